"""The one place that reads the time.

A store runs on the system clock or on a simulated clock persisted in the store (`clock
simulate`), so tests and lessons see timers fire without waiting. Waiting itself (idle
timeouts, polling for new messages) is always real time: monotonic() and sleep() live here too.
"""
from __future__ import annotations

import time as _time


class Clock:
    simulated = False

    def now_ms(self) -> int:
        raise NotImplementedError


class SystemClock(Clock):
    def now_ms(self) -> int:
        return _time.time_ns() // 1_000_000


class SimulatedClock(Clock):
    simulated = True

    def __init__(self, at_ms: int):
        self.at_ms = int(at_ms)

    def now_ms(self) -> int:
        return self.at_ms

    def advance(self, ms: int) -> int:
        self.at_ms += int(ms)
        return self.at_ms


SYSTEM = SystemClock()

# The latest time a clock may be at: 9999-12-31T23:59:59.999Z, the last one ISO 8601 writes
# with four-digit years (and Python's datetime at all). Times and clock moves past it are
# refused before anything is saved, so every time the store holds can be shown.
MAX_MS = 253_402_300_799_999
MAX_TEXT = "9999-12-31T23:59:59.999Z"


def in_range(ms) -> bool:
    """Whether ms (epoch milliseconds) is a time a clock may be at: 1970 to MAX_MS."""
    return isinstance(ms, int) and 0 <= ms <= MAX_MS


def from_state(state) -> Clock:
    """The clock a store's persisted state describes: None or {'mode': 'real'} -> system."""
    if state and state.get("mode") == "simulated":
        return SimulatedClock(state["at"])
    return SYSTEM


def monotonic() -> float:
    return _time.monotonic()


def sleep(seconds: float) -> None:
    _time.sleep(seconds)


def wall_ms() -> int:
    """Real time even on a simulated store (for process start times and real waits)."""
    return _time.time_ns() // 1_000_000
