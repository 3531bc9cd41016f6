# SPDX-License-Identifier: Apache-2.0
# podfeed.Loader and Batch: the C API's batches bit for bit, zero copy,
# lifetimes, the held-batch limit, errors, argument checks.
import errno
import gc
import inspect
import pydoc
import re
import shutil
import zlib

import numpy as np
import pytest

import podfeed
from conftest import TOKENS, digests


def crc_of(batch):
    crc = 0
    for c in range(batch.cores):
        views = batch.core(c)
        for name in batch.keys():
            crc = zlib.crc32(views[name].tobytes(), crc)
    return crc


@pytest.mark.parametrize("cores,pcb,shuffle,host,hosts", [
    (2, 8, True, 0, 1), (1, 16, False, 0, 1), (3, 5, True, 1, 2), (2, 8, "global", 0, 1),
    (3, 5, "global", 1, 2)])
def test_batches_equal_the_c_api(data, cores, pcb, shuffle, host, hosts):
    want = digests(TOKENS, pcb, cores, 7, shuffle, host, hosts, data / "indexed")
    with podfeed.Loader(data / "indexed", TOKENS, pcb, cores=cores, seed=7,
                        shuffle=shuffle, host_index=host, num_hosts=hosts) as loader:
        got = [(b.epoch, b.step, crc_of(b)) for b in loader]
    assert len(want) == 2000 // (pcb * cores * hosts)
    assert got == want


def test_arrays_are_views_of_the_loader_block(data):
    with podfeed.Loader(data / "indexed", TOKENS, 8, cores=2) as loader:
        b = next(loader)
        start, size = b.block
        for name in b.keys():
            a = b[name]
            assert a.shape == (2, 8, 64 if name == "tokens" else 1)
            assert a.base is not None and not a.flags.owndata
            lo = a.ctypes.data
            hi = lo + (a.shape[0] - 1) * a.strides[0] + a.shape[1] * a.strides[1]
            assert start <= lo and hi <= start + size
            # One core's rows are C-contiguous, and core 1 is core 0's
            # block further on.
            c0, c1 = b.core(0)[name], b.core(1)[name]
            assert c0.flags.c_contiguous and c0.ctypes.data == lo
            assert c1.ctypes.data == lo + a.strides[0]
        # Writing through one view shows in another: the same memory.
        t = b["tokens"]
        t[1, 2, 3] = 12345
        assert b.core(1)["tokens"][2, 3] == 12345


