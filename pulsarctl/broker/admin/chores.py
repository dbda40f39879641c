"""The chores a daemon tick (and `clock advance`) runs over the whole store: fire due timers
(nack delays, ack timeouts), disconnect consumers that are gone, apply TTL and retention. Each
covers the store's non-persistent topics too, when their store exists."""
from __future__ import annotations

from pulsarctl.broker import consumers, expiry, fired, redelivery, retention, timers
from pulsarctl.broker import subscriptions as subs
from pulsarctl.broker.admin.base import Noun
from pulsarctl.wake import wakes


def _added(result, more):
    if isinstance(result, dict):
        return {k: result[k] + more.get(k, 0) for k in result}
    return result + more


class Chores(Noun):
    __slots__ = ()

    def _store_wide(self, chore, *args):
        """chore(broker, *args) on this store, then on its non-persistent one if open."""
        b = self._broker
        result = chore(b, *args)
        np = None if b.non_persistent else b.non_persistent_if_open()
        return result if np is None else _added(result, chore(np, *args))

    def fire_due(self, by_kind: bool = False):
        """Fire every timer due by now, store-wide (clock advance, daemon run-once). Returns
        how many messages were redelivered or dead-lettered; with by_kind, that count by timer
        kind ({"nack": n, "ackTimeout": m}, broker/fired.py)."""
        return self._store_wide(_fire_due, by_kind)

    def sweep_consumers(self) -> int:
        """Disconnect every consumer whose process is gone or whose lease ended, store-wide
        (the daemon's tick). Returns how many were disconnected."""
        return self._store_wide(_sweep_consumers)

    def enforce_policies(self) -> dict:
        """Message TTL and retention on every topic, store-wide (the daemon's tick)."""
        return self._store_wide(_enforce_policies)

    @wakes   # consumers waiting for them (serve's, which no longer poll) fetch now
    def came_due(self, moved_ms: int) -> dict:
        """Store-wide: {"delayed": n, "retry": m}, held messages (delayed delivery,
        reconsume-later) that the last moved_ms of the clock made deliverable (the daemon's
        tick)."""
        return self._store_wide(lambda b: b._read(fired.came_due, moved_ms))

    def timers_due(self) -> int:
        return self._store_wide(
            lambda b: b._read(lambda ctx: timers.count(ctx, due_by=ctx.now)))

    def timer_counts(self) -> dict:
        """Store-wide: timersScheduled (every timer: nack delays, ack timeouts) and timersDue
        (those of them due by now, which the next command or daemon tick fires)."""
        return self._store_wide(lambda b: b._read(
            lambda ctx: {"timersScheduled": timers.count(ctx),
                         "timersDue": timers.count(ctx, due_by=ctx.now)}))


@wakes
def _fire_due(b, by_kind):
    def run(ctx):
        n, kinds = 0, fired.empty(fired.TIMER_KINDS)
        for ml_id, sub in timers.due_subscriptions(ctx, ctx.now):
            try:
                info = ctx.ledgers.info(ctx.txn, ml_id)
            except KeyError:
                continue
            c = subs.get(ctx, info, sub)
            if c is not None:
                before = fired.before_firing(ctx, c) if by_kind else None
                n += redelivery.fire(ctx, info, c)
                if by_kind:
                    fired.tally(ctx, c, before, kinds)
        return kinds if by_kind else n
    return b._write(run)


@wakes
def _sweep_consumers(b) -> int:
    def run(ctx):
        n = 0
        for _name, ml_id in list(ctx.ledgers.names(ctx.txn)):
            info = ctx.ledgers.info(ctx.txn, ml_id)
            for c in ctx.cursors.list(ctx.txn, ml_id):
                before = len(consumers.records(ctx, c))
                if before:
                    n += before - len(consumers.sweep(ctx, info, c))
        return n
    return b._write(run)


def _enforce_policies(b) -> dict:
    def run(ctx):
        expired = trimmed = 0
        for _name, ml_id in list(ctx.ledgers.names(ctx.txn)):
            info = ctx.ledgers.info(ctx.txn, ml_id)
            before = len(info.ledgers)
            expired += expiry.apply(ctx, info)  # may trim, too, as any ack does
            retention.trim(ctx, info)
            trimmed += before - len(info.ledgers)
        return {"expired": expired, "trimmedLedgers": trimmed}
    return b._write(run)
