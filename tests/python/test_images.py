# SPDX-License-Identifier: Apache-2.0
# Image features from Python: podfeed.Image and the spec string, arrays
# [cores, B, H, W, C] over the loader's memory (no copy), each row the C
# transform of its record (image_ref), layouts and dtypes, the torch
# adapter's uint8 and bfloat16 tensors, bad arguments.
import subprocess

import numpy as np
import pytest

import podfeed
from conftest import tool

N = 48


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    path = tmp_path_factory.mktemp("images") / "images.tfrecord.zst"
    subprocess.run([tool("tests/python/image_ref"), "shard", str(path), str(N)], check=True)
    return path


def features(**kw):
    return {"image/encoded": podfeed.Image(32, 48, **kw), "image/class/label": "int64"}


def test_image_spec_text():
    assert podfeed.Image(224, 224, "train").spec() == "image[224,224]:train"
    im = podfeed.Image(8, 16, "eval", channels=1, layout="nchw", dtype="float32",
                       mean=0.5, std=(0.1, 0.2, 0.3), max_pixels=1000)
    assert im.spec() == ("image[8,16]:eval:channels=1:layout=nchw:dtype=float32:"
                         "mean=0.5:std=0.1:0.2:0.3:max_pixels=1000")
    assert podfeed.Image(4, 4, "train", scale=(0.2, 1), ratio=(0.5, 2), flip=False).spec() \
        == "image[4,4]:train:scale=0.2:1:ratio=0.5:2:flip=0"


@pytest.mark.parametrize("kw, exc", [
    ({"augment": "crop"}, ValueError), ({"channels": 2}, ValueError),
    ({"layout": "hwc"}, ValueError), ({"dtype": "int8"}, ValueError),
    ({"flip": 1}, TypeError), ({"max_pixels": 0}, ValueError),
    ({"scale": 0.5}, TypeError), ({"mean": (1, 2)}, ValueError),
])
def test_image_bad_arguments(kw, exc):
    with pytest.raises(exc):
        podfeed.Image(8, 8, **kw).spec()


def test_image_bad_sizes():
    for h, w in ((0, 8), (8, -1), (8.0, 8), (True, 8)):
        with pytest.raises(ValueError):
            podfeed.Image(h, w)


def test_spec_errors_are_config_errors(shard):
    with pytest.raises(podfeed.ConfigError, match="eval.*train's options|train's options"):
        podfeed.Loader(shard, "image/encoded:image[8,8]:eval:flip=0", 4)
    with pytest.raises(podfeed.ConfigError, match="mean and std need"):
        podfeed.Loader(shard, features(mean=0.5), 4)


def test_arrays_are_images_without_copy(shard):
    with podfeed.Loader(shard, features(augment="train"), 4, cores=2, seed=3) as loader:
        batch = next(loader)
        a = batch["image/encoded"]
        assert a.shape == (2, 4, 32, 48, 3) and a.dtype == np.uint8
        assert not a.flags.owndata
        assert np.shares_memory(a, batch["image/encoded"])
        t = batch.tensor("image/encoded", 1)
        assert t.shape == (4, 32, 48, 3)
        assert np.shares_memory(np.asarray(t), a[1])
        assert a.std() > 1  # an image, not zeros


def test_rows_are_the_c_transform(shard, tmp_path):
    """Each row equals transform/ on its record's JPEG, drawn from (seed,
    epoch, place), place being the record's number in this one file."""
    # The JPEGs, through a loader of raw bytes (padded with zeros after
    # their end marker).
    with podfeed.Loader(shard, "image/encoded:bytes[65536],image/class/label:int64[1]",
                        N) as raw:
        b = next(raw)
        blobs = b["image/encoded"][0].copy()
        labels = b["image/class/label"][0, :, 0].copy()
    jpegs = {}
    for blob, label in zip(blobs, labels):
        data = bytes(blob)
        end = data.rfind(b"\xff\xd9") + 2
        path = tmp_path / f"{label}.jpg"
        path.write_bytes(data[:end])
        jpegs[int(label)] = path
    with podfeed.Loader(shard, features(augment="train"), 4, seed=9, epochs=2,
                        shuffle=True) as loader:
        for batch in loader:
            imgs = batch["image/encoded"][0]
            for img, label in zip(imgs, batch["image/class/label"][0, :, 0]):
                args = ["transform", jpegs[int(label)], "train", 32, 48, 9, batch.epoch,
                        int(label)]
                p = subprocess.run([tool("tests/python/image_ref"), *map(str, args)],
                                   capture_output=True, check=True)
                assert np.array_equal(img.reshape(-1), np.frombuffer(p.stdout, np.uint8))


