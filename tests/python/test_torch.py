# SPDX-License-Identifier: Apache-2.0
# podfeed.torch: the IterableDataset end to end with a tiny model step.
import hashlib
import os
import pickle
import subprocess
import sys
import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import podfeed  # noqa: E402
import podfeed.torch  # noqa: E402
from conftest import TOKENS, digests  # noqa: E402


def test_dataloader_trains_a_tiny_model(data):
    ds = podfeed.torch.IterableDataset(data / "indexed", TOKENS, per_core_batch=16,
                                       seed=4, with_valid=True)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.EmbeddingBag(32000, 16), torch.nn.Linear(16, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses, steps = [], 0
    ref = podfeed.Loader(data / "indexed", TOKENS, 16, seed=4)
    for batch in dl:
        want = next(ref)
        assert np.array_equal(batch["tokens"].numpy(), want["tokens"])
        assert batch["tokens"].dtype == torch.int32 and batch["tokens"].shape == (1, 16, 64)
        assert bool(batch["valid"].all())
        x = batch["tokens"][0].long().clamp(0, 31999)
        y = batch["label"][0, :, 0]
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        steps += 1
    assert steps == 2000 // 16
    assert np.mean(losses[-20:]) < np.mean(losses[:20])


def test_tensors_share_the_loader_memory(data):
    ds = podfeed.torch.IterableDataset(data / "indexed", TOKENS, per_core_batch=8)
    it = iter(ds)
    batch = next(it)
    loader = ds.loader
    assert loader.held == 1  # the tensors hold the slot: no copy was made
    del batch
    assert loader.held == 0
    it.close()
    assert loader.closed


def test_state_and_a_second_iteration(data):
    ds = podfeed.torch.IterableDataset(data / "indexed", TOKENS, per_core_batch=8)
    it = iter(ds)
    for _ in range(5):
        next(it)
    state = ds.state_dict()
    rest = [b["tokens"].clone() for b in it]
    ds.load_state_dict(state)
    again = [b["tokens"].clone() for b in ds]
    assert len(rest) == len(again) == 2000 // 8 - 5
    assert all(torch.equal(a, b) for a, b in zip(rest, again))
    with pytest.raises(TypeError, match="pin_memory"):
        podfeed.torch.IterableDataset(data / "indexed", TOKENS, 8, pin_memory="yes")


def test_batches_equal_the_c_api(data):
    want = digests(TOKENS, 8, 2, 6, True, 0, 1, data / "indexed")
    ds = podfeed.torch.IterableDataset(data / "indexed", TOKENS, per_core_batch=8,
                                       cores=2, seed=6, shuffle=True)
    got = []
    for step, b in enumerate(torch.utils.data.DataLoader(ds, batch_size=None,
                                                         num_workers=0)):
        crc = 0
        for c in range(2):  # the C digest's order: core by core, spec order
            for name in ("tokens", "label"):
                crc = zlib.crc32(b[name][c].numpy().tobytes(), crc)
        got.append((0, step, crc))
    assert got == want


def test_the_first_iteration_uses_the_loader_opened_here(data):
    ds = podfeed.torch.IterableDataset(data / "indexed", TOKENS, per_core_batch=8)
    opened = ds.loader
    it = iter(ds)
    next(it)
    assert ds.loader is opened and opened.held == 0  # the dict was dropped
    it.close()
    assert opened.closed
    again = iter(ds)  # a second iteration opens a new loader, from the start
    first = next(again)
    assert ds.loader is not opened and first["tokens"].shape == (1, 8, 64)
    del first
    again.close()


def test_state_dict_through_torch_save(data, tmp_path):
    kw = dict(per_core_batch=8, cores=2, seed=3)
    ref = [b["tokens"].clone() for b in
           podfeed.torch.IterableDataset(data / "indexed", TOKENS, **kw)]
    ds = podfeed.torch.IterableDataset(data / "indexed", TOKENS, **kw)
    it = iter(ds)
    head = [next(it)["tokens"].clone() for _ in range(30)]
    torch.save({"data": ds.state_dict(), "step": 30}, tmp_path / "ckpt.pt")
    it.close()
    ckpt = torch.load(tmp_path / "ckpt.pt")
    assert ckpt["data"]["step_in_epoch"] == 30
    # a new dataset from the checkpoint, as a restarted job does
    resumed = podfeed.torch.IterableDataset(data / "indexed", TOKENS, state=ckpt["data"],
                                            **kw)
    tail = [b["tokens"].clone() for b in resumed]
    assert len(head) + len(tail) == len(ref)
    assert all(torch.equal(a, b) for a, b in zip(head + tail, ref))
    # after the last batch the state says so: resuming from it gives nothing
    done = resumed.state_dict()
    assert done["records_left"] == 0
    assert list(podfeed.torch.IterableDataset(data / "indexed", TOKENS, state=done,
                                              **kw)) == []
    # the plain loader's state goes through torch.save as well
    with podfeed.Loader(data / "indexed", TOKENS, **kw) as lo:
        for _ in range(30):
            next(lo)
        torch.save(lo.state_dict(), tmp_path / "loader.pt")
    s = torch.load(tmp_path / "loader.pt")
    with podfeed.Loader(data / "indexed", TOKENS, state=s, **kw) as lo:
        assert all(torch.equal(torch.from_numpy(b["tokens"]), r)
                   for b, r in zip(lo, tail))


def test_dataloader_workers_get_a_clear_error(data):
    ds = podfeed.torch.IterableDataset(data / "indexed", TOKENS, per_core_batch=8)
    with pytest.raises(Exception, match="num_workers=0"):
        for _ in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1):
            pass
    with pytest.raises(TypeError, match="num_workers=0"):
        pickle.dumps(ds)
    ds.loader.close()


