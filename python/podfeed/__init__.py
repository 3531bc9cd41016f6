# SPDX-License-Identifier: Apache-2.0
"""podfeed: the host-side input pipeline for training pods, from Python.

    import podfeed
    with podfeed.Loader("data/", {"tokens": ("int32", 256), "label": "int64"},
                        per_core_batch=32, cores=8, seed=1) as loader:
        for batch in loader:
            step(batch["tokens"], batch["label"])   # numpy [8, 32, 256], no copy

The loader is the C library's (loader/podfeed.h): its threads read, check,
decompress and decode the shards with the GIL released; a batch's arrays are
numpy views over the loader's own memory.  See help(podfeed.Loader) for the
arguments, help(podfeed.Batch) for what a batch holds and how long, and
podfeed.torch / podfeed.jax for the framework adapters.
"""

import base64
import binascii
import json
import math
import numbers
import os
import sys

from . import _podfeed
from ._podfeed import Batch, Tensor

__all__ = [
    "Loader", "Source", "Batch", "Tensor", "Image", "Error", "DataError", "FileError",
    "ConfigError",
    "BatchLimitError", "inspect_state", "describe_state", "plan", "parse_spec", "host_identity",
    "STATE_FORMAT",
]

STATE_FORMAT = "podfeed-state/1"
# The C library's pf_version_string(): the one the extension runs on.
__version__ = _podfeed.version


class Error(Exception):
    """An error from the podfeed engine.

    Attributes (None where they do not apply):
      errno        the C error code, positive (e.g. errno.EBADMSG)
      file         the file it happened in
      offset       byte offset in it (offset_kind 'file': as stored;
                   'stream': in the decompressed TFRecord stream)
      offset_kind  'file', 'stream' or None
      frame        frame number in an indexed shard
      record       record number in the file
      cause        what was wrong, without the place
    """

    errno = None
    file = None
    offset = None
    offset_kind = None
    frame = None
    record = None
    cause = None


class DataError(Error):
    """Corrupt or unreadable data: a bad CRC, a bad zstd frame, a record
    that does not decode, a feature missing or of the wrong kind."""


class FileError(Error, OSError):
    """A file or directory that is missing or cannot be opened."""


class ConfigError(Error, ValueError):
    """A configuration the engine refuses (a bad spec, too few records for
    one global batch, a state of another dataset, ...)."""


class BatchLimitError(Error, RuntimeError):
    """More batches held than the loader's prefetch allows.  Nothing is
    lost: release a batch (or drop its arrays) and call next() again."""


_podfeed._register_errors({
    "Error": Error, "DataError": DataError, "FileError": FileError,
    "ConfigError": ConfigError, "BatchLimitError": BatchLimitError,
})


def parse_spec(text):
    """parse_spec(text) -> [{'name', 'dtype', 'len', 'pad', 'default'}, ...]

    Parse a feature spec string ('tokens:int32[256],label:int64[1]:pad=-1')
    as the loader does.  A malformed spec is a ConfigError (a ValueError)
    naming the byte offset in text and what was wrong."""
    if not isinstance(text, str):
        raise TypeError(f"text: expected a feature spec str, not {type(text).__name__}")
    return _podfeed.parse_spec(text)


_DTYPES = {"int32": "int32", "int64": "int64", "float32": "float32", "bytes": "bytes",
           "uint8": "bytes"}


def _dtype_name(value, where):
    """'int32' | 'int64' | 'float32' | 'bytes' from a name or numpy dtype."""
    name = value
    if not isinstance(value, str):
        try:
            import numpy
            name = numpy.dtype(value).name
        except TypeError:
            raise TypeError(f"features: {where}: dtype must be a str or numpy dtype "
                            f"(int32, int64, float32, bytes), not {value!r}") from None
    if name not in _DTYPES:
        raise ValueError(f"features: {where}: unknown dtype {value!r} "
                         f"(expected int32, int64, float32 or bytes)")
    return _DTYPES[name]


def _number(value, where):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"features: {where} must be a number, not {value!r}")
    return repr(float(value)) if isinstance(value, float) else str(int(value))


