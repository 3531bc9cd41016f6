# SPDX-License-Identifier: Apache-2.0
"""Every pair of features, decided (issue 37): image features, packing
(first_fit, concat), mixtures (stratified, sample), the window and the
global shuffle, skip mode over damaged data, max_steps, remainder wrap,
each on 1 and 4 hosts (every host), and each resumed exactly from a state
and, on another host count, elastically.  A pair either works, its
batches equal to a reference built from its parts, or is refused at
create naming both (docs/api.md, "Every pair of features", says which
and why).

The references, by the part that decides each:
  - an image row is the row of its record (its label) that a plain image
    loader (no shuffle, one host, the same seed and epoch) gives: the
    pair's order is the same config's with the label alone;
  - packed rows are the packer's rule (test_packed_mixture.pack_ref) over
    the inner loader's records (one core of 32, the pair's order);
  - a mixture's rows of source k are, in order, source k's own loader's
    (its batch and window share as the mixture gives them);
  - max_steps is the run without it, cut; skip mode is the run over the
    intact data with the damaged frame's records as holes;
  - wrap's last step is filled from the start of the host's stream;
  - an elastic resume (4 hosts saved at step 3, resumed on 2) repeats no
    record of the epoch and loses less than one global batch."""
import collections
import itertools
import shutil
import subprocess

import numpy as np
import pytest

import podfeed
from conftest import tool
from records import text_source, who
from test_packed_mixture import pack_ref

FEATURES = ["images", "first_fit", "concat", "stratified", "sample", "window", "global",
            "skip", "max_steps", "wrap", "elastic"]
