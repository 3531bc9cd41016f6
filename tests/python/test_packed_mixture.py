# SPDX-License-Identifier: Apache-2.0
"""Packed mixtures (pack_length with sources: mixed, then packed; issue
37): three text sources whose every token names its source, record and
position (records.py).  The packed batches equal a reference built from the
parts: the unpacked mixture's record stream (one core of 32 rows, the
packing loader's inner loader) packed by the packer's rule written here;
every host has the same steps; every value's _source is its token's; a
state resumes bit for bit; mix_unit='tokens' makes the token shares the
weights; another topology is refused, naming both features."""
import collections
import json
import subprocess

import numpy as np
import pytest

import podfeed
from conftest import tool
from records import text_source, who

L = 256
SPEC = "tokens:int32[*]"


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    root = tmp_path_factory.mktemp("texts")
    st = tool("tools/shardtool")
    web, web_len = text_source(st, root / "web", 0, 1500, 50, 3)
    code, code_len = text_source(st, root / "code", 1, 700, 90, 2)
    books, books_len = text_source(st, root / "books", 2, 300, 160, 2)
    return (web, code, books), (web_len, code_len, books_len)


def sources(texts, weights=(0.5, 0.3, 0.2)):
    (web, code, books), _ = texts
    return [podfeed.Source(web, weights[0], "web"), podfeed.Source(code, weights[1], "code"),
            podfeed.Source(books, weights[2], "books")]


def common(mix, hosts=1, host=0, **kw):
    return dict(per_core_batch=4, cores=2, host_index=host, num_hosts=hosts, shuffle=True,
                shuffle_window=512, seed=7, mix=mix, **kw)


def pack_ref(records, mode, pool=8, L=L):
    """The packer's rule (transform/pack.c) over records (token lists) into
    rows of L: each row [tokens, segment ids, positions], in the order
    rows open."""
    rows, open_ = [], []
    for toks in records:
        if mode == "first_fit":
            take = toks[:L]
            r = next((i for i in open_ if len(rows[i][0]) + len(take) <= L), None)
            if r is None:
                if len(open_) == pool:
                    open_.pop(0)
                rows.append([[], [], [], 0])
                r = len(rows) - 1
                open_.append(r)
            row = rows[r]
            row[3] += 1
            row[0] += take
            row[1] += [row[3]] * len(take)
            row[2] += list(range(len(take)))
            continue
        done = 0
        while done < len(toks):
            if not open_:
                rows.append([[], [], [], 0])
                open_ = [len(rows) - 1]
            row = rows[open_[0]]
            take = min(L - len(row[0]), len(toks) - done)
            row[3] += 1
            row[0] += toks[done:done + take]
            row[1] += [row[3]] * take
            row[2] += list(range(done, done + take))
            done += take
            if len(row[0]) == L:
                open_ = []
    return rows


def inner_records(texts, mix, hosts, host):
    """Host `host`'s records as the packed mixture's inner mixture deals
    them: the unpacked mixture of one core of 32 rows, each row's tokens."""
    out = []
    with podfeed.Loader(sources(texts), "tokens:int32[900]:lengths", per_core_batch=32,
                        cores=1, host_index=host, num_hosts=hosts, shuffle=True,
                        shuffle_window=512, seed=7, mix=mix) as loader:
        for b in loader:
            t = np.asarray(b["tokens"]).reshape(32, 900)
            n = np.asarray(b["tokens_lengths"]).reshape(32)
            out += [list(map(int, t[r, :n[r]])) for r in range(32)]
    return out


def batches(texts, mix, mode, hosts=1, host=0, **kw):
    out = []
    with podfeed.Loader(sources(texts), SPEC, pack_length=L, pack_mode=mode, source_feature=True,
                        **common(mix, hosts, host, **kw)) as loader:
        for b in loader:
            out.append({k: np.array(b[k]) for k in b.keys()})
        m = loader.metrics()
    return out, m


