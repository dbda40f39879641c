"""The store's clock (pulsarctl clock): real, or simulated and moved by hand; moving it fires
what became due, as a daemon tick would."""
from __future__ import annotations

from pulsarctl import clock as clocks
from pulsarctl.broker import fired
from pulsarctl.broker.admin.base import Noun
from pulsarctl.errors import InvalidValue, PulsarctlError
from pulsarctl.wake import wakes


def _now(ctx) -> int:
    return ctx.now


class StoreClock(Noun):
    __slots__ = ()

    def now(self) -> int:
        """The store's clock in ms, a simulated one included (what a token's expiry is checked
        against)."""
        return self._broker._read(_now)

    def state(self) -> dict:
        b = self._broker

        def run(ctx):
            state = b.env.get(ctx.txn, "meta", b"clock") or {"mode": "real"}
            mode = state.get("mode", "real")
            if mode == "simulated" and not clocks.in_range(ctx.now):
                # Saved by a version that did not check: say so rather than fail to show it.
                raise PulsarctlError(
                    f"the store's simulated clock is at {ctx.now!r} epoch milliseconds, which "
                    f"is no time a clock can show (1970 to {clocks.MAX_TEXT})",
                    hint="go back to the real clock with `pulsarctl clock real`, or set a time "
                    "with `pulsarctl clock simulate --at TIME`")
            return {"mode": mode, "now": ctx.now}
        return b._read(run)

    def simulate(self, at_ms: int | None):
        b = self._broker

        def run(ctx):
            at = ctx.now if at_ms is None else at_ms
            if not clocks.in_range(at):
                raise InvalidValue(f"the clock cannot be set to {at!r} epoch milliseconds: "
                                   f"times run from 1970 to {clocks.MAX_TEXT}",
                                   hint="give a time with --at (ISO 8601 or epoch milliseconds)")
            b.env.put(ctx.txn, "meta", b"clock", {"mode": "simulated", "at": at})
            return at
        return b._write(run)

    @wakes
    def advance(self, ms: int, by_kind: bool = False):
        """Move the simulated clock forward and fire what became due, as a daemon tick would.
        Returns the new time; with by_kind, (new time, what fired by kind: broker/fired.py)."""
        if ms < 0:
            raise InvalidValue("the clock cannot go back", hint="give a positive duration")
        b = self._broker

        def run(ctx):
            state = b.env.get(ctx.txn, "meta", b"clock")
            if not state or state.get("mode") != "simulated":
                raise InvalidValue("the store runs on the real clock",
                                   hint="switch with `pulsarctl clock simulate` first")
            at = state["at"] + ms
            if not clocks.in_range(at):
                raise InvalidValue(f"the clock cannot move past {clocks.MAX_TEXT}: {ms} ms "
                                   f"from now is after it", hint="advance it by less")
            state["at"] = at
            b.env.put(ctx.txn, "meta", b"clock", state)
            # What the move makes deliverable, counted as the clock moves (in this transaction).
            ctx.now = at
            return at, (fired.came_due(ctx, ms) if by_kind else None)
        at, came = b._write(run)
        # As a daemon tick would: consumers whose lease ended are disconnected, what became due
        # fires now, TTL and retention apply.
        chores = b.chores
        swept = chores.sweep_consumers()
        timer_kinds = chores.fire_due(by_kind=by_kind)
        pol = chores.enforce_policies()
        if not by_kind:
            return at
        return at, {**fired.empty(), **timer_kinds, **came, "ttl": pol.get("expired", 0),
                    "lease": swept}

    def real(self):
        b = self._broker
        b._write(lambda ctx: b.env.put(ctx.txn, "meta", b"clock", {"mode": "real"}))
