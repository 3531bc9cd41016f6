# SPDX-License-Identifier: Apache-2.0
# podfeed.Loader.report(): loadbench's report of the run, made by the same
# library code (pf_report), as text and as the JSON object's dict.
import json

import pytest

import podfeed
from conftest import TOKENS, run, tool


def loadbench(data, *args):
    return run(tool("tools/loadbench"), "--quiet", "--per-core-batch", 8, "--cores", 2,
               "--threads", 1, "--features", TOKENS, *args, data / "indexed")


def labels(text):
    return [line.split()[0] for line in text.splitlines() if line.strip()]


def test_report_is_loadbench_s(data):
    want = json.loads(loadbench(data, "--json"))
    want_text = loadbench(data)
    with podfeed.Loader(data / "indexed", TOKENS, 8, cores=2, threads=1,
                        shuffle=False) as loader:
        steps = sum(1 for _ in loader)
        got = loader.report("dict")
        text = loader.report()
    # loadbench's object also has its regions section (always in its JSON)
    assert set(got) == set(want) - {"regions"}
    # the time series: the same columns of rates as loadbench's
    assert "series" in got
    assert set(got["series"]) - {"too_short"} <= set(want["series"]) | {
        "t_s", "records_per_s", "mb_per_s_read", "mb_per_s_decompressed", "stages",
        "regions", "rss_bytes"}
    for key in ("records", "steps", "records_per_epoch", "steps_per_epoch", "bytes_read",
                "bytes_decompressed", "remainder_dropped", "remainder_wrapped", "corrupt",
                "features", "files", "empty_files", "shuffle", "shuffle_window", "seed",
                "threads", "memory_budget_bytes", "repeat", "topology"):
        assert got[key] == want[key], key
    assert got["steps"] == steps == 2000 // 16
    assert got["topology"] == {"num_hosts": 1, "host_index": 0, "cores": 2,
                               "per_core_batch": 8, "global_batch": 16}
    assert got["records_per_s"] == pytest.approx(got["records"] / got["seconds"], rel=1e-6)
    assert 0 < got["first_batch_ms"] <= got["seconds"] * 1000
    assert got["bottleneck"] in ("io", "decode")
    assert got["peak_rss_bytes"] > 0
    if got["steady_records_per_s"] is None:
        assert got["steady_na"]
    else:
        assert got["steady_records_per_s"] > 0
    # the text: loadbench's lines, label by label
    assert labels(text) == labels(want_text)
    assert text.startswith("files       4\nfeatures    " + TOKENS + "\n")
    assert "records     2000 in 125 steps" in text


def test_report_says_the_order_and_counts_what_was_delivered(data):
    with podfeed.Loader(data / "indexed", TOKENS, 10, seed=5, shuffle=True) as loader:
        before = loader.report("dict")
        assert before["records"] == before["steps"] == 0
        assert before["first_batch_ms"] == 0
        for _ in range(3):
            next(loader).release()
        mid = loader.report("dict")
        assert (mid["records"], mid["steps"]) == (30, 3)
        # The window in force: the default 8192 in whole host batches of 10.
        assert (mid["shuffle"], mid["shuffle_window"], mid["seed"]) == (True, 8200, 5)
        assert "shuffled" in loader.report().splitlines()[3]
    # after close: the figures of the close
    after = loader.report("dict")
    assert (after["records"], after["steps"]) == (30, 3)
    assert after["seconds"] == mid["seconds"]


def test_report_format_is_checked(data):
    with podfeed.Loader(data / "indexed", TOKENS, 8) as loader:
        with pytest.raises(ValueError, match=r"^format: expected 'text', 'dict', 'json' "
                           r"or 'html', not 'yaml'"):
            loader.report("yaml")
        # 'json' is the text 'dict' parses
        got = json.loads(loader.report("json"))
        assert set(got) == set(loader.report("dict"))
        assert got["records_per_epoch"] == 2000
        with pytest.raises(TypeError, match=r"^format: "):
            loader.report(1)