class Image:
    """An image feature: the record's JPEG or PNG decoded, cropped and
    resized to [height, width] by the loader's threads.

        podfeed.Image(224, 224, augment="train")

    augment: "train" (torchvision's RandomResizedCrop rule and a mirror
    with probability 1/2; scale, ratio and flip change them), "eval" (the
    shorter side to int(height / 0.875), the center crop) or "resize" (the
    whole image).  channels 3 (RGB) or 1 (luma); layout "nhwc" or "nchw";
    dtype "uint8" or, normalized as (v / 255 - mean) / std, "float32" or
    "bfloat16" (numpy: its bits as uint16; podfeed.torch: torch.bfloat16);
    mean and std one number or three; max_pixels: larger images are
    corrupt records.  A batch's array is [cores, per_core_batch, height,
    width, channels] (nchw: [..., channels, height, width]).  The same as
    the spec text "name:image[H,W]:train" (docs/api.md, "Images")."""

    _AUGMENTS = ("train", "eval", "resize")

    def __init__(self, height, width, augment="resize", *, channels=3, layout="nhwc",
                 dtype="uint8", mean=None, std=None, scale=None, ratio=None, flip=None,
                 max_pixels=None):
        for what, v in (("height", height), ("width", width)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"Image: {what} must be an int >= 1, not {v!r}")
        if augment not in self._AUGMENTS:
            raise ValueError(f"Image: augment must be one of {self._AUGMENTS}, "
                             f"not {augment!r}")
        if channels not in (1, 3) or isinstance(channels, bool):
            raise ValueError(f"Image: channels must be 3 or 1, not {channels!r}")
        if layout not in ("nhwc", "nchw"):
            raise ValueError(f"Image: layout must be 'nhwc' or 'nchw', not {layout!r}")
        if dtype not in ("uint8", "float32", "bfloat16"):
            raise ValueError("Image: dtype must be 'uint8', 'float32' or 'bfloat16', "
                             f"not {dtype!r}")
        if flip is not None and not isinstance(flip, bool):
            raise TypeError(f"Image: flip must be True or False, not {flip!r}")
        self.height, self.width, self.augment = int(height), int(width), augment
        self.channels, self.layout, self.dtype = channels, layout, dtype
        self.mean, self.std = mean, std
        self.scale, self.ratio, self.flip, self.max_pixels = scale, ratio, flip, max_pixels

    @staticmethod
    def _values(v, n, what):
        if isinstance(v, (tuple, list)):
            if len(v) not in n:
                raise ValueError(f"Image: {what} takes {' or '.join(map(str, n))} "
                                 f"values, not {len(v)}")
            return ":".join(_number(x, f"Image.{what}") for x in v)
        if 1 not in n:
            raise TypeError(f"Image: {what} must be a pair (lo, hi), not {v!r}")
        return _number(v, f"Image.{what}")

    def spec(self):
        """The spec text after 'name:' ('image[224,224]:train...')."""
        text = f"image[{self.height},{self.width}]:{self.augment}"
        if self.channels != 3:
            text += f":channels={self.channels}"
        if self.layout != "nhwc":
            text += f":layout={self.layout}"
        if self.dtype != "uint8":
            text += f":dtype={self.dtype}"
        for key, n in (("mean", (1, 3)), ("std", (1, 3)), ("scale", (2,)), ("ratio", (2,))):
            v = getattr(self, key)
            if v is not None:
                text += f":{key}={self._values(v, n, key)}"
        if self.flip is not None:
            text += f":flip={int(self.flip)}"
        if self.max_pixels is not None:
            if (isinstance(self.max_pixels, bool)
                    or not isinstance(self.max_pixels, numbers.Integral)
                    or self.max_pixels < 1):
                raise ValueError("Image: max_pixels must be an int >= 1, "
                                 f"not {self.max_pixels!r}")
            text += f":max_pixels={int(self.max_pixels)}"
        return text

    def __repr__(self):
        return f"podfeed.Image({self.spec()!r})"


def _feature_spec(features):
    """The C spec text from a spec string or a dict."""
    if isinstance(features, str):
        if not features:
            raise ValueError("features: the spec is empty")
        return features
    if not isinstance(features, dict):
        raise TypeError("features: expected a spec string such as "
                        "'tokens:int32[256],label:int64[1]' or a dict "
                        f"{{name: dtype | (dtype, len) | dict}}, not {type(features).__name__}")
    if not features:
        raise ValueError("features: no feature given")
    parts = []
    for name, what in features.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"features: a feature name must be a non-empty str, not {name!r}")
        if any(c in name for c in ",:[] \t\n"):
            raise ValueError(f"features: feature name {name!r} holds one of , : [ ] "
                             "or white space")
        opts = {}
        if isinstance(what, Image):
            parts.append(f"{name}:{what.spec()}")
            continue
        if isinstance(what, tuple):
            if len(what) != 2:
                raise ValueError(f"features: {name}: a tuple is (dtype, len), not {what!r}")
            dtype, length = what
        elif isinstance(what, dict):
            unknown = set(what) - {"dtype", "len", "pad", "default", "required",
                                   "scale", "shift", "clip", "lengths"}
            if unknown:
                raise ValueError(f"features: {name}: unknown keys {sorted(unknown)} "
                                 "(known: dtype, len, pad, default, required, scale, "
                                 "shift, clip, lengths)")
            if "dtype" not in what:
                raise ValueError(f"features: {name}: the dict has no 'dtype'")
            dtype, length = what["dtype"], what.get("len", 1)
            opts = what
        else:
            dtype, length = what, 1
        dtype = _dtype_name(dtype, name)
        if length == "*":
            text = f"{name}:{dtype}[*]"
        elif isinstance(length, bool) or not isinstance(length, numbers.Integral) or length < 1:
            raise ValueError(f"features: {name}: len must be an int >= 1 or '*' "
                             f"(ragged, packed), not {length!r}")
        else:
            text = f"{name}:{dtype}[{int(length)}]"
        opts = dict(opts)
        if not isinstance(opts.get("lengths", False), bool):
            raise TypeError(f"features: {name}.lengths must be True or False, "
                            f"not {opts['lengths']!r}")
        if not isinstance(opts.get("required", False), bool):
            raise TypeError(f"features: {name}.required must be True or False, "
                            f"not {opts['required']!r}")
        # As tf.train.Example parsing: a feature without a default must be
        # in every record (a misspelled name is an error, not a tensor of
        # padding); required=False without a default means default=pad.
        default = opts.pop("default", None)
        if opts.get("required") is False and default is None:
            default = opts.get("pad") or 0
        for key in ("pad", "scale", "shift"):
            if opts.get(key) is not None:
                text += f":{key}={_number(opts[key], f'{name}.{key}')}"
        if default is not None:
            text += f":default={_number(default, f'{name}.default')}"
        if opts.get("clip") is not None:
            clip = opts["clip"]
            if not isinstance(clip, (tuple, list)) or len(clip) != 2:
                raise ValueError(f"features: {name}.clip must be (lo, hi), not {clip!r}")
            text += (f":clip={_number(clip[0], f'{name}.clip')}:"
                     f"{_number(clip[1], f'{name}.clip')}")
        if opts.get("lengths"):
            text += ":lengths"
        parts.append(text)
    return ",".join(parts)


