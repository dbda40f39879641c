"""Fixtures of the remote tests: a real `pulsarctl serve` on free ports of 127.0.0.1 (one per
test module, over a store of its own), and the CLI run in-process against it with
--service-url/--admin-url (`rcli`), or against the same store locally (`lcli`), so the two
answers can be compared. Each test uses topics of its own names. The contexts file lives in a
temporary $XDG_CONFIG_HOME, never the user's."""
from __future__ import annotations

import os
import uuid

import pytest

from procs import reap
from serve_procs import start_serve


class Remote:
    def __init__(self, served, store: str):
        self.served = served
        self.store = store
        self.service_url = served.url
        self.admin_url = served.http_url

    def flags(self) -> list[str]:
        return ["--service-url", self.service_url, "--admin-url", self.admin_url]


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """A running serve for the module's tests; stopped (and reaped) after them."""
    store = str(tmp_path_factory.mktemp("remote") / "store")
    env = dict(os.environ, PULSARCTL_STORE=store, NO_COLOR="1")
    s = start_serve(env)
    yield Remote(s, store)
    if s.proc.poll() is None:
        s.stop()
    reap([s.proc])


@pytest.fixture(autouse=True)
def config_home(tmp_path, monkeypatch):
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


@pytest.fixture
def rcli(cli, remote):
    """The CLI against the remote serve: rcli('topics', 'list')."""
    def run(*args, input=None):
        return cli(*remote.flags(), *args, input=input)
    return run


@pytest.fixture
def lcli(cli, remote):
    """The CLI on the serve's own store, locally (the store is shared with serve)."""
    def run(*args, input=None):
        return cli("--store", remote.store, *args, input=input)
    return run


@pytest.fixture
def name():
    """A topic name of this test's own."""
    return f"t-{uuid.uuid4().hex[:10]}"
