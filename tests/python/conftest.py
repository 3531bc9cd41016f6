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
              2 if shuffle == "global" else int(shuffle), host, hosts, *paths)
    return [(int(e), int(s), int(c, 16)) for e, s, c in
            (line.split() for line in out.splitlines())]


# A test skipped because a package is missing (pytest.importorskip) is not
# a pass.  tools/test installs every package the tests use
# (tools/install-deps) and sets PODFEED_TEST_NO_MISSING=1: there, such a
# skip fails the run, naming the package.  A plain `meson test` says what
# was skipped and why (-rs), and passes.
_missing = []


def _note_missing(report):
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = report.longrepr[2]
        if "could not import" in reason:
            _missing.append(f"{report.nodeid}: {reason}")


def pytest_collectreport(report):
    _note_missing(report)


def pytest_runtest_logreport(report):
    _note_missing(report)


def pytest_terminal_summary(terminalreporter):
    if _missing and os.environ.get("PODFEED_TEST_NO_MISSING") == "1":
        terminalreporter.write_line(
            "FAILED: tests skipped for a missing package (tools/install-deps "
            "installs it):", red=True)
        for line in _missing:
            terminalreporter.write_line("  " + line, red=True)


def pytest_sessionfinish(session):
    if _missing and os.environ.get("PODFEED_TEST_NO_MISSING") == "1":
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
