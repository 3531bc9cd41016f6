# SPDX-License-Identifier: Apache-2.0
# transform/'s images against PIL (python3-pil) and torchvision: the
# decoders' output (the whole image: identical), the resize of a box (no
# DCT scaling: identical; with it: within 2 levels on average), eval
# (torchvision's Resize(256) + CenterCrop(224): identical) and train (the
# box the rule drew, cropped, resized and flipped by PIL: identical when
# not DCT-scaled).  image_ref (tests/python/image_ref.c) runs the C side.
import os
import subprocess

import numpy as np
import pytest

from conftest import tool

Image = pytest.importorskip("PIL.Image")


def scene(w, h, seed):
    """Edges, gradients, a checkerboard and noise: what a photo's JPEG has."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    r = (128 + 100 * np.sin(x / 17.0) * np.cos(y / 23.0)).astype(np.uint8)
    g = ((x * 3 + y * 5) % 256).astype(np.uint8)
    b = (rng.integers(0, 256, (h, w)) // 2 + 64 * ((x // 40 + y // 40) % 2)).astype(np.uint8)
    return Image.fromarray(np.stack([r, g, b], -1))


KINDS = {
    "baseline.jpg": lambda im, p: im.save(p, quality=90),
    "progressive.jpg": lambda im, p: im.save(p, quality=90, progressive=True),
    "gray.jpg": lambda im, p: im.convert("L").save(p, quality=90),
    "cmyk.jpg": lambda im, p: im.convert("CMYK").save(p, quality=90),
    "444.jpg": lambda im, p: im.save(p, quality=85, subsampling=0),
    "rgb.png": lambda im, p: im.save(p),
    "palette.png": lambda im, p: im.convert("P").save(p),
    "rgba.png": lambda im, p: im.convert("RGBA").save(p),
    "gray.png": lambda im, p: im.convert("L").save(p),
    "interlaced.png": lambda im, p: im.save(p, interlace=1),
}


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    out = {}
    for i, (name, save) in enumerate(KINDS.items()):
        size = (500, 375) if i % 2 == 0 else (333, 517)
        path = root / name
        save(scene(*size, i), path)
        out[name] = path
    return out


def ref(*args, simd=None):
    """image_ref's output; simd: the resize's path (PODFEED_SIMD), else the
    CPU's best."""
    env = dict(os.environ)
    env.pop("PODFEED_SIMD", None)
    if simd:
        env["PODFEED_SIMD"] = simd
    p = subprocess.run([tool("tests/python/image_ref"), *map(str, args)], capture_output=True,
                       env=env)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout, p.stderr.decode().split()


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_full_decode_is_pils(images, name, mode):
    im = Image.open(images[name]).convert(mode)
    out, _ = ref("full", images[name], 3 if mode == "RGB" else 1)
    got = np.frombuffer(out, np.uint8).reshape(np.asarray(im).shape)
    assert np.array_equal(got, np.asarray(im))


def boxes(w, h, n, seed):
    rng = np.random.default_rng(seed)
    for t in range(n):
        bw, bh = int(rng.integers(8, w + 1)), int(rng.integers(8, h + 1))
        yield (int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1)), bw, bh,
               [(224, 224), (64, 48), (300, 300), (17, 5)][t % 4], t % 2)


@pytest.mark.parametrize("simd", [None, "sse2", "scalar"])
@pytest.mark.parametrize("name", KINDS)
def test_box_resize_is_pils(images, name, simd):
    """Partial decode + resize of a box, DCT scaling forbidden: PIL's crop
    then resize(BILINEAR) (then the mirror), to the bit, on the resize's
    best path, SSE2 and scalar (a path the CPU lacks: the best below)."""
    im = Image.open(images[name]).convert("RGB")
    for x, y, bw, bh, (ow, oh), flip in boxes(*im.size, 10, 7):
        want = im.crop((x, y, x + bw, y + bh)).resize((ow, oh), Image.BILINEAR)
        if flip:
            want = want.transpose(Image.FLIP_LEFT_RIGHT)
        out, note = ref("box", images[name], x, y, bw, bh, ow, oh, 3, flip, 1, simd=simd)
        got = np.frombuffer(out, np.uint8).reshape(oh, ow, 3)
        assert np.array_equal(got, np.asarray(want)), (x, y, bw, bh, ow, oh)
        assert note[5] == "1"


