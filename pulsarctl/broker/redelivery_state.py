"""What the redelivery controller (redelivery.py) keeps per subscription, stored: the redelivery
counts and the replay set.

- Redelivery counts, per subscription and message (database "redelivery", key (cursor id,
  offset) -> count). Pulsar keeps them in the dispatcher's memory (InMemoryRedeliveryTracker),
  only for Shared and Key_Shared, and loses them on restart; here they survive every process
  and are kept on every subscription type, so a dead-letter policy works on Exclusive and
  Failover too. They count as Pulsar counts: a nack, an ack timeout or an explicit
  redelivery adds one; a consumer that goes away does not.
- The replay set (database "replay", key (cursor id, offset) -> the redelivery count to
  deliver it with): messages to deliver again before new ones, as Pulsar's dispatcher keeps
  them (MessageRedeliveryController's messagesToRedeliver): redelivered ones, those a consumer
  that went away held, and on Key_Shared those read for another consumer's key.

It sits below subscriptions.py and the dispatchers, which read and clear it (an ack forgets
its messages' counts and replays); the controller, which decides and fires, sits above them.
"""
from __future__ import annotations

from store import codec, keys

_pair, _unpair = keys.pair, keys.unpack_pair


# -- redelivery counts ------------------------------------------------------------------------
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


# -- the replay set ---------------------------------------------------------------------------
def replay_items(ctx, cid: int):
    """(offset, redelivery count) of the replay set, in offset order."""
    cur = ctx.env.cursor(ctx.txn, "replay")
    prefix = keys.u64(cid)
    if cur.set_range(prefix):
        for k, v in cur:
            if not k.startswith(prefix):
                break
            yield _unpair(k)[1], codec.decode(v)


def replay_has_any(ctx, cid: int) -> bool:
    return next(replay_items(ctx, cid), None) is not None


def replay_count(ctx, cid: int) -> int:
    return sum(1 for _ in replay_items(ctx, cid))


def replay_get(ctx, cid: int, offset: int) -> int | None:
    """The count the message at offset is to be delivered again with, or None if it is not in
    the replay set."""
    raw = ctx.txn.get(_pair(cid, offset), db=ctx.env.db["replay"])
    return None if raw is None else codec.decode(raw)


def replay_member(ctx, cid: int):
    """A function offset -> whether the message is in the replay set (nothing decoded)."""
    txn, db, pair = ctx.txn, ctx.env.db["replay"], _pair

    def member(offset: int) -> bool:
        return txn.get(pair(cid, offset), db=db) is not None
    return member


def replay_add(ctx, cid: int, offset: int, count: int = 0) -> None:
    """Put the message at offset in the replay set, to go out with count."""
    ctx.txn.put(_pair(cid, offset), codec.encode(count), db=ctx.env.db["replay"])


def replay_remove(ctx, cid: int, offset: int) -> None:
    ctx.txn.delete(_pair(cid, offset), db=ctx.env.db["replay"])


def replay_remove_through(ctx, cid: int, offset: int) -> None:
    """Take out of the replay set the messages at or below offset (a cumulative ack)."""
    for o, _ in list(replay_items(ctx, cid)):
        if o > offset:
            break
        replay_remove(ctx, cid, o)


def replay_clear(ctx, cid: int) -> None:
    ctx.env.delete_prefix(ctx.txn, "replay", keys.u64(cid))


def take_replay(ctx, info, c, max_n: int) -> list[tuple[int, int]]:
    """Shared: take up to max_n messages out of the replay set, in offset order, as (offset,
    redelivery count); those acked since, or trimmed from the topic, are dropped on the way."""
    out = []
    txn, rdb, cid = ctx.txn, ctx.env.db["replay"], c.id
    for o, rc in list(replay_items(ctx, cid)):
        if len(out) >= max_n:
            break
        txn.delete(_pair(cid, o), db=rdb)
        if ctx.cursors.is_acked(txn, c, o) or not info.contains(o):
            continue
        out.append((o, rc))
    return out
