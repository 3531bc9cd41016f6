# SPDX-License-Identifier: Apache-2.0
# Real buckets for the tests and tools/bench/buckets: an S3-protocol server
# (s3rver, from npm: tools/install-deps installs it under
# /var/cache/podfeed/s3rver) on 127.0.0.1 with one bucket, mounted by the
# real FUSE bucket clients, s3fs and rclone (Debian's).  Everything waits
# on events: the server's "listening" line, the mount table's change
# (/proc/self/mountinfo is pollable), a process's end; a deadline only
# turns a hang into a failure that says what was awaited.
import os
import pathlib
import select
import shutil
import signal
import subprocess
import threading
import time

BUCKET = "podfeed"
KEY = "S3RVER"          # s3rver's fixed credentials
S3RVER_DIR = pathlib.Path(os.environ.get("PODFEED_S3RVER_DIR", "/var/cache/podfeed/s3rver"))
CLIENTS = ("s3fs", "rclone")
WAIT = 120              # seconds before a wait is called a hang


class Missing(Exception):
    """A package the bucket tests need is not installed."""


def s3rver_bin():
    path = S3RVER_DIR / "node_modules" / ".bin" / "s3rver"
    if not path.exists():
        raise Missing(f"s3rver: not installed in {S3RVER_DIR} (tools/install-deps installs it)")
    if not shutil.which("node"):
        raise Missing("node: not installed (tools/install-deps installs nodejs)")
    return str(path)


def client_bin(client):
    path = shutil.which(client)
    if not path:
        raise Missing(f"{client}: not installed (tools/install-deps installs it)")
    return path


def fuse_usable():
    """Why FUSE cannot be mounted here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if not shutil.which("fusermount3") and not shutil.which("fusermount"):
        return "no fusermount"
    return None


class Server:
    """s3rver on 127.0.0.1 with BUCKET, its objects under root/objects."""

    def __init__(self, root):
        self.root = pathlib.Path(root)
        self.data = self.root / "objects"
        self.data.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self.proc = None
        self.lines = []

    def start(self):
        """Start (again, on the same port once it has one) and wait for
        its "listening" line."""
        listening = threading.Event()
        self.proc = subprocess.Popen(
            [s3rver_bin(), "-d", str(self.data), "-a", "127.0.0.1", "-p", str(self.port),
             "--configure-bucket", BUCKET],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True, start_new_session=True)
        proc = self.proc

        def drain():
            for line in proc.stdout:
                self.lines.append(line.rstrip("\n"))
                if "listening on" in line and not listening.is_set():
                    self.port = int(line.rsplit(":", 1)[1])
                    listening.set()
            listening.set()     # it ended: start() says so

        threading.Thread(target=drain, daemon=True).start()
        if not listening.wait(WAIT) or proc.poll() is not None:
            raise RuntimeError("s3rver did not start:\n" + "\n".join(self.lines[-20:]))
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        """Stop it (SIGKILL: a server that dies), and wait for its end."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _mountinfo_has(mountpoint):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 4 and fields[4] == str(mountpoint):
                return line.split(" - ", 1)[1].split()[0]
    return None


def _wait_mount(mountpoint, proc, present, what, log):
    """Wait until mountpoint is (or is not) in the mount table: poll(2)
    on /proc/self/mountinfo wakes on every mount and unmount."""
    deadline = time.monotonic() + WAIT
    with open("/proc/self/mountinfo") as f:
        p = select.poll()
        p.register(f, select.POLLPRI | select.POLLERR)
        while (_mountinfo_has(mountpoint) is not None) != present:
            if proc is not None and proc.poll() is not None and present:
                raise RuntimeError(f"{what} ended ({proc.returncode}) before mounting:\n"
                                   + _tail(log))
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{what}: {mountpoint} not {'mounted' if present else 'gone'}"
                                   f" after {WAIT} s:\n" + _tail(log))
            # Wakes on a change of the mount table; the period only looks
            # again at the client's process.
            p.poll(min(left, 1.0) * 1000)
            f.seek(0)
            f.read()


def _tail(path):
    try:
        return "\n".join(pathlib.Path(path).read_text(errors="replace").splitlines()[-20:])
    except OSError:
        return "(no log)"


class Mount:
    """A bucket client's mount of server's BUCKET at mountpoint, in the
    foreground (its process is ours), with extra options."""

    def __init__(self, client, server, mountpoint, options=()):
        self.client = client
        self.server = server
        self.mountpoint = pathlib.Path(mountpoint)
        self.options = list(options)
        self.proc = None
        self.log = self.mountpoint.parent / f"{self.mountpoint.name}.{client}.log"

    def command(self):
        mp = str(self.mountpoint)
        if self.client == "s3fs":
            passwd = self.mountpoint.parent / f"{self.mountpoint.name}.passwd"
            passwd.write_text(f"{KEY}:{KEY}\n")
            passwd.chmod(0o600)
            return [client_bin("s3fs"), BUCKET, mp, "-f", "-o", f"url={self.server.url}",
                    "-o", "use_path_request_style", "-o", f"passwd_file={passwd}",
                    "-o", "dbglevel=warn", *self.options]
        remote = (f":s3,provider=Other,endpoint='{self.server.url}',"
                  f"access_key_id={KEY},secret_access_key={KEY}:{BUCKET}")
        return [client_bin("rclone"), "mount", remote, mp, "--log-level", "NOTICE",
                *self.options]

    def env(self):
        env = dict(os.environ)
        if self.client == "rclone":
            # rclone refuses to start while AWS_CA_BUNDLE is set (its
            # S3 SDK reads the file and fails on what it finds there).
            env.pop("AWS_CA_BUNDLE", None)
        return env

    def start(self):
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL, env=self.env(),
                                         start_new_session=True)
        _wait_mount(self.mountpoint, self.proc, True, self.client, self.log)
        return self

    @property
    def fstype(self):
        return _mountinfo_has(self.mountpoint)

    def stop(self):
        """Unmount, and end the client; requests still waiting on it then
        fail (ENOTCONN), so that no reader stays stuck."""
        if self.proc is None:
            return
        if _mountinfo_has(self.mountpoint) is not None:
            um = shutil.which("fusermount3") or shutil.which("fusermount")
            subprocess.run([um, "-u", "-z", str(self.mountpoint)], capture_output=True)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _wait_mount(self.mountpoint, None, False, self.client, self.log)
        self.proc = None


def upload(local_dir, dest):
    """A plain copy (as cp -r, new mtimes) of local_dir's files into dest,
    a directory of a mounted bucket."""
    dest = pathlib.Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(pathlib.Path(local_dir).iterdir()):
        shutil.copyfile(f, dest / f.name)
    return dest