EXCLUSIVE = [{"first_fit", "concat"}, {"stratified", "sample"}, {"window", "global"}]
# Refused at create, and the words of the refusal (docs/api.md says why).
REFUSED = {
    frozenset({"images", "first_fit"}): "is an image and pack_length",
    frozenset({"images", "concat"}): "is an image and pack_length",
    frozenset({"first_fit", "wrap"}): "remainder wrap with pack_length",
    frozenset({"concat", "wrap"}): "remainder wrap with pack_length",
}
PAIRS = [p for p in itertools.combinations(FEATURES, 2) if set(p) not in EXCLUSIVE]
L = 64
PCB, CORES, SEED, EPOCHS, WINDOW, STEPS = 4, 2, 5, 2, 64, 7


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    st = tool("tools/shardtool")
    text_source(st, root / "t0", 0, 603, 30, 3)     # not whole steps: wrap wraps
    text_source(st, root / "t1", 1, 250, 50, 2)
    text_source(st, root / "t2", 2, 150, 20, 2)
    subprocess.run([tool("tests/python/image_ref"), "shard", str(root / "img.tfrecord.zst"),
                    "96"], check=True)
    subprocess.run([st, "convert", "--out", str(root / "img"), "--frame-size", "16K",
                    str(root / "img.tfrecord.zst")], check=True, capture_output=True)
    # Damaged copies: a frame's bytes flipped in the second shard (no
    # manifest: it would name the shard's new bytes as a change).
    for name in ("t0", "img"):
        bad = root / (name + "-bad")
        shutil.copytree(root / name, bad)
        (bad / "podfeed.manifest").unlink()
        f = sorted(bad.glob("*.zst"))[-1 if name == "img" else 1]
        b = bytearray(f.read_bytes())
        for at in range(len(b) // 3, len(b) // 3 + 8):
            b[at] ^= 0xFF
        f.write_bytes(bytes(b))
    return root


RECORDS = {"t0": 603, "t1": 250, "t2": 150, "img": 96}


def config(data, pair, hosts, host, label_only=False, intact=False):
    """The pair's (paths, features, kwargs) on host `host` of `hosts`
    (intact: the damaged data's intact copy, skip mode or not)."""
    f = set(pair)
    image = "images" in f
    pack = f & {"first_fit", "concat"}
    kw = dict(per_core_batch=PCB, cores=CORES, seed=SEED, epochs=EPOCHS, host_index=host,
              num_hosts=hosts)
    if image:
        feats = ({"image/class/label": "int64"} if label_only else
                 {"image/encoded": podfeed.Image(32, 48, "train"), "image/class/label": "int64"})
    else:
        feats = "tokens:int32[*]" if pack else "tokens:int32[8]"
    if pack:
        kw.update(pack_length=L, pack_mode=pack.pop())
    if f & {"window", "global"}:
        kw.update(shuffle=True if "window" in f else "global", shuffle_window=WINDOW)
    if "skip" in f:
        kw.update(on_corrupt="skip")
    if "max_steps" in f:
        kw.update(max_steps=STEPS)
    if "wrap" in f:
        kw.update(remainder="wrap")
    bad = "-bad" if "skip" in f and not intact else ""
    mix = f & {"stratified", "sample"}
    if mix:
        kw.update(mix=mix.pop(), source_feature=True)
        if image:
            paths = [podfeed.Source(data / ("img" + bad), 2, "a"),
                     podfeed.Source(data / "img", 1, "b")]
        else:
            paths = [podfeed.Source(data / ("t0" + bad), 0.6, "t0"),
                     podfeed.Source(data / "t1", 0.25, "t1"),
                     podfeed.Source(data / "t2", 0.15, "t2")]
    else:
        paths = data / (("img" if image else "t0") + bad)
    return paths, feats, kw


def run(paths, feats, kw, state=None):
    out = []
    with podfeed.Loader(paths, feats, state=state, **kw) as loader:
        for b in loader:
            row = {k: np.array(b[k]) for k in b.keys()}
            row["_valid"] = np.array(b.valid)
            row["_epoch"] = b.epoch
            out.append(row)
    return out


def same(a, b, what):
    assert len(a) == len(b), f"{what}: {len(a)} batches, the reference {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        for k in y:
            if k.startswith("_e"):
                continue
            assert np.array_equal(x[k], y[k]), f"{what}: batch {i}, '{k}'"


def rows(batch, name):
    a = batch[name]
    return a.reshape(a.shape[0] * a.shape[1], *a.shape[2:])


# ---------------------------------------------------------------------
# The references

def image_reference(data, pair, hosts, host, got):
    """Each image row is its record's from a plain image loader (by its
    label and epoch); the order is the same config's with the label
    alone."""
    paths, feats, kw = config(data, pair, hosts, host, label_only=True)
    order = run(paths, feats, kw)
    assert len(order) == len(got)
    plain = {}
    kwp = dict(per_core_batch=8, seed=SEED, epochs=EPOCHS)
    for b in run(data / "img", {"image/encoded": podfeed.Image(32, 48, "train"),
                                "image/class/label": "int64"}, kwp):
        for lab, im in zip(rows(b, "image/class/label"), rows(b, "image/encoded")):
            plain[(b["_epoch"], int(lab[0]))] = im
    for g, o in zip(got, order):
        assert np.array_equal(rows(g, "image/class/label"), rows(o, "image/class/label"))
        valid = g["_valid"].reshape(-1)
        assert np.array_equal(valid, o["_valid"].reshape(-1))
        for v, lab, im in zip(valid, rows(g, "image/class/label"), rows(g, "image/encoded")):
            if v and not set(pair) & {"stratified", "sample"}:
                assert np.array_equal(im, plain[(g["_epoch"], int(lab[0]))]), f"label {lab[0]}"
            elif v:
                # A mixture's sources have epochs of their own (its
                # batches say its first source's): one of the record's
                # epochs' crops.
                want = [plain[(e, int(lab[0]))] for e in range(EPOCHS)]
                assert any(np.array_equal(im, w) for w in want), f"label {lab[0]}"
            else:
                assert not im.any()


def inner_stream(data, pair, hosts, host):
    """The packing loader's inner records on this host: one core of 32,
    the pair's order, each record's tokens (holes: None)."""
    paths, _, kw = config(data, pair, hosts, host)
    kw = {k: v for k, v in kw.items() if k not in ("pack_length", "pack_mode", "max_steps",
                                                    "source_feature")}
    kw.update(per_core_batch=32, cores=1)
    out = collections.defaultdict(list)     # epoch -> its records
    for b in run(paths, "tokens:int32[900]:lengths", kw):
        t = rows(b, "tokens")
        n = rows(b, "tokens_lengths").reshape(-1)
        for r in range(32):
            out[b["_epoch"]].append(list(map(int, t[r, :n[r]]))
                                    if b["_valid"].reshape(-1)[r] else None)
    return out


def pack_reference(data, pair, hosts, host, got, mode):
    """Each epoch packed on its own (a new packer), its steps every host's
    fewest rows over the rows of a step."""
    streams = [inner_stream(data, pair, hosts, h) for h in range(hosts)]
    want = []
    for e in sorted(streams[host]):
        refs = [pack_ref([r for r in st[e] if r], mode, L=L) for st in streams]
        steps = min(len(r) for r in refs) // (PCB * CORES)
        want += [refs[host][s * PCB * CORES:(s + 1) * PCB * CORES] for s in range(steps)]
    if "max_steps" in pair:
        want = want[:STEPS]
    assert len(got) == len(want)
    for b, step in zip(got, want):
        for idx in range(PCB * CORES):
            toks, seg, pos, _ = step[idx]
            core, i = divmod(idx, PCB)
            assert list(b["tokens"][core, i, :len(toks)]) == toks
            assert list(b["tokens_segment_ids"][core, i, :len(toks)]) == seg
            assert list(b["tokens_positions"][core, i, :len(toks)]) == pos


def mix_shares(weights):
    """The mixture's shares in 2^-32 (mixture.c's fix_shares())."""
    one = 1 << 32
    total = sum(weights)
    q = [max(1, int(w / total * one)) for w in weights]
    big = max(range(len(q)), key=lambda k: (q[k], -k))
    q[big] += one - sum(q)
    return q


def mixture_reference(data, pair, hosts, host, got):
    """Source k's rows, in order, are source k's own loader's: batches of
    its share of 8 host batches fitted to its records (at most records /
    (8 x hosts)), its share of the shuffle window."""
    paths, feats, kw = config(data, pair, hosts, host)
    q = mix_shares([s.weight for s in paths])
    hb = PCB * CORES
    name = "image/class/label" if "images" in pair else "tokens"
    for k, src in enumerate(paths):
        recs = RECORDS[src.paths[0].rstrip("/").split("/")[-1].replace("-bad", "")]
        cap = max(1, ((hb * 8 * q[k]) + (1 << 31)) >> 32)
        batch = max(1, min(cap, recs // (8 * hosts)))
        skw = {a: v for a, v in kw.items() if a not in ("mix", "source_feature", "max_steps",
                                                        "cores", "per_core_batch", "epochs")}
        if "shuffle_window" in skw:
            w = ((WINDOW * q[k]) + (1 << 31)) >> 32
            skw["shuffle_window"] = max(1, w)
        mine = [(r, g["_valid"].reshape(-1)[i])
                for g in got for i, r in enumerate(rows(g, name))
                if rows(g, "_source").reshape(-1)[i] == k]
        want = []
        for b in run(src.paths, feats, dict(skw, per_core_batch=batch, cores=1, epochs=40)):
            for i, r in enumerate(rows(b, name)):
                want.append((r, b["_valid"].reshape(-1)[i]))
            if len(want) >= len(mine):
                break
        for i, ((a, va), (b, vb)) in enumerate(zip(mine, want)):
            assert va == vb and (not va or np.array_equal(a, b)), f"source {k}, row {i}"


def skip_reference(data, pair, hosts, host, got):
    """Over the intact data the same batches, the damaged frame's records
    holes (zero rows, invalid)."""
    paths, feats, kw = config(data, pair, hosts, host, intact=True)
    ref = run(paths, feats, {k: v for k, v in kw.items() if k != "on_corrupt"})
    assert len(got) == len(ref)
    holes = 0
    for g, r in zip(got, ref):
        valid = g["_valid"].reshape(-1)
        holes += int((~valid.astype(bool)).sum())
        for k in r:
            if k.startswith("_") and k != "_source":
                continue
            a, b = rows(g, k), rows(r, k)
            for i, v in enumerate(valid):
                if v:
                    assert np.array_equal(a[i], b[i]), f"'{k}' row {i}"
                elif not k.startswith("_"):
                    assert not a[i].any()
    return holes


def wrap_reference(data, pair, hosts, host, got):
    """Each epoch: every record of the host's share once, and the last
    step filled with records the epoch gave before."""
    by = collections.defaultdict(list)
    for g in got:
        for v, r in zip(g["_valid"].reshape(-1), rows(g, "tokens")):
            if v:
                by[g["_epoch"]].append(who(int(r[0]))[:2])
    for e, recs in by.items():
        c = collections.Counter(recs)
        assert max(c.values()) <= 2
        twice = [r for r, n in c.items() if n == 2]
        assert len(twice) < PCB * CORES, f"epoch {e}: {len(twice)} records twice"


# ---------------------------------------------------------------------
# The matrix

@pytest.mark.parametrize("hosts", [1, 4])
@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(p) for p in PAIRS])
def test_pair(data, pair, hosts):
    words = REFUSED.get(frozenset(pair))
    if words:
        paths, feats, kw = config(data, pair, hosts, hosts - 1)
        with pytest.raises(podfeed.ConfigError, match=words):
            podfeed.Loader(paths, feats, **kw)
        return
    if "elastic" in pair:
        return elastic(data, pair, hosts)
    steps, holes = set(), 0
    for host in range(hosts):
        paths, feats, kw = config(data, pair, hosts, host)
        got = run(paths, feats, kw)
        steps.add(len(got))
        holes += sum(int((~g["_valid"].astype(bool)).sum()) for g in got)
        assert got, "no batch"
        f = set(pair)
        if "images" in f:
            image_reference(data, pair, hosts, host, got)
        if f & {"first_fit", "concat"}:
            if not f & {"stratified", "sample"}:
                pack_reference(data, pair, hosts, host, got, (f & {"first_fit", "concat"}).pop())
        elif f & {"stratified", "sample"}:
            mixture_reference(data, pair, hosts, host, got)
        resumed_want = None
        if "max_steps" in f:
            full = run(*_cfg(data, pair, hosts, host))
            same(got, full[:STEPS], "max_steps: the run without it, cut")
        if "skip" in f and not f & {"first_fit", "concat", "images"}:
            assert skip_reference(data, pair, hosts, host, got) >= 0
        if "wrap" in f and not f & {"images", "stratified", "sample"}:
            wrap_reference(data, pair, hosts, host, got)
        # Exact resume from step 3 (or the last); max_steps counts from
        # a run's start, so the resumed run goes on as far again.
        at = min(3, len(got))
        with podfeed.Loader(paths, feats, **kw) as loader:
            it = iter(loader)
            for _ in range(at):
                next(it)
            state = loader.state_dict()
        resumed_want = full[at:at + STEPS] if "max_steps" in f else got[at:]
        same(run(paths, feats, kw, state), resumed_want, "resumed at step %d" % at)
    assert len(steps) == 1, f"steps differ among hosts: {steps}"
    if "skip" in pair and not set(pair) & {"first_fit", "concat", "max_steps"}:
        assert holes, "skip mode: the damaged data made no hole"


def _cfg(data, pair, hosts, host):
    """The pair's config without max_steps (the other feature alone, as
    the pair has it)."""
    paths, feats, kw = config(data, pair, hosts, host)
    kw.pop("max_steps", None)
    return paths, feats, kw


def elastic(data, pair, hosts):
    """4 hosts saved at step 3, resumed on 2 (or 1 saved on 2 of the 1's
    ... only 4 -> 2 makes an elastic resume): no record of the epoch
    twice, less than one global batch lost."""
    if hosts != 4:
        return
    other = [p for p in pair if p != "elastic"][0]
    f = {other}
    if f & {"first_fit", "concat", "max_steps"}:
        name = "tokens"
    elif "images" in f:
        name = "image/class/label"
    else:
        name = "tokens"
    states, seen = [], collections.Counter()
    for h in range(4):
        paths, feats, kw = config(data, (other,), 4, h)
        with podfeed.Loader(paths, feats, **kw) as loader:
            it = iter(loader)
            for _ in range(3):
                b = next(it)
                _count(b, name, f, seen)
            states.append(loader.state_dict())
    for h in range(2):
        paths, feats, kw = config(data, (other,), 2, h)
        with podfeed.Loader(paths, feats, state=states, **kw) as loader:
            for b in loader:
                if b.epoch > 0:
                    break
                _count(b, name, f, seen)
    if f & {"stratified", "sample"}:
        # A mixture's sources have epochs of their own: the first
        # source's records in the run's first epoch, each once.
        firsts = [r for r in seen if r[0] == 0]
        assert all(seen[r] == 1 for r in firsts)
        return
    if "wrap" in f:
        assert max(seen.values()) <= 2
        return
    assert max(seen.values()) == 1, "a record twice after an elastic resume"
    # Against the run that never stopped: less than one global batch (of
    # the old topology's) lost; packed, rows (a row holds ~2 records
    # here, each the fewer the longer).
    base = collections.Counter()
    for h in range(4):
        paths, feats, kw = config(data, (other,), 4, h)
        with podfeed.Loader(paths, feats, **kw) as loader:
            for b in loader:
                if b.epoch > 0:
                    break
                _count(b, name, f, base)
    lost = len(base) - len(seen)
    rows_ = PCB * CORES * 4
    assert 0 <= lost < (3 * rows_ if f & {"first_fit", "concat"} else rows_), \
        f"{lost} records lost ({len(base)} in the run that never stopped)"


def _count(b, name, f, seen):
    valid = np.array(b.valid).reshape(-1)
    if f & {"first_fit", "concat"}:
        t = np.array(b["tokens"]).reshape(-1, L)
        p = np.array(b["tokens_positions"]).reshape(-1, L)
        seg = np.array(b["tokens_segment_ids"]).reshape(-1, L)
        for v in t[(p == 0) & (seg > 0)]:
            seen[who(int(v))[:2]] += 1
        return
    for v, r in zip(valid, rows({name: np.array(b[name])}, name)):
        if v:
            seen[who(int(r[0]))[:2] if name == "tokens" else (0, int(r[0]))] += 1
