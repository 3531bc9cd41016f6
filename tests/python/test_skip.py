# SPDX-License-Identifier: Apache-2.0
# Checkpoints a person can read and edit (issue 39): skip_steps against
# runs never stopped (one host and four in one process, across an epoch,
# packed, mixed, an elastic resume with a skip), records_of() against the
# batches delivered (each record read back through a loader of its file
# alone), every readable field of state_dict() checked against its blob,
# describe_state().
import json
import zlib

import numpy as np
import pytest

import podfeed
from conftest import TOKENS, run, tool

S = podfeed.Source


def crc_of(batch):
    crc = 0
    for c in range(batch.cores):
        for _, view in sorted(batch.core(c).items()):
            crc = zlib.crc32(view.tobytes(), crc)
    return crc


def steps_of(loader, n=None):
    """[(global_step, epoch, step, crc)] of the loader's next n steps (all)."""
    out = []
    for b in loader:
        out.append((b.global_step, b.epoch, b.step, crc_of(b)))
        if n is not None and len(out) == n:
            break
    return out


def open_run(paths, **kw):
    args = dict(features=TOKENS, per_core_batch=8, cores=2, shuffle=True, seed=7, epochs=2,
                shuffle_window=200)
    args.update(kw)
    return podfeed.Loader(paths, **args)


