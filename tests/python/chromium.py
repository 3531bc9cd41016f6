# SPDX-License-Identifier: Apache-2.0
# Headless Chromium driven over the DevTools protocol on a pipe
# (--remote-debugging-pipe: JSON messages ending in NUL on fds 3 and 4),
# with the standard library only: open a page at a window size, collect
# its console errors, exceptions and network requests, evaluate
# JavaScript, take PNG screenshots (decoded here: zlib and PNG's row
# filters) and count the pixels of a colour.
import base64
import json
import os
import shutil
import struct
import subprocess
import tempfile
import zlib

import numpy

import pytest

# As root in a container, and with the network closed: without these
# Chromium tries to reach Google's services at start.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--remote-debugging-pipe", "about:blank"]

PHONE = (390, 844)      # a phone's CSS width and height
DESKTOP = (1280, 800)


def binary():
    """Debian's chromium; a test without it fails under tools/test
    (PODFEED_TEST_NO_MISSING=1, tools/install-deps installs it), else is
    skipped saying so."""
    path = shutil.which("chromium") or (
        "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if path:
        return path
    if os.environ.get("PODFEED_TEST_NO_MISSING") == "1":
        pytest.fail("chromium is not installed (tools/install-deps installs it)")
    pytest.skip("could not import chromium: not installed (tools/install-deps)")


class Browser:
    def __init__(self, timeout=60):
        self.profile = tempfile.mkdtemp(prefix="podfeed-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds():
            # Through fds out of the way first: a pipe may already sit on
            # 3 or 4, and dup2 onto itself would leave it close-on-exec.
            os.dup2(to_chrome_r, 100)
            os.dup2(from_chrome_w, 101)
            os.dup2(100, 3)
            os.dup2(101, 4)

        self.proc = subprocess.Popen(
            [binary(), f"--user-data-dir={self.profile}", *FLAGS],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, preexec_fn=fds, close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.timeout = timeout
        self._buf = b""
        self._id = 0
        self.events = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _read_message(self):
        import select
        while b"\0" not in self._buf:
            ready, _, _ = select.select([self._from_chrome], [], [], self.timeout)
            if not ready:
                raise TimeoutError(f"chromium said nothing for {self.timeout} s")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its pipe (exit status "
                                   f"{self.proc.poll()})")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, session=False, **params):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method):
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            e = self._read_message()
            if e.get("method") == method:
                return e
            self.events.append(e)

    def open(self, url, size, mobile=False):
        """Load url at size (CSS pixels): the events before it are
        forgotten."""
        width, height = size
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=mobile)
        self.events = []
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")
        # Anything logged while loading arrives before this reply.
        self.eval("1")

    def eval(self, expression):
        r = self.call("Runtime.evaluate", session=True, expression=expression,
                      returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def problems(self):
        """Console errors, uncaught exceptions and failed loads so far."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails'].get('text')} "
                           f"{p['exceptionDetails'].get('exception', {}).get('description')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(
                    str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(f"log: {p['entry']['text']} {p['entry'].get('url', '')}")
            elif m == "Network.loadingFailed":
                out.append(f"load failed: {p.get('errorText')}")
        return out

    def requests(self):
        """Every URL the page asked for."""
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, clip=None):
        """A PNG of the viewport, or of clip (x, y, width, height in page
        CSS pixels, beyond the viewport too)."""
        # optimizeForSpeed: rows filtered "Up", which numpy undoes at once
        params = {"format": "png", "optimizeForSpeed": True}
        if clip:
            x, y, w, h = clip
            params["clip"] = {"x": x, "y": y, "width": w, "height": h, "scale": 1}
            params["captureBeyondViewport"] = True
        return base64.b64decode(self.call("Page.captureScreenshot", session=True,
                                          **params)["data"])


def png_pixels(png):
    """The pixels of an 8-bit RGB or RGBA PNG without interlacing, as
    Chromium writes them: a numpy array (height, width, 3)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and not interlace, (depth, ctype)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = 3 if ctype == 2 else 4
    raw = numpy.frombuffer(zlib.decompress(idat), dtype=numpy.uint8)
    raw = raw.reshape(height, width * bpp + 1)
    out = numpy.zeros((height, width * bpp), dtype=numpy.uint8)
    prev = numpy.zeros(width * bpp, dtype=numpy.uint8)
    for y in range(height):
        f, line = raw[y, 0], raw[y, 1:].copy()
        if f == 1:      # Sub: a running sum of each channel along the row
            line = numpy.cumsum(line.reshape(width, bpp), axis=0,
                                dtype=numpy.uint8).reshape(-1)
        elif f == 2:    # Up
            line += prev
        elif f in (3, 4):   # Average, Paeth: pixel by pixel
            line = line.astype(numpy.int32)
            up = prev.astype(numpy.int32)
            for i in range(width * bpp):
                a = line[i - bpp] if i >= bpp else 0
                b = up[i]
                if f == 3:
                    line[i] = (line[i] + ((a + b) >> 1)) & 255
                else:
                    c = up[i - bpp] if i >= bpp else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    line[i] = (line[i] + (a if pa <= pb and pa <= pc else
                                          b if pb <= pc else c)) & 255
            line = line.astype(numpy.uint8)
        out[y] = line
        prev = line
    return out.reshape(height, width, bpp)[:, :, :3]


def count_colour(pixels, hex_colour, tolerance=40):
    """Pixels within tolerance (summed over r, g, b) of #rrggbb."""
    want = numpy.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=numpy.int32)
    return int((numpy.abs(pixels.astype(numpy.int32) - want).sum(axis=2) <= tolerance).sum())
