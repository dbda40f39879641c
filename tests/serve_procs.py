"""Helpers of the serve tests: start `pulsarctl serve` as a real process on a free port of
127.0.0.1 (--port 0: never 6650, so the tests can run beside a real serve) and wait, bounded,
for the URL it prints. A module of its own, as procs.py is: a test never imports a conftest
(in a whole run, the module named conftest may be another folder's)."""
from __future__ import annotations

import selectors
import signal
import subprocess
import time

from procs import PATIENCE_S, argv


class Served:
    def __init__(self, proc, url, before=""):
        self.before = before   # what it printed on stderr before its URL
        self.proc = proc
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=PATIENCE_S)


def start_serve(env, *args) -> Served:
    """Start `pulsarctl serve --port 0 ARGS` and wait (bounded) for its pulsar:// line."""
    proc = subprocess.Popen(argv("serve", "--port", "0", *args), env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + PATIENCE_S
    seen = []
    while time.monotonic() < deadline:
        if not sel.select(timeout=deadline - time.monotonic()):
            break
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith("pulsar://"):
            sel.close()
            return Served(proc, line.strip(), "".join(seen[:-1]))
    proc.kill()
    proc.wait()
    raise AssertionError(f"serve did not print its URL: {''.join(seen)}{proc.stderr.read()}")
