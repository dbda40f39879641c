"""The redelivery controller: which messages a subscription delivers again, when, and with what
count (Pulsar's dispatcher redeliverUnacknowledgedMessages, with its RedeliveryTracker and its
MessageRedeliveryController).

- The redelivery counts and the replay set are stored in redelivery_state.py (below
  subscriptions.py and the dispatchers, which read and clear them); its functions are named
  here too (get, lookup, increment, forget, clear, replay_items, take_replay...).
- fire: a subscription's due timers, the nack delays (set by the negative-acks tracker,
  nacks.py) and the ack timeouts (set by the unacked-message tracker, unacked.py), fire in one
  pass: each that still applies to the delivery it was set for (applies; an ack timeout asks
  unacked.applies) redelivers its message.
- redeliver: count one more redelivery, or past maxRedeliverCount move the message to the
  dead letter topic (deadletter.py); Shared and Key_Shared put it in the replay set, Exclusive and
  Failover rewind the cursor.

Timers fire lazily, when a command touches the subscription, when the clock is advanced, or
from the daemon; whoever fires them, the outcome is the same."""
from __future__ import annotations

from pulsarctl.broker import (
    consumers, deadletter, history, subscriptions as subs, timers, unacked,
)
from pulsarctl.broker.records import ACK_TIMEOUT, Pending, Timer
from pulsarctl.broker.subscription_state import state
# The stored state, named here as the controller's: callers read counts through this module.
from pulsarctl.broker.redelivery_state import (  # noqa: F401
    clear, forget, forget_through, get, has_any, increment, lookup, replay_add, replay_clear,
    replay_count, replay_get, replay_has_any, replay_items, replay_remove, take_replay,
)


def fire(ctx, info, c) -> int:
    """Fire the subscription's due timers (nack delays and ack timeouts): the broker's
    redeliverUnacknowledgedMessages(ids).
    Returns how many messages were redelivered or dead-lettered."""
    first = timers.next_due(ctx, c.id)
    if first is None or first > ctx.now:
        return 0
    # Consumers that are gone are disconnected first: their pending messages go back, but
    # the ones they nacked stay held for their timers (consumers.remove, subscriptions.rewind),
    # which fire here whoever holds them now. A nack timer does not die with its consumer.
    consumers.sweep(ctx, info, c)
    due = timers.take_due(ctx, c.id, ctx.now)
    pending = subs.pending_map(ctx, c.id)
    todo, holders, reasons = [], {}, {}
    policy = state(c).policy
    for _due, o, timer in due:
        prec = pending.get(o)
        if ctx.cursors.is_acked(ctx.txn, c, o) or not info.contains(o):
            continue
        if not applies(timer, prec):
            continue  # redelivered (or, for an ack timeout, nacked) since: the timer is void
        todo.append(o)
        holders[o] = timer.consumer
        if history.on(ctx):
            if timer.kind == ACK_TIMEOUT:
                why = f"ack timeout {history.duration_text(unacked.timeout_ms(policy))}"
                history.record(ctx, info, o, history.ACK_TIMEOUT, c.name, timer.consumer,
                               prec.redelivery_count if prec else None, reason=why)
            else:
                why = history.nack_reason(ctx, info.ml_id, o, c.name)
            reasons[o] = why
    if todo:
        redeliver(ctx, info, c, todo, holders, reasons)
    return len(todo)


def applies(timer: Timer, prec: Pending | None) -> bool:
    """Whether a timer still speaks for the delivery that is pending: same consumer, same
    delivery; an ack timeout also ends with a nack (the nack's own timer takes over)."""
    if timer.kind == ACK_TIMEOUT:
        return unacked.applies(timer, prec)
    return timer.same_delivery(prec)


def redeliver(ctx, info, c, offsets: list[int], holders: dict | None = None,
              reasons: dict | None = None, reason: str | None = None) -> None:
    """Count a redelivery for each message, or past the limit move it to the dead letter topic
    (publish and ack in this transaction). Shared and Key_Shared redeliver just these messages;
    Exclusive and Failover redeliver every unacked message, in order (a cursor rewind).
    reasons (by offset) or reason: why, for the message history (history.py)."""
    s = state(c)
    policy = s.policy
    max_rc = policy.get("maxRedeliverCount")
    typ = subs.type_of(c)
    s.counted = True  # acks now also forget counts (see subscriptions.ack)
    # Pulsar's Exclusive and Failover dispatchers count nothing: a count there is pulsarctl's.
    beyond = {history.BEYOND: history.COUNT_NOTE} if typ in subs.SINGLE_ACTIVE else {}
    again = []
    for o in offsets:
        rc = get(ctx, c.id, o)
        if max_rc and rc >= max_rc:
            # A chunk already moved with an earlier chunk of its message is acked.
            if not ctx.cursors.is_acked(ctx.txn, c, o):
                deadletter.move(ctx, info, c, o, (holders or {}).get(o))
            continue
        n = increment(ctx, c.id, o, rc)
        again.append(o)
        history.record(ctx, info, o, history.REDELIVERED, c.name, (holders or {}).get(o), n,
                       reason=(reasons or {}).get(o, reason), **beyond)
        if typ not in subs.SINGLE_ACTIVE:
            subs.forget_pending(ctx, c.id, o)
            # Past the read position (a nack held across a rewind) the message is read again
            # in order, with its count; before it, it goes to the replay set.
            if o < c.read_position:
                replay_add(ctx, c.id, o, n)
    # The subscription's redeliveries so far, a counter as out is: `top` shows its growth as
    # redeliveries per minute (broker/snapshot.py).
    s.redelivered += len(again)
    if again and typ in subs.SINGLE_ACTIVE:
        subs.rewind(ctx, c, release=again)
    ctx.cursors.save(ctx.txn, c)
