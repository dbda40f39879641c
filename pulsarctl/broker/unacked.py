"""The unacked-message tracker (Pulsar's UnAckedMessageTracker), the ack timeout: a message
delivered and not acked within ackTimeout (plus the ack-timeout backoff for its redelivery
count) is redelivered, between timeout and timeout + tick after delivery. Ack and nack cancel
it. Disabled by default.

Pulsar's tracker is a ring of in-memory buckets in the client; here each delivery schedules a
durable timer rounded up to the tick (track), so the window is the same and survives
processes. When the timer is due, applies says whether it fires (the delivery it was set for is
still pending and was not nacked); the redelivery controller (redelivery.fire), which fires a
subscription's due timers of every kind in one pass, then redelivers the message."""
from __future__ import annotations

from pulsarctl.broker import timers
from pulsarctl.broker.backoff import backoff_next
from pulsarctl.broker.records import ACK_TIMEOUT, Pending, Timer
from pulsarctl.broker.subscription_state import state
from pulsarctl.errors import InvalidValue
MIN_ACK_TIMEOUT_MS = 1000        # Java: "Ack timeout should be greater than 1000 ms"
DEFAULT_TICK_MS = 1000
MIN_TICK_MS = 100


def check(timeout_ms: int | None, tick_ms: int | None) -> None:
    if timeout_ms is not None and 0 < timeout_ms < MIN_ACK_TIMEOUT_MS:
        raise InvalidValue("Ack timeout should be greater than 1000 ms",
                           hint="give --ack-timeout 1s or more (0 turns it off)")
    if tick_ms is not None and tick_ms < MIN_TICK_MS:
        raise InvalidValue("Ack timeout tick should be at least 100 ms")


def timeout_ms(policy: dict) -> int:
    """The ack timeout a subscription's policy (SubscriptionState.policy) sets, in ms; 0 when
    off. The one reader of it: dispatch asks this before it tracks anything."""
    return policy.get("ackTimeoutMs") or 0


def due(policy: dict, delivered_at: int, count: int) -> int | None:
    timeout = timeout_ms(policy)
    if timeout <= 0:
        return None
    tick = min(policy.get("ackTimeoutTickMs") or DEFAULT_TICK_MS, timeout)
    extra = 0
    backoff = policy.get("ackTimeoutBackoff")
    if backoff:
        extra = backoff_next(backoff[0], backoff[1], backoff[2], count)
    at = delivered_at + timeout + extra
    return -(-at // tick) * tick  # the next tick at or after: within [timeout, timeout + tick]


def track(ctx, c, consumer: str, delivered: list[tuple[int, int]]) -> None:
    """Schedule the ack timeout of messages just delivered: (offset, redelivery count)."""
    policy = state(c).policy
    if not timeout_ms(policy):
        return
    for o, rc in delivered:
        at = due(policy, ctx.now, rc)
        timers.schedule(ctx, c, at, o, ACK_TIMEOUT, consumer, ctx.now)


def applies(timer: Timer, prec: Pending | None) -> bool:
    """Whether a due ack timeout fires: the delivery it was set for is still pending, and it
    was not nacked since (a nack cancels the ack timeout; the nack's own timer takes over)."""
    return timer.same_delivery(prec) and not prec.nacked
