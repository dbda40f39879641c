"""Fixtures of the process tests."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from procs import reap


def _argv(*args) -> list[str]:
    return [sys.executable, "-m", "pulsarctl", *args]


@pytest.fixture
def spawn(store_path):
    """Start `python -m pulsarctl ARGS` in the background; every process started here is killed
    and reaped when the test ends, whatever happened."""
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
    started: list[subprocess.Popen] = []

    def start(*args):
        p = subprocess.Popen(_argv(*args), env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(p)
        return p

    yield start
    reap(started)
