"""Shared fixtures. Real LMDB in tmp_path; a simulated clock instead of sleeping."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
import typer
from hypothesis import settings

from pulsarctl.broker import Broker
from pulsarctl.clock import SimulatedClock

from simclock import START_MS, FakeTime  # noqa: E402  (2026-01-01T00:00:00Z)

# Hypothesis: the same examples on every run (derandomized), so a run's outcome depends only on
# the code; HYPOTHESIS_PROFILE=explore draws new ones (and keeps failures in .hypothesis/).
settings.register_profile("deterministic", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

# Tests live in one folder per layer; each folder is also a marker, so a lane can be chosen with
# -m: the fast lane is `-m "store or broker or cli"`, the slow ones `processes` and `spark`;
# `serve` drives `pulsarctl serve` (in the test process, or a real one where the process is
# tested) with the real pulsar-client, `rest` the admin REST API
# against a real server on 127.0.0.1; `oracle` a real Apache Pulsar standalone, only when asked
# for, inside `tests/oracle/pulsar.sh netns` (tests/oracle/README.md).
# `remote`: the same commands against a remote Pulsar (a real `pulsarctl serve` on 127.0.0.1,
# through the real pulsar-client library and the admin REST API).
LAYERS = ("store", "broker", "cli", "processes", "spark", "serve", "rest", "remote", "oracle")


def pytest_configure(config):
    for layer in LAYERS:
        config.addinivalue_line("markers", f"{layer}: tests of tests/{layer}/")
    _share_bytecode(config)
    # A remote target in the caller's environment would send the suite's commands to it
    # (pulsarctl/config.py resolve_target): every test, and every process it starts, runs
    # without one unless it sets its own.
    for var in ("PULSAR_SERVICE_URL", "PULSAR_ADMIN_URL"):
        os.environ.pop(var, None)


def _share_bytecode(config) -> None:
    """The suite starts about two thousand Python processes (pulsarctl commands, serve, the
    daemon). With PYTHONDONTWRITEBYTECODE set, as on the project's machines, each of them would
    compile everything it imports anew; instead they share one bytecode cache for the run,
    under pytest's own temporary directory (PYTHONPYCACHEPREFIX: nothing is written into the
    checkout). What each process does is unchanged; only its start-up is cheaper."""
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    import tempfile

    prefix = tempfile.mkdtemp(prefix="pulsarctl-tests-pycache-")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    config.add_cleanup(lambda: __import__("shutil").rmtree(prefix, ignore_errors=True))


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = item.path.parts
        for layer in LAYERS:
            if layer in parts[-3:-1]:
                item.add_marker(getattr(pytest.mark, layer))
                break
        # The README runs the suite on two workers (pytest-xdist, --dist loadgroup). A group
        # runs whole on one worker: a module keeps its module-scoped fixtures (a serve, a
        # store) in one process, and the Spark folder shares one Spark session (one JVM).
        item.add_marker(pytest.mark.xdist_group(_worker_group(item)))
    # The Spark folder is the longest group (a JVM start, then two minutes of jobs): it goes
    # first, so one worker runs it while the other takes every other module.
    items.sort(key=lambda item: _worker_group(item) != "spark")


def _worker_group(item) -> str:
    return "spark" if "spark" in item.path.parts[-3:-1] else item.nodeid.split("::", 1)[0]


@pytest.fixture
def store_path(tmp_path):
    return str(tmp_path / "store")


@pytest.fixture
def clean_np_tmpfs(store_path):
    """For tests of non-persistent topics: their store lives on tmpfs, outside tmp_path
    (nonpersistent.path_for); it goes when the test ends."""
    yield
    import shutil

    from pulsarctl.broker import nonpersistent

    shutil.rmtree(nonpersistent.path_for(store_path), ignore_errors=True)


@pytest.fixture
def clock():
    return SimulatedClock(START_MS)


@pytest.fixture
def fake_time(monkeypatch):
    """pulsarctl.clock.monotonic()/sleep() on a FakeTime: real-time waits without waiting."""
    import pulsarctl.clock

    t = FakeTime()
    monkeypatch.setattr(pulsarctl.clock, "monotonic", t.monotonic)
    monkeypatch.setattr(pulsarctl.clock, "sleep", t.sleep)
    return t


@pytest.fixture
def broker(store_path, clock):
    b = Broker(store_path, clock)
    yield b
    b.close()


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


def _shim_app():
    """A one-command typer app that hands its raw arguments to pulsarctl's own run(), so tests
    go through typer's CliRunner *and* the one place errors become exit codes."""

    from pulsarctl.cli import app as app_module

    shim = typer.Typer(add_completion=False)

    @shim.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                    "help_option_names": []})
    def main(ctx: typer.Context):
        raise typer.Exit(app_module.run(list(ctx.args)))

    return shim


@pytest.fixture(autouse=True)
def cli_brokers(monkeypatch):
    """The stores the CLI opens in this test process (pulsarctl.cli.state.State.broker), closed
    when the test ends: a command's process would end with the command, and its store with it;
    here every test would otherwise leave an LMDB environment open, and a long run would run
    out of file descriptors. The cli fixture closes them after each command."""
    from pulsarctl.cli.state import State

    opened: list = []
    open_broker = State.broker

    def broker(self):
        b = open_broker(self)
        if not any(b is o for o in opened):
            opened.append(b)
        return b

    monkeypatch.setattr(State, "broker", broker)
    yield opened
    close_all(opened)


def close_all(brokers: list) -> None:
    while brokers:
        brokers.pop().close()


@pytest.fixture
def cli(store_path, monkeypatch, cli_brokers):
    """Run the CLI in-process through CliRunner: cli('produce', 't', '-m', 'x', input=None).
    The store a command opened is closed when it returns, as at the end of its process."""
    from typer.testing import CliRunner

    monkeypatch.setenv("PULSARCTL_STORE", store_path)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()
    shim = _shim_app()

    def run(*args, input=None) -> CliResult:
        try:
            res = runner.invoke(shim, list(args), input=input, catch_exceptions=False)
        finally:
            close_all(cli_brokers)
        return CliResult(res.exit_code, res.stdout, res.stderr)

    return run


@pytest.fixture
def run_proc(store_path):
    """Run the real entry point in a subprocess: run_proc('produce', 't', '-m', 'x')."""
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")

    def run(*args, input=None, timeout=60, env_extra=None):
        e = dict(env, **(env_extra or {}))
        return subprocess.run([sys.executable, "-m", "pulsarctl", *args], input=input,
                              capture_output=True, timeout=timeout, env=e,
                              text=not isinstance(input, bytes))
    return run
