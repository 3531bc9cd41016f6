# SPDX-License-Identifier: Apache-2.0
# The HTML report (PF_REPORT_HTML: loadbench --html, Loader.report("html"))
# rendered by headless Chromium at a desktop's and a phone's size: no
# console error, no request but the page itself, every chart has drawn
# data (its lines' colours counted in a screenshot of it), and the page's
# text holds the figures of the JSON report of the same run.
import html.parser
import json
import re
import math
import os
import pathlib
import subprocess

import pytest

import chromium
from conftest import TOKENS, tool

SHOTS = os.environ.get("PODFEED_HTML_SHOTS")  # keep the screenshots here


class Figures(html.parser.HTMLParser):
    """The page's rows of figures (tr data-key -> its td's text), the
    charts' readings and every text node."""

    def __init__(self):
        super().__init__()
        self.rows, self.readings, self.text = {}, [], []
        self._key = self._in = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-key" in a:
            self._key = a["data-key"]
        elif tag == "td" and self._key is not None:
            self._in = "td"
            self.rows[self._key] = ""
        elif tag == "p" and a.get("class") == "reading":
            self._in = "reading"
            self.readings.append("")

    def handle_endtag(self, tag):
        if tag in ("td", "p"):
            self._in = None
        if tag == "tr":
            self._key = None

    def handle_data(self, data):
        self.text.append(data)
        if self._in == "td":
            self.rows[self._key] += data
        elif self._in == "reading":
            self.readings[-1] += data


def flatten(v, prefix=""):
    """The JSON as the page's tables have it: objects dotted, arrays of
    objects indexed, arrays of scalars as one row."""
    if isinstance(v, dict):
        for k, m in v.items():
            yield from flatten(m, f"{prefix}.{k}" if prefix else k)
    elif isinstance(v, list) and v and isinstance(v[0], (dict, list)):
        for i, m in enumerate(v):
            yield from flatten(m, f"{prefix}[{i}]")
    else:
        yield prefix, v


def same(cell, value):
    if isinstance(value, list):
        parts = cell.split(", ") if cell else []
        return len(parts) == len(value) and all(same(p, v) for p, v in zip(parts, value))
    if value is None:
        return cell == "null"
    if isinstance(value, bool):
        return cell == ("true" if value else "false")
    if isinstance(value, (int, float)):
        return math.isclose(float(cell), value, rel_tol=1e-8, abs_tol=1e-300)
    return cell == value


def check_figures(dom, report):
    """Every member of the JSON report is a row of the page, same value."""
    f = Figures()
    f.feed(dom)
    want = dict(flatten(report))
    missing = [k for k in want if k not in f.rows]
    assert not missing, f"figures not on the page: {missing[:10]}"
    wrong = [(k, f.rows[k], v) for k, v in want.items() if not same(f.rows[k], v)]
    assert not wrong, f"figures that differ (key, page, json): {wrong[:5]}"
    return f


def chart_boxes(b):
    return b.eval("""[...document.querySelectorAll('figure.chart')].map(f => {
        const s = f.querySelector('svg.plot'), r = s.getBoundingClientRect();
        return {id: f.id, x: r.x + scrollX, y: r.y + scrollY, w: r.width, h: r.height,
                drawn: s.dataset.drawn, colours: s.dataset.colors.split(' ').filter(c => c),
                reading: f.querySelector('p.reading').textContent};
    })""")


