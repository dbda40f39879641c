"""Negative acknowledgement: redelivery after the nack delay, or after
MultiplierRedeliveryBackoff's delay for the message's redelivery count, then (past
maxRedeliverCount) the dead letter topic.

Pulsar's client keeps the nack timer in memory, and it dies with the client; here it is a
durable timer (timers.py), so a nack from one shell command is redelivered however many
processes come and go: a nacked message whose consumer has gone (closed, crashed, its lease
ended) stays held, neither redelivered nor counted, until its timer fires, and then comes back
counted (or goes to the dead letter topic), whichever process fires it: a later command on the
subscription, `clock advance`, the daemon or `daemon run-once`."""
from __future__ import annotations

from store import codec, keys
from pulsarctl.broker import deadletter, redelivery, subscriptions as subs, timers
from pulsarctl.broker.backoff import backoff_next
from pulsarctl.broker.unacked import ACK_TIMEOUT

DEFAULT_NACK_DELAY_MS = 60_000
MIN_NACK_DELAY_MS = 100          # NegativeAcksTracker.MIN_NACK_DELAY_MS
NACK_PRECISION_BITS = 8          # negativeAckPrecisionBitCnt: deadlines in 256 ms buckets


def delay_ms(policy: dict, count: int) -> int:
    backoff = policy.get("negativeAckBackoff")
    if backoff:
        return backoff_next(backoff[0], backoff[1], backoff[2], count)
    return max(policy.get("negativeAckRedeliveryDelayMs", DEFAULT_NACK_DELAY_MS), MIN_NACK_DELAY_MS)


def nack(ctx, info, c, offsets: list[int]) -> tuple[int, set]:
    """Schedule redelivery of the messages a consumer holds. Returns (nacked, holders).
    A message nobody holds (never received, or already acked) is left alone: Pulsar never
    redelivers or dead-letters a message that was not received."""
    policy = c.props.get("policy") or {}
    pending = subs.pending_map(ctx, c.id)
    done, holders = 0, set()
    mask = ~((1 << NACK_PRECISION_BITS) - 1)
    for o in offsets:
        prec = pending.get(o)
        if prec is None or ctx.cursors.is_acked(ctx.txn, c, o):
            continue
        rc = prec[2] if len(prec) > 2 else 0
        due = (ctx.now + delay_ms(policy, rc)) & mask
        timers.schedule(ctx, c, due, o, timers.NACK, prec[0], prec[1])
        # Marked nacked: its ack timeout no longer applies (a nack cancels it, as in Pulsar).
        # (A batch's size, [4], stays: the unacked limits count its messages.)
        ctx.txn.put(keys.pair(c.id, o), codec.encode([prec[0], prec[1], rc, 1, *prec[4:5]]),
                    db=ctx.env.db["pending"])
        holders.add(prec[0])
        done += 1
    if done and not c.props.get(subs.NACKED):
        c.props[subs.NACKED] = True  # a rewind keeps nacked messages held (subs.rewind)
        ctx.cursors.save(ctx.txn, c)
    return done, holders


def fire(ctx, info, c) -> int:
    """Fire the subscription's due timers (nack delays and ack timeouts): the broker's
    redeliverUnacknowledgedMessages(ids).
    Returns how many messages were redelivered or dead-lettered."""
    first = timers.next_due(ctx, c.id)
    if first is None or first > ctx.now:
        return 0
    from pulsarctl.broker import consumers

    # Consumers that are gone are disconnected first: their pending messages go back, but
    # the ones they nacked stay held for their timers (consumers.remove, subscriptions.rewind),
    # which fire here whoever holds them now. A nack timer does not die with its consumer.
    consumers.sweep(ctx, info, c)
    due = timers.take_due(ctx, c.id, ctx.now)
    pending = subs.pending_map(ctx, c.id)
    todo, holders = [], {}
    for _due, o, value in due:
        holder = value[3] if len(value) > 3 else None
        prec = pending.get(o)
        if ctx.cursors.is_acked(ctx.txn, c, o) or not info.contains(o):
            continue
        if not applies(value, prec):
            continue  # redelivered (or, for an ack timeout, nacked) since: the timer is void
        todo.append(o)
        holders[o] = holder
    if todo:
        redeliver(ctx, info, c, todo, holders)
    return len(todo)


def applies(value: list, prec: list | None) -> bool:
    """Whether a timer still speaks for the delivery that is pending: same consumer, same
    delivery; an ack timeout also ends with a nack (the nack's own timer takes over)."""
    if prec is None or prec[0] != (value[3] if len(value) > 3 else None):
        return False
    delivered_at = value[4] if len(value) > 4 else None
    if delivered_at is not None and prec[1] != delivered_at:
        return False
    return not (value[0] == ACK_TIMEOUT and len(prec) > 3 and prec[3])


def redeliver(ctx, info, c, offsets: list[int], holders: dict | None = None) -> None:
    """Count a redelivery for each message, or past the limit move it to the dead letter topic
    (publish and ack in this transaction). Shared and Key_Shared redeliver just these messages;
    Exclusive and Failover redeliver every unacked message, in order (a cursor rewind)."""
    policy = c.props.get("policy") or {}
    max_rc = policy.get("maxRedeliverCount")
    typ = c.props.get("type", subs.EXCLUSIVE)
    pdb, rdb = ctx.env.db["pending"], ctx.env.db["replay"]
    c.props["counted"] = True  # acks now also forget counts (see subscriptions.ack)
    again = []
    for o in offsets:
        rc = redelivery.get(ctx, c.id, o)
        if max_rc and rc >= max_rc:
            # A chunk already moved with an earlier chunk of its message is acked.
            if not ctx.cursors.is_acked(ctx.txn, c, o):
                deadletter.move(ctx, info, c, o, (holders or {}).get(o))
            continue
        n = redelivery.increment(ctx, c.id, o, rc)
        again.append(o)
        if typ not in subs.SINGLE_ACTIVE:
            k = keys.pair(c.id, o)
            ctx.txn.delete(k, db=pdb)
            # Past the read position (a nack held across a rewind) the message is read again
            # in order, with its count; before it, it goes to the replay set.
            if o < c.read_position:
                ctx.txn.put(k, codec.encode(n), db=rdb)
    if again and typ in subs.SINGLE_ACTIVE:
        subs.rewind(ctx, c, release=again)
    ctx.cursors.save(ctx.txn, c)
