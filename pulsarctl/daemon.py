"""The timer daemon: one active per store, elected by an exclusive file lock in the store
directory. It fires whatever is due (nack delays, ack timeouts) and disconnects consumers whose
leases ended, every tick. Correctness never depends on it: every timer is durable and also fired
lazily by the commands that touch a subscription; the daemon only makes things happen on time
when nobody is running commands.

Files in the store directory: daemon.lock (the election), daemon.json (pid, standby, lastTick,
timersScheduled, timersDue: what `daemon status` reads), daemon.log. Each is private (0600), as
the store's own files are: a log line may name topics and subscriptions.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import signal

from pulsarctl import clock as clocks
from pulsarctl.errors import DaemonNotRunning, LockBusy, PulsarctlError, InvalidValue
from pulsarctl.broker.fired import text
from pulsarctl.messages import iso_ms

LOCK, STATE, LOG = "daemon.lock", "daemon.json", "daemon.log"
DEFAULT_TICK_S = 1.0


def paths(store: str) -> dict:
    return {k: os.path.join(store, v) for k, v in (("lock", LOCK), ("state", STATE), ("log", LOG))}


def acquire(store: str, patience_s: float = 0.5):
    """try_lock, retried for a moment: where /proc/locks is missing, `daemon status` and `stop`
    probe the lock by taking it briefly, and a daemon starting then must not take the probe for
    a daemon."""
    end = clocks.monotonic() + patience_s
    while True:
        fd = try_lock(store)
        if fd is not None or clocks.monotonic() >= end:
            return fd
        clocks.sleep(0.02)


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


def lock_holder(store: str) -> int | None:
    """The pid holding the daemon lock, or None: read from /proc/locks, so asking never takes
    the lock (a daemon starting at that instant is not turned away). Where /proc/locks cannot
    be read, fall back to trying the lock (0 stands for a holder of unknown pid)."""
    path = paths(store)["lock"]
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as f:
            table = f.read()
    except OSError:
        fd = try_lock(store)
        if fd is None:
            return 0
        os.close(fd)
        return None
    for line in table.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; "->" marks a waiter, not a holder
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == want and parts[4].isdigit():
            return int(parts[4])
    return None


def read_state(store: str) -> dict:
    try:
        with open(paths(store)["state"]) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return {}


def _private(path: str, flags: int):
    """A file object on path opened with flags, created 0600; one an older version made
    readable by others (0644) is made private too."""
    fd = os.open(path, flags | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
        return os.fdopen(fd, "w" if flags & os.O_TRUNC else "a")
    except BaseException:
        os.close(fd)
        raise


def write_state(store: str, state: dict) -> None:
    p = paths(store)["state"]
    tmp = p + ".tmp"
    with _private(tmp, os.O_WRONLY | os.O_TRUNC) as f:
        json.dump(state, f)
    os.replace(tmp, p)  # readers never see half a file


def open_log(store: str):
    """daemon.log for appending (private: 0600), for log lines and a started daemon's output."""
    return _private(paths(store)["log"], os.O_WRONLY | os.O_APPEND)


def log(store: str, line: str) -> None:
    with open_log(store) as f:
        f.write(f"{clocks.wall_ms()} {line}\n")


def _standby_marker(store: str, pid: int) -> str:
    return os.path.join(store, f"daemon.standby.{pid}")


def stand_by(store: str) -> str:
    """Say (in daemon.log and with a marker file that `daemon status` lists) that this process
    waits for the lock; the marker's path, for stop_standing_by."""
    log(store, f"standby pid {os.getpid()}")
    marker = _standby_marker(store, os.getpid())
    _private(marker, os.O_WRONLY).close()
    return marker


def stop_standing_by(marker: str) -> None:
    try:
        os.remove(marker)
    except FileNotFoundError:
        pass


def took_over(store: str) -> None:
    """Log that this process, holding the lock now, is the active daemon."""
    log(store, f"active pid {os.getpid()}")


def step_down(store: str, fd: int) -> None:
    """Leave as a stopping daemon does: daemon.json removed (status then says none runs),
    a log line, and the lock let go of last."""
    try:
        os.remove(paths(store)["state"])
    except FileNotFoundError:
        pass
    log(store, f"stopped pid {os.getpid()}")
    os.close(fd)


