# SPDX-License-Identifier: Apache-2.0
# tools/bench/mixture's arguments: the sets chosen, the refusals, and the
# two command lines each set runs (loadbench and the data faked: the
# benchmark itself is not a test).
import importlib.machinery
import importlib.util
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parent.parent.parent / "tools/bench/mixture"


def load():
    loader = importlib.machinery.SourceFileLoader("bench_mixture", str(SCRIPT))
    spec = importlib.util.spec_from_loader("bench_mixture", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_sets_chosen_in_order_each_once():
    m = load()
    assert m.sets_chosen(None) == ["default"]
    assert m.sets_chosen(["all"]) == list(m.SETS)
    assert m.sets_chosen(["threads1", "small,threads1", "default"]) == [
        "default", "small", "threads1"]
    with pytest.raises(ValueError, match="no set named 'tiny'"):
        m.sets_chosen(["small", "tiny"])


@pytest.mark.parametrize("args,says", [
    (["--set", "nosuch"], "no set named 'nosuch'"),
    (["--set", "default,", "--runs", "3"], "no set named ''"),
    (["--epochs", "0"], "--epochs 0: at least 1"),
    (["--runs", "0"], "--runs 0: at least 1"),
])
def test_bad_arguments_refused_before_any_run(args, says, tmp_path):
    # --build names a directory that is no build: a refusal must come first.
    out = subprocess.run([sys.executable, str(SCRIPT), "--build", str(tmp_path), *args],
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stdout + out.stderr
    assert says in out.stderr


def fake(m, monkeypatch, sizes):
    """prepare() with the data made elsewhere and each source's records
    as SIZES."""
    calls = iter(sizes)
    monkeypatch.setattr(m, "make_parts", lambda build, data, key, split:
                        (data / key, data / "parts"))
    monkeypatch.setattr(m, "loadbench", lambda build, args:
                        ({"records_per_epoch": next(calls)}, {}))


def test_command_lines_of_a_set(monkeypatch, tmp_path):
    m = load()
    fake(m, monkeypatch, [34375, 34375, 31250])
    c = m.prepare(tmp_path, tmp_path, "default", None)
    assert c["one"] == ["--threads", "2", "--per-core-batch", "32", "--shuffle",
                        "--epochs", "2", str(tmp_path / "tokz")]
    assert c["three"][:7] == c["one"][:7]
    assert c["three"][7:] == [
        "--source", f"p0=34375:{tmp_path / 'parts/p0'}",
        "--source", f"p1=34375:{tmp_path / 'parts/p1'}",
        "--source", f"p2=31250:{tmp_path / 'parts/p2'}"]


def test_weights_not_by_size_run_the_same_steps(monkeypatch, tmp_path):
    m = load()
    fake(m, monkeypatch, [34375, 34375, 31250])
    c = m.prepare(tmp_path, tmp_path, "weights-epochs", 3)
    # 3 epochs of the 100,000 records in batches of 32, on both sides.
    assert c["one"][c["one"].index("--steps") + 1] == "9375"
    assert c["three"][c["three"].index("--steps") + 1] == "9375"
    assert "--epochs" not in c["one"] + c["three"]
    assert [a.split(":")[0] for a in c["three"] if a.startswith("p")] == [
        "p0=0.1", "p1=0.2", "p2=0.7"]


def test_epochs_given_is_every_sets(monkeypatch, tmp_path):
    m = load()
    fake(m, monkeypatch, [700, 700, 600] * 2)
    c = m.prepare(tmp_path, tmp_path, "bytes", None)
    assert c["epochs"] == 8 and c["one"][c["one"].index("--epochs") + 1] == "8"
    c = m.prepare(tmp_path, tmp_path, "bytes", 7)
    assert c["epochs"] == 7 and c["three"][c["three"].index("--epochs") + 1] == "7"


def test_figures_are_medians_of_each_runs_ratios():
    m = load()

    def run(rate, cpu_s, records, steady, wall, vcsw):
        return m.side({"records_per_s": rate, "records": records,
                       "steady_records_per_s": steady, "first_batch_ms": 5.0,
                       "threads": 2},
                      {"cpu": cpu_s, "wall": wall, "vcsw": vcsw, "ivcsw": 0})

    one = [run(100.0, 1.0, 1000, 120.0, 2.0, 10), run(200.0, 1.0, 1000, None, 1.0, 20),
           run(100.0, 2.0, 1000, 100.0, 4.0, 30)]
    three = [run(90.0, 2.0, 1000, 60.0, 2.0, 40), run(100.0, 1.25, 1000, 90.0, 1.0, 50),
             run(300.0, 2.0, 1000, 150.0, 1.0, 60)]
    r = m.figures("", one, three)
    assert r["ratios"] == [0.9, 0.5, 3.0] and r["ratio_median"] == 0.9
    assert r["cpu_ratios"] == [0.5, 0.8, 1.0] and r["cpu_ratio_median"] == 0.8
    # A run whose steady rate is n/a on either side has no steady ratio.
    assert r["steady_ratios"] == [0.5, 1.5] and r["steady_ratio_median"] == 1.0
    assert r["one_source_cpu_us_per_record"] == 1000.0
    assert r["three_sources_cpu_utilisation"] == 1.25
    assert r["one_source_voluntary_switches_per_1k_records"] == 20.0
    assert r["three_sources_voluntary_switches_per_1k_records"] == 50.0


def test_against_before_pairs_the_rounds():
    m = load()

    def run(cpu_s):
        return m.side({"records_per_s": 1.0, "records": 1000}, {"cpu": cpu_s, "wall": 1.0,
                                                                 "vcsw": 0, "ivcsw": 0})

    this = ([run(1.0), run(3.0), run(2.0)], [run(1.0), run(1.0), run(4.0)])
    before = ([run(2.0), run(3.0), run(1.0)], [run(2.0), run(4.0), run(4.0)])
    r = m.against_before(this, before)
    assert r["one_source_cpu_this_over_before"] == [0.5, 1.0, 2.0]
    assert r["one_source_cpu_this_over_before_median"] == 1.0
    assert r["three_sources_cpu_this_over_before"] == [0.5, 0.25, 1.0]
    assert r["three_sources_cpu_this_over_before_median"] == 0.5
