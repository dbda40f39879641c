"""The durable schedule that everything due-at-a-time goes through (nack delays and ack
timeouts). A timer is stored under (cursor id, due ms, offset) as a records.Timer: [kind,
managed-ledger id, subscription, consumer, delivered at], five items (a timer from an older
release may end after the subscription); kind is NACK (set by nacks.py) or ACK_TIMEOUT (set by
unacked.py), consumer and delivered at are copied from the message's pending record. The
redelivery controller (redelivery.fire) fires them, lazily when a command touches its
subscription, or when the clock is advanced, or from the daemon — correctness never depends on
who fires it, nor on whether the consumer that set it is still there."""
from __future__ import annotations

from store import codec, keys
from pulsarctl.broker.records import ACK_TIMEOUT, NACK, Timer  # noqa: F401

_triple, _untriple = keys.triple, keys.unpack_triple


def schedule(ctx, c, due: int, offset: int, kind: str, consumer: str | None = None,
             delivered_at: int | None = None) -> None:
    timer = Timer(kind, c.ml_id, c.name, consumer, delivered_at)
    ctx.txn.put(_triple(c.id, max(0, due), offset), codec.encode(timer.to_stored()),
                db=ctx.env.db["timers"])


def take_due(ctx, cid: int, now: int, limit: int = 100_000) -> list[tuple[int, int, Timer]]:
    """Remove and return (due, offset, Timer) of the timers of cid due at or before now."""
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
    record = Timer.from_stored
    return [(due, o, record(v)) for (due, o), v in zip(at, codec.decode_many(vals))]


def next_due(ctx, cid: int) -> int | None:
    """When the first timer of cid is due (None when it has none)."""
    cur = ctx.txn.cursor(db=ctx.env.db["timers"])
    prefix = keys.u64(cid)
    if not cur.set_range(prefix) or not cur.key().startswith(prefix):
        return None
    return _untriple(cur.key())[1]


def pending(ctx, cid: int) -> dict[int, list[tuple[int, Timer]]]:
    """offset -> [(due, Timer)] for every timer of cid, earliest first."""
    out: dict = {}
    cur = ctx.txn.cursor(db=ctx.env.db["timers"])
    prefix = keys.u64(cid)
    if cur.set_range(prefix):
        for k, v in cur:
            if not k.startswith(prefix):
                break
            _c, due, o = _untriple(k)
            out.setdefault(o, []).append((due, Timer.from_stored(codec.decode(v))))
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
            timer = Timer.from_stored(codec.decode(cur.value()))
            out.append((timer.ml_id, timer.subscription))
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
