"""Helpers of the serve tests: start `pulsarctl serve` as a real process on a free port of
127.0.0.1 (--port 0: never 6650, so the tests can run beside a real serve) and wait, bounded,
for the URL it prints. A module of its own, as procs.py is: a test never imports a conftest
(in a whole run, the module named conftest may be another folder's)."""
from __future__ import annotations

import io
import os
import selectors
import signal
import subprocess
import time

from procs import PATIENCE_S, argv, reap


class Served:
    def __init__(self, proc, url, before=""):
        self.before = before   # what it printed on stderr before its URL
        self.proc = proc
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])
        http = [w for w in before.split() if w.startswith("http://")]
        self.http_url = http[-1] if http else None
        tls = [w for w in before.split() if w.startswith("pulsar+ssl://")]
        self.tls_url = tls[-1] if tls else None
        https = [w for w in before.split() if w.startswith("https://")]
        self.https_url = https[-1] if https else None

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=PATIENCE_S)


class _Then(io.RawIOBase):
    """The bytes head, then what stream gives."""

    def __init__(self, head: bytes, stream):
        self.head, self.stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.head:
            n = min(len(b), len(self.head))
            b[:n], self.head = self.head[:n], self.head[n:]
            return n
        # readinto1: what one read of the pipe gives; readinto would wait to fill all of b,
        # holding back lines serve already wrote
        return self.stream.readinto1(b)


def start_serve(env, *args) -> Served:
    """Start `pulsarctl serve --port 0 ARGS` and wait (bounded) for its pulsar:// line."""
    if "--http-port" not in args:
        args = (*args, "--http-port", "0")  # never 8080: tests run beside a real serve
    proc = subprocess.Popen(argv("serve", "--port", "0", *args), env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    # Raw reads of stderr's pipe, split into lines here: a buffered readline() may take in the
    # next line with the one asked for, and select() would then wait for bytes already read.
    fd = proc.stderr.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + PATIENCE_S
    buf, seen = b"", []
    while time.monotonic() < deadline:
        if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            raw, buf = buf.split(b"\n", 1)
            line = raw.decode(errors="replace")
            seen.append(line + "\n")
            if line.startswith("pulsar://"):
                sel.close()
                # What came in the same read after the URL line is the start of the rest.
                proc.stderr = io.TextIOWrapper(io.BufferedReader(_Then(buf, proc.stderr)),
                                               errors="replace")
                return Served(proc, line.strip(), "".join(seen[:-1]))
    proc.kill()
    proc.wait()
    raise AssertionError(f"serve did not print its URL: {''.join(seen)}"
                         f"{buf.decode(errors='replace')}{proc.stderr.read().decode(errors='replace')}")


def stop_all(served) -> None:
    """SIGTERM every serve still running, then reap them all (a fixture's teardown)."""
    for s in served:
        if s.proc.poll() is None:
            s.stop()
    reap([s.proc for s in served])


def quiet_logger():
    """A logger for the real pulsar-client that says only errors."""
    import logging

    log = logging.getLogger("pulsar-client-in-tests")
    log.setLevel(logging.ERROR)
    return log