def standbys(store: str) -> list[int]:
    """Pids of the standby daemons waiting for the lock (markers of dead ones are dropped)."""
    out = []
    for name in os.listdir(store):
        if not name.startswith("daemon.standby."):
            continue
        try:
            pid = int(name.rsplit(".", 1)[1])
            os.kill(pid, 0)
            out.append(pid)
        except (ValueError, ProcessLookupError):
            try:
                os.remove(os.path.join(store, name))
            except OSError:
                pass
        except PermissionError:
            out.append(pid)
    return sorted(out)


def status(store: str) -> dict:
    """running, pid, standby (a standby daemon is waiting), lastTick, timersScheduled (every
    timer the store holds) and timersDue (those due by the last tick, after it fired: left
    over only when firing failed); DaemonNotRunning (exit 3) when none runs."""
    holder = lock_holder(store)
    if holder is None:
        raise DaemonNotRunning(f"no daemon runs for the store at {store}")
    st = read_state(store)
    waiting = standbys(store)
    return {"running": True, "pid": st.get("pid") or holder or None, "lockHolder": holder or None,
            "standby": bool(waiting),
            "standbyPids": waiting, "lastTick": st.get("lastTick"),
            "timersScheduled": st.get("timersScheduled", 0), "timersDue": st.get("timersDue", 0)}


def timer_text(kinds: dict) -> str:
    """'2 nack, 1 ack timeout' (what fired), or 'none'."""
    t = text(kinds)
    return "none" if t == "nothing" else t


def check_tick(tick_s: float) -> float:
    if not 0.01 <= tick_s <= 3600:
        raise InvalidValue(f"--tick must be between 0.01 and 3600 seconds, not {tick_s}")
    return tick_s


class Daemon:
    def __init__(self, broker, store: str, tick_s: float = DEFAULT_TICK_S):
        self.broker = broker
        self.store = store
        self.tick_s = tick_s
        self.stopping = False
        self._last_now = None   # the store clock at the last tick (for what came due since)

    def _on_term(self, signum, frame):
        self.stopping = True

    def run(self, standby: bool = False, ready=None) -> int:
        """Hold the lock and tick until SIGTERM/SIGINT. Without standby a held lock is
        LockBusy (exit 5); with it, wait for the lock and take over within one tick."""
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        fd = try_lock(self.store) if standby else acquire(self.store)
        if fd is None and not standby:
            raise LockBusy(f"a daemon already runs for the store at {self.store} "
                           f"(pid {read_state(self.store).get('pid')})",
                           hint="use --standby to wait and take over when it stops")
        if fd is None:
            marker = stand_by(self.store)
            if ready:
                ready(True)
            try:
                while fd is None and not self.stopping:
                    self._sleep()
                    fd = try_lock(self.store)
            finally:
                stop_standing_by(marker)
            if fd is None:
                return 0
        elif ready:
            ready(False)
        took_over(self.store)
        try:
            while not self.stopping:
                self.tick()
                self._sleep()
        finally:
            step_down(self.store, fd)
        return 0

    def _sleep(self) -> None:
        """One tick, in slices, so SIGTERM stops the daemon promptly whatever the tick."""
        end = clocks.monotonic() + self.tick_s
        while not self.stopping:
            left = end - clocks.monotonic()
            if left <= 0:
                return
            clocks.sleep(min(left, 0.05))

    def tick(self) -> int:
        try:
            kinds = self.broker.chores.fire_due(by_kind=True)
            # Delayed messages whose time came since the last tick: counted as fired, and the
            # waiting consumers woken (Pulsar's delayed delivery tick, 1 s by default).
            now = self.broker.clock.now()
            moved = int(self.tick_s * 1000) if self._last_now is None else now - self._last_now
            self._last_now = now
            for kind, n in self.broker.chores.came_due(moved).items():
                kinds[kind] = kinds.get(kind, 0) + n
            swept = self.broker.chores.sweep_consumers()
            pol = self.broker.chores.enforce_policies()
            counts = self.broker.chores.timer_counts()
        except PulsarctlError as exc:
            log(self.store, f"tick failed: {exc.line()}")
            kinds, swept, counts, pol = {}, 0, {}, {}

        fired = sum(kinds.values())
        write_state(self.store, {"pid": os.getpid(), "lastTick": iso_ms(clocks.wall_ms()),
                                 "timersScheduled": counts.get("timersScheduled", 0),
                                 "timersDue": counts.get("timersDue", 0)})
        if fired or swept or any(pol.values()):
            log(self.store, f"fired {fired} timer(s) ({timer_text(kinds)}), disconnected "
                f"{swept} consumer(s), expired {pol.get('expired', 0)}, trimmed "
                f"{pol.get('trimmedLedgers', 0)} ledger(s)")
        return fired
