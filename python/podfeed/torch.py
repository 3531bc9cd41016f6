# SPDX-License-Identifier: Apache-2.0
"""podfeed for PyTorch: an IterableDataset over a podfeed.Loader.

    ds = podfeed.torch.IterableDataset("data/", "tokens:int32[256],label:int64[1]",
                                       per_core_batch=32, cores=1)
    for batch in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0):
        loss = model(batch["tokens"][0]) ...
"""

import torch as _torch
import torch.utils.data as _data

import podfeed as _podfeed


class IterableDataset(_data.IterableDataset):
    """Batches of a podfeed.Loader as dicts of torch tensors.

    IterableDataset(*args, pin_memory=False, with_valid=False, **kwargs)
    takes podfeed.Loader's arguments.  Each item is one host batch: a dict
    name -> tensor [cores, per_core_batch, len] made by torch.from_numpy
    over the loader's memory (no copy; the tensor keeps that memory alive,
    and it goes back to the loader when the tensors are gone).  With
    pin_memory=True each tensor is copied once into pinned memory for fast
    transfers to a GPU (the loader's slot is then released at once).  With
    with_valid=True the dict also holds "valid" (bool [cores,
    per_core_batch]).

    Use it as DataLoader(ds, batch_size=None, num_workers=0).  Why
    num_workers=0: the loader already runs its own reader and decoder
    threads in C, without the GIL; DataLoader workers are forked processes,
    and a loader's threads do not survive fork (a loader used in a worker
    raises a RuntimeError saying so), each worker would read the whole
    host's share again, and every batch would be pickled through a pipe: a
    copy of the data the loader hands out without one.  batch_size=None,
    because the loader already makes the batches.

    state_dict() / load_state_dict() are the loader's (exact resume); the
    loader is made when iteration starts and closed when it ends.
    """

    def __init__(self, *args, pin_memory=False, with_valid=False, **kwargs):
        super().__init__()
        if not isinstance(pin_memory, bool):
            raise TypeError(f"pin_memory: expected True or False, not {pin_memory!r}")
        if not isinstance(with_valid, bool):
            raise TypeError(f"with_valid: expected True or False, not {with_valid!r}")
        self._args, self._kwargs = args, kwargs
        self.pin_memory, self.with_valid = pin_memory, with_valid
        self._state = kwargs.pop("state", None)
        self.loader = None
        # Check every argument now rather than at the first batch.
        _podfeed.Loader(*args, **kwargs).close()

    def __iter__(self):
        if self.loader is not None:
            self.loader.close()
        self.loader = _podfeed.Loader(*self._args, state=self._state, **self._kwargs)
        self._state = None
        loader = self.loader
        try:
            while True:
                held = [next(loader, None)]
                if held[0] is None:
                    return
                # The generator keeps no reference while suspended: the
                # slot goes back as soon as the consumer drops the tensors.
                yield self._tensors(held)
        finally:
            loader.close()

    def _tensors(self, held):
        batch = held.pop()
        out = {}
        for name in batch.keys():
            t = _torch.from_numpy(batch[name])
            out[name] = t.pin_memory() if self.pin_memory else t
        if self.with_valid:
            out["valid"] = _torch.from_numpy(batch.valid.copy())  # tiny; the view is read-only
        batch.release()
        return out

    def state_dict(self):
        """The loader's state_dict() (the state to start from before the
        first iteration)."""
        if self.loader is None or self.loader.closed:
            return self._state
        return self.loader.state_dict()

    def load_state_dict(self, state):
        """Start the next iteration from state."""
        _podfeed._state_blobs(state)
        self._state = state
