"""The timer daemon: one active per store, elected by an exclusive file lock in the store
directory. It fires whatever is due (nack delays, ack timeouts) and disconnects consumers whose
leases ended, every tick. Correctness never depends on it: every timer is durable and also fired
lazily by the commands that touch a subscription; the daemon only makes things happen on time
when nobody is running commands.

Files in the store directory: daemon.lock (the election), daemon.json (pid, standby, lastTick,
timersDue: what `daemon status` reads), daemon.log.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import signal

from pulsarctl import clock as clocks
from pulsarctl.errors import LockBusy, NotFound, PulsarctlError

LOCK, STATE, LOG = "daemon.lock", "daemon.json", "daemon.log"
DEFAULT_TICK_S = 1.0


class DaemonNotRunning(NotFound):
    hint = "start one with `pulsarctl daemon start`"


def paths(store: str) -> dict:
    return {k: os.path.join(store, v) for k, v in (("lock", LOCK), ("state", STATE), ("log", LOG))}


def try_lock(store: str):
    """The lock's file descriptor if we now hold it, else None."""
    fd = os.open(paths(store)["lock"], os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        raise


def read_state(store: str) -> dict:
    try:
        with open(paths(store)["state"]) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return {}


def write_state(store: str, state: dict) -> None:
    p = paths(store)["state"]
    tmp = p + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, p)  # readers never see half a file


def log(store: str, line: str) -> None:
    with open(paths(store)["log"], "a") as f:
        f.write(f"{clocks.wall_ms()} {line}\n")


def status(store: str) -> dict:
    """running, pid, standby, lastTick, timersDue; DaemonNotRunning (exit 3) when none runs."""
    fd = try_lock(store)
    if fd is not None:
        os.close(fd)  # we got it: nobody holds it
        raise DaemonNotRunning(f"no daemon runs for the store at {store}")
    st = read_state(store)
    return {"running": True, "pid": st.get("pid"), "standby": False,
            "lastTick": st.get("lastTick"), "timersDue": st.get("timersDue", 0)}


class Daemon:
    def __init__(self, broker, store: str, tick_s: float = DEFAULT_TICK_S):
        self.broker = broker
        self.store = store
        self.tick_s = tick_s
        self.stopping = False

    def _on_term(self, signum, frame):
        self.stopping = True

    def run(self, standby: bool = False, ready=None) -> int:
        """Hold the lock and tick until SIGTERM/SIGINT. Without standby a held lock is
        LockBusy (exit 5); with it, wait for the lock and take over within one tick."""
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        fd = try_lock(self.store)
        if fd is None and not standby:
            raise LockBusy(f"a daemon already runs for the store at {self.store} "
                           f"(pid {read_state(self.store).get('pid')})",
                           hint="use --standby to wait and take over when it stops")
        if fd is None:
            log(self.store, f"standby pid {os.getpid()}")
            if ready:
                ready(True)
            while fd is None and not self.stopping:
                clocks.sleep(self.tick_s)
                fd = try_lock(self.store)
            if fd is None:
                return 0
        elif ready:
            ready(False)
        log(self.store, f"active pid {os.getpid()}")
        try:
            while not self.stopping:
                self.tick()
                clocks.sleep(self.tick_s)
        finally:
            try:
                os.remove(paths(self.store)["state"])
            except FileNotFoundError:
                pass
            log(self.store, f"stopped pid {os.getpid()}")
            os.close(fd)
        return 0

    def tick(self) -> int:
        try:
            fired = self.broker.fire_due()
            swept = self.broker.sweep_consumers()
            due = self.broker.timers_due()
        except PulsarctlError as exc:
            log(self.store, f"tick failed: {exc.line()}")
            fired, swept, due = 0, 0, 0
        from pulsarctl.messages import iso_ms

        write_state(self.store, {"pid": os.getpid(), "lastTick": iso_ms(clocks.wall_ms()),
                                 "timersDue": due})
        if fired or swept:
            log(self.store, f"fired {fired} timer(s), disconnected {swept} consumer(s)")
        return fired