@pytest.mark.parametrize("hosts", [1, 4])
@pytest.mark.parametrize("mix", ["stratified", "sample"])
@pytest.mark.parametrize("mode", ["first_fit", "concat"])
def test_batches_are_the_mixture_packed(texts, mode, mix, hosts):
    refs = [pack_ref(inner_records(texts, mix, hosts, h), mode) for h in range(hosts)]
    steps = min(len(r) for r in refs) // 8          # 2 cores x 4 rows a step
    for h in range(hosts):
        got, m = batches(texts, mix, mode, hosts, h)
        assert len(got) == steps, f"host {h}: {len(got)} steps, every host's fewest {steps}"
        assert m["pack_rows_dropped"] == len(refs[h]) - steps * 8
        for s, b in enumerate(got):
            for idx in range(8):
                toks, seg, pos, _ = refs[h][s * 8 + idx]
                core, i = divmod(idx, 4)
                n = len(toks)
                row = b["tokens"][core, i]
                assert list(row[:n]) == toks, f"host {h} step {s} row {idx}"
                assert not row[n:].any()
                assert list(b["tokens_segment_ids"][core, i, :n]) == seg
                assert not b["tokens_segment_ids"][core, i, n:].any()
                assert list(b["tokens_positions"][core, i, :n]) == pos
                src = b["_source"][core, i]
                assert list(src[:n]) == [who(t)[0] for t in toks]
                assert (src[n:] == -1).all()


@pytest.mark.parametrize("mode", ["first_fit", "concat"])
def test_direct_placement_writes_the_same_batches(texts, mode, monkeypatch):
    """The sources' decode threads write records planned ahead straight
    into their packed rows (pack_direct.c): most records are placed so,
    and the batches are those of the consumer's packing alone, from the
    run's start and from a resume inside it."""
    got, m = batches(texts, "stratified", mode)
    assert m["pack_direct_records"] > m["records"] // 2, m
    monkeypatch.setenv("PODFEED_PACK_DIRECT", "0")
    ref, m0 = batches(texts, "stratified", mode)
    assert m0["pack_direct_records"] == 0
    assert len(got) == len(ref)
    for s, (a, b) in enumerate(zip(got, ref)):
        for k in a:
            assert np.array_equal(a[k], b[k]), f"{k} of step {s}"
    monkeypatch.delenv("PODFEED_PACK_DIRECT")
    kw = dict(pack_length=L, pack_mode=mode, source_feature=True, **common("stratified"))
    at = len(ref) // 2
    with podfeed.Loader(sources(texts), SPEC, **kw) as loader:
        it = iter(loader)
        for _ in range(at):
            next(it)
        state = loader.state_dict()
    with podfeed.Loader(sources(texts), SPEC, state=state, **kw) as loader:
        rest = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
        placed = loader.metrics()["pack_direct_records"]
    assert placed > 0
    for s, (a, b) in enumerate(zip(ref[at:], rest)):
        for k in a:
            assert np.array_equal(a[k], b[k]), f"{k} of step {at + s} after a resume"


def test_a_long_run_of_max_steps_plans_its_steps_alone(texts):
    """A run of (nearly) endless epochs with max_steps is planned as far
    as its steps (it planned the whole run, for ever, before), and an
    endless one not at all; the batches of both are the first steps of
    the same run of 3 epochs."""
    kw = dict(pack_length=L, source_feature=True, **common("stratified"))
    kw["epochs"] = 3
    ref = []
    with podfeed.Loader(sources(texts), SPEC, **kw) as loader:
        for b in loader:
            ref.append({k: np.array(b[k]) for k in b.keys()})
    kw["epochs"] = 2 ** 32 - 1
    with podfeed.Loader(sources(texts), SPEC, max_steps=40, **kw) as loader:
        got = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
    assert len(got) == 40 < len(ref)
    # Endless (no max_steps): no last step to plan; its first steps the
    # same, placed by the decode threads as far as its order reaches.
    with podfeed.Loader(sources(texts), SPEC, **kw) as loader:
        it = iter(loader)
        got += [{k: np.array(b[k]) for k in b.keys()} for b in (next(it) for _ in range(40))]
        assert loader.metrics()["pack_direct_records"] > 0
    for s, (a, b) in enumerate(zip(ref[:40] + ref[:40], got)):
        for k in a:
            assert np.array_equal(a[k], b[k]), f"{k} of step {s % 40}"


