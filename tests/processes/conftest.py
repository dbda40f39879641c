"""Fixtures of the process tests."""
from __future__ import annotations

import os
import subprocess

import pytest

from procs import argv, reap


@pytest.fixture
def env(store_path):
    """The environment of a `python -m pulsarctl` process on this test's store."""
    return dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")


@pytest.fixture
def spawn(env):
    """Start `python -m pulsarctl ARGS` in the background; every process started here is killed
    and reaped when the test ends, whatever happened."""
    started: list[subprocess.Popen] = []

    def start(*args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
        p = subprocess.Popen(argv(*args), env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                             text=True)
        started.append(p)
        return p

    yield start
    reap(started)
