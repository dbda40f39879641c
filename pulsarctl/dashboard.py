"""The data behind `pulsarctl top`: the broker's snapshot of a namespace (broker/snapshot.py, one
read transaction), who runs the timers (a `pulsarctl daemon` or a `pulsarctl serve` holding the
daemon lock, pulsarctl/daemon.py), and rates from the snapshot before.

It sits beside daemon.py, above the broker: the broker knows nothing of the daemon's lock file,
and the CLI only renders what take() returns."""
from __future__ import annotations

from pulsarctl import clock as clocks
from pulsarctl import daemon as daemons
from pulsarctl.broker import snapshot as snapshots
from pulsarctl.errors import DaemonNotRunning

ONCE_GAP_S = 1.0   # `top --once`: the two snapshots its rates come from are this far apart


def runner_kind(argv: list[str]) -> str:
    """What a process holding the daemon lock is, from its command line: "serve" (serve runs
    the timers while it holds the lock), "daemon", or "process" (anything else: a test, a
    script using pulsarctl.daemon)."""
    words = [a for a in argv if not a.startswith("-")]
    if "serve" in words:
        return "serve"
    if "daemon" in words:
        return "daemon"
    return "process"


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def daemon_state(store: str) -> dict:
    """Who runs the store's timers: {"running", "kind" (daemon, serve or process; None when
    nobody does), "pid", "lastTick", "timersScheduled", "timersDue", "standbyPids"}, as
    `pulsarctl daemon status` reads them, without its exit 3 when none runs."""
    try:
        st = daemons.status(store)
    except DaemonNotRunning:
        return {"running": False, "kind": None, "pid": None, "lastTick": None,
                "timersScheduled": None, "timersDue": None, "standbyPids": daemons.standbys(store)}
    pid = st.get("pid")
    return {"running": True, "kind": runner_kind(_argv(pid)) if pid else "process", "pid": pid,
            "lastTick": st.get("lastTick"), "timersScheduled": st.get("timersScheduled"),
            "timersDue": st.get("timersDue"), "standbyPids": st.get("standbyPids", [])}


class Dashboard:
    """Snapshots of one scope, each with its rates since the one before (the first has none)."""

    def __init__(self, broker, namespace: str | None = None):
        self.broker = broker
        self.namespace = namespace
        self._prev = None
        self._prev_mono = None

    def take(self) -> dict:
        cur = self.broker.snapshot(self.namespace)
        mono = clocks.monotonic()
        gap = None if self._prev_mono is None else mono - self._prev_mono
        snapshots.rates(self._prev, cur, gap)
        cur = {"namespace": cur["namespace"], "clock": cur["clock"],
               "daemon": daemon_state(self.broker.path), "intervalMs": cur["intervalMs"],
               "topics": cur["topics"], "deadLetterTopics": cur["deadLetterTopics"]}
        self._prev, self._prev_mono = cur, mono
        return cur


def once(broker, namespace: str | None = None, gap_s: float = ONCE_GAP_S) -> dict:
    """One snapshot with rates: two taken gap_s apart (real seconds), the second returned."""
    d = Dashboard(broker, namespace)
    d.take()
    clocks.sleep(gap_s)
    return d.take()
