"""Helpers of the multi-process tests: start `python -m pulsarctl`, reap what a test started,
wait on several processes at once without one blocking on a full pipe, and wait for a condition.

No test sleeps to let something happen: it polls for the thing itself with wait_for(), whose
bound is generous (60 s by default), so it only fails when the thing never happens, however
loaded the machine is."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

# A wait for something that should take milliseconds: long enough for a machine with every
# core busy, short enough that a test that truly hangs still ends.
PATIENCE_S = 60.0


def argv(*args) -> list[str]:
    """The command line of `python -m pulsarctl ARGS` with this interpreter."""
    return [sys.executable, "-m", "pulsarctl", *args]


def pok(r):
    """A finished subprocess.run() of the CLI exited 0 (else its output is the message)."""
    assert r.returncode == 0, (r.args[3:] if isinstance(r.args, list) else r.args,
                               r.returncode, r.stdout, r.stderr)
    return r


def wait_for(predicate, what: str, timeout: float = PATIENCE_S, interval: float = 0.02,
             diag=None):
    """Poll predicate() until it returns something truthy, and return that. After timeout
    seconds the test fails with what it waited for (and diag(), if given, of what it saw)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}"
                                 + (f"; {diag()}" if diag else ""))
        time.sleep(interval)


def gone(pid: int) -> bool:
    """The process has exited (no such process, or a zombie waiting to be reaped)."""
    return proc_state(pid) in (None, "Z", "X")


def proc_state(pid: int) -> str | None:
    """The kernel's one-letter state of pid (R, S, D, Z, ...), None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat[stat.rindex(")") + 2:].split()[0]


def signal_pending(pid: int, sig: int) -> bool:
    """sig was sent to pid and not yet delivered (its handler has not run). False once the
    process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    masks = [int(line.split()[1], 16) for line in status.splitlines()
             if line.startswith(("SigPnd:", "ShdPnd:"))]
    return any(m & (1 << (sig - 1)) for m in masks)


def flock_waiters(path: str) -> set[int]:
    """Pids blocked in flock() on the file at path, read from /proc/locks ("->" marks one)."""
    st = os.stat(path)
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = set()
    for line in Path("/proc/locks").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 7 and parts[1] == "->" and parts[2] == "FLOCK" and parts[6] == want:
            pids.add(int(parts[5]))
    return pids


def reap(procs) -> None:
    """Kill (if still running) and reap every process; close its pipes."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for f in (p.stdin, p.stdout, p.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass


class Collector:
    """communicate() with several processes at once, each in a thread, started now: the test
    goes on (waits for a condition, sends a signal) while their output is read, so none
    blocks on a full pipe. results() joins them."""

    def __init__(self, procs, inputs=None, timeout: float = PATIENCE_S):
        self.procs = list(procs)
        self.timeout = timeout
        inputs = inputs or [None] * len(self.procs)
        self._results: list = [None] * len(self.procs)
        self._threads = [threading.Thread(target=self._one, args=(i, inputs[i]), daemon=True)
                         for i in range(len(self.procs))]
        for t in self._threads:
            t.start()

    def _one(self, i, data):
        try:
            self._results[i] = self.procs[i].communicate(data, timeout=self.timeout)
        except BaseException as exc:  # reported by results()
            self._results[i] = exc

    def results(self) -> list:
        """[(stdout, stderr), ...]; a process that does not finish fails the test."""
        for t in self._threads:
            t.join(self.timeout + 5)
        for p, r in zip(self.procs, self._results):
            if r is None or isinstance(r, BaseException):
                raise AssertionError(f"process {p.args[3:]} did not finish: {r!r}")
        return self._results


def communicate_all(procs, inputs=None, timeout=PATIENCE_S):
    """communicate() with several processes at once (each in a thread). Returns
    [(stdout, stderr), ...]; a process that does not finish fails the test."""
    return Collector(procs, inputs, timeout).results()
