# SPDX-License-Identifier: Apache-2.0
# Checkpoints (state_dict, exact and elastic resume), inspect_state, plan,
# and four hosts emulated in one process.
import base64
import errno
import json
import pickle

import numpy as np
import pytest

import podfeed
from conftest import TOKENS


def ids(batch):
    """The records of a batch, by content: each token row as bytes."""
    t = batch["tokens"]
    return [t[c, r].tobytes() + batch["label"][c, r].tobytes()
            for c in range(t.shape[0]) for r in range(t.shape[1])]


def test_exact_resume_mid_epoch(data):
    kw = dict(per_core_batch=8, cores=2, seed=5, epochs=2)
    ref = [ids(b) for b in podfeed.Loader(data / "indexed", TOKENS, **kw)]
    loader = podfeed.Loader(data / "indexed", TOKENS, **kw)
    first = [ids(next(loader)) for _ in range(40)]
    state = loader.state_dict()
    loader.close()
    state = json.loads(json.dumps(state))  # plain values only
    pickle.dumps(state)
    assert state["step_in_epoch"] == 40 and state["epoch"] == 0
    resumed = [ids(b) for b in podfeed.Loader(data / "indexed", TOKENS, state=state, **kw)]
    assert first + resumed == ref
    # load_state_dict on a loader that has run on does the same.
    other = podfeed.Loader(data / "indexed", TOKENS, **kw)
    for _ in range(70):
        next(other)
    other.load_state_dict(state)
    assert [ids(b) for b in other] == resumed


def test_elastic_resume_four_hosts_to_two(data):
    kw = dict(per_core_batch=5, cores=2, seed=9)
    olds = [podfeed.Loader(data / "indexed", TOKENS, host_index=h, num_hosts=4, **kw)
            for h in range(4)]
    seen = []
    for _ in range(10):  # ten global steps on four hosts
        for lo in olds:
            seen += ids(next(lo))
    states = [lo.state_dict() for lo in olds]
    for lo in olds:
        lo.close()
    info = podfeed.inspect_state(states)
    assert [i["host_index"] for i in info] == [0, 1, 2, 3]
    assert all(i["step_in_epoch"] == 10 and i["num_hosts"] == 4 for i in info)
    news = [podfeed.Loader(data / "indexed", TOKENS, host_index=h, num_hosts=2,
                           state=states, **kw) for h in range(2)]
    steps = []
    for lo in news:
        got = [ids(b) for b in lo]
        steps.append(len(got))
        seen += [r for b in got for r in b]
    assert steps[0] == steps[1]  # equal steps on every host
    assert len(seen) == len(set(seen))  # nothing repeated
    # Nothing lost but the epoch's remainder (less than a global batch).
    assert 2000 - 20 < len(seen) <= 2000


def test_four_hosts_in_one_process_equal_steps_disjoint_records(data):
    shares = []
    for h in range(4):
        with podfeed.Loader(data / "indexed", TOKENS, 6, cores=2, host_index=h,
                            num_hosts=4, seed=2) as lo:
            shares.append([r for b in lo for r in ids(b)])
            assert lo.steps_per_epoch == 2000 // 48
    assert len({len(s) for s in shares}) == 1 and len(shares[0]) == 2000 // 48 * 12
    flat = [r for s in shares for r in s]
    assert len(flat) == len(set(flat))


def test_inspect_state_and_damage(data):
    with podfeed.Loader(data / "indexed", TOKENS, 8) as lo:
        next(lo)
        s = lo.state_dict()
    info = podfeed.inspect_state(s)
    assert info["global_step"] == 1 and info["dataset_records"] == 2000
    assert info["records_left"] == 2000 - 8
    bad = dict(s, blob=s["blob"][:10] + ("A" if s["blob"][10] != "A" else "B") + s["blob"][11:])
    with pytest.raises(podfeed.DataError):
        podfeed.inspect_state(bad)


def test_state_of_another_dataset_is_a_config_error(data):
    # A state saved over 3 of the 4 shards, resumed over all 4: the engine
    # says -ESTALE; that is a refused configuration (a ValueError), not a
    # bare podfeed.Error.
    shards = sorted((data / "indexed").glob("*.zst"))
    with podfeed.Loader([str(p) for p in shards[:3]], TOKENS, 8) as lo:
        next(lo)
        s = lo.state_dict()
    with pytest.raises(podfeed.ConfigError, match="another dataset") as e:
        podfeed.Loader(data / "indexed", TOKENS, 8, state=s)
    assert isinstance(e.value, ValueError) and e.value.errno == errno.ESTALE
    lo = podfeed.Loader(data / "indexed", TOKENS, 8)
    with pytest.raises(podfeed.ConfigError, match="another dataset"):
        lo.load_state_dict(s)
    lo.close()


def test_host_identity(data):
    assert podfeed.host_identity(2, 4) == (2, 4, "arguments")
    assert podfeed.host_identity() == (0, 1, "single")
    assert podfeed.host_identity(None, 1) == (0, 1, "arguments")
    with pytest.raises(ValueError, match="^host_index: num_hosts is 4 but nothing says"):
        podfeed.host_identity(None, 4)
    with pytest.raises(ValueError, match="^num_hosts: host_index is 1 but nothing gives"):
        podfeed.host_identity(1)
    with pytest.raises(ValueError, match="^host_index"):  # the loader: the same
        podfeed.Loader(data / "indexed", TOKENS, 8, num_hosts=4)