def test_layouts_and_float_dtypes(shard):
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    with podfeed.Loader(shard, features(augment="eval"), 4) as u8, \
         podfeed.Loader(shard, features(augment="eval", layout="nchw", dtype="float32",
                                        mean=mean, std=std), 4) as f32, \
         podfeed.Loader(shard, features(augment="eval", dtype="bfloat16"), 4) as bf:
        a, b, c = next(u8)["image/encoded"], next(f32)["image/encoded"], \
            next(bf)["image/encoded"]
        assert b.shape == (1, 4, 3, 32, 48) and b.dtype == np.float32
        want = (a.transpose(0, 1, 4, 2, 3) / np.float32(255) - np.array(mean, np.float32)[
            :, None, None]) / np.array(std, np.float32)[:, None, None]
        assert np.allclose(b, want, atol=1e-5)
        assert c.dtype == np.uint16 and c.shape == (1, 4, 32, 48, 3)
        as_f32 = (c.astype(np.uint32) << 16).view(np.float32)
        assert np.allclose(as_f32, a / 255.0, rtol=1 / 128, atol=1e-6)


def test_torch_gives_uint8_and_bfloat16_tensors(shard):
    torch = pytest.importorskip("torch")
    import podfeed.torch as pt
    ds = pt.IterableDataset(shard, features(augment="train"), per_core_batch=4, seed=1)
    batch = next(iter(ds))
    t = batch["image/encoded"]
    assert t.dtype == torch.uint8 and tuple(t.shape) == (1, 4, 32, 48, 3)
    ds = pt.IterableDataset(shard, features(augment="eval", dtype="bfloat16"), per_core_batch=4)
    t = next(iter(ds))["image/encoded"]
    assert t.dtype == torch.bfloat16 and tuple(t.shape) == (1, 4, 32, 48, 3)
    assert 0 <= float(t.float().min()) and float(t.float().max()) <= 1.01


# The shuffle window of image features (issue 37): records wait in it as
# read and are decoded once the order has put them in a step; a default
# window the budget cannot hold is fitted to it and said; one set that it
# cannot hold is a ConfigError naming the largest it can.
WINDOW_N = 1024


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    path = tmp_path_factory.mktemp("window") / "images.tfrecord.zst"
    subprocess.run([tool("tests/python/image_ref"), "shard", str(path), str(WINDOW_N)],
                   check=True)
    return path


def images64():
    return {"image/encoded": podfeed.Image(64, 64, augment="train"), "image/class/label": "int64"}


def _digests(loader):
    out = []
    for batch in loader:
        out.append(hash(batch["image/encoded"].tobytes() + batch["image/class/label"].tobytes()))
        batch.release()
    return out


@pytest.mark.parametrize("shuffle", [True, "global"])
def test_image_shuffle_on_the_defaults_fits_the_budget(many, shuffle):
    """The issue's loader, scaled to a 4 MiB budget: nothing but the budget
    set, the window fitted to it, said in the metrics and the report, the
    same batches with 1 thread and with the CPUs'."""
    kw = dict(per_core_batch=8, cores=2, shuffle=shuffle, memory_mib=4, seed=5, epochs=2)
    with podfeed.Loader(many, images64(), **kw) as loader:
        got = _digests(loader)
        m = loader.metrics()
        report = loader.report()
    assert len(got) == 2 * (WINDOW_N // 16)
    assert m["images"] == 2 * WINDOW_N
    assert m["window_as_read"] == 1 and m["fitted"] & 1
    assert 16 <= m["shuffle_window"] < WINDOW_N and m["shuffle_window"] % 16 == 0
    assert m["memory_bytes"] <= 4 << 20
    assert 0 < m["window_peak_bytes"] <= m["window_bytes"]
    assert f"window      {m['shuffle_window']} (auto): cut from the default 8192" in report
    assert f"records in a window of {m['shuffle_window']}," in report
    with podfeed.Loader(many, images64(), threads=1, **kw) as one:
        assert _digests(one) == got


def test_image_window_set_too_large_names_the_largest(many):
    with pytest.raises(podfeed.ConfigError,
                       match=r"^shuffle_window: shuffle_window of 8192 records does not fit the "
                             r"memory budget of 4 MiB.*the largest window that fits is \d+") as e:
        podfeed.Loader(many, images64(), per_core_batch=8, cores=2, shuffle=True,
                       shuffle_window=8192, memory_mib=4, threads=2)
    fit = int(str(e.value).rsplit(" is ", 1)[1].split()[0])
    with podfeed.Loader(many, images64(), per_core_batch=8, cores=2, shuffle=True,
                        shuffle_window=fit, memory_mib=4, threads=2, max_steps=2) as loader:
        assert len(_digests(loader)) == 2
        assert loader.metrics()["shuffle_window"] == fit


def test_image_shuffle_on_the_defaults_resumes_exactly(many):
    kw = dict(per_core_batch=8, cores=2, shuffle="global", memory_mib=4, seed=2, epochs=2)
    with podfeed.Loader(many, images64(), **kw) as loader:
        whole = _digests(loader)
    with podfeed.Loader(many, images64(), max_steps=90, **kw) as loader:
        first = _digests(loader)
        state = loader.state_dict()
    with podfeed.Loader(many, images64(), state=state, **kw) as loader:
        rest = _digests(loader)
    assert first + rest == whole