def check_drawn(b, name, min_pixels=40):
    """Every chart says it drew and shows each of its colours; @return
    the charts."""
    charts = chart_boxes(b)
    assert charts, "no chart on the page"
    for c in charts:
        assert c["w"] > 100 and c["h"] > 40, c
        png = b.screenshot((c["x"], c["y"], c["w"], c["h"]))
        if SHOTS:
            pathlib.Path(SHOTS, f"{name}-{c['id']}.png").write_bytes(png)
        if c["drawn"] != "yes":
            continue
        pixels = chromium.png_pixels(png)
        assert c["colours"], c
        counts = {col: chromium.count_colour(pixels, col) for col in c["colours"]}
        # The first batch's bar may have parts under a pixel wide; a
        # line is drawn across the whole plot.
        # (bars, as a stage's share near 0%, may be short: the longest)
        # The ladder's lines meet at one host by definition, and the pod's
        # line lies on the linear ideal wherever scaling is linear: the
        # longest colour here, each line's points in the ladder's test.
        # The stages' lines coincide where two stages are equally busy
        # (two near 0% on a loaded machine hid one line's colour): the
        # longest colour, and each stage's line in the DOM with its points.
        bars = ("chart-first-batch", "chart-pod", "chart-pod-stages", "chart-ladder",
                "chart-stages")
        need = counts.values() if c["id"] not in bars else [max(counts.values())]
        assert all(n >= min_pixels for n in need), f"{c['id']}: {counts}"
        if c["id"] == "chart-stages":
            points = b.eval("""[...document.querySelectorAll(
                '#chart-stages g.series polyline')].map(p => [p.getAttribute('stroke'),
                p.getAttribute('points').trim().split(/ +/).length])""")
            assert sorted(col for col, _ in points) == sorted(c["colours"]), points
            assert all(n >= 2 for _, n in points), points
    return charts


def render(page, name, sizes=(chromium.DESKTOP, chromium.PHONE)):
    """Open page at each size: no problem, no request but the page, the
    charts drawn.  @return the DOM and the charts (of the last size)."""
    with chromium.Browser() as b:
        for size in sizes:
            phone = size == chromium.PHONE
            b.open(pathlib.Path(page).as_uri(), size, mobile=phone)
            assert b.problems() == [], b.problems()
            assert b.requests() == [pathlib.Path(page).as_uri()], b.requests()
            # nothing wider than the screen but what scrolls inside a table
            assert b.eval("document.documentElement.scrollWidth") <= size[0]
            tag = f"{name}-{size[0]}"
            if SHOTS:
                pathlib.Path(SHOTS, f"{tag}.png").write_bytes(b.screenshot())
            charts = check_drawn(b, tag)
            dom = b.eval("document.documentElement.outerHTML")
    return dom, charts


