# SPDX-License-Identifier: Apache-2.0
# Real buckets (issue 38): a dataset converted locally and uploaded with
# plain copies (new mtimes) to a real S3-protocol server (s3rver), mounted
# by the real bucket clients s3fs and rclone, read by directory, by shell
# glob, with loadbench and from Python: every record once, in the order a
# local read gives; the mount named by its client; a shard replaced in the
# bucket refused by name; the same shard named twice refused, the
# directory alone not (s3fs gives every readdir entry one inode number);
# the server stopped mid-epoch: a named failure, no hang, and an exact
# resume once it is back.  A client, s3rver or node missing is a skip
# ("could not import", which tools/test turns into a failure); no
# /dev/fuse is a skip of its own.
import glob
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

import buckets
from conftest import BUILD, run, tool

HERE = pathlib.Path(__file__).resolve().parent
READER = HERE / "bucket_reader.py"


def need(client=None):
    try:
        buckets.s3rver_bin()
        if client:
            buckets.client_bin(client)
    except buckets.Missing as e:
        pytest.skip(f"could not import {e}")
    why = buckets.fuse_usable()
    if why:
        pytest.skip(f"FUSE cannot be mounted here: {why}")


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """A converted dataset (with its manifest) and the order a local read
    of it gives."""
    root = tmp_path_factory.mktemp("buckets")
    st = tool("tools/shardtool")
    run(st, "synth", "--kind", "tokens", "--records", 60000, "--shards", 6,
        "--out", root / "plain", "--seed", 5)
    run(st, "convert", "--out", root / "ds", "--shards", 6, "--frame-size", "256K",
        root / "plain")
    return root / "ds", reader([root / "ds"]).batches


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need()
    s = buckets.Server(tmp_path_factory.mktemp("s3rver")).start()
    yield s
    s.stop()


@pytest.fixture(params=buckets.CLIENTS)
def mount(request, server, tmp_path):
    need(request.param)
    m = buckets.Mount(request.param, server, tmp_path / "mnt").start()
    yield m
    m.stop()


class Reader:
    """bucket_reader.py's lines, read as they come."""

    def __init__(self, paths, *args, env=None):
        self.proc = subprocess.Popen(
            [sys.executable, str(READER), *map(str, args), *map(str, paths)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env)
        self.batches, self.states, self.error, self.end = [], [], None, None
        self.stderr = []
        self._saved = threading.Event()
        self._over = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr),
                         daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind == "B":
                self.batches.append(rest)
            elif kind == "S":
                n, path = rest.split(" ", 1)
                self.states.append((int(n), path))
                self._saved.set()
            elif kind == "E":
                self.error = rest
                self._over.set()
                self._saved.set()
            elif kind == "END":
                self.end = int(rest)
                self._over.set()
                self._saved.set()
        self._over.set()
        self._saved.set()

    def wait_saved(self):
        assert self._saved.wait(buckets.WAIT) and self.states, \
            f"no state saved: {self.error} {''.join(self.stderr)}"

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def wait_over(self, what, mount=None):
        if self._over.wait(buckets.WAIT):
            return
        # Where it waits: each thread's kernel wait channel and state.
        where = []
        for t in sorted(pathlib.Path(f"/proc/{self.proc.pid}/task").glob("*")):
            try:
                stat = (t / "stat").read_text().rsplit(")", 1)[1].split()
                where.append(f"{t.name} {(t / 'comm').read_text().strip()} "
                             f"{(t / 'wchan').read_text()} {stat[0]}")
            except OSError:
                pass
        log = buckets._tail(mount.log) if mount else ""
        raise AssertionError(f"{what}: the reader neither failed nor ended in {buckets.WAIT} s "
                             f"(a hang); {len(self.batches)} batches; threads:\n"
                             + "\n".join(where) + "\nclient log:\n" + log)


def reader(paths, *args, env=None, mount=None):
    r = Reader(paths, *args, env=env)
    r.wait_over("reading", mount)
    r.proc.wait()
    assert r.end is not None, f"{r.error} {''.join(r.stderr)}"
    return r