@pytest.mark.parametrize("name", ["baseline.jpg", "progressive.jpg", "gray.jpg", "cmyk.jpg"])
def test_dct_scaled_box_is_near_pils(images, name):
    """A box at least twice the output decoded at 1/2..1/8: within 2 levels
    of PIL's full-resolution resize on average (the DCT's own low-pass
    differs from the bilinear filter's)."""
    im = Image.open(images[name]).convert("RGB")
    scaled = 0
    for x, y, bw, bh, _, flip in boxes(*im.size, 24, 11):
        ow, oh = max(bw // 3, 8), max(bh // 3, 8)
        want = np.asarray(im.crop((x, y, x + bw, y + bh)).resize((ow, oh), Image.BILINEAR))
        out, note = ref("box", images[name], x, y, bw, bh, ow, oh, 3, 0, 0)
        got = np.frombuffer(out, np.uint8).reshape(oh, ow, 3)
        scaled += note[5] != "1"
        assert np.abs(got.astype(int) - want).mean() <= 2.0, (x, y, bw, bh, note)
    assert scaled >= 12


@pytest.mark.parametrize("size", [(224, 224), (224, 400), (192, 320), (224, 100)])
@pytest.mark.parametrize("name", ["baseline.jpg", "444.jpg", "rgb.png", "interlaced.png"])
def test_eval_is_torchvisions(images, name, size):
    """Resize(int(H / 0.875)) + CenterCrop((H, W)), to the bit; where W is
    wider than the resized image (400 and 320 of a 500x375 image's 341
    and 292, of a 333x517 image's 256 and 219), CenterCrop pads with
    zeros: the same zeros, the image between them.  (No box here is twice
    its output, so no JPEG is DCT-scaled.)"""
    T = pytest.importorskip("torchvision.transforms")
    h, w = size
    im = Image.open(images[name]).convert("RGB")
    want = np.asarray(T.Compose([T.Resize(int(h / 0.875)), T.CenterCrop((h, w))])(im))
    out, note = ref("transform", images[name], "eval", h, w, 1, 0, 0)
    got = np.frombuffer(out, np.uint8).reshape(h, w, 3)
    assert note[5] == "1"
    assert np.array_equal(got, want)
    s = int(h / 0.875)
    rw = s if im.size[0] <= im.size[1] else int(s * im.size[0] / im.size[1])
    if w > rw:
        left, right = (w - rw) // 2, (w - rw + 1) // 2
        assert not got[:, :left].any() and not got[:, w - right:].any()
        assert got[:, left:w - right].mean() > 20


def test_resize_is_pils(images):
    im = Image.open(images["rgb.png"]).convert("RGB")
    out, _ = ref("transform", images["rgb.png"], "resize", 100, 120, 1, 0, 0)
    got = np.frombuffer(out, np.uint8).reshape(100, 120, 3)
    assert np.array_equal(got, np.asarray(im.resize((120, 100), Image.BILINEAR)))


@pytest.mark.parametrize("name", ["rgb.png", "palette.png"])
def test_train_is_pils_on_its_box(images, name):
    """train's output is PIL's crop of the box it drew, resized, mirrored
    when it flipped (PNG: never DCT-scaled)."""
    im = Image.open(images[name]).convert("RGB")
    flips = 0
    for place in range(20):
        out, note = ref("transform", images[name], "train", 224, 224, 5, 1, place)
        x, y, w, h, flip = map(int, note[:5])
        want = im.crop((x, y, x + w, y + h)).resize((224, 224), Image.BILINEAR)
        if flip:
            want = want.transpose(Image.FLIP_LEFT_RIGHT)
        flips += flip
        got = np.frombuffer(out, np.uint8).reshape(224, 224, 3)
        assert np.array_equal(got, np.asarray(want)), note
    assert 3 <= flips <= 17
