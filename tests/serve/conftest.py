"""Fixtures of the serve tests: `pulsarctl serve` as a real process on a free port of
127.0.0.1 (never 6650, so the tests can run beside a real serve), over this test's store."""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time

import pytest

from procs import PATIENCE_S, argv, reap


@pytest.fixture
def env(store_path):
    return dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")


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


@pytest.fixture
def served(env):
    """A running `pulsarctl serve` on a free port; stopped (and reaped) after the test."""
    s = start_serve(env)
    yield s
    if s.proc.poll() is None:
        s.stop()
    reap([s.proc])


@pytest.fixture
def client(served):
    """The real pulsar-client's Client on the served URL."""
    import pulsar

    c = pulsar.Client(served.url, operation_timeout_seconds=30, logger=_quiet_logger())
    yield c
    c.close()


def _quiet_logger():
    import logging

    log = logging.getLogger("pulsar-client-in-tests")
    log.setLevel(logging.ERROR)
    return log