def loadbench(*args):
    return subprocess.run([tool("tools/loadbench"), "--quiet", *map(str, args)],
                          capture_output=True, text=True)


def test_a_copied_dataset_reads_by_directory_glob_and_python(local, mount):
    ds, want = local
    up = buckets.upload(ds, mount.mountpoint / "ds")
    assert mount.fstype == f"fuse.{mount.client}"
    # From Python, by directory (planned from the manifest, which the copy
    # gave new mtimes) and by the shell's glob of it: the local order.
    assert reader([up], mount=mount).batches == want
    assert reader(sorted(glob.glob(str(up / "*"))), mount=mount).batches == want
    # loadbench, its report naming the mount and its client.
    out = loadbench("--json", up)
    assert out.returncode == 0, out.stderr
    assert '"records_per_epoch":60000' in out.stdout.replace(" ", ""), out.stdout[:2000]
    text = loadbench("--region", "here", "--mount", f"{mount.mountpoint}=here", up)
    assert text.returncode == 0, text.stderr
    assert f"fuse.{mount.client}" in text.stdout and f"{mount.client} bucket" in text.stdout, \
        text.stdout


def test_a_replaced_shard_is_refused_by_name(local, mount):
    ds, _ = local
    up = buckets.upload(ds, mount.mountpoint / "ds")
    shard = sorted(up.glob("part-*"))[2]
    data = bytearray(shard.read_bytes())
    data[-40] ^= 1      # the same size, another index: another shard
    shard.write_bytes(bytes(data))
    out = loadbench(up)
    assert out.returncode != 0
    assert shard.name in out.stderr and "not the shard the manifest was written for" \
        in out.stderr, out.stderr


def test_the_same_shard_named_twice_is_refused(local, mount):
    ds, _ = local
    up = buckets.upload(ds, mount.mountpoint / "ds")
    shard = sorted(up.glob("part-*"))[1]
    out = loadbench(up, shard)
    assert out.returncode != 0
    assert "named twice" in out.stderr and shard.name in out.stderr, out.stderr
    out = loadbench(shard, up / "." / shard.name)
    assert out.returncode != 0 and "named twice" in out.stderr, out.stderr
    out = loadbench("--no-manifest", up)
    assert out.returncode == 0, out.stderr


def test_the_server_stopped_mid_epoch(local, server, tmp_path, request):
    """A named failure within the I/O timeout (not the client's minutes of
    retries), then an exact resume from the last state once the server is
    back."""
    ds, want = local
    for client in buckets.CLIENTS:
        need(client)
        mnt = tmp_path / f"mnt-{client}"
        m = buckets.Mount(client, server, mnt).start()
        request.addfinalizer(m.stop)
        up = buckets.upload(ds, mnt / "ds")
        states = tmp_path / f"states-{client}"
        states.mkdir()
        m.stop()    # a cold mount: nothing of the dataset in the page cache
        m.start()
        env = dict(os.environ, PODFEED_IO_TIMEOUT_MS="2000")
        r = Reader([up], "--state-dir", states, "--every", 5, "--pause",
                   "--memory-mib", 20, env=env)
        r.wait_saved()
        server.stop()
        t0 = time.monotonic()
        r.go()
        r.wait_over(f"{client}, the server stopped", m)
        took = time.monotonic() - t0
        assert r.end is None, f"{client}: the epoch ended without reading after the stop"
        assert r.error and str(mnt / "ds") in r.error, r.error
        assert "timed out" in r.error or "read failed" in r.error or "cannot open" in r.error, \
            r.error
        # The reader may be held in the kernel by the client's read; ending
        # the client ends it.
        m.stop()
        r.proc.wait(buckets.WAIT)
        server.start()
        m.start()
        n, state = r.states[-1]
        done = r.batches[:n]
        again = reader([up], "--resume", state, mount=m)
        assert done + again.batches == want, \
            f"{client}: {n} batches, then {len(again.batches)} resumed, of {len(want)}"
        print(f"{client}: named failure {took:.1f} s after the server stopped: {r.error}")
        m.stop()
