"""Fixtures of the serve tests. `served`: what `pulsarctl serve` runs (pulsarctl/serve/run.py),
in a thread of the test process (tests/serve_inproc.py) on free ports of 127.0.0.1 (never
6650, so the tests can run beside a real serve), over this test's store: no process to start,
so a protocol test costs milliseconds more than its own work. `served_process`: `pulsarctl
serve` as a real process, for what only a process shows (its start-up output, SIGTERM and its
exit code, a crash, a second process on the store, the command line and --config as the CLI
reads them); each module that uses it says why."""
from __future__ import annotations

import os

import pytest

from procs import reap
from serve_inproc import serve_in_process
from serve_procs import quiet_logger, start_serve


@pytest.fixture
def env(store_path):
    return dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")


@pytest.fixture
def served(store_path):
    """serve, in this process, on free ports; stopped (its thread ended) after the test."""
    with serve_in_process(store_path) as s:
        yield s


@pytest.fixture
def served_process(env):
    """A running `pulsarctl serve` process on a free port; stopped (and reaped) after the test."""
    s = start_serve(env)
    yield s
    if s.proc.poll() is None:
        s.stop()
    reap([s.proc])


@pytest.fixture
def client(served):
    """The real pulsar-client's Client on the served URL."""
    import pulsar

    c = pulsar.Client(served.url, operation_timeout_seconds=30, logger=quiet_logger())
    yield c
    c.close()