def test_max_steps_a_session_resumes_for_the_next(texts):
    """max_steps counts this run's steps: a state saved at the end of one
    session of 30 resumes into the next 30, as one run of 60 gives them
    (the plan of a resumed run reaches its own max_steps)."""
    kw = dict(pack_length=L, source_feature=True, **common("sample"))
    kw["epochs"] = 2 ** 32 - 1
    with podfeed.Loader(sources(texts), SPEC, max_steps=60, **kw) as loader:
        ref = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
    with podfeed.Loader(sources(texts), SPEC, max_steps=30, **kw) as loader:
        first = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
        state = loader.state_dict()
    with podfeed.Loader(sources(texts), SPEC, max_steps=30, state=state, **kw) as loader:
        second = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
    assert len(ref) == 60 and len(first) == 30 and len(second) == 30
    for s, (a, b) in enumerate(zip(ref, first + second)):
        for k in a:
            assert np.array_equal(a[k], b[k]), f"{k} of step {s}"


def test_no_record_more_often_than_its_epochs_on_any_host(texts):
    """Over 4 hosts: each record of a source at most once for each of
    that source's epochs started (a host's share of an epoch is its own);
    every host the same steps."""
    (_, lens) = texts
    seen = collections.Counter()
    steps, epochs = set(), collections.Counter()
    for h in range(4):
        with podfeed.Loader(sources(texts), SPEC, pack_length=L,
                            **common("stratified", 4, h)) as loader:
            n = 0
            for b in loader:
                n += 1
                t = np.asarray(b["tokens"]).reshape(-1, L)
                p = np.asarray(b["tokens_positions"]).reshape(-1, L)
                seg = np.asarray(b["tokens_segment_ids"]).reshape(-1, L)
                for v in t[(p == 0) & (seg > 0)]:
                    seen[who(int(v))[:2]] += 1
            steps.add(n)
            for s in loader.report("dict")["sources"]:
                epochs[s["name"]] = max(epochs[s["name"]], s["epochs_started"])
    assert len(steps) == 1
    for s, name in enumerate(("web", "code", "books")):
        most = max(seen[(s, r)] for r in range(len(lens[s])))
        assert 1 <= most <= epochs[name], f"{name}: a record {most} times"


@pytest.mark.parametrize("mix,mode,hosts,host", [("stratified", "first_fit", 1, 0),
                                                 ("sample", "concat", 1, 0),
                                                 ("stratified", "concat", 4, 3),
                                                 ("sample", "first_fit", 4, 1)])
