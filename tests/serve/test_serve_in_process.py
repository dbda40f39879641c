"""The serve the serve tests run in their own process (tests/serve_inproc.py) is what
`pulsarctl serve` runs, and leaves nothing behind: the admin REST API beside the binary
protocol, the timers under the daemon lock (held by this process, let go of at stop), no thread
left running after stop(); the errors its thread logs are in its log, as the command's stderr
would show them, so a test's "no Traceback" means something; a server that cannot start
raises at once, its store closed."""
from __future__ import annotations

import json
import os
import socket
import threading
import urllib.request

import pytest

from procs import PATIENCE_S, wait_for
from serve_inproc import serve_in_process, start_in_process
from pulsarctl.errors import PulsarctlError
from pulsarctl.serve.settings import ServeSettings


def _status(cli):
    r = cli("daemon", "status", "-o", "json")
    return r.exit_code, (json.loads(r.stdout) if r.exit_code == 0 else None)


def test_it_runs_what_serve_runs_and_stops_whole(cli, store_path):
    before = set(threading.enumerate())
    s = start_in_process(store_path)
    try:
        with urllib.request.urlopen(s.http_url + "/admin/v2/clusters", timeout=PATIENCE_S) as r:
            assert json.loads(r.read()) == ["standalone"]
        assert s.http_url in s.before and s.url.startswith("pulsar://127.0.0.1:")
        wait_for(lambda: (lambda st: st[1] and st[1]["pid"] == os.getpid()
                          and st[1]["lastTick"])(_status(cli)), "serve's timers to tick")
        assert s.proc.poll() is None
    finally:
        assert s.stop() == 0
    assert s.proc.poll() == 0
    assert _status(cli) == (3, None)   # the daemon lock let go of
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], left
    assert _open_files_under(store_path) == []
    assert not [line for line in s.log.finished() if "Traceback" in line], s.log.lines


def test_what_its_thread_logs_is_in_its_log(store_path):
    with serve_in_process(store_path) as s:
        loop = s._holder["loop"]

        def fail():
            try:
                raise ValueError("lost")
            except ValueError as exc:
                loop.call_exception_handler({"message": "Task exception was never retrieved",
                                             "exception": exc})
        loop.call_soon_threadsafe(fail)
        s.log.wait("Task exception was never retrieved")
    lines = s.log.finished()
    assert "Traceback (most recent call last):" in lines and "ValueError: lost" in lines, lines


def test_a_serve_that_cannot_listen_raises_and_leaves_no_thread(store_path):
    before = set(threading.enumerate())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PulsarctlError, match="cannot listen"):
            start_in_process(store_path, ServeSettings(port=port, http_port=0))
    wait_for(lambda: not [t for t in threading.enumerate() if t not in before and t.is_alive()],
             "the serve thread to end")
    assert _open_files_under(store_path) == []


def _open_files_under(path: str) -> list[str]:
    """The files under path this process holds open."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:   # closed meanwhile (the listing's own descriptor)
            continue
        if target.startswith(os.path.abspath(path) + os.sep):
            out.append(target)
    return out
