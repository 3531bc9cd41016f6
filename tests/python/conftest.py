# SPDX-License-Identifier: Apache-2.0
# Fixtures of the Python package's tests: the build's tools and small
# datasets made with them (shardtool synth, then convert to indexed shards).
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("PODFEED_BUILD_DIR", REPO / "build"))
TOKENS = "tokens:int32[64],label:int64[1]"


def tool(name):
    path = BUILD / name
    if not path.exists():
        pytest.fail(f"{path} is not built (ninja -C {BUILD})")
    return str(path)


def run(*args):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    """4 indexed shards of 2,000 token records (and the plain TFRecords)."""
    root = tmp_path_factory.mktemp("data")
    st = tool("tools/shardtool")
    run(st, "synth", "--kind", "tokens", "--records", 2000, "--shards", 4,
        "--out", root / "plain", "--seed", 1)
    run(st, "convert", "--out", root / "indexed", "--shards", 4, "--frame-size", "64K",
        root / "plain")
    return root


def digests(features, per_core_batch, cores, seed, shuffle, host, hosts, *paths):
    """The C API's batches: [(epoch, step, crc32), ...] from batch_digest."""
    out = run(tool("tests/python/batch_digest"), features, per_core_batch, cores, seed,
              int(shuffle), host, hosts, *paths)
    return [(int(e), int(s), int(c, 16)) for e, s, c in
            (line.split() for line in out.splitlines())]
