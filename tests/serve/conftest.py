"""Fixtures of the serve tests: `pulsarctl serve` as a real process on a free port of
127.0.0.1 (never 6650, so the tests can run beside a real serve), over this test's store."""
from __future__ import annotations

import os

import pytest

from procs import reap
from serve_procs import start_serve


@pytest.fixture
def env(store_path):
    return dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")


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
