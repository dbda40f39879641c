"""The simulated clock's starting time in every test: 2026-01-01T00:00:00Z."""
START_MS = 1_767_225_600_000


class FakeTime:
    """A stand-in for pulsarctl.clock's real-time waits (monotonic() and sleep(), which idle
    timeouts, polls and send timeouts use): time moves only when the code under test sleeps,
    at once, and what a test scheduled with at() happens when that time is reached. So a test
    of how long something waits needs no waiting and cannot fail on a busy machine."""

    def __init__(self, start: float = 1000.0):
        self.now = start
        self.slept: list[float] = []
        self._due: list[tuple[float, object]] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(0.0, seconds)
        due = [fn for at, fn in self._due if at <= self.now]
        self._due = [(at, fn) for at, fn in self._due if at > self.now]
        for fn in due:
            fn()

    def at(self, when: float, fn) -> None:
        """Call fn() once the clock reaches when (during the sleep that gets there)."""
        self._due.append((when, fn))
