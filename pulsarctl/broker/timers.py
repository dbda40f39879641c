"""The durable schedule that everything due-at-a-time goes through (nack delays and ack
timeouts). A timer is a record (cursor id, due ms, offset) -> [kind, managed-ledger id,
subscription, consumer, delivered at]: kind is NACK (nacks.py) or ACK_TIMEOUT (unacked.py),
consumer and delivered at are copied from the message's pending record. It fires lazily when a
command touches its subscription, or when the clock is advanced, or from the daemon —
correctness never depends on who fires it, nor on whether the consumer that set it is still
there."""
from __future__ import annotations

from store import codec, keys

_triple, _untriple = keys.triple, keys.unpack_triple
NACK = "nack"


def schedule(ctx, c, due: int, offset: int, kind: str, consumer: str | None = None,
             delivered_at: int | None = None) -> None:
    ctx.txn.put(_triple(c.id, max(0, due), offset),
                codec.encode([kind, c.ml_id, c.name, consumer, delivered_at]),
                db=ctx.env.db["timers"])


def take_due(ctx, cid: int, now: int, limit: int = 100_000) -> list[tuple[int, int, list]]:
    """Remove and return (due, offset, [kind, ml id, subscription, consumer, delivered at]) of
    the timers of cid due at or before now."""
    cur = ctx.txn.cursor(db=ctx.env.db["timers"])
    prefix = keys.u64(cid)
    at, vals = [], []
    if not cur.set_range(prefix):
        return []
    while len(at) < limit:
        k = cur.key()
        if not k or not k.startswith(prefix):
            break
        _c, due, o = _untriple(k)
        if due > now:
            break
        at.append((due, o))
        vals.append(cur.value())
        if not cur.delete():
            break
    return [(due, o, v) for (due, o), v in zip(at, codec.decode_many(vals))]


def next_due(ctx, cid: int) -> int | None:
    """When the first timer of cid is due (None when it has none)."""
    cur = ctx.txn.cursor(db=ctx.env.db["timers"])
    prefix = keys.u64(cid)
    if not cur.set_range(prefix) or not cur.key().startswith(prefix):
        return None
    return _untriple(cur.key())[1]


def pending(ctx, cid: int) -> dict[int, list[tuple[int, list]]]:
    """offset -> [(due, value)] for every timer of cid, earliest first."""
    out: dict = {}
    cur = ctx.txn.cursor(db=ctx.env.db["timers"])
    prefix = keys.u64(cid)
    if cur.set_range(prefix):
        for k, v in cur:
            if not k.startswith(prefix):
                break
            _c, due, o = _untriple(k)
            out.setdefault(o, []).append((due, codec.decode(v)))
    return out


def due_subscriptions(ctx, now: int) -> list[tuple[int, str]]:
    """(managed-ledger id, subscription) of every subscription with a timer due by now."""
    out = []
    cur = ctx.txn.cursor(db=ctx.env.db["timers"])
    if not cur.first():
        return out
    while True:
        k = cur.key()
        if not k:
            break
        cid, due, _o = _untriple(k)
        if due <= now:
            value = codec.decode(cur.value())
            out.append((value[1], value[2]))
        # Jump to the next cursor id: timers of one cursor are sorted by due time.
        if not cur.set_range(keys.u64(cid + 1)):
            break
    return out


def count(ctx, cid: int | None = None, due_by: int | None = None) -> int:
    n = 0
    cur = ctx.txn.cursor(db=ctx.env.db["timers"])
    prefix = keys.u64(cid) if cid is not None else b""
    if cur.set_range(prefix):
        for k in cur.iternext(values=False):
            if not k.startswith(prefix):
                break
            if due_by is None or _untriple(k)[1] <= due_by:
                n += 1
    return n


def clear(ctx, cid: int) -> None:
    ctx.env.delete_prefix(ctx.txn, "timers", keys.u64(cid))