def loadbench(data, *args):
    out = subprocess.run([tool("tools/loadbench"), "--quiet", "--per-core-batch", "8",
                          "--threads", "1", "--features", TOKENS, *map(str, args),
                          str(data / "indexed")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out


@pytest.fixture(scope="module")
def long_run(data, tmp_path_factory):
    """loadbench over 60 epochs (7,500 steps: many points), as JSON and
    as the page of the same run."""
    page = tmp_path_factory.mktemp("html") / "report.html"
    out = loadbench(data, "--epochs", 60, "--json", "--html", page)
    return json.loads(out.stdout), page


def test_the_page_renders_every_chart_with_the_json_s_figures(long_run):
    report, page = long_run
    assert report["series"]["points"] >= 3, report["series"]
    dom, charts = render(page, "loadbench")
    ids = [c["id"] for c in charts]
    for chart in ("throughput", "bandwidth", "stages", "regions", "memory", "first-batch"):
        assert f"chart-{chart}" in ids
    assert all(c["drawn"] == "yes" for c in charts), charts
    f = check_figures(dom, report)
    # one reading under each chart, and what it says is the JSON's
    assert len(f.readings) == len(charts)
    bn = report["bottleneck"]
    stage_reading = next(c["reading"] for c in charts if c["id"] == "chart-stages")
    assert stage_reading.startswith(
        f"{bn} was busy {report['stages'][bn] * 100:.0f}% of the run: the bottleneck")
    thr = next(c["reading"] for c in charts if c["id"] == "chart-throughput")
    assert thr.startswith(f"{report['records_per_s']:.0f} records/s over the run")
    # a stage of the series is a line of the stages chart, whatever it is
    stages = next(c for c in charts if c["id"] == "chart-stages")
    assert len(stages["colours"]) == len(report["series"]["stages"]) == 3


def test_the_checks_catch_a_broken_page(tmp_path):
    """The checks above can fail: a chart with nothing drawn, a script
    error, a request out, each is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><html><body><figure class='chart' id='chart-x'>"
        "<svg class='plot' viewBox='0 0 720 280' data-drawn='yes' "
        "data-colors='#1f77b4'><title>x</title><rect x='0' y='0' width='10' "
        "height='10' fill='#eeeeee'/></svg><p class='reading'>x</p></figure>"
        "<script>undefined_function()</script>"
        "<img src='http://192.0.2.1/x.png'></body></html>")
    with chromium.Browser() as b:
        b.open(bad.as_uri(), chromium.DESKTOP)
        assert any("undefined_function" in p for p in b.problems()), b.problems()
        assert "http://192.0.2.1/x.png" in b.requests()
        with pytest.raises(AssertionError, match="chart-x"):
            check_drawn(b, "bad")
    with pytest.raises(AssertionError, match="figures"):
        check_figures("<table><tr data-key='records'><td>2</td></tr></table>",
                      {"records": 3})


def test_a_run_too_short_to_plot_still_gives_a_page(data, tmp_path):
    page = tmp_path / "short.html"
    out = loadbench(data, "--steps", 1, "--json", "--html", page)
    report = json.loads(out.stdout)
    assert report["series"]["too_short"].startswith("too little time to plot")
    dom, charts = render(page, "short", sizes=(chromium.DESKTOP,))
    check_figures(dom, report)
    by_id = {c["id"]: c for c in charts}
    for chart in ("throughput", "stages", "memory"):
        assert by_id[f"chart-{chart}"]["drawn"] == "no"
    assert "too little time to plot" in dom
    # the totals and the first batch are there all the same
    assert by_id["chart-first-batch"]["drawn"] == "yes"
    assert f"{report['records']:.0f} records in" in dom


def test_an_unwritable_html_path_fails_before_the_run(data, tmp_path):
    for path, why in ((tmp_path / "no" / "such" / "dir.html", "No such file or directory"),
                      (tmp_path, "Is a directory")):
        out = subprocess.run([tool("tools/loadbench"), "--quiet", "--html", str(path),
                              "--features", TOKENS, str(data / "indexed")],
                             capture_output=True, text=True)
        assert out.returncode == 1
        assert f"--html {path}: cannot write it: {why}" in out.stderr
        assert out.stdout == ""     # no report: the run never started
    # a run that fails leaves no page it made
    page = tmp_path / "failed.html"
    out = subprocess.run([tool("tools/loadbench"), "--quiet", "--html", str(page),
                          "--features", "nosuch:int64[1]", str(data / "indexed")],
                         capture_output=True, text=True)
    assert out.returncode != 0 and not page.exists()


def test_python_s_page_is_the_same_report(data, tmp_path):
    """Loader.report("html"): the page of the report("dict") figures,
    rendered as loadbench's is."""
    import podfeed
    with podfeed.Loader(data / "indexed", TOKENS, 8, epochs=40) as loader:
        for batch in loader:
            batch.release()
    report = loader.report("dict")
    page = tmp_path / "python.html"
    page.write_text(loader.report("html"))
    assert report["series"]["points"] >= 3, report["series"]
    dom, charts = render(page, "python", sizes=(chromium.DESKTOP,))
    # the process's peak memory may grow between the two calls
    report.pop("peak_rss_bytes")
    check_figures(dom, report)
    drawn = {c["id"] for c in charts if c["drawn"] == "yes"}
    assert {"chart-throughput", "chart-stages", "chart-memory"} <= drawn
    # no region table in Python: the chart says so instead of drawing
    assert "no region table" in dom


def test_report_format_html_is_checked(data):
    import podfeed
    with podfeed.Loader(data / "indexed", TOKENS, 8) as loader:
        with pytest.raises(ValueError, match=r"^format: expected 'text', 'dict', 'json' "
                           r"or 'html', not 'svg'"):
            loader.report("svg")
        assert loader.report("html").startswith("<!DOCTYPE html>")


def test_a_pod_s_page_names_the_straggler_and_its_bottleneck(data, tmp_path):
    """Under mpirun (2 hosts): each host's records/s and stage shares drawn,
    the slowest host and its bottleneck stage named, as the pod section
    of the JSON says."""
    env = _mpi_env(tmp_path)
    page = tmp_path / "pod.html"
    out = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", tool("tools/loadbench"),
                          "--quiet", "--json", "--per-core-batch", "8", "--threads", "1",
                          "--epochs", "20", "--features", TOKENS, "--html", str(page),
                          str(data / "indexed")], capture_output=True, text=True, env=env,
                         timeout=240)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    pod = report["pod"]
    slow = pod["straggler"]
    assert len(pod["host"]) == 2
    assert slow["bottleneck"] == pod["host"][slow["index"]]["bottleneck"]
    assert pod["step_ms"]["max"] >= pod["step_ms"]["min"] > 0
    for h in pod["host"]:
        assert set(h["stages"]) == {"io", "decode", "consumer_wait"}
        assert h["step_ms"] == pytest.approx(h["seconds"] * 1e3 / h["steps"], rel=1e-6)
    dom, charts = render(page, "pod")
    check_figures(dom, report)
    by_id = {c["id"]: c for c in charts}
    assert by_id["chart-pod"]["drawn"] == by_id["chart-pod-stages"]["drawn"] == "yes"
    assert by_id["chart-pod"]["reading"].startswith(
        f"{pod['records_per_s']:.0f} records/s for the pod of 2 hosts; the slowest is "
        f"host {slow['index']} ")
    assert f"its bottleneck: {slow['bottleneck']} " in by_id["chart-pod"]["reading"]
    assert len(by_id["chart-pod-stages"]["colours"]) == 3