def test_host_identity_from_torch_distributed(monkeypatch):
    import sys
    import types
    fake = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                                 get_rank=lambda: 3, get_world_size=lambda: 8)
    monkeypatch.setitem(sys.modules, "torch.distributed", fake)
    assert podfeed.host_identity() == (3, 8, "torch.distributed")
    assert podfeed.host_identity(host_index=1) == (1, 8, "torch.distributed")
    jax = types.SimpleNamespace(process_index=lambda: 1, process_count=lambda: 2)
    monkeypatch.setitem(sys.modules, "jax", jax)
    assert podfeed.host_identity() == (1, 2, "jax")
    # a single-process jax says nothing about four hosts: never a silent host 0
    jax = types.SimpleNamespace(process_index=lambda: 0, process_count=lambda: 1)
    monkeypatch.setitem(sys.modules, "jax", jax)
    with pytest.raises(ValueError, match="^host_index: num_hosts is 4 but jax says 1"):
        podfeed.host_identity(None, 4)


def test_host_identity_from_the_environment(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert podfeed.host_identity() == (1, 3, "torch")
    # an argument wins over the environment; the other comes from it
    assert podfeed.host_identity(0) == (0, 3, "torch")
    assert podfeed.host_identity(None, 3) == (1, 3, "torch")
    with pytest.raises(ValueError, match="^host_index: 3 is not below the 3 hosts torch"):
        podfeed.host_identity(3)
    # another host count than the environment's leaves this host unknown
    with pytest.raises(ValueError, match="^host_index: num_hosts is 4 but torch says 3"):
        podfeed.host_identity(None, 4)
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="RANK"):
        podfeed.host_identity()


def test_plan():
    p = podfeed.plan(128, 32, 1, 1024, 100)
    assert p["global_batch"] == 4096 and p["steps"] == 25
    p = podfeed.plan(125, 8, 4, 1000, 100)
    assert p["global_batch"] == 4000 and p["steps"] == 25 and p["ref_cores"] == 8
    p = podfeed.plan(10, 2, 1, records=1005, epochs=2)
    assert p["steps_per_epoch"] == 50 and p["dropped_per_epoch"] == 5
    with pytest.raises(ValueError):
        podfeed.plan(0, 1, 1)


def test_jax_local_data_is_what_make_array_needs(data):
    import podfeed.jax as pj
    with podfeed.Loader(data / "indexed", TOKENS, 4, cores=3) as lo:
        b = next(lo)
        local = pj.local_data(b, "tokens")
        assert local.shape == (12, 64) and local.flags.c_contiguous
        assert local.dtype == np.int32
        for c in range(3):  # core 0's rows first
            assert np.array_equal(local[4 * c:4 * (c + 1)], b.core(c)["tokens"])
        assert pj.global_shape(b, "tokens", 4) == (48, 64)
    with podfeed.Loader(data / "indexed", "tokens:int32[64]", 4, cores=3) as lo:
        b = next(lo)
        local = pj.local_data(b, "tokens")  # one feature: a view, no copy
        assert local.ctypes.data == b["tokens"].ctypes.data


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """3,000 `--kind text` records (median 40 tokens) in 4 indexed shards."""
    from conftest import run, tool
    root = tmp_path_factory.mktemp("text")
    st = tool("tools/shardtool")
    run(st, "synth", "--kind", "text", "--records", 3000, "--shards", 2, "--median-tokens", 40,
        "--max-tokens", 300, "--seed", 3, "--out", root / "plain")
    run(st, "convert", "--out", root / "z", "--shards", 4, "--frame-size", "16K", root / "plain")
    return root / "z"


def packed(batch):
    return b"".join(batch[k].tobytes() for k in sorted(batch))


@pytest.mark.parametrize("mode", ["first_fit", "concat"])
def test_packing_state_dict_round_trip(text, mode):
    kw = dict(per_core_batch=2, cores=2, seed=4, epochs=2, shuffle=True, pack_length=128,
              pack_mode=mode)
    spec = "tokens:int32[*],targets:int32[*]"
    ref = [packed(b) for b in podfeed.Loader(text, spec, **kw)]
    loader = podfeed.Loader(text, spec, **kw)
    first = [packed(next(loader)) for _ in range(17)]
    state = json.loads(json.dumps(loader.state_dict()))
    loader.close()
    assert state["pack_length"] == 128 and state["step_in_epoch"] == 17
    assert state["cores"] == 2 and state["per_core_batch"] == 2
    assert len(base64.b64decode(state["blob"])) < 64 << 10
    resumed = [packed(b) for b in podfeed.Loader(text, spec, state=state, **kw)]
    assert first + resumed == ref
    # Other settings: refused, saying what differs.
    with pytest.raises(podfeed.Error, match="rows of 128 .* this loader packs 2 into rows of 64"):
        podfeed.Loader(text, spec, state=state, **{**kw, "pack_length": 64})
    with pytest.raises(podfeed.Error, match="saved by a packing loader"):
        podfeed.Loader(text, "tokens:int32[64]", per_core_batch=2, seed=4, state=state)
