"""The negative-acks tracker (Pulsar's NegativeAcksTracker): a nack schedules the message's
redelivery after the nack delay, or after MultiplierRedeliveryBackoff's delay for its
redelivery count; when the timer fires, the redelivery controller (redelivery.py) redelivers
it, or past maxRedeliverCount moves it to the dead letter topic.

Pulsar's client keeps the nack timer in memory, and it dies with the client; here it is a
durable timer (timers.py), so a nack from one shell command is redelivered however many
processes come and go: a nacked message whose consumer has gone (closed, crashed, its lease
ended) stays held, neither redelivered nor counted, until its timer fires, and then comes back
counted (or goes to the dead letter topic), whichever process fires it: a later command on the
subscription, `clock advance`, the daemon or `daemon run-once`."""
from __future__ import annotations

from store import codec, keys
from pulsarctl.broker import history, redelivery, subscriptions as subs, timers
from pulsarctl.broker.subscription_state import state
from pulsarctl.broker.backoff import backoff_next

DEFAULT_NACK_DELAY_MS = 60_000
MIN_NACK_DELAY_MS = 100          # NegativeAcksTracker.MIN_NACK_DELAY_MS
NACK_PRECISION_BITS = 8          # negativeAckPrecisionBitCnt: deadlines in 256 ms buckets

# Firing the timers and redelivering is the redelivery controller's (redelivery.py); these
# names are kept for the callers that still use them from here.
fire, redeliver, applies = redelivery.fire, redelivery.redeliver, redelivery.applies


def delay_ms(policy: dict, count: int) -> int:
    backoff = policy.get("negativeAckBackoff")
    if backoff:
        return backoff_next(backoff[0], backoff[1], backoff[2], count)
    return max(policy.get("negativeAckRedeliveryDelayMs", DEFAULT_NACK_DELAY_MS), MIN_NACK_DELAY_MS)


def nack(ctx, info, c, offsets: list[int]) -> tuple[int, set]:
    """Schedule redelivery of the messages a consumer holds. Returns (nacked, holders).
    A message nobody holds (never received, or already acked) is left alone: Pulsar never
    redelivers or dead-letters a message that was not received."""
    s = state(c)
    policy = s.policy
    pending = subs.pending_map(ctx, c.id)
    done, holders = 0, set()
    mask = ~((1 << NACK_PRECISION_BITS) - 1)
    for o in offsets:
        prec = pending.get(o)
        if prec is None or ctx.cursors.is_acked(ctx.txn, c, o):
            continue
        wait = delay_ms(policy, prec.redelivery_count)
        due = (ctx.now + wait) & mask
        history.record(ctx, info, o, history.NACKED, c.name, prec.consumer,
                       prec.redelivery_count, delay=wait, due=due,
                       **{history.BEYOND: history.NACK_NOTE})
        timers.schedule(ctx, c, due, o, timers.NACK, prec.consumer, prec.delivered_at)
        # Marked nacked: its ack timeout no longer applies (a nack cancels it, as in Pulsar).
        # (A batch's size stays: the unacked limits count its messages.)
        ctx.txn.put(keys.pair(c.id, o), codec.encode(prec._replace(nacked=1).to_stored()),
                    db=ctx.env.db["pending"])
        holders.add(prec.consumer)
        done += 1
    if done and not s.nacked:
        s.nacked = True  # a rewind keeps nacked messages held (subs.rewind)
        ctx.cursors.save(ctx.txn, c)
    return done, holders


def asked(ctx, info, c, consumer: str | None, offsets: list[int]) -> int:
    """A client asked for the redelivery of messages it holds (a wire consumer's nack: its
    client kept the nack delay: consuming.redeliver_unacked with ids): each goes back now,
    counted, or past maxRedeliverCount to the dead letter topic. Returns how many."""
    pending = subs.pending_map(ctx, c.id)
    todo, holders, reasons = [], {}, {}
    for o in offsets:
        prec = pending.get(o)
        if prec is None or (consumer is not None and prec.consumer != consumer) \
                or ctx.cursors.is_acked(ctx.txn, c, o):
            continue
        held = max(0, ctx.now - (prec.delivered_at or ctx.now))
        history.record(ctx, info, o, history.NACKED, c.name, prec.consumer,
                       prec.redelivery_count, byClient=True, held=held)
        todo.append(o)
        holders[o] = prec.consumer
        reasons[o] = f"nacked at {history.clock_text(ctx.now)} by its client, after holding " \
                     f"it {history.duration_text(held)}"
    if todo:
        redelivery.redeliver(ctx, info, c, todo, holders, reasons)
    return len(todo)