def _paths(paths):
    """A list of str from a path, a PathLike or a list of them (bytes
    os.fsdecode()d; the extension encodes them back as os.fsencode())."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    if not isinstance(paths, (list, tuple)):
        raise TypeError("paths: expected a str, bytes, os.PathLike or a list of them "
                        f"(files, directories, globs), not {type(paths).__name__}")
    out = []
    for p in paths:
        if not isinstance(p, (str, bytes, os.PathLike)):
            raise TypeError(f"paths: expected str, bytes or os.PathLike items, not {p!r}")
        p = os.fsdecode(os.fspath(p))
        if not p:
            raise ValueError("paths: an empty path")
        out.append(p)
    if not out:
        raise ValueError("paths: no path given")
    return out


def _choice(name, value, choices, none_ok=False):
    """value, one of the str choices (TypeError / ValueError naming name)."""
    if value is None and none_ok:
        return None
    expected = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected {expected}, not {type(value).__name__} {value!r}")
    if value not in choices:
        raise ValueError(f"{name}: expected {expected}, not {value!r}")
    return value


def _flag(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected True or False, not {value!r}")
    return value


def _shuffle(value):
    """shuffle=: False, True or 'window' (the window shuffle), 'global'.
    @return (shuffle on, global)."""
    if isinstance(value, bool):
        return value, False
    if isinstance(value, str):
        if value in ("window", "global"):
            return True, value == "global"
        raise ValueError(f"shuffle: {value!r} is not a shuffle (False, True or 'window', "
                         "'global')")
    raise TypeError(f"shuffle: expected True, False, 'window' or 'global', not {value!r}")


def _uint(name, value, lo=0, hi=2**32 - 1, none_ok=False):
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int, not {type(value).__name__} {value!r}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{name}: {value} is out of range [{lo}, {hi}]")
    return value


# The C loader's configuration errors name what is wrong in words; the
# Python argument each comes from, by the start of its message (the tests
# hold these to the C library's messages).
_C_MESSAGE_ARGUMENT = (
    ("feature spec", "features"),
    ("fault spec", "io_faults"),
    ("memory budget", "memory_mib"),
    # A value set that the memory budget cannot hold, named with the
    # largest it can.
    ("shuffle_window of", "shuffle_window"),
    ("prefetch of", "prefetch"),
    ("threads of", "threads"),
    ("cannot open the quarantine log", "quarantine"),
    ("the dataset names no files", "paths"),
    # pf_paths_expand()'s refusals: a directory with no shards, a file
    # reached twice, a FIFO or another non-regular file, a manifest named
    # beside shards it does not list, a link in a directory that leads
    # nowhere.
    ("the directory", "paths"),
    ("named twice", "paths"),
    ("is a ", "paths"),
    ("named beside the manifest", "paths"),
    ("lists the shard", "paths"),
    ("in directory", "paths"),
)


def _named_error(e, paths):
    """e with the Python argument in front of its message when the C
    library's message says which (a budget too small becomes a
    ConfigError); else e itself."""
    text = str(e)
    cause = e.cause or ""
    # A mixture's source names itself first ("source 'web': ..."): its
    # config is wrong (a feature its schema lacks), a ValueError.
    source = cause.startswith("source '") and "': " in cause
    if source:
        cause = cause.split("': ", 1)[1]
    for start, argument in _C_MESSAGE_ARGUMENT:
        if cause.startswith(start):
            # A frame cache asked for that the budget cannot hold: the
            # cache's size is what was named.
            if argument == "memory_mib" and "of the frame cache's" in cause:
                argument = "frame_cache"
            cls = (ConfigError if argument in ("memory_mib", "frame_cache", "shuffle_window",
                                               "prefetch", "threads") or source
                   else type(e))
            if argument == "paths":
                text += f" (paths {paths!r})"
            named = cls(f"{argument}: {text}")
            for attr in ("errno", "file", "offset", "offset_kind", "frame", "record",
                         "cause"):
                setattr(named, attr, getattr(e, attr))
            return named
    return e


def host_identity(host_index=None, num_hosts=None):
    """(host_index, num_hosts, source): who this host is.

    Explicit arguments win.  What they leave open comes from, in order:
    jax.process_index()/process_count() when jax is already imported;
    torch.distributed's rank and world size when it is initialised; else
    the C library's reading of the environment (Open MPI / PMI ranks,
    TPU_WORKER_ID, torchrun's RANK/WORLD_SIZE; see host/pf_host.h).  With
    num_hosts alone, the index comes from a source that says that many
    hosts.  More than one host with no way to know this one is a
    ValueError, never a silent host 0.  source is 'arguments', 'jax',
    'torch.distributed', or the environment's: 'mpi', 'tpu', 'torch',
    'single' (nothing set: one host).
    """
    host_index = _uint("host_index", host_index, none_ok=True)
    num_hosts = _uint("num_hosts", num_hosts, lo=1, none_ok=True)
    if host_index is not None and num_hosts is not None:
        if host_index >= num_hosts:
            raise ValueError(f"host_index: {host_index} is not below num_hosts {num_hosts}")
        return host_index, num_hosts, "arguments"
    found = None
    jax = sys.modules.get("jax")
    if jax is not None and hasattr(jax, "process_index"):
        found = (jax.process_index(), jax.process_count(), "jax")
    if found is None:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            found = (dist.get_rank(), dist.get_world_size(), "torch.distributed")
    if found is None:
        # The C library's reading of the environment (a malformed
        # variable is a ConfigError naming it).
        found = _podfeed.topology(-1, -1)[:3]
    found_index, found_count, source = found
    if host_index is None and num_hosts is None:
        return found_index, found_count, source
    # One argument given: it wins, the other comes from what was found.
    if host_index is None:
        if num_hosts == 1:
            return 0, 1, "arguments"
        if found_count != num_hosts:
            what = ("nothing says which host this is (no host_index, jax, "
                    "torch.distributed, MPI, TPU or RANK)" if source == "single"
                    else f"{source} says {found_count} hosts")
            raise ValueError(f"host_index: num_hosts is {num_hosts} but {what}; give "
                             f"host_index 0..{num_hosts - 1}")
        return found_index, num_hosts, source
    if source == "single":
        raise ValueError(f"num_hosts: host_index is {host_index} but nothing gives the "
                         "host count (no num_hosts, jax, torch.distributed, MPI, TPU or "
                         "WORLD_SIZE); give num_hosts")
    if host_index >= found_count:
        raise ValueError(f"host_index: {host_index} is not below the {found_count} hosts "
                         f"{source} says")
    return host_index, found_count, source


def _state_blobs(state):
    """The C blobs of a state dict or a list of them (every old host's)."""
    states = state if isinstance(state, (list, tuple)) else [state]
    if not states:
        raise ValueError("state: an empty list")
    blobs = []
    for i, s in enumerate(states):
        where = "state" if len(states) == 1 else f"state[{i}]"
        if not isinstance(s, dict):
            raise TypeError(f"{where}: expected a dict from Loader.state_dict(), "
                            f"not {type(s).__name__}")
        if s.get("format") != STATE_FORMAT or not isinstance(s.get("blob"), str):
            raise ValueError(f"{where}: not a podfeed state (expected format "
                             f"{STATE_FORMAT!r} and a 'blob')")
        try:
            blobs.append(base64.b64decode(s["blob"], validate=True))
        except binascii.Error as e:
            raise ValueError(f"{where}: blob is not base64: {e}") from None
    return blobs


def _readable(blob):
    """A state blob's readable fields (the C pf_state_describe()'s JSON)."""
    return json.loads(_podfeed.describe_state_blob(blob, True))


def _first_difference(path, said, truth):
    """The first place where `said` (a field as the dict has it) is not
    `truth` (the blob's): (path, said, truth), or None.  Keys of a dict
    the blob's lacks are the caller's own."""
    if isinstance(truth, dict):
        if not isinstance(said, dict):
            return path, said, truth
        for key in said:
            found = key in truth and _first_difference(f"{path}.{key}", said[key], truth[key])
            if found:
                return found
        return None
    if isinstance(truth, list):
        if not isinstance(said, (list, tuple)) or len(said) != len(truth):
            return path, said, truth
        for i, (a, b) in enumerate(zip(said, truth)):
            found = _first_difference(f"{path}[{i}]", a, b)
            if found:
                return found
        return None
    if isinstance(truth, bool) or isinstance(said, bool):
        return None if said is truth else (path, said, truth)
    return None if said == truth else (path, said, truth)


def _checked_blobs(state):
    """The C blobs of a state dict or a list of them, each dict's readable
    fields checked against its blob: a field that says otherwise is a
    ValueError naming it and both values (the blob is what resumes; keys
    of the caller's own, not a state's, are left alone)."""
    blobs = _state_blobs(state)
    states = state if isinstance(state, (list, tuple)) else [state]
    for i, (s, blob) in enumerate(zip(states, blobs)):
        where = "state" if len(states) == 1 else f"state[{i}]"
        truth = _readable(blob)
        for key, said in s.items():
            if key in ("format", "blob") or key not in truth:
                continue
            found = _first_difference(key, said, truth[key])
            if found:
                field, a, b = found
                raise ValueError(
                    f"{where}: field '{field}' says {a!r} but the state's blob holds {b!r}: "
                    "the readable fields are what the blob says, not settings (to start "
                    "further on, pass skip_steps=N; to resume elsewhere, the blob of that "
                    "place)")
    return blobs


def inspect_state(state):
    """What a state (a state_dict(), or a list of every host's) holds: a
    dict per host of its readable fields (the keys state_dict() has
    beside 'format' and 'blob': kind, host_index, num_hosts, cores,
    per_core_batch, epoch, fresh, step_in_epoch, global_step,
    records_left, dataset_records, dataset_fingerprint, seed, shuffle,
    remainder, skipped_steps, pack_length, ...; a mixture's sources), read
    from the blob; a list of them for a list.  DataError for a state that
    is damaged or from a newer podfeed."""
    infos = [_readable(b) for b in _state_blobs(state)]
    return infos if isinstance(state, (list, tuple)) else infos[0]


def describe_state(state):
    """A state (a state_dict(), or a list of every host's) for a person:
    lines of its kind, topology, position (epoch, steps delivered, the
    next global step), records left, dataset (records, fingerprint),
    order (seed, shuffle, remainder), packing, a mixture's sources and
    the steps skip_steps skipped, as loadbench state show prints them.
    Read from the blob.  DataError for a damaged state."""
    blobs = _state_blobs(state)
    texts = [_podfeed.describe_state_blob(b, False) for b in blobs]
    if not isinstance(state, (list, tuple)):
        return texts[0]
    return "\n".join(f"state[{i}]\n{t}" for i, t in enumerate(texts))


def plan(per_core_batch, cores, hosts, ref_global_batch=0, ref_steps=0, *,
         records=0, epochs=0, remainder="drop", ref_lr=0.0, rule="none",
         ref_warmup_steps=0):
    """The scaling plan of the C library (host/pf_host.h): scaling out keeps
    per_core_batch and shrinks the steps.

    plan(per_core_batch, cores, hosts, ref_global_batch, ref_steps): a run of
    ref_steps steps of ref_global_batch records becomes steps of the global
    batch per_core_batch x cores x hosts, rounded up, e.g. 1,000-record
    batches for 100 steps -> 4,000-record batches for 25 steps.  Or give
    records= (and epochs=) for an epoch schedule; ref_lr= with rule=
    'linear' or 'sqrt' (and ref_warmup_steps=) for the learning rate.
    Returns a dict: global_batch, host_batch, total_cores, batch_ratio,
    steps, examples, and per mode steps_exact / extra_examples or
    steps_per_epoch / dropped_per_epoch, and lr, warmup_steps.
    """
    u64 = 2**64 - 1
    per_core_batch = _uint("per_core_batch", per_core_batch, lo=1, hi=u64)
    cores = _uint("cores", cores, lo=1, hi=u64)
    hosts = _uint("hosts", hosts, lo=1, hi=u64)
    ref_global_batch = _uint("ref_global_batch", ref_global_batch, hi=u64)
    ref_steps = _uint("ref_steps", ref_steps, hi=u64)
    records = _uint("records", records, hi=u64)
    epochs = _uint("epochs", epochs, hi=u64)
    ref_warmup_steps = _uint("ref_warmup_steps", ref_warmup_steps, hi=u64)
    remainder = _choice("remainder", remainder, ("drop", "wrap"))
    rule = _choice("rule", rule, ("none", "linear", "sqrt"))
    if isinstance(ref_lr, bool) or not isinstance(ref_lr, numbers.Real):
        raise TypeError(f"ref_lr: expected a number, not {ref_lr!r}")
    if not (ref_lr == 0 or (math.isfinite(ref_lr) and ref_lr > 0)):
        raise ValueError(f"ref_lr: expected a finite number above 0 (or 0: none), "
                         f"not {ref_lr!r}")
    if ref_steps and not ref_global_batch:
        raise ValueError("ref_steps: needs ref_global_batch (the plan keeps "
                         "ref_steps x ref_global_batch examples)")
    if ref_steps and (records or epochs):
        raise ValueError("ref_steps: give ref_steps or records (and epochs), not both")
    if epochs and not records:
        raise ValueError("epochs: needs records, the dataset's record count")
    if rule != "none" and not (ref_lr and ref_global_batch):
        raise ValueError(f"rule: {rule!r} scales ref_lr by the batch ratio: it needs "
                         "ref_lr and ref_global_batch")
    return _podfeed.scaling_plan(per_core_batch, cores, hosts, ref_global_batch, ref_steps,
                                 records, epochs, remainder == "wrap", float(ref_lr), rule,
                                 ref_warmup_steps)


class Source:
    """Source(paths, weight=1.0, name=None): one source of a mixture, given
    to Loader in a list in place of paths:

        podfeed.Loader([podfeed.Source("data/web", weight=0.7, name="web"),
                        podfeed.Source("data/code", weight=0.3, name="code")],
                       "tokens:int32[512]", per_core_batch=32, shuffle=True)

    paths as Loader's; weight a finite number > 0 (the shares are the
    weights over their sum); name unique among the sources (None:
    'source<i>').  Each source is read with the loader's features,
    topology, seed and shuffle, has epochs of its own and its own place in
    a checkpoint (docs/api.md, "Mixtures")."""

    __slots__ = ("paths", "weight", "name")

    def __init__(self, paths, weight=1.0, name=None):
        self.paths = _paths(paths)
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
            raise TypeError(f"weight: expected a number, not {weight!r}")
        weight = float(weight)
        if not (weight > 0 and math.isfinite(weight)):
            raise ValueError(f"weight: {weight!r} is not a finite number above 0"
                             + (f" (source {name!r})" if isinstance(name, str) else ""))
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name: expected a str or None, not {name!r}")
        if name is not None and not 0 < len(name.encode()) < 64:
            raise ValueError(f"name: {name!r} is not 1 to 63 bytes")
        self.weight, self.name = weight, name

    def __repr__(self):
        return f"podfeed.Source({self.paths!r}, weight={self.weight!r}, name={self.name!r})"


def _sources(paths):
    """A mixture's sources as the C extension takes them, or None when paths
    names plain files."""
    items = paths if isinstance(paths, (list, tuple)) else [paths]
    if not any(isinstance(s, Source) for s in items):
        return None
    if not all(isinstance(s, Source) for s in items):
        raise TypeError("paths: a list of podfeed.Source, or of paths, not both")
    out, names = [], set()
    for i, s in enumerate(items):
        name = s.name if s.name is not None else f"source{i}"
        if name in names:
            raise ValueError(f"paths: two sources are named {name!r}")
        names.add(name)
        out.append((name, s.weight, list(s.paths)))
    return out


class Loader(_podfeed.LoaderBase):
    """Loader(paths, features, per_core_batch, cores=1, host_index=None,
    num_hosts=None, seed=0, epochs=1, shuffle=False, shuffle_window=None,
    remainder="drop", on_corrupt="fail", memory_mib=512, threads=None,
    state=None, prefetch=None, max_steps=None, io_depth=None, max_corrupt=None,
    quarantine=None, verify_records=False, direct_io=False, io_backend=None,
    io_faults=None, pack_length=None, pack_mode="first_fit", pack_pool=None,
    mix="stratified", mix_stop="first", source_feature=False, frame_cache=None,
    mix_unit="records", skip_steps=0)

    One loader per host.  Each step it hands each of this host's `cores`
    cores exactly `per_core_batch` records, as one Batch whose arrays are
    [cores, per_core_batch, len] numpy views over the loader's memory.

        with podfeed.Loader("gs-mount/train/", "tokens:int32[256],label:int64[1]",
                            per_core_batch=32, cores=8, seed=7, epochs=3) as loader:
            for batch in loader:
                x = batch["tokens"]          # int32 [8, 32, 256], no copy
                train_step(x, batch["label"])
            state = loader.state_dict()      # JSON-able: resume with state=

    Arguments (each checked: a TypeError or ValueError whose message starts
    with the argument's name):
      paths           a file, a directory (its files, sorted), a glob
                      ('data/*.zst'), or a list of them; str, bytes or
                      PathLike (os.fsencode()d: names not UTF-8 work).
                      Or a mixture: a list of podfeed.Source(paths,
                      weight, name), each source its own dataset read
                      with these features, topology, seed and shuffle,
                      with epochs of its own (help(podfeed.Source)).
                      Plain TFRecord, GZIP/ZLIB TFRecord, zstd streams and
                      podfeed's indexed shards, told apart by their bytes;
                      a directory with a podfeed.manifest is planned from it.
      features        which tf.train.Example features, as dense tensors:
                      the spec string 'name:dtype[len][:pad=V]...,...'
                      (podfeed.parse_spec() checks one), or a dict name ->
                      'int32' (len 1) | ('int32', 256) | {'dtype': 'int32',
                      'len': 256, 'pad': 0, 'default': 0, 'scale': 1.0,
                      'shift': 0.0, 'clip': (lo, hi)}.  dtypes: int32,
                      int64, float32, bytes (uint8 arrays of len bytes).
                      pad fills a row shorter than len.  As with
                      tf.io.FixedLenFeature, a feature without a default
                      must be in every record (else a DataError naming it,
                      the file and the record); with 'default' (or
                      'required': False, default = pad) it is optional.
                      float32 values become value * scale + shift, then
                      are clipped to clip.
      per_core_batch  records per core per step (>= 1).
      cores           this host's accelerator cores (>= 1): the arrays'
                      first axis.
      host_index, num_hosts
                      which host of the pod this is.  Explicit values win;
                      else jax (if imported), torch.distributed (if
                      initialised), else the environment (MPI, TPU,
                      torchrun); see podfeed.host_identity().  Each host
                      reads ~1/num_hosts of the data and every host yields
                      the same number of steps.  num_hosts > 1 with
                      nothing saying which host this is: a ValueError.
      seed            the order is a pure function of (data, seed, epoch,
                      topology): the same on every run and thread count.
      epochs          passes over the data (a resumed run goes on to the
                      same count).
      shuffle         False (the default, as in the C API, loadbench,
                      tf.data and Grain): the files' order; True (or
                      'window'): frames permuted each epoch and records
                      shuffled in a window; 'global': a new permutation of
                      the whole dataset each epoch (indexed shards' frames
                      cut into slices of a few records, the slices of all
                      shards permuted, then the window), so that shards
                      sorted by label or source still give mixed batches;
                      a file without an index is a ConfigError naming it.
      shuffle_window  records per shuffle block, rounded up to whole host
                      batches (at most 2**30).  None: 8192, or fewer where
                      memory_mib cannot hold them (metrics()
                      'shuffle_window' and report() say what was chosen
                      and why); a window set that it cannot hold is a
                      ConfigError naming the largest it can.  Image
                      features wait in it as read (their stored bytes),
                      decoded once the order has put them in a step.
      remainder       'drop' the records past the last whole global batch
                      of an epoch, or 'wrap' to fill the last step from the
                      start of the host's share.
      on_corrupt      'fail': the first damaged byte ends iteration with a
                      DataError naming file, offset, frame, record; 'skip':
                      drop the damage and go on (holes show in batch.valid).
      memory_mib      memory budget of all the loader's pools, MiB.  What
                      is left to the loader (shuffle_window, prefetch,
                      threads, frame_cache: None) is fitted to it; too
                      small even for the least of them: a ConfigError
                      that says what it needs.
      threads         decode threads (None: one per CPU, fewer where
                      memory_mib cannot hold their buffers).
      state           a state_dict() to resume from (or the list of every
                      old host's, to resume with another host count or
                      host batch).  Its readable fields are checked
                      against its blob: one that says otherwise is a
                      ValueError naming the field and both values.
      skip_steps      start this many steps on, as if they had been
                      delivered and dropped (the batches of a loss
                      spike): the first batch is the one a run never
                      stopped gives at the state's global step (or 0) +
                      skip_steps, on every host alike, across epochs,
                      packed and mixed too; what is skipped is not read,
                      metrics() counts it (skipped_*), and state_dict()
                      is past it.  Past the run's last step: a
                      ConfigError naming that step.
      prefetch        batches made ahead; at most prefetch + 1 batches may
                      be held at once (a held batch counts until it is
                      released and its arrays are gone).  None: 2 (fewer
                      where memory_mib cannot hold them; the loader may
                      make more ahead when the consumer stalls).
      max_steps       stop after this many steps of this run (None: after
                      the last epoch).
      io_depth        reads in flight (None: 32).
      max_corrupt     on_corrupt='skip': damaged units allowed; one more
                      ends iteration with a DataError (None: no limit).
      quarantine      on_corrupt='skip': a file to append a JSON line to
                      per unit dropped (file, offset, unit, records, cause).
      verify_records  also check each record's CRC inside frames already
                      checked by their CRC32C and zstd checksum (streams:
                      always checked).
      direct_io       read aligned indexed shards with O_DIRECT (past the
                      page cache).
      io_backend      'uring' or 'pread' (None: $PODFEED_IO, else io_uring,
                      falling back to pread where it is refused).
      mix, mix_stop, source_feature, mix_unit
                      a mixture's rows: mix 'stratified' (each batch takes
                      from each source its share, floor or ceiling, the
                      rounding rotating so long-run shares are exact) or
                      'sample' (each row's source drawn); mix_stop 'first'
                      (after `epochs` epochs of the first source) or
                      'first_exhausted' (when any source runs out of its
                      first epoch); source_feature True adds '_source'
                      (int32, the row's source index) to the batches.
                      With pack_length a mixture is mixed, then packed:
                      rows hold records of several sources, '_source' is
                      then int32[pack_length], each value's source (-1
                      in the padding), and mix_unit 'tokens' makes the
                      weights count tokens (the first packed feature's
                      values) instead of 'records'.
      io_faults       inject read faults and delays, for tests: e.g.
                      'eio@7,short:0.05,delay=200ms:0.1,seed=42' (kinds
                      eio, short, enoent, hang, delay=D; '@N' the Nth
                      request, ':F' a fraction of reads).
      pack_length     pack the spec's ragged features ('tokens:int32[*]')
                      into rows of this many values, each with
                      NAME_segment_ids and NAME_positions (None: no
                      packing; docs/api.md, "Packed sequences").
      pack_mode       'first_fit' (each record whole into the first open
                      row with room; longer ones cut at pack_length) or
                      'concat' (the records one after the other, cut into
                      rows).
      pack_pool       first_fit's open rows (None: 8).
      frame_cache     shuffle='global': decompressed frames kept so that a
                      frame cut into slices is read once (None: as many
                      as the plan's frame groups need and the budget
                      holds; 0: none; n: n frames, a ConfigError when the
                      budget cannot hold them).  Batches are the same
                      whatever it holds.

    Iterating yields podfeed.Batch objects (help(podfeed.Batch)) and ends
    after the last epoch.  next() runs without the GIL and Ctrl-C
    interrupts it within ~20 ms (the batch on its way is not lost).  More
    batches held than prefetch allows: a BatchLimitError, the loader
    unchanged.  Errors of the engine are podfeed.Error subclasses
    (DataError, FileError, ConfigError) with .file, .offset, .frame,
    .record, .cause.  Use the loader from one thread, in the process that
    made it (a forked child, e.g. a torch DataLoader worker, gets a clear
    RuntimeError: make the loader there instead).  close() (or the end of
    `with`) stops the threads; the memory goes once no batch is held.
    Garbage collection of an open loader closes it.

    Checkpoints: state_dict() is a small JSON-able dict; Loader(...,
    state=s) or load_state_dict(s) resumes exactly where it was taken,
    also with another host count given every old host's state.

    Attributes: host_index, num_hosts and host_source (where they came
    from, as podfeed.host_identity() says), cores, per_core_batch,
    steps_per_epoch, spec (the canonical spec string), features (names),
    prefetch, held (batches held now), closed.  metrics() says where the
    time went, report() what loadbench would say of the run.
    """

    def __init__(self, paths, features, per_core_batch, cores=1, host_index=None,
                 num_hosts=None, seed=0, epochs=1, shuffle=False, shuffle_window=None,
                 remainder="drop", on_corrupt="fail", memory_mib=512, threads=None,
                 state=None, prefetch=None, max_steps=None, io_depth=None,
                 max_corrupt=None, quarantine=None, verify_records=False,
                 direct_io=False, io_backend=None, io_faults=None, pack_length=None,
                 pack_mode="first_fit", pack_pool=None, mix="stratified",
                 mix_stop="first", source_feature=False, frame_cache=None,
                 mix_unit="records", skip_steps=0):
        u64 = 2**64 - 1
        sources = _sources(paths)
        mix = _choice("mix", mix, ("stratified", "sample"))
        mix_stop = _choice("mix_stop", mix_stop, ("first", "first_exhausted"))
        mix_unit = _choice("mix_unit", mix_unit, ("records", "tokens"))
        source_feature = _flag("source_feature", source_feature)
        for name, given in (("mix", mix != "stratified"), ("mix_stop", mix_stop != "first"),
                            ("source_feature", source_feature),
                            ("mix_unit", mix_unit != "records")):
            if sources is None and given:
                raise ValueError(f"{name}: only for a mixture (paths a list of "
                                 "podfeed.Source)")
        shuffle, shuffle_global = _shuffle(shuffle)
        pack_length = _uint("pack_length", pack_length, lo=1, hi=2**32 - 1, none_ok=True) or 0
        pack_mode = _choice("pack_mode", pack_mode, ("first_fit", "concat"))
        pack_pool = _uint("pack_pool", pack_pool, lo=1, hi=2**32 - 1, none_ok=True) or 0
        if mix_unit == "tokens" and not pack_length:
            raise ValueError("mix_unit: 'tokens' weighs a packed mixture's tokens: give a "
                             "pack_length, or weigh records")
        # None: as many frames as the plan needs and the budget holds; 0:
        # none (every slice reads its frame); n: n frames.
        frame_cache = _uint("frame_cache", frame_cache, lo=0, hi=2**32 - 2, none_ok=True)
        frame_cache = 0 if frame_cache is None else frame_cache or 2**32 - 1
        verify_records = _flag("verify_records", verify_records)
        direct_io = _flag("direct_io", direct_io)
        remainder = _choice("remainder", remainder, ("drop", "wrap"))
        on_corrupt = _choice("on_corrupt", on_corrupt, ("fail", "skip"))
        io_backend = _choice("io_backend", io_backend, ("uring", "pread"), none_ok=True)
        if io_faults is not None and not isinstance(io_faults, str):
            raise TypeError(f"io_faults: expected a fault spec str or None, not {io_faults!r}")
        if quarantine is not None:
            if not isinstance(quarantine, (str, os.PathLike)):
                raise TypeError(f"quarantine: expected a file path or None, not {quarantine!r}")
            quarantine = os.fsdecode(os.fspath(quarantine))
        max_corrupt = _uint("max_corrupt", max_corrupt, lo=1, hi=u64, none_ok=True)
        for name, value in (("quarantine", quarantine), ("max_corrupt", max_corrupt)):
            if value is not None and on_corrupt != "skip":
                raise ValueError(f"{name}: only with on_corrupt='skip' (with 'fail' "
                                 "the first damage ends the run)")
        if isinstance(memory_mib, bool) or not isinstance(memory_mib, numbers.Real):
            raise TypeError(f"memory_mib: expected a number of MiB, not {memory_mib!r}")
        if not 1 <= memory_mib <= 1 << 30:
            raise ValueError(f"memory_mib: {memory_mib} is out of range [1, 2**30]")
        per_core_batch = _uint("per_core_batch", per_core_batch, lo=1)
        cores = _uint("cores", cores, lo=1)
        if per_core_batch * cores > 2**31 - 1:
            raise ValueError(f"per_core_batch: {per_core_batch} x {cores} cores is "
                             "over 2**31 - 1 records a step")
        # None: the default (0 to the C loader), fitted to the budget.
        shuffle_window = _uint("shuffle_window", shuffle_window, lo=1, none_ok=True) or 0
        host_batch = per_core_batch * cores
        # Checked whether or not shuffle is on: a window named is a window meant.
        if -(-shuffle_window // host_batch) * host_batch > 2**30:
            raise ValueError(f"shuffle_window: {shuffle_window} records, in whole host "
                             f"batches of {host_batch}, is over 2**30")
        index, count, self.host_source = host_identity(host_index, num_hosts)
        self._config = dict(
            paths=[] if sources else _paths(paths), features=_feature_spec(features),
            sources=sources, mix=("stratified", "sample").index(mix),
            mix_stop=("first", "first_exhausted").index(mix_stop),
            mix_unit=("records", "tokens").index(mix_unit), source_feature=source_feature,
            per_core_batch=per_core_batch, cores=cores,
            host_index=index, num_hosts=count,
            seed=_uint("seed", seed, hi=u64),
            epochs=_uint("epochs", epochs, lo=1),
            max_steps=_uint("max_steps", max_steps, lo=1, hi=u64, none_ok=True) or 0,
            shuffle=shuffle, shuffle_window=shuffle_window, shuffle_global=shuffle_global,
            remainder_wrap=remainder == "wrap",
            threads=_uint("threads", threads, lo=1, hi=4096, none_ok=True) or 0,
            io_depth=_uint("io_depth", io_depth, lo=1, hi=65536, none_ok=True) or 0,
            memory_bytes=int(memory_mib * (1 << 20)),
            prefetch=_uint("prefetch", prefetch, lo=1, hi=1 << 16, none_ok=True) or 0,
            on_corrupt_skip=on_corrupt == "skip", max_corrupt=max_corrupt or 0,
            quarantine=quarantine, verify_records=verify_records, direct_io=direct_io,
            io_backend=io_backend, io_faults=io_faults, pack_length=pack_length,
            pack_concat=pack_mode == "concat", pack_pool=pack_pool,
            frame_cache=frame_cache, skip_steps=_uint("skip_steps", skip_steps, hi=u64))
        self.host_index, self.num_hosts = index, count
        self.cores, self.per_core_batch = cores, per_core_batch
        self._reopen(None if state is None else _checked_blobs(state))

    def _reopen(self, resume, skip=True):
        config = self._config if skip else dict(self._config, skip_steps=0)
        try:
            self._open(**config, resume=resume)
        except Error as e:
            named = _named_error(e, self._config["paths"])
            if named is e:
                raise
            raise named from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return (f"<podfeed.Loader {state}: host {self.host_index} of {self.num_hosts}, "
                f"{self.cores} cores x {self.per_core_batch} records, "
                f"features {self._config['features']!r}>")

    def report(self, format="text"):
        """What the loader did so far, as loadbench reports it, made by the
        same library code (pf_report): format='text' gives the lines for
        people (files, features, topology, records, time, steady, read,
        stages, bottleneck, next(), memory, ...), 'dict' the JSON object
        loadbench --json prints, as a dict (records, steps, seconds,
        records_per_s, bottleneck, stages, next_latency_us, topology,
        series, ...), 'json' that object's text, 'html' a self-contained
        page of it with charts (throughput, each stage's busy share, bytes
        per region and memory over time; the first batch's split), as
        loadbench --html writes (docs/report.md).
        The run is timed from the loader's creation to the last next()
        return; the steady rate counts the batches after the first (None,
        and steady_na says why, under 10 of them or 100 ms).  It works
        after close() too, with the figures of the close."""
        how = _choice("format", format, ("text", "dict", "json", "html"))
        text = self._report({"text": 0, "dict": 1, "json": 1, "html": 2}[how])
        return json.loads(text) if how == "dict" else text

    def state_dict(self):
        """Where this host is, as a small dict of plain values (str, int,
        bool) that json.dumps, torch.save and Orbax's JSON handler store:
        'format', 'blob' (the C state, base64) and readable fields
        (host_index, num_hosts, epoch, step_in_epoch, global_step, ...).
        Every batch next() has returned counts as delivered, released or
        not.  Call it between next() calls, from the loader's thread."""
        blob = self._save_state()
        return {"format": STATE_FORMAT, "blob": base64.b64encode(blob).decode("ascii"),
                **_readable(blob)}

    def records_of(self, step):
        """Which record each row of global step `step` holds, from the
        plan (nothing is read, the loader is not advanced): what next()
        delivers at that step, or for a step skip_steps skipped what a run
        never stopped delivered there.  Any step of the run, from the one
        it started at to its last.  A list, core by core and row by row,
        of dicts: core, row, file (its path), record (its number in the
        file, from 0), epoch and step (its step in the epoch); packed
        (pack_length), one per piece of a record in a row, with segment
        (its id in the row), at (where its values start in the row), from
        and count (which of the record's values are there); mixed, source
        (its name) and epoch its source's.  A ConfigError naming the
        run's first and last steps for a step that is not one of them."""
        names = [src[0] for src in self._config["sources"] or []]
        out = []
        for (epoch, in_epoch, core, row, source, path, record, segment, at, first,
             count) in self._records_of(step):
            ref = {"core": core, "row": row, "file": path, "record": record,
                   "epoch": epoch, "step": in_epoch}
            if names:
                ref["source"] = names[source]
            if self._config["pack_length"]:
                ref.update(segment=segment, at=at, **{"from": first}, count=count)
            out.append(ref)
        return out

    def load_state_dict(self, state):
        """Go on from state (a state_dict(), or a list of every old host's
        to resume with another host count or batch): the loader is reopened
        with the same arguments from that point (skip_steps, which moved the
        state the loader was made with, is not applied again).  Its
        readable fields are checked against its blob as at creation.  No
        batch may be held."""
        blobs = _checked_blobs(state)
        if self.held:
            raise RuntimeError(f"load_state_dict: {self.held} batches of this loader "
                               "are still held; release them first")
        self.close()
        self._reopen(blobs, skip=False)