def test_dlpack_capsule_and_torch(data):
    torch = pytest.importorskip("torch")
    with podfeed.Loader(data / "indexed", TOKENS, 8, cores=2) as loader:
        b = next(loader)
        t = b.tensor("tokens")
        assert t.__dlpack_device__() == (1, 0)
        cap = t.__dlpack__()
        assert "dltensor" in repr(cap)
        x = torch.from_dlpack(b.tensor("tokens"))
        a = b["tokens"]
        assert x.data_ptr() == a.ctypes.data
        assert tuple(x.stride()) == tuple(s // 4 for s in a.strides)
        assert torch.equal(x, torch.from_numpy(a.copy()))
        assert np.asarray(b.tensor("label", core=1)).ctypes.data == b.core(1)["label"].ctypes.data
        del cap  # never consumed: its destructor frees it
        held = loader.held
        b.release()
        assert loader.held == held  # x still holds the slot
        del x, t, a
        gc.collect()
        assert loader.held == 0


def test_views_outlive_batch_and_loader(data):
    loader = podfeed.Loader(data / "indexed", TOKENS, 4, prefetch=1, shuffle=False)
    b = next(loader)
    kept = b["tokens"]
    copy = kept.copy()
    b.release()
    with pytest.raises(ValueError, match="released"):
        b["tokens"]
    # The slot stays out of the loader while the view lives: many more
    # batches go through the other slots and never touch it.
    for _ in range(50):
        with next(loader):
            pass
    assert np.array_equal(kept, copy)
    loader.close()
    loader.close()  # idempotent
    assert loader.closed
    with pytest.raises(ValueError, match="closed"):
        next(loader)
    assert np.array_equal(kept, copy)  # memory kept for the view
    del loader
    gc.collect()
    assert np.array_equal(kept, copy)
    del kept


def test_release_returns_the_slot(data):
    with podfeed.Loader(data / "indexed", TOKENS, 4, prefetch=1) as loader:
        for _ in range(20):
            b = next(loader)
            assert loader.held == 1 and not b.released
            b.release()
            assert loader.held == 0 and b.released
        with next(loader) as b:
            assert loader.held == 1
        assert loader.held == 0
        b = next(loader)
        del b  # the last reference: the slot goes back
        assert loader.held == 0


def test_too_many_held_batches_is_an_error_and_nothing_is_lost(data):
    ref = [crc_of(b) for b in podfeed.Loader(data / "indexed", TOKENS, 8, seed=3)]
    loader = podfeed.Loader(data / "indexed", TOKENS, 8, seed=3, prefetch=2)
    held = [next(loader) for _ in range(3)]
    got = [crc_of(b) for b in held]
    with pytest.raises(podfeed.BatchLimitError, match="prefetch"):
        next(loader)
    with pytest.raises(RuntimeError):  # and it is a RuntimeError
        next(loader)
    arrays = held[0]["tokens"]
    held[0].release()
    with pytest.raises(podfeed.BatchLimitError):  # the array still holds it
        next(loader)
    del arrays, held[0]
    for b in loader:
        got.append(crc_of(b))
        b.release()
    del held
    assert got == ref


def test_batch_attributes(data):
    with podfeed.Loader(data / "indexed", TOKENS, 10, cores=2, epochs=2) as loader:
        steps = loader.steps_per_epoch
        assert steps == 2000 // 20
        batches = [(b.epoch, b.step, b.global_step, b.epoch_start, b.epoch_end,
                    b.nvalid, bool(b.valid.all()), b.valid.shape) for b in loader]
        m = loader.metrics()
    assert len(batches) == 2 * steps
    assert batches[0][:5] == (0, 0, 0, True, False)
    assert batches[steps - 1][:5] == (0, steps - 1, steps - 1, False, True)
    assert batches[steps][:5] == (1, 0, steps, True, False)
    assert all(n == 20 and v and shape == (2, 10) for *_, n, v, shape in batches)
    assert m["records"] == 2 * 2000 and m["steps"] == 2 * steps
    assert m["steps_per_epoch"] == steps and m["records_per_epoch"] == 2000
    assert m["remainder_dropped"] == 0 and m["holes"] == m["corrupt_drops"] == 0
    # zstd shards: more bytes out than in; one read per frame, each epoch
    assert 0 < m["bytes_read"] < m["bytes_decompressed"] and m["io_requests"] > 0
    assert sum(m["next_hist_log2_us"]) >= m["steps"] and m["memory_bytes"] > 0
    assert m["io_backend"] in ("io_uring", "pread") and set(m["io"]) == {"busy_ns",
                                                                         "wait_ns"}
    for key in m:  # each key is in metrics()'s docstring
        assert key in podfeed.Loader.metrics.__doc__, key


def test_features_as_dict_and_spec_text(data):
    spec = {"tokens": ("int32", 64), "label": {"dtype": np.int64, "len": 1, "pad": -1}}
    with podfeed.Loader(str(data / "indexed"), spec, 8) as a, \
            podfeed.Loader([data / "indexed" / "part-0000*"], TOKENS + ":pad=-1", 8) as b:
        assert a.spec.startswith("tokens:int32[64]")
        assert a.features == ("tokens", "label")
        for x, y in zip(a, b):
            assert crc_of(x) == crc_of(y)
            assert x["label"].dtype == np.int64 and x["tokens"].dtype == np.int32


def test_lengths_and_ragged_in_the_dict_form(data):
    spec = {"tokens": {"dtype": "int32", "len": 16, "lengths": True}, "label": ("int64", 1)}
    assert podfeed._feature_spec(spec) == "tokens:int32[16]:lengths,label:int64[1]"
    assert podfeed._feature_spec({"tokens": ("int32", "*")}) == "tokens:int32[*]"
    with podfeed.Loader(str(data / "indexed"), spec, 8) as loader:
        assert loader.features == ("tokens", "tokens_lengths", "label")
        batch = next(loader)
        lengths = batch["tokens_lengths"]
        assert lengths.dtype == np.int32 and lengths.shape[-1] == 1
        # every synth token record holds at least one token; capped at 16
        assert ((lengths >= 1) & (lengths <= 16)).all()
    with pytest.raises(podfeed.ConfigError) as e:
        podfeed.Loader(str(data / "indexed"), "tokens:int32[*],label:int64[1]", 8)
    assert "'tokens' is ragged ([*]): give it a length" in str(e.value)


@pytest.mark.parametrize("mode", ["first_fit", "concat"])
def test_packing(data, mode):
    L = 128
    with podfeed.Loader(str(data / "indexed"), "tokens:int32[*]", 4, cores=2,
                        pack_length=L, pack_mode=mode) as loader:
        assert loader.features == ("tokens", "tokens_segment_ids", "tokens_positions")
        rows = 0
        for batch in loader:
            tok, seg, pos = (batch[k] for k in loader.features)
            assert tok.shape == seg.shape == pos.shape == (2, 4, L)
            for row_seg, row_pos in zip(seg.reshape(-1, L), pos.reshape(-1, L)):
                rows += 1
                used = row_seg > 0
                # the segments come first, then padding (0)
                assert not used[np.argmin(used):].any() or used.all()
                ids = row_seg[used]
                assert (np.diff(ids) >= 0).all() and (ids[0] == 1)
                # positions count up inside each segment
                starts = np.flatnonzero(np.diff(ids)) + 1
                for a, b in zip(np.r_[0, starts], np.r_[starts, ids.size]):
                    p = row_pos[used][a:b]
                    assert (np.diff(p) == 1).all()
                    if mode == "first_fit":
                        assert p[0] == 0
        m = loader.metrics()
        assert m["pack_rows"] == rows > 0 and m["pack_slots"] == rows * L
        assert 0 < m["pack_values"] <= m["pack_slots"]
        # planned from the manifest's 4 shards' index tails, read once
        assert (m["pack_lengths_tails"], m["pack_lengths_files"],
                m["pack_lengths_exchanged"]) == (4, 0, 0)
        packing = loader.report("dict")["packing"]
        assert packing["lengths_tails"] == 4 and packing["lengths_files"] == 0
        assert packing["mode"] == mode and packing["length"] == L
        assert packing["efficiency"] == pytest.approx(m["pack_values"] / m["pack_slots"])
        assert "packing" in loader.report()
    with pytest.raises(podfeed.ConfigError) as e:
        podfeed.Loader(str(data / "indexed"), "tokens:int32[*],label:int64[1]", 4,
                       pack_length=L)
    assert "'label' has a fixed length ([1]) beside packed features" in str(e.value)
    with pytest.raises(podfeed.ConfigError) as e:
        podfeed.Loader(str(data / "indexed"), "tokens:int32[*]", 4, pack_length=2**21)
    assert "pack length 2097152 is too large" in str(e.value)


def test_missing_file(data, tmp_path):
    missing = tmp_path / "nope.tfrecord.zst"
    with pytest.raises(podfeed.FileError) as e:
        podfeed.Loader([data / "indexed", missing], TOKENS, 8)
    assert e.value.file == str(missing) or str(missing) in str(e.value)
    assert e.value.errno == errno.ENOENT and isinstance(e.value, OSError)


def test_corrupt_frame_names_file_and_offset(data, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(data / "indexed", bad)
    shard = bad / "part-00001-of-00004.tfrecord.zst"
    raw = bytearray(shard.read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    shard.write_bytes(bytes(raw))
    # convert's manifest would refuse the rewritten shard as changed; the
    # damage itself is what is tested here
    (bad / "podfeed.manifest").unlink()
    with pytest.raises(podfeed.DataError) as e:
        with podfeed.Loader(bad, TOKENS, 8, shuffle=False) as loader:
            for _ in loader:
                pass
    err = e.value
    assert err.file == str(shard)
    assert err.offset is not None and err.offset_kind == "file"
    assert err.offset <= len(raw) // 3 and err.frame is not None
    assert err.cause and str(shard) in str(err)
    assert err.errno == errno.EBADMSG


def test_misspelled_feature_is_a_data_error(data):
    # Indexed shards carry their schema, and convert's manifest the
    # merged one: the loader refuses at once, naming the manifest.
    with pytest.raises(podfeed.DataError) as e:
        podfeed.Loader(data / "indexed", {"tokenz": ("int32", 64)}, 8)
    assert "tokenz" in str(e.value) and "tokens" in e.value.cause
    assert e.value.file and e.value.file.endswith("podfeed.manifest")
    # Plain TFRecords do not: the first record without it says where.
    with pytest.raises(podfeed.DataError) as e:
        with podfeed.Loader(data / "plain", {"tokenz": ("int32", 64)}, 8,
                            shuffle=False) as loader:
            next(loader)
    assert "tokenz" in str(e.value)
    assert e.value.file and str(data / "plain") in e.value.file
    assert e.value.record is not None and e.value.offset is not None
    # With a default the feature is optional: the default, no error.
    with podfeed.Loader(data / "indexed", {"tokenz": {"dtype": "int32", "len": 4,
                                                      "default": 7}}, 8) as loader:
        assert (next(loader)["tokenz"] == 7).all()


def test_bad_spec_names_the_argument():
    with pytest.raises(podfeed.ConfigError, match="features") as e:
        podfeed.parse_spec("tokens:int33[4]")
    assert isinstance(e.value, ValueError)


# Every argument of Loader, a wrong type and a wrong value: TypeError or
# ValueError whose message starts with the argument's name.
LOADER_BAD = [
    (dict(paths=3), TypeError, "paths"),
    (dict(paths=["x", 3]), TypeError, "paths"),
    (dict(paths=[]), ValueError, "paths"),
    (dict(paths=""), ValueError, "paths"),
    (dict(features=5), TypeError, "features"),
    (dict(features=""), ValueError, "features"),
    (dict(features={}), ValueError, "features"),
    (dict(features={3: "int32"}), TypeError, "features"),
    (dict(features={"a,b": "int32"}), ValueError, "features"),
    (dict(features={"x": ("int32", 0)}), ValueError, "features"),
    (dict(features={"x": ("int32", 2, 3)}), ValueError, "features"),
    (dict(features={"x": "complex64"}), ValueError, "features"),
    (dict(features={"x": object()}), TypeError, "features"),
    (dict(features={"x": {"dtype": "int32", "size": 3}}), ValueError, "features"),
    (dict(features={"x": {"len": 3}}), ValueError, "features"),
    (dict(features={"x": {"dtype": "int32", "pad": "0"}}), TypeError, "features"),
    (dict(features={"x": {"dtype": "int32", "clip": 3}}), ValueError, "features"),
    (dict(features={"x": {"dtype": "int32", "required": "yes"}}), TypeError, "features"),
    (dict(features={"x": {"dtype": "int32", "lengths": 1}}), TypeError, "features"),
    (dict(features={"x": ("int32", "**")}), ValueError, "features"),
    (dict(features="x:int32[*]:lengths"), ValueError, "features"),
    (dict(pack_length=0), ValueError, "pack_length"),
    (dict(pack_length="64"), TypeError, "pack_length"),
    (dict(pack_mode="best_fit"), ValueError, "pack_mode"),
    (dict(pack_mode=1), TypeError, "pack_mode"),
    (dict(pack_pool=0), ValueError, "pack_pool"),
    (dict(frame_cache=-1), ValueError, "frame_cache"),
    (dict(frame_cache="auto"), TypeError, "frame_cache"),
    (dict(features="tokens:int33[4]"), ValueError, "features"),
    (dict(per_core_batch=1.5), TypeError, "per_core_batch"),
    (dict(per_core_batch=0), ValueError, "per_core_batch"),
    (dict(per_core_batch=2**31), ValueError, "per_core_batch"),
    (dict(cores="2"), TypeError, "cores"),
    (dict(cores=0), ValueError, "cores"),
    (dict(host_index="0", num_hosts=2), TypeError, "host_index"),
    (dict(host_index=2, num_hosts=2), ValueError, "host_index"),
    (dict(num_hosts=2.0), TypeError, "num_hosts"),
    (dict(num_hosts=0), ValueError, "num_hosts"),
    (dict(seed=None), TypeError, "seed"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(epochs="2"), TypeError, "epochs"),
    (dict(epochs=0), ValueError, "epochs"),
    (dict(shuffle=1), TypeError, "shuffle"),
    (dict(shuffle="random"), ValueError, "shuffle"),
    (dict(shuffle="Global"), ValueError, "shuffle"),
    (dict(shuffle_window=1.0), TypeError, "shuffle_window"),
    (dict(shuffle_window=0), ValueError, "shuffle_window"),
    (dict(shuffle_window=2**31), ValueError, "shuffle_window"),
    (dict(remainder=1), TypeError, "remainder"),
    (dict(remainder="keep"), ValueError, "remainder"),
    (dict(on_corrupt=None), TypeError, "on_corrupt"),
    (dict(on_corrupt="ignore"), ValueError, "on_corrupt"),
    (dict(memory_mib="512"), TypeError, "memory_mib"),
    (dict(memory_mib=0), ValueError, "memory_mib"),
    (dict(memory_mib=float("nan")), ValueError, "memory_mib"),
    (dict(memory_mib=1), ValueError, "memory_mib"),  # the C loader: too small
    (dict(threads=1.0), TypeError, "threads"),
    (dict(threads=0), ValueError, "threads"),
    (dict(state="abc"), TypeError, "state"),
    (dict(state={"blob": "x"}), ValueError, "state"),
    (dict(state={"format": "podfeed-state/1", "blob": "@@"}), ValueError, "state"),
    (dict(state=[]), ValueError, "state"),
    (dict(prefetch="2"), TypeError, "prefetch"),
    (dict(prefetch=0), ValueError, "prefetch"),
    (dict(max_steps="1"), TypeError, "max_steps"),
    (dict(max_steps=0), ValueError, "max_steps"),
    (dict(io_depth=[1]), TypeError, "io_depth"),
    (dict(io_depth=0), ValueError, "io_depth"),
    (dict(max_corrupt=1.0, on_corrupt="skip"), TypeError, "max_corrupt"),
    (dict(max_corrupt=0, on_corrupt="skip"), ValueError, "max_corrupt"),
    (dict(max_corrupt=5), ValueError, "max_corrupt"),  # without on_corrupt='skip'
    (dict(quarantine=3, on_corrupt="skip"), TypeError, "quarantine"),
    (dict(quarantine="q.jsonl"), ValueError, "quarantine"),  # without 'skip'
    (dict(quarantine="/nonexistent/dir/q.jsonl", on_corrupt="skip"), OSError, "quarantine"),
    (dict(verify_records="yes"), TypeError, "verify_records"),
    (dict(direct_io=0), TypeError, "direct_io"),
    (dict(io_backend=1), TypeError, "io_backend"),
    (dict(io_backend="aio"), ValueError, "io_backend"),
    (dict(io_faults=5), TypeError, "io_faults"),
    (dict(io_faults="what=3"), ValueError, "io_faults"),
    (dict(mix=1), TypeError, "mix"),
    (dict(mix="sample"), ValueError, "mix"),  # not a mixture
    (dict(mix_stop="last"), ValueError, "mix_stop"),
    (dict(mix_stop="first_exhausted"), ValueError, "mix_stop"),  # not a mixture
    (dict(source_feature=1), TypeError, "source_feature"),
    (dict(source_feature=True), ValueError, "source_feature"),  # not a mixture
    (dict(mix_unit=1), TypeError, "mix_unit"),
    (dict(mix_unit="bytes"), ValueError, "mix_unit"),
    (dict(mix_unit="tokens"), ValueError, "mix_unit"),  # not a mixture
    (dict(skip_steps=-1), ValueError, "skip_steps"),
    (dict(skip_steps=1.5), TypeError, "skip_steps"),
    (dict(skip_steps=10**9), ValueError, "skip_steps"),  # past the run's last step
]


def test_every_loader_argument_is_in_the_list():
    checked = {word for _, _, word in LOADER_BAD}
    params = set(inspect.signature(podfeed.Loader).parameters)
    assert params == checked


@pytest.mark.parametrize("kwargs,exc,word", LOADER_BAD)
def test_arguments_are_checked(data, kwargs, exc, word):
    args = dict(paths=data / "indexed", features=TOKENS, per_core_batch=8)
    args.update(kwargs)
    with pytest.raises(exc) as e:
        podfeed.Loader(**args)
    assert str(e.value).startswith(word + ":"), str(e.value)


def test_an_empty_directory_names_the_paths(tmp_path):
    with pytest.raises(podfeed.FileError) as e:
        podfeed.Loader(tmp_path, TOKENS, 8)
    assert str(e.value).startswith("paths:") and str(tmp_path) in str(e.value)


def test_a_named_c_error_keeps_its_fields(data):
    # features/io_faults/memory_mib are named from the C message; the
    # exception keeps the class and fields the C error gave.
    with pytest.raises(podfeed.ConfigError) as e:
        podfeed.Loader(data / "indexed", "tokens:int32[4]x", 8)
    assert e.value.errno == errno.EINVAL and e.value.cause.startswith("feature spec")
    with pytest.raises(podfeed.ConfigError) as e:
        podfeed.Loader(data / "indexed", TOKENS, 8, memory_mib=1)
    assert e.value.errno == errno.ENOMEM and "MiB" in e.value.cause


PLAN_BAD = [
    (dict(per_core_batch="8"), TypeError, "per_core_batch"),
    (dict(per_core_batch=0), ValueError, "per_core_batch"),
    (dict(cores=0), ValueError, "cores"),
    (dict(hosts=-1), ValueError, "hosts"),
    (dict(ref_global_batch=1.0), TypeError, "ref_global_batch"),
    (dict(ref_steps=10), ValueError, "ref_steps"),
    (dict(ref_steps=10, ref_global_batch=64, records=100), ValueError, "ref_steps"),
    (dict(records=-5), ValueError, "records"),
    (dict(epochs=2), ValueError, "epochs"),
    (dict(remainder="keep"), ValueError, "remainder"),
    (dict(ref_lr="0.1"), TypeError, "ref_lr"),
    (dict(ref_lr=-1.0), ValueError, "ref_lr"),
    (dict(ref_lr=float("inf")), ValueError, "ref_lr"),
    (dict(rule=None), TypeError, "rule"),
    (dict(rule="cubic"), ValueError, "rule"),
    (dict(rule="linear"), ValueError, "rule"),
    (dict(ref_warmup_steps=-1), ValueError, "ref_warmup_steps"),
]


def test_every_plan_argument_is_in_the_list():
    assert set(inspect.signature(podfeed.plan).parameters) == {w for *_, w in PLAN_BAD}


@pytest.mark.parametrize("kwargs,exc,word", PLAN_BAD)
def test_plan_arguments_are_checked(kwargs, exc, word):
    args = dict(per_core_batch=8, cores=2, hosts=1)
    args.update(kwargs)
    with pytest.raises(exc) as e:
        podfeed.plan(**args)
    assert str(e.value).startswith(word + ":"), str(e.value)


def test_other_arguments_are_checked(data):
    for call, exc, word in [
        (lambda: podfeed.parse_spec(3), TypeError, "text"),
        (lambda: podfeed.inspect_state("x"), TypeError, "state"),
        (lambda: podfeed.host_identity("1"), TypeError, "host_index"),
        (lambda: podfeed.host_identity(0, 0), ValueError, "num_hosts"),
    ]:
        with pytest.raises(exc) as e:
            call()
        assert str(e.value).startswith(word + ":"), str(e.value)
    with podfeed.Loader(data / "indexed", TOKENS, 8, cores=2) as loader:
        b = next(loader)
        for call, exc, word in [
            (lambda: b.core("0"), TypeError, "core"),
            (lambda: b.core(True), TypeError, "core"),
            (lambda: b.core(2), IndexError, "core"),
            (lambda: b.tensor(3), TypeError, "name"),
            (lambda: b.tensor("tokens", core=1.0), TypeError, "core"),
            (lambda: b.tensor("tokens", core=-1), IndexError, "core"),
            (lambda: b.tensor("tokens").__dlpack__(stream=1), BufferError, "stream"),
            (lambda: b.tensor("tokens").__dlpack__(copy=True), BufferError, "copy"),
            (lambda: b.tensor("tokens").__dlpack__(dl_device=(2, 0)), BufferError,
             "dl_device"),
        ]:
            with pytest.raises(exc) as e:
                call()
            assert str(e.value).startswith(word), str(e.value)
        with pytest.raises(KeyError, match="tokenz"):
            b["tokenz"]
        b.release()


def test_gc_of_running_loader(data):
    for _ in range(5):
        loader = podfeed.Loader(data / "indexed", TOKENS, 8, threads=2)
        next(loader)
        del loader  # threads running, slots filling
        gc.collect()
    loader = podfeed.Loader(data / "indexed", TOKENS, 8)
    b = next(loader)
    a = b["tokens"]
    del loader, b  # the array keeps the loader's memory
    gc.collect()
    assert a.shape == (1, 8, 64) and int(a.sum()) >= 0


def test_help_reads_as_a_manual():
    doc = podfeed.Loader.__doc__
    args = doc[doc.index("Arguments"):doc.index("Iterating yields")]
    described = set()
    for line in args.splitlines():
        # "      name  what it is", or "      a, b" described on the next lines
        m = re.match(r"      (\w+(?:, \w+)*)(?:  |$)", line)
        if m:
            described |= set(m.group(1).split(", "))
    assert described == set(inspect.signature(podfeed.Loader).parameters)
    for word in ("state_dict", "Ctrl-C", "BatchLimitError", "DataError", "fork",
                 "metrics()", "Attributes"):
        assert word in doc
    # every public method and attribute says what it is
    loader_attrs = {"host_index", "num_hosts", "host_source", "cores", "per_core_batch"}
    for cls in (podfeed.Loader, podfeed.Batch, podfeed.Tensor):
        for name in dir(cls):
            if name.startswith("_") or name in loader_attrs:
                continue
            assert getattr(cls, name).__doc__, f"{cls.__name__}.{name}"
    assert all(a in doc for a in loader_attrs)
    assert "release" in podfeed.Batch.__doc__ and "DLPack" in podfeed.Tensor.__doc__
    for fn in (podfeed.plan, podfeed.inspect_state, podfeed.host_identity,
               podfeed.parse_spec):
        assert len(fn.__doc__) > 200, fn.__name__
    text = pydoc.render_doc(podfeed.Loader, renderer=pydoc.plaintext)
    assert "per_core_batch, cores=1, host_index=None" in text  # the signature
    assert "next_wait_ns" in text  # metrics() lists what it returns


def test_version_is_the_projects():
    # The C library's pf_version_string(), the same as the package's
    # metadata in pyproject.toml and meson's project version.
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[2]
    pyproject = (root / "pyproject.toml").read_text()
    meson = (root / "meson.build").read_text()
    want = re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1)
    assert podfeed.__version__ == want
    assert re.search(r"version : '%s'" % re.escape(want), meson)
    assert re.fullmatch(r"\d+\.\d+\.\d+", podfeed.__version__)


def test_skip_mode_that_leaves_no_record_names_the_damage(data, tmp_path):
    # One stock zstd stream cut inside its only frame: skip mode drops it
    # whole, and the refusal names the file, the byte and the damage, not
    # only "the dataset holds 0 records".
    import subprocess
    plain = sorted((data / "plain").iterdir())[0]
    whole = subprocess.run(["zstd", "-q", "-c", str(plain)], check=True,
                           capture_output=True).stdout
    cut = tmp_path / "cut.tfrecord.zst"
    cut.write_bytes(whole[:20000])
    with pytest.raises(podfeed.DataError, match="truncated zstd stream") as e:
        podfeed.Loader(cut, TOKENS, 8, on_corrupt="skip")
    assert e.value.file == str(cut) and e.value.offset == 20000
    assert "0 records" in str(e.value)


def test_skip_mode_metrics_say_an_uncountable_loss_is_unknown(data, tmp_path):
    # A plain shard cut inside a record: the records the cut took cannot
    # be counted; corrupt_records is None (unknown), never 0.
    plain = sorted((data / "plain").iterdir())[0].read_bytes()
    (tmp_path / "a.tfrecord").write_bytes(plain[:len(plain) * 45 // 100])
    with podfeed.Loader(tmp_path, TOKENS, 1, on_corrupt="skip") as lo:
        n = sum(1 for _ in lo)
        m = lo.metrics()
    assert n > 0
    assert m["corrupt_drops"] == 1 and m["corrupt_records"] is None
    assert m["corrupt_unknown"] == 1 and m["corrupt_records_known"] == 0
    assert m["corrupt_bytes"] > 0
