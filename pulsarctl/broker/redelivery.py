"""Redelivery counts, persisted per subscription and message.

Pulsar keeps them in the dispatcher's memory (InMemoryRedeliveryTracker), only for Shared and
Key_Shared, and loses them on restart; here they survive every process and are kept on every
subscription type, so a dead-letter policy works on Exclusive and Failover too. They count as
Pulsar counts: a nack, an ack timeout or an explicit redelivery adds one; a consumer that goes
away does not."""
from __future__ import annotations

from store import codec, keys

_pair, _unpair = keys.pair, keys.unpack_pair


def has_any(ctx, cid: int) -> bool:
    cur = ctx.txn.cursor(db=ctx.env.db["redelivery"])
    return cur.set_range(keys.u64(cid)) and cur.key()[:8] == keys.u64(cid)


def get(ctx, cid: int, offset: int) -> int:
    raw = ctx.txn.get(_pair(cid, offset), db=ctx.env.db["redelivery"])
    return 0 if raw is None else codec.decode(raw)


def lookup(ctx, cid: int):
    """A function offset -> count, cheap when the subscription has no counts at all."""
    if not has_any(ctx, cid):
        return None
    db, txn, decode = ctx.env.db["redelivery"], ctx.txn, codec.decode

    def count(offset: int) -> int:
        raw = txn.get(_pair(cid, offset), db=db)
        return 0 if raw is None else decode(raw)
    return count


def increment(ctx, cid: int, offset: int, current: int | None = None) -> int:
    """Count one more redelivery (current: the count, when the caller has just read it)."""
    n = (get(ctx, cid, offset) if current is None else current) + 1
    ctx.txn.put(_pair(cid, offset), codec.encode(n), db=ctx.env.db["redelivery"])
    return n


def forget(ctx, cid: int, offsets) -> None:
    db = ctx.env.db["redelivery"]
    for o in offsets:
        ctx.txn.delete(_pair(cid, o), db=db)


def forget_through(ctx, cid: int, offset: int) -> None:
    """Drop the counts at or below offset (acked by mark-delete)."""
    cur = ctx.txn.cursor(db=ctx.env.db["redelivery"])
    if not cur.set_range(_pair(cid, 0)):
        return
    while cur.key():
        c, o = _unpair(cur.key())
        if c != cid or o > offset:
            break
        if not cur.delete():
            break


def clear(ctx, cid: int) -> None:
    ctx.env.delete_prefix(ctx.txn, "redelivery", keys.u64(cid))
