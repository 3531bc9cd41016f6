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

_WHY_NO_WORKERS = (
    "podfeed.torch.IterableDataset runs in the process that made it: use "
    "DataLoader(ds, batch_size=None, num_workers=0).  The loader already reads "
    "and decodes with its own threads, without the GIL; a worker process would "
    "read the host's whole share again and pickle every batch through a pipe")


class IterableDataset(_data.IterableDataset):
    """Batches of a podfeed.Loader as dicts of torch tensors.

    IterableDataset(*args, pin_memory=False, with_valid=False, **kwargs)
    takes podfeed.Loader's arguments (help(podfeed.Loader)).  Each item is
    one host batch: a dict name -> tensor [cores, per_core_batch, len]
    made by torch.from_numpy over the loader's memory (no copy; the
    tensors keep that memory, and it goes back to the loader when the
    last of them is gone: at most prefetch + 1 batches may be alive at
    once).  With pin_memory=True each tensor is copied once into pinned
    memory for fast transfers to a GPU (the loader's memory is then
    released at once; it needs CUDA).  With with_valid=True the dict also holds "valid"
    (bool [cores, per_core_batch], a copy: False where on_corrupt='skip'
    left a hole).

    Use it as DataLoader(ds, batch_size=None, num_workers=0).  Why
    num_workers=0: the loader already runs its own reader and decoder
    threads in C, without the GIL; DataLoader workers are other processes,
    where each would read the whole host's share again and every batch
    would be pickled through a pipe: copies of the data the loader hands
    out without one (a worker gets a RuntimeError saying so).
    batch_size=None, because the loader already makes the batches.

    The loader is opened here (so a bad argument fails at once) and serves
    the first iteration; each later iteration opens a new one, from the
    state given to load_state_dict() if any, else from the start.
    state_dict() / load_state_dict() are the loader's (exact resume).
    """

    def __init__(self, *args, pin_memory=False, with_valid=False, **kwargs):
        super().__init__()
        if not isinstance(pin_memory, bool):
            raise TypeError(f"pin_memory: expected True or False, not {pin_memory!r}")
        if pin_memory and not _torch.cuda.is_available():
            raise ValueError("pin_memory: pinned memory is for copies to a GPU, and "
                             "torch.cuda.is_available() is False here")
        if not isinstance(with_valid, bool):
            raise TypeError(f"with_valid: expected True or False, not {with_valid!r}")
        self.pin_memory, self.with_valid = pin_memory, with_valid
        self._args, self._kwargs = args, dict(kwargs)
        self._kwargs.pop("state", None)
        self._state = None
        self._final_state = None
        self.loader = _podfeed.Loader(*args, **kwargs)
        self._fresh = True  # self.loader has handed out no batch

    def __reduce__(self):
        raise TypeError(_WHY_NO_WORKERS)

    def __iter__(self):
        if _data.get_worker_info() is not None:
            raise RuntimeError(_WHY_NO_WORKERS)
        if not self._fresh:
            self.loader.close()
            self.loader = _podfeed.Loader(*self._args, state=self._state, **self._kwargs)
        self._fresh = False
        self._state = self._final_state = None
        return self._batches(self.loader)

    def _batches(self, loader):
        # The frame keeps no array or tensor while suspended (each batch is
        # released before the yield, and the dict goes straight out), so the
        # loader's memory goes back as soon as the consumer drops the dict.
        convert = self._convert
        try:
            for batch in loader:
                yield convert(batch)
            self._final_state = loader.state_dict()
        finally:
            loader.close()

    def _convert(self, batch):
        from_numpy = _torch.from_numpy
        arrays = batch.asdict()
        if self.with_valid:
            arrays["valid"] = batch.valid.copy()  # tiny; the view is read-only
        batch.release()
        out = {}
        for name, a in arrays.items():
            # An image of dtype bfloat16 is its bits in numpy (uint16, which
            # torch.from_numpy does not take): the same memory as bfloat16.
            t = (from_numpy(a.view("int16")).view(_torch.bfloat16) if a.dtype == "uint16"
                 else from_numpy(a))
            out[name] = t.pin_memory() if self.pin_memory else t
        return out

    def state_dict(self):
        """The loader's state_dict(): where the iteration in progress is;
        after one ran to its end, its final state; before any, the state
        the next iteration starts from (None: the start)."""
        if not self.loader.closed:
            return self.loader.state_dict()
        return self._final_state if self._final_state is not None else self._state

    def load_state_dict(self, state):
        """Start the next iteration from state (a state_dict(), or the list
        of every old host's: podfeed.Loader(state=...))."""
        _podfeed._state_blobs(state)
        self._state = state
        self._final_state = None
        if self._fresh:  # the loader opened here has not been used: replace it
            self._fresh = False
            self.loader.close()