def test_resume_is_bit_for_bit(texts, mix, mode, hosts, host):
    kw = dict(pack_length=L, pack_mode=mode, source_feature=True, **common(mix, hosts, host))
    full, _ = batches(texts, mix, mode, hosts, host)
    for at in (0, 3, len(full) // 2, len(full)):
        with podfeed.Loader(sources(texts), SPEC, **kw) as loader:
            it = iter(loader)
            for _ in range(at):
                next(it)
            state = loader.state_dict()
        assert state["step_in_epoch"] == at and state["pack_length"] == L
        with podfeed.Loader(sources(texts), SPEC, state=state, **kw) as loader:
            rest = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
        assert len(rest) == len(full) - at
        for a, b in zip(full[at:], rest):
            for k in a:
                assert np.array_equal(a[k], b[k]), f"{k} after a resume at {at}"
    # A resumed run's own state (its sources inside the batches they were
    # resumed in) resumes too.
    at = 3
    with podfeed.Loader(sources(texts), SPEC, max_steps=at, **kw) as loader:
        for _ in loader:
            pass
        state = loader.state_dict()
    with podfeed.Loader(sources(texts), SPEC, state=state, max_steps=20, **kw) as loader:
        for _ in loader:
            pass
        state = loader.state_dict()
    with podfeed.Loader(sources(texts), SPEC, state=state, **kw) as loader:
        rest = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
    same(rest, full[at + 20:], "a resume of a resume")


def test_tokens_weigh_the_token_shares(texts):
    with podfeed.Loader(sources(texts), SPEC, pack_length=L, mix_unit="tokens",
                        **common("stratified")) as loader:
        for _ in loader:
            pass
        rep = loader.report("dict")
    got = {s["name"]: s for s in rep["sources"]}
    for name, w in (("web", 0.5), ("code", 0.3), ("books", 0.2)):
        assert got[name]["unit"] == "tokens"
        assert got[name]["share"] == pytest.approx(w)
        assert got[name]["realised_token_share"] == pytest.approx(w, abs=0.02)
    # Records weighed, the token shares follow the records' lengths.
    with podfeed.Loader(sources(texts), SPEC, pack_length=L, **common("stratified")) as loader:
        for _ in loader:
            pass
        rep = loader.report("dict")
    got = {s["name"]: s for s in rep["sources"]}
    assert got["web"]["unit"] == "records"
    assert got["web"]["realised_share"] == pytest.approx(0.5, abs=0.02)
    assert got["web"]["realised_token_share"] < 0.4     # its records are the short ones


def test_every_token_is_counted_delivered_or_dropped(texts):
    got, m = batches(texts, "stratified", "first_fit", 1, 0)
    delivered = sum(int((b["tokens_segment_ids"] > 0).sum()) for b in got)
    assert m["pack_values"] == delivered
    assert m["pack_dropped_tokens"] > 0 and m["pack_dropped_records"] > 0
    assert m["pack_rows_dropped"] > 0


# --------------------------------------------------------------------
# Elastic resume: the states of H hosts resumed on H'.

def pieces_of(loader, b, out, texts=None):
    """Each piece records_of() names in step b, counted by (source, its
    epoch, file, record, first value), checked against b's tokens."""
    refs = loader.records_of(b.global_step)
    if texts is not None:
        check_pieces(refs, {k: np.array(b[k]) for k in b.keys()}, first_records(texts),
                     f"step {b.global_step}")
    for r in refs:
        out[(r["source"], r["epoch"], r["file"], r["record"], r["from"])] += 1


@pytest.mark.parametrize("mix,mode,old,new", [("stratified", "first_fit", 4, 2),
                                              ("stratified", "concat", 2, 3),
                                              ("sample", "first_fit", 1, 2),
                                              ("sample", "concat", 4, 2)])
def test_elastic_resume(texts, mix, mode, old, new):
    """States of `old` hosts saved at step 5, resumed on `new`: every new
    host has the same steps, going on from step 5; no piece of a record
    of a source's epoch is delivered twice (before the cut and after it,
    every host: records_of() names each, checked against its tokens);
    the rows the old hosts had in progress are counted as dropped, and
    of each source's epoch the cut is in, less than one batch of the
    packed host's rows of records a new host is lost beyond them; a state
    saved after the resume resumes exactly, and skip_steps skips from
    it."""
    at = 5
    kw = dict(pack_length=L, pack_mode=mode, source_feature=True)
    base, seen, states = collections.Counter(), collections.Counter(), []
    for h in range(old):
        with podfeed.Loader(sources(texts), SPEC, **kw, **common(mix, old, h)) as loader:
            for b in loader:
                pieces_of(loader, b, base)
        with podfeed.Loader(sources(texts), SPEC, max_steps=at, **kw,
                            **common(mix, old, h)) as loader:
            for b in loader:
                pieces_of(loader, b, seen)
            states.append(loader.state_dict())
    cut = set(seen)
    steps, lost_records, lost_rows = set(), 0, 0
    for h in range(new):
        with podfeed.Loader(sources(texts), SPEC, state=states, **kw,
                            **common(mix, new, h)) as loader:
            m = loader.metrics()
            lost_records += m["pack_dropped_records"]
            lost_rows += m["pack_rows_dropped"]
            got = []
            for b in loader:
                pieces_of(loader, b, seen, texts)
                got.append({k: np.array(b[k]) for k in b.keys()})
                assert b.global_step == at + len(got) - 1 == b.step
            steps.add(len(got))
        if h == new - 1:
            stop = len(got) // 2
            with podfeed.Loader(sources(texts), SPEC, state=states, max_steps=stop, **kw,
                                **common(mix, new, h)) as loader:
                for _ in loader:
                    pass
                after = loader.state_dict()
            with podfeed.Loader(sources(texts), SPEC, state=after, **kw,
                                **common(mix, new, h)) as loader:
                rest = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
            same(rest, got[stop:], "resumed on the new hosts")
            with podfeed.Loader(sources(texts), SPEC, state=states, skip_steps=7, **kw,
                                **common(mix, new, h)) as loader:
                rest = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
            same(rest, got[7:], "skip_steps after an elastic resume")
    assert len(steps) == 1, f"new hosts' steps: {steps}"
    assert max(seen.values()) == 1, "a piece of a record twice in its source's epoch"
    assert lost_rows > 0 and lost_records > 0
    # The epoch of each source the cut is in (code and books: their epochs
    # end inside the run, before it and after; web's ends with the run).
    for name in ("code", "books"):
        e = max(k[1] for k in cut if k[0] == name)
        had = {k[:4] for k in base if k[0] == name and k[1] == e}
        got = {k[:4] for k in seen if k[0] == name and k[1] == e}
        assert len(had - got) < lost_records + 8 * new, \
            f"{name}: {len(had - got)} records of epoch {e} lost"


def test_elastic_resume_refuses_states_of_other_jobs(texts):
    kw = dict(pack_length=L)
    states = []
    for hosts in (2, 4):
        with podfeed.Loader(sources(texts), SPEC, max_steps=3, **kw,
                            **common("stratified", hosts, 0)) as loader:
            for _ in loader:
                pass
            states.append(loader.state_dict())
    with pytest.raises(podfeed.ConfigError, match="not one job's states"):
        podfeed.Loader(sources(texts), SPEC, state=states, **kw, **common("stratified", 1, 0))
    with pytest.raises(podfeed.ConfigError, match="needs the state of each old host once"):
        podfeed.Loader(sources(texts), SPEC, state=states[1:], **kw,
                       **common("stratified", 1, 0))
    with pytest.raises(podfeed.ConfigError, match="saved packing 1 features into rows of 256 "
                                                  r"\(first_fit, pool 8\); this loader packs "
                                                  "1 into rows of 256 \\(concat"):
        podfeed.Loader(sources(texts), SPEC, state=states[1:], pack_length=L,
                       pack_mode="concat", **common("stratified", 1, 0))


# --------------------------------------------------------------------
# skip_steps: N packed steps on, as if delivered (issue 39's skip for a
# packed mixture).

def same(a, b, what):
    assert len(a) == len(b), f"{what}: {len(a)} steps, {len(b)} expected"
    for s, (x, y) in enumerate(zip(a, b)):
        for k in y:
            assert np.array_equal(x[k], y[k]), f"{what}: {k} of step {s}"


def held(steps):
    """The pieces of records (segments) and values the steps' rows hold."""
    records = tokens = 0
    for b in steps:
        seg = b["tokens_segment_ids"].reshape(-1, L)
        records += int(seg.max(axis=1).sum())
        tokens += int((seg > 0).sum())
    return records, tokens


@pytest.mark.parametrize("hosts", [1, 4])
@pytest.mark.parametrize("mix", ["stratified", "sample"])
@pytest.mark.parametrize("mode", ["first_fit", "concat"])
def test_skip_steps_gives_the_run_never_stopped(texts, mode, mix, hosts):
    """On every host, skip_steps=N gives the uninterrupted run's steps
    from N on, and says what it skipped: the pieces of records and the
    values of the skipped steps' rows."""
    for h in range(hosts):
        full, _ = batches(texts, mix, mode, hosts, h)
        for n in (1, len(full) // 2 + 3, len(full) - 1):
            got, m = batches(texts, mix, mode, hosts, h, skip_steps=n)
            same(got, full[n:], f"host {h}, skip_steps={n}")
            assert m["skipped_steps"] == n and m["skipped_from"] == 0
            assert (m["skipped_records"], m["skipped_tokens"]) == held(full[:n]), n
            assert m["steps"] == len(full) - n


@pytest.mark.parametrize("mix,mode,hosts,host", [("stratified", "first_fit", 1, 0),
                                                 ("sample", "concat", 1, 0),
                                                 ("stratified", "concat", 4, 2),
                                                 ("sample", "first_fit", 4, 3)])
def test_skip_steps_from_a_state(texts, mix, mode, hosts, host):
    """From a resumed state: its steps, then N more, skipped; a state saved
    after the skip is past it and resumes exactly; max_steps counts the
    steps after the skip; a skip past the run's last step is refused
    naming that step."""
    kw = dict(pack_length=L, pack_mode=mode, source_feature=True, **common(mix, hosts, host))
    full, _ = batches(texts, mix, mode, hosts, host)
    at, n = 7, len(full) // 3
    with podfeed.Loader(sources(texts), SPEC, max_steps=at, **kw) as loader:
        for _ in loader:
            pass
        state = loader.state_dict()
    with podfeed.Loader(sources(texts), SPEC, state=state, skip_steps=n, **kw) as loader:
        got = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
        m = loader.metrics()
    same(got, full[at + n:], f"resumed at {at}, skip_steps={n}")
    assert m["skipped_from"] == at and m["skipped_steps"] == n
    assert (m["skipped_records"], m["skipped_tokens"]) == held(full[at:at + n])
    with podfeed.Loader(sources(texts), SPEC, state=state, skip_steps=n, max_steps=5,
                        **kw) as loader:
        got = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
        after = loader.state_dict()
    same(got, full[at + n:at + n + 5], "max_steps after the skip")
    assert after["global_step"] == at + n + 5 and after["skipped_steps"] == n
    with podfeed.Loader(sources(texts), SPEC, state=after, **kw) as loader:
        got = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
    same(got, full[at + n + 5:], "resumed from a state saved after the skip")
    last = len(full) - 1
    with pytest.raises(podfeed.ConfigError,
                       match=rf"^skip_steps: .*its last step is global step {last} "):
        podfeed.Loader(sources(texts), SPEC, state=state, skip_steps=len(full) - at, **kw)
    with podfeed.Loader(sources(texts), SPEC, state=state, skip_steps=len(full) - at - 1,
                        **kw) as loader:
        got = [{k: np.array(b[k]) for k in b.keys()} for b in loader]
    same(got, full[-1:], "the last step alone")


def test_loadbench_skip_steps(texts):
    """loadbench --skip-steps with --source and --pack: the report's
    skipped packed steps, and the steps after them."""
    (web, code, books), _ = texts
    args = [tool("tools/loadbench"), "--quiet", "--json", "--source", f"web=0.5:{web}",
            "--source", f"code=0.3:{code}", "--source", f"books=0.2:{books}", "--features", SPEC,
            "--pack", str(L), "--per-core-batch", "4", "--cores", "2", "--shuffle", "--seed", "7"]
    whole = json.loads(subprocess.run([str(a) for a in args], check=True,
                                      capture_output=True, text=True).stdout)
    got = json.loads(subprocess.run([str(a) for a in args + ["--skip-steps", "20"]], check=True,
                                    capture_output=True, text=True).stdout)
    assert got["skipped"]["steps"] == 20 and got["skipped"]["from_step"] == 0
    assert got["skipped"]["tokens"] > got["skipped"]["records"] > 0
    assert got["steps"] == whole["steps"] - 20
    bad = subprocess.run([str(a) for a in args + ["--skip-steps", str(whole["steps"])]],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert f"its last step is global step {whole['steps'] - 1} " in bad.stderr


# --------------------------------------------------------------------
# The records of a step: each piece of a record in a row, its source,
# file and record, from the plan (records.py's tokens say who they are).

def first_records(texts):
    """Each converted file's first record number in its source (the
    shards text_source wrote, in order)."""
    (dirs, lens) = texts
    base = {}
    for d, ls, shards in zip(dirs, lens, (3, 2, 2)):
        per = -(-len(ls) // shards)
        for i, f in enumerate(sorted(d.glob("*.zst"))):
            base[str(f)] = i * per
    return base


def check_pieces(refs, b, base, what):
    """Every piece names, in its row, its source's record's values there
    (by their tokens), with its segment id; together they name every
    value the step's rows hold."""
    names = ["web", "code", "books"]
    covered = 0
    for r in refs:
        c, i, at, n = r["core"], r["row"], r["at"], r["count"]
        want = [(names.index(r["source"]), base[r["file"]] + r["record"], r["from"] + p)
                for p in range(n)]
        got = [who(int(t)) for t in b["tokens"][c, i, at:at + n]]
        assert got == want, f"{what}: {r}"
        assert (b["tokens_segment_ids"][c, i, at:at + n] == r["segment"]).all(), r
        assert (b["_source"][c, i, at:at + n] == names.index(r["source"])).all(), r
        covered += n
    assert covered == int((b["tokens_segment_ids"] != 0).sum()), what


@pytest.mark.parametrize("mix,mode,hosts,host", [("stratified", "first_fit", 1, 0),
                                                 ("sample", "concat", 1, 0),
                                                 ("stratified", "concat", 4, 1),
                                                 ("sample", "first_fit", 4, 3)])
def test_records_of_names_each_piece(texts, mix, mode, hosts, host):
    base = first_records(texts)
    kw = dict(pack_length=L, pack_mode=mode, source_feature=True, **common(mix, hosts, host))
    with podfeed.Loader(sources(texts), SPEC, **kw) as loader:
        full = []
        for b in loader:
            check_pieces(loader.records_of(b.global_step), b, base, f"step {b.global_step}")
            full.append(b.global_step)
        last = full[-1]
        with pytest.raises(podfeed.ConfigError,
                           match=rf"^records_of: step {last + 1} .* global steps 0 to {last} "):
            loader.records_of(last + 1)
    # Skipped and resumed: the steps skipped say what the run never
    # stopped delivered there; a step before the state's is not the run's.
    with podfeed.Loader(sources(texts), SPEC, max_steps=5, **kw) as loader:
        for _ in loader:
            pass
        state = loader.state_dict()
    with podfeed.Loader(sources(texts), SPEC, state=state, skip_steps=9, **kw) as loader:
        ahead = {s: loader.records_of(s) for s in (5, 13, 14, 20)}
        for b in loader:
            if b.global_step in ahead:
                check_pieces(ahead[b.global_step], b, base, f"step {b.global_step} resumed")
            if b.global_step == 20:
                break
        with pytest.raises(podfeed.ConfigError, match=r"^records_of: step 4 .* global steps 5 "):
            loader.records_of(4)
    with podfeed.Loader(sources(texts), SPEC, **kw) as loader:
        for b in loader:
            if b.global_step in (5, 13):
                assert loader.records_of(b.global_step) == ahead[b.global_step]
            if b.global_step == 13:
                break


def test_loadbench_which_names_a_packed_mixture_s_pieces(texts):
    """loadbench which (a plan-only loader: nothing read) names the pieces
    the loader delivers."""
    (web, code, books), _ = texts
    base = first_records(texts)
    args = [tool("tools/loadbench"), "which", "--steps", "3:6", "--json",
            "--source", f"web=0.5:{web}", "--source", f"code=0.3:{code}",
            "--source", f"books=0.2:{books}", "--features", SPEC, "--pack", str(L),
            "--per-core-batch", "4", "--cores", "2", "--shuffle", "--seed", "7",
            "--num-hosts", "2", "--host-index", "1"]
    out = json.loads(subprocess.run([str(a) for a in args], check=True, capture_output=True,
                                    text=True).stdout)
    with podfeed.Loader(sources(texts), SPEC, pack_length=L, source_feature=True,
                        per_core_batch=4, cores=2, shuffle=True, seed=7, num_hosts=2,
                        host_index=1) as loader:
        got = {b.global_step: {k: np.array(b[k]) for k in b.keys()}
               for b, _ in zip(loader, range(6))}
    assert [s["step"] for s in out["steps"]] == [3, 4, 5]
    for s in out["steps"]:
        check_pieces(s["rows"], got[s["step"]], base, f"loadbench which, step {s['step']}")
    bad = subprocess.run([str(a) for a in args[:3] + ["100000:100001"] + args[4:]],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "is not a step of this run" in bad.stderr
