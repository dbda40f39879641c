"""The daemon's files are private, as the store's own are (issue 14, item 9): daemon.log (and
daemon.json) are created 0600 whatever the umask, and a daemon.log an older version left
readable by others (0644) is made private, its lines kept."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from procs import argv, gone, pok, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="process liveness is read from /proc")


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _run(store_path, *args):
    """`python -m pulsarctl ARGS` under the usual umask (022), which would make files 0644."""
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
    return subprocess.run(argv(*args), capture_output=True, text=True, timeout=60, env=env,
                          umask=0o022)


@pytest.mark.parametrize("older_log", [False, True])
def test_daemon_start_keeps_its_log_and_state_private(store_path, older_log):
    pok(_run(store_path, "topics", "create", "t"))        # the store exists
    log = Path(store_path, "daemon.log")
    if older_log:
        log.write_text("1767225600000 active pid 1\n")
        os.chmod(log, 0o644)
    pid = None
    try:
        r = pok(_run(store_path, "daemon", "start", "--tick", "0.05"))
        pid = int(r.stdout.strip())
        state = Path(store_path, "daemon.json")
        wait_for(state.exists, "the daemon's first tick")
        assert _mode(log) == 0o600, oct(_mode(log))
        assert _mode(state) == 0o600, oct(_mode(state))
        text = log.read_text()
        assert f"active pid {pid}" in text
        if older_log:
            assert text.startswith("1767225600000 active pid 1\n")   # kept
        pok(_run(store_path, "daemon", "stop"))
        assert _mode(log) == 0o600 and f"stopped pid {pid}" in log.read_text()
    finally:
        if pid is not None and not gone(pid):
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: gone(pid), "the daemon to exit")