def test_pin_memory(data):
    if not torch.cuda.is_available():
        # pinned memory is CUDA's: asking for it without is an error at once
        with pytest.raises(ValueError, match="pin_memory"):
            podfeed.torch.IterableDataset(data / "indexed", TOKENS, 8, pin_memory=True)
        return
    ds = podfeed.torch.IterableDataset(data / "indexed", TOKENS, 8, pin_memory=True)
    b = next(iter(ds))
    assert b["tokens"].is_pinned() and ds.loader.held == 0  # a copy, slot back


# Two processes in a real torch.distributed group (gloo over a file store):
# with no host arguments each loader is its rank's host, ahead of the
# environment's RANK/WORLD_SIZE (set here to something else).
DIST = """
import hashlib, os, sys
import torch.distributed as dist
import podfeed
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=rank,
                        world_size=2)
ident = podfeed.host_identity()
with podfeed.Loader(sys.argv[3], sys.argv[4], 8, cores=2, seed=5) as lo:
    rows = [hashlib.sha1(b["tokens"][c, r].tobytes()).hexdigest()[:16]
            for b in lo for c in range(2) for r in range(8)]
    print(ident[0], ident[1], ident[2], lo.host_index, lo.num_hosts, " ".join(rows))
dist.destroy_process_group()
"""


def test_host_identity_from_a_torch_distributed_group(data, tmp_path):
    env = dict(os.environ, RANK="7", WORLD_SIZE="9")
    procs = [subprocess.Popen([sys.executable, "-c", DIST, str(r), str(tmp_path / "store"),
                               str(data / "indexed"), TOKENS], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    shares = []
    for r, (out, _) in enumerate(outs):
        i, n, source, host, hosts, *rows = out.split()
        assert (int(i), int(n), source) == (r, 2, "torch.distributed")
        assert (int(host), int(hosts)) == (r, 2)
        shares.append(rows)
    assert len(shares[0]) == len(shares[1]) == 2000 // 32 * 16
    assert not set(shares[0]) & set(shares[1])
    # the same shares as explicit host arguments give
    for r in range(2):
        with podfeed.Loader(data / "indexed", TOKENS, 8, cores=2, seed=5, host_index=r,
                            num_hosts=2) as lo:
            want = [hashlib.sha1(b["tokens"][c, i].tobytes()).hexdigest()[:16]
                    for b in lo for c in range(2) for i in range(8)]
        assert shares[r] == want