def test_skip_gives_the_batches_of_a_run_never_stopped(data):
    paths = data / "indexed"
    with open_run(paths) as lo:
        ref = steps_of(lo)
    assert len(ref) == 2 * (2000 // 16)
    for stop, skip in [(0, 17), (30, 1), (30, 100), (100, 124), (100, 149)]:
        state = None
        if stop:
            with open_run(paths, max_steps=stop) as lo:
                steps_of(lo)
                state = lo.state_dict()
        with open_run(paths, state=state, skip_steps=skip) as lo:
            got = steps_of(lo)
            m = lo.metrics()
        assert got == ref[stop + skip:], (stop, skip)
        assert m["skipped_steps"] == skip and m["skipped_records"] == 16 * skip
        assert m["skipped_from"] == stop


def test_load_state_dict_does_not_skip_again(data):
    paths = data / "indexed"
    with open_run(paths) as lo:
        ref = steps_of(lo)
    with open_run(paths, max_steps=10) as lo:
        steps_of(lo)
        state = lo.state_dict()
    with open_run(paths, state=state, skip_steps=50) as lo:
        assert steps_of(lo, 1) == ref[60:61]
        lo.load_state_dict(state)           # back to step 10, not 60
        assert steps_of(lo, 1) == ref[10:11]


def test_four_hosts_skip_the_same_steps_and_resume_elastically(data):
    paths = data / "indexed"
    states = []
    for h in range(4):
        with open_run(paths, host_index=h, num_hosts=4) as lo:
            ref = steps_of(lo)
        with open_run(paths, host_index=h, num_hosts=4, max_steps=5 + h) as lo:
            steps_of(lo)
            states.append(lo.state_dict())
        with open_run(paths, host_index=h, num_hosts=4, state=states[h], skip_steps=20) as lo:
            assert steps_of(lo) == ref[5 + h + 20:]
    # Four hosts' states on two: the elastic resume, n steps on.
    for h in range(2):
        with open_run(paths, host_index=h, num_hosts=2, state=states) as lo:
            ref = steps_of(lo)
        with open_run(paths, host_index=h, num_hosts=2, state=states, skip_steps=40) as lo:
            assert steps_of(lo) == ref[40:]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """1,500 `--kind text` records in 3 indexed shards."""
    root = tmp_path_factory.mktemp("text")
    st = tool("tools/shardtool")
    run(st, "synth", "--kind", "text", "--records", 1500, "--shards", 2, "--median-tokens", 40,
        "--max-tokens", 300, "--seed", 3, "--out", root / "plain")
    run(st, "convert", "--out", root / "z", "--shards", 3, "--frame-size", "16K", root / "plain")
    return root / "z"


PACKED = "tokens:int32[*],targets:int32[*]"


@pytest.mark.parametrize("mode", ["first_fit", "concat"])
def test_packed_skip_and_records(text, mode):
    def packed(**kw):
        return podfeed.Loader(text, PACKED, 2, cores=2, pack_length=96, pack_mode=mode,
                              shuffle=True, seed=5, epochs=2, **kw)
    with packed() as lo:
        ref = steps_of(lo)
    with packed(max_steps=10) as lo:
        steps_of(lo)
        state = lo.state_dict()
    assert state["kind"] == "packing" and state["pack_mode"] == mode
    skip = len(ref) // 2 + 3          # into the second epoch
    with packed(state=state, skip_steps=skip) as lo:
        assert steps_of(lo) == ref[10 + skip:]
        m = lo.metrics()
        assert m["skipped_steps"] == skip and m["skipped_tokens"] > m["skipped_records"] > 0
    # records_of(): each piece is where it says in its row, with its
    # segment id, and the pieces cover every value of the step (the
    # values themselves: tests/loader/api/test_loader_which.c).
    with packed() as lo:
        for b in lo:
            if b.global_step > 12:
                break
            seg = b["tokens_segment_ids"]
            covered = 0
            for ref in lo.records_of(b.global_step):
                at, n = ref["at"], ref["count"]
                assert (seg[ref["core"], ref["row"], at:at + n] == ref["segment"]).all()
                assert ref["from"] >= 0 and ref["file"].startswith(str(text))
                covered += n
            assert covered == int((seg != 0).sum())


def mixture(data):
    return [S(data / "indexed", weight=3, name="web"), S(data / "plain", weight=1, name="code")]


@pytest.mark.parametrize("mix", ["stratified", "sample"])
def test_mixture_skip(data, mix):
    def mixed(**kw):
        return podfeed.Loader(mixture(data), TOKENS, 8, cores=2, shuffle=True, seed=3,
                              epochs=2, mix=mix, source_feature=True, **kw)
    with mixed() as lo:
        ref = steps_of(lo)
    with mixed(max_steps=7) as lo:
        steps_of(lo)
        state = lo.state_dict()
    assert state["kind"] == "mixture"
    assert [s["name"] for s in state["sources"]] == ["web", "code"]
    with mixed(state=state, skip_steps=90) as lo:
        assert steps_of(lo) == ref[97:]
    with mixed(skip_steps=len(ref) - 1) as lo:
        assert steps_of(lo) == ref[-1:]
    with pytest.raises(podfeed.ConfigError, match=r"^skip_steps: .*last step is global step"):
        mixed(skip_steps=len(ref))


def file_rows(path):
    """Every record of one file, in order: a loader of the file alone."""
    with podfeed.Loader(str(path), TOKENS, 1, cores=1) as lo:
        return [b["tokens"][0, 0].copy() for b in lo]


def test_records_of_names_what_each_row_holds(data):
    paths = data / "indexed"
    rows = {}
    with open_run(paths, host_index=1, num_hosts=3, epochs=2) as lo:
        for b in lo:
            for ref in lo.records_of(b.global_step):
                f = ref["file"]
                if f not in rows:
                    rows[f] = file_rows(f)
                assert ref["epoch"] == b.epoch and ref["step"] == b.step
                assert np.array_equal(rows[f][ref["record"]],
                                      b["tokens"][ref["core"], ref["row"]]), ref
        last = b.global_step
        with pytest.raises(podfeed.ConfigError, match=r"^records_of: step .* global steps 0 to"):
            lo.records_of(last + 1)


def test_mixed_records_of_name_the_source(data):
    with podfeed.Loader(mixture(data), TOKENS, 4, cores=2, shuffle=True, seed=3,
                        source_feature=True, max_steps=20) as lo:
        rows = {}
        for b in lo:
            for ref in lo.records_of(b.global_step):
                assert ref["source"] == ("web", "code")[b["_source"][ref["core"], ref["row"], 0]]
                f = ref["file"]
                if f not in rows:
                    rows[f] = file_rows(f)
                assert np.array_equal(rows[f][ref["record"]],
                                      b["tokens"][ref["core"], ref["row"]])


# --------------------------------------------------------------------
# Readable fields: each one edited is refused by name, both values said.

EDITS = [
    ("epoch", 3), ("global_step", 0), ("step_in_epoch", 0), ("records_left", 1),
    ("fresh", True), ("host_index", 1), ("num_hosts", 2), ("cores", 4),
    ("per_core_batch", 16), ("dataset_records", 5), ("dataset_fingerprint", "0" * 16),
    ("seed", 8), ("shuffle", "off"), ("remainder", "wrap"), ("skipped_steps", 3),
    ("pack_length", 64), ("kind", "packing"),
]


@pytest.fixture(scope="module")
def saved(data):
    with open_run(data / "indexed", max_steps=12) as lo:
        steps_of(lo)
        return lo.state_dict()


def test_every_readable_field_is_in_the_list(saved):
    assert {k for k in saved if k not in ("format", "blob")} == {k for k, _ in EDITS}


@pytest.mark.parametrize("field,value", EDITS)
def test_an_edited_field_is_refused_by_name(data, saved, field, value):
    edited = json.loads(json.dumps(saved))
    truth = edited[field]
    edited[field] = value
    with pytest.raises(ValueError) as e:
        open_run(data / "indexed", state=edited)
    msg = str(e.value)
    assert msg.startswith(f"state: field '{field}' says {value!r} but the state's blob "
                          f"holds {truth!r}"), msg
    # load_state_dict() checks the same.
    with open_run(data / "indexed") as lo:
        with pytest.raises(ValueError, match=f"field '{field}'"):
            lo.load_state_dict(edited)
    # In a list of every host's, the state is named by its place.
    with pytest.raises(ValueError, match=r"^state\[1\]: field"):
        open_run(data / "indexed", state=[saved, edited])


def test_unedited_and_own_fields_resume(data, saved):
    mine = json.loads(json.dumps(saved))
    mine["note"] = "loss spike at 40"         # a key of the caller's own: left alone
    del mine["records_left"]                  # a field left out: the blob says it
    with open_run(data / "indexed", state=mine) as lo:
        assert next(iter(lo)).global_step == 12


def test_a_mixture_s_sources_are_checked(data):
    with podfeed.Loader(mixture(data), TOKENS, 8, shuffle=True, seed=3, max_steps=5) as lo:
        steps_of(lo)
        state = lo.state_dict()
    edited = json.loads(json.dumps(state))
    edited["sources"][1]["rows_taken"] += 1
    with pytest.raises(ValueError, match=r"field 'sources\[1\]\.rows_taken' says"):
        podfeed.Loader(mixture(data), TOKENS, 8, shuffle=True, seed=3, state=edited)
    edited = json.loads(json.dumps(state))
    edited["sources"][0]["name"] = "books"
    with pytest.raises(ValueError, match=r"'sources\[0\]\.name' says 'books' .* holds 'web'"):
        podfeed.Loader(mixture(data), TOKENS, 8, shuffle=True, seed=3, state=edited)


def test_describe_state(data, saved, text):
    t = podfeed.describe_state(saved)
    assert "kind          loader" in t and "global step 12 next" in t
    assert "seed 7, shuffle window, remainder drop" in t
    with open_run(data / "indexed", state=saved, skip_steps=100) as lo:
        after = lo.state_dict()
    assert after["skipped_steps"] == 100 and after["global_step"] == 112
    assert "skipped       100 steps" in podfeed.describe_state(after)
    assert podfeed.inspect_state(after)["global_step"] == 112
    both = podfeed.describe_state([saved, after])
    assert both.startswith("state[0]\n") and "\nstate[1]\n" in both
    with podfeed.Loader(text, PACKED, 2, pack_length=96, max_steps=3) as lo:
        steps_of(lo)
        p = lo.state_dict()
    assert "packing       rows of 96, first_fit, pool 8, 2 packed features" in \
        podfeed.describe_state(p)
    bad = dict(saved, blob=saved["blob"][:12] + ("A" if saved["blob"][12] != "A" else "B") +
               saved["blob"][13:])
    with pytest.raises(podfeed.DataError):
        podfeed.describe_state(bad)