def _mpi_env(tmp_path):
    import shutil
    if not shutil.which("mpirun"):
        if os.environ.get("PODFEED_TEST_NO_MISSING") == "1":
            pytest.fail("mpirun is not installed (tools/install-deps installs it)")
        pytest.skip("mpirun is not installed")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                        "PMI_RANK", "PMI_SIZE", "TPU_WORKER_ID", "RANK", "WORLD_SIZE")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               TMPDIR=str(tmp_path))    # an mpirun session directory of its own
    return env


def test_the_ladder_s_page_draws_scaling_against_the_linear_ideal(data, tmp_path):
    env = _mpi_env(tmp_path)
    page = tmp_path / "ladder.html"
    out = subprocess.run([tool("tools/loadbench"), "ladder", "--hosts", "1,2", "--json",
                          "--html", str(page), "--per-core-batch", "8", "--threads", "1",
                          "--epochs", "5", "--features", TOKENS, str(data / "indexed")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    rungs = report["rungs"]
    assert [g["hosts"] for g in rungs] == [1, 2]
    for g in rungs:
        assert g["ideal_records_per_s"] == pytest.approx(
            rungs[0]["per_host_records_per_s"] * g["hosts"], rel=1e-6)
        assert g["global_batch"] == 8 * g["hosts"]
        assert g["steps"] == 5 * 2000 // g["global_batch"]
        assert g["lr"] is None      # no model
    dom, charts = render(page, "ladder")
    check_figures(dom, report)
    (c,) = charts
    assert c["id"] == "chart-ladder" and c["drawn"] == "yes" and len(c["colours"]) == 3
    # each of the three lines has a point a rung, in its own colour
    lines = re.findall(r'<polyline[^>]*stroke="(#[0-9a-f]{6})"[^>]*points="([^"]*)"', dom)
    assert sorted(col for col, _ in lines) == sorted(c["colours"]), lines
    assert all(len(pts.split()) == len(rungs) for _, pts in lines), lines
    want = ", ".join(f"{g['efficiency'] * 100:.0f}% at {g['hosts']} host"
                     f"{'' if g['hosts'] == 1 else 's'}" for g in rungs)
    assert c["reading"].startswith(f"scaling efficiency {want}; ")
    assert ("under 90% from 2 hosts" in c["reading"]) == (report["first_under_90"] == 2)
    f = Figures()
    f.feed(dom)
    assert "The step plan of each rung" in "".join(f.text)
    # an unwritable page fails before any rung runs
    bad = subprocess.run([tool("tools/loadbench"), "ladder", "--hosts", "1,2", "--html",
                          str(tmp_path / "no" / "x.html"), "--features", TOKENS,
                          str(data / "indexed")], capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and "--html " in bad.stderr and "rung of" not in bad.stderr
