# SPDX-License-Identifier: Apache-2.0
# podfeed.Loader and the process: Ctrl-C during a blocked next(), the GIL
# released while it waits, a forked child.
import os
import subprocess
import sys
import textwrap
import threading
import time

import podfeed
from conftest import TOKENS

# A child process: io_faults makes the loader's first read wait 1 s (and
# the first index read too, which create() pays), so next() blocks; a
# thread sends SIGINT to the process 200 ms into it.
CTRL_C = textwrap.dedent("""
    import os, signal, sys, threading, time
    import podfeed
    loader = podfeed.Loader(sys.argv[1], sys.argv[2], 8, threads=1,
                            io_faults="delay=1s@1")
    sent = []
    def kill():
        time.sleep(0.2)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=kill).start()
    t0 = time.monotonic()
    try:
        next(loader)
        print("no interrupt", time.monotonic() - t0)
        sys.exit(1)
    except KeyboardInterrupt:
        late = time.monotonic() - sent[0]
    # The batch on its way is not lost: the next call hands it out.
    b = next(loader)
    n = 1 + sum(1 for _ in loader)
    print(f"{late:.4f} {b.step} {n}")
""")


def test_ctrl_c_interrupts_a_blocked_next_within_100ms(data):
    shard = data / "indexed" / "part-00000-of-00004.tfrecord.zst"
    out = subprocess.run([sys.executable, "-c", CTRL_C, str(shard), TOKENS],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stdout + out.stderr
    late, step, n = out.stdout.split()
    assert float(late) < 0.1, f"next() returned {late} s after SIGINT"
    assert int(step) == 0 and int(n) == 500 // 8


def test_next_releases_the_gil(data):
    shard = data / "indexed" / "part-00000-of-00004.tfrecord.zst"
    loader = podfeed.Loader(shard, TOKENS, 8, threads=1, io_faults="delay=300ms@1")
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    t = threading.Thread(target=tick)
    t0 = time.monotonic()
    t.start()
    next(loader)
    waited = time.monotonic() - t0
    stop.set()
    t.join()
    loader.close()
    # The other thread ran during the wait: with the GIL held it could not
    # have ticked at all between its start and its end.
    during = [t for t in ticks if t0 + 0.02 < t < t0 + waited - 0.02]
    assert waited > 0.1 and len(during) >= 5


def test_forked_child_gets_a_clear_error(data):
    loader = podfeed.Loader(data / "indexed", TOKENS, 8)
    b = next(loader)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: must not hang, must say why
        os.close(r)
        try:
            next(loader)
            msg = b"no error"
        except RuntimeError as e:
            msg = str(e).encode()
        del b
        loader.close()
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        raise AssertionError("the forked child hung")
    msg = os.read(r, 4096).decode()
    os.close(r)
    assert os.WEXITSTATUS(status) == 0
    assert "fork" in msg and "child" in msg
    # The parent's loader goes on.
    b.release()
    assert sum(1 for _ in loader) == 2000 // 8 - 1
    loader.close()
