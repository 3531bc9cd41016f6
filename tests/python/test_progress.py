# SPDX-License-Identifier: Apache-2.0
# len(loader): the steps it still has (pf_loader_steps_left()), so that a
# progress bar (tqdm(loader)) knows its total; and Loader.metrics()'s time
# series.
import operator

import pytest

import podfeed
from conftest import TOKENS


def test_len_is_the_steps_left(data):
    with podfeed.Loader(data / "indexed", TOKENS, 10, epochs=3) as loader:
        total = loader.steps_per_epoch * 3
        assert len(loader) == operator.length_hint(loader) == total == 600
        for i, batch in enumerate(loader, 1):
            batch.release()
            assert len(loader) == total - i
        assert i == total
        assert len(loader) == 0
        assert loader       # a finished loader is still true
    with pytest.raises(ValueError, match="^len: the loader is closed"):
        len(loader)


def test_len_counts_max_steps_and_a_resume(data):
    with podfeed.Loader(data / "indexed", TOKENS, 10, epochs=2, max_steps=7) as loader:
        assert len(loader) == 7
        assert sum(1 for _ in loader) == 7
    with podfeed.Loader(data / "indexed", TOKENS, 10, epochs=2) as loader:
        for _ in range(250):
            next(loader).release()
        state = loader.state_dict()
        assert len(loader) == 400 - 250
    # a resumed run has the rest of its epoch and the epochs after it
    with podfeed.Loader(data / "indexed", TOKENS, 10, epochs=2, state=state) as loader:
        assert len(loader) == 150
        assert sum(1 for _ in loader) == 150
        assert len(loader) == 0


def test_a_progress_bar_s_protocol(data):
    """What tqdm does with an iterable: its total from len(), then one
    update per item; the total is the items there are."""
    with podfeed.Loader(data / "indexed", TOKENS, 16, epochs=2) as loader:
        total = len(loader)
        seen = 0
        for batch in loader:
            seen += 1
            batch.release()
        assert seen == total


def test_metrics_have_the_time_series(data):
    with podfeed.Loader(data / "indexed", TOKENS, 8, epochs=20) as loader:
        for batch in loader:
            batch.release()
        m = loader.metrics()
    s = m["series"]
    n = len(s["t_s"])
    assert 2 <= n <= 240
    for name in ("records", "steps", "bytes_read", "bytes_decompressed", "rss_bytes",
                 "stage.io.busy_s", "stage.io.threads", "stage.decode.busy_s",
                 "stage.decode.threads", "stage.consumer_wait.busy_s"):
        assert len(s[name]) == n, name
    assert s["t_s"][0] == 0 and s["records"][0] == 0
    assert s["t_s"] == sorted(s["t_s"])
    assert s["records"][-1] == m["records"] == 20 * 2000 // 8 * 8
    assert s["bytes_read"][-1] == m["bytes_read"]


def _on_a_terminal(*args):
    """Run a tool with its stderr on a pseudo-terminal: @return (exit
    status, what the terminal got, stdout)."""
    import os
    import pty
    import subprocess
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    got = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:     # EIO: the tool closed its end
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    out = proc.stdout.read()
    proc.stdout.close()
    return proc.wait(), got.decode(), out.decode()


@pytest.mark.parametrize("command", ["convert", "verify"])
def test_shardtool_draws_progress_on_a_terminal_only(data, tmp_path, command):
    import subprocess
    from conftest import tool
    st = tool("tools/shardtool")
    if command == "convert":
        args = lambda out: [st, "convert", "--out", tmp_path / out, "--shards", 2,
                            data / "plain"]
    else:
        shards = sorted(str(p) for p in (data / "indexed").glob("*.zst"))
        args = lambda out: [st, "verify", *shards]
    status, tty, out = _on_a_terminal(*args("a"))
    assert status == 0, tty
    # "\r<command>  N records  X MB/s  P%  Ts left", then cleared
    assert f"\r{command}  " in tty and " records  " in tty and " MB/s" in tty, tty
    assert "%" in tty and "s left" in tty, tty
    assert tty.endswith("\r\x1b[K"), repr(tty[-40:])
    # on a pipe: nothing but what it always said
    piped = subprocess.run([str(a) for a in args("b")], capture_output=True, text=True)
    assert piped.returncode == 0
    assert "\r" not in piped.stderr and "records  " not in piped.stderr
    assert piped.stdout == out.replace("\r\n", "\n").replace(str(tmp_path / "a"),
                                                            str(tmp_path / "b"))
