"""Delayed delivery (deliverAfter / deliverAt) for Shared and Key_Shared subscriptions.

As Pulsar's DelayedDeliveryTracker, but durable: when dispatch reads an entry whose delivery
time is still ahead, it goes into an index keyed (cursor, deliver-at, offset) instead of to a
consumer; later fetches take what has come due, in message-id order. Exclusive and Failover
subscriptions deliver at once, as Pulsar's single-active-consumer dispatchers do.
"""
from __future__ import annotations

from store import keys
from pulsarctl.broker import policies

_triple, _untriple = keys.triple, keys.unpack_triple


NEVER_HELD = 1 << 62


def cutoff(ctx, topic: str) -> int:
    """Messages due before now + tick go out now (isDelayedDeliveryDeliverAtTimeStrict=false),
    so a message may arrive up to one tick early, as in Pulsar. With delayed delivery switched
    off by a namespace or topic policy, everything is due: held messages go out at once."""
    p = policies.effective(ctx, topic, policies.DELAYED)
    if not p.get("active", True):
        return NEVER_HELD
    return ctx.now + p.get("tickTime", ctx.setting("delayedDeliveryTickTimeMillis"))


def defer(ctx, cid: int, deliver_at: int, offset: int) -> None:
    ctx.txn.put(_triple(cid, deliver_at, offset), b"", db=ctx.env.db["delayed"])


def take_due(ctx, c, max_n: int, until: int) -> list[int]:
    """Remove and return up to max_n due offsets that are not acknowledged, in offset order."""
    db = ctx.env.db["delayed"]
    cur = ctx.txn.cursor(db=db)
    prefix = keys.u64(c.id)
    due = []
    if cur.set_range(prefix):
        while len(due) < max_n:
            k = cur.key()
            if not k or not k.startswith(prefix):
                break
            _cid, at, o = _untriple(k)
            if at > until:
                break
            if not cur.delete():
                if not ctx.cursors.is_acked(ctx.txn, c, o):
                    due.append(o)
                break
            if not ctx.cursors.is_acked(ctx.txn, c, o):
                due.append(o)
    due.sort()
    return due


def count(ctx, cid: int) -> int:
    n = 0
    cur = ctx.txn.cursor(db=ctx.env.db["delayed"])
    prefix = keys.u64(cid)
    if cur.set_range(prefix):
        for k in cur.iternext(values=False):
            if not k.startswith(prefix):
                break
            n += 1
    return n


def offsets(ctx, cid: int) -> set[int]:
    """The offsets held in the index for cursor cid."""
    out = set()
    cur = ctx.txn.cursor(db=ctx.env.db["delayed"])
    prefix = keys.u64(cid)
    if cur.set_range(prefix):
        for k in cur.iternext(values=False):
            if not k.startswith(prefix):
                break
            out.add(_untriple(k)[2])
    return out


def highest(ctx, cid: int) -> int | None:
    """The highest offset held in the index for cursor cid, or None."""
    return max(offsets(ctx, cid), default=None)


def clear(ctx, cid: int) -> None:
    ctx.env.delete_prefix(ctx.txn, "delayed", keys.u64(cid))
