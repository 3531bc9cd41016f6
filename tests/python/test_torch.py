# SPDX-License-Identifier: Apache-2.0
# podfeed.torch: the IterableDataset end to end with a tiny model step.
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import podfeed  # noqa: E402
import podfeed.torch  # noqa: E402
from conftest import TOKENS  # noqa: E402


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


def test_pin_memory_copies_and_state(data):
    ds = podfeed.torch.IterableDataset(data / "indexed", TOKENS, per_core_batch=8,
                                       pin_memory=torch.cuda.is_available())
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
