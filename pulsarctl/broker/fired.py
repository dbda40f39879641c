"""What a move of the clock fires, by kind: what `clock advance` (and `daemon run-once`) say.

    nack        nacked messages whose redelivery delay ran out (redelivered or dead-lettered)
    ackTimeout  delivered messages whose ack timeout ran out (redelivered or dead-lettered)
    delayed     messages held back by delayed delivery whose deliver-at came
    retry       the same on a retry letter topic: reconsume-later delays that ran out
    ttl         messages expired by the message TTL (counted per subscription)
    lease       consumers disconnected because their lease ended (or their process is gone)

The timer kinds are tallied by what firing did, not by re-deciding which timers still apply
(that is redelivery.fire's business): a timer's message counts when its redelivery count went up or
it was acknowledged (moved to the dead letter topic) while the subscription's timers fired.
"""
from __future__ import annotations

from store import keys
from pulsarctl.broker import delayed, redelivery_state, timers
from pulsarctl.broker.subscription_state import state
from pulsarctl.errors import InvalidTopicName
from pulsarctl.message_events import ACK_TIMEOUT, NACK
from pulsarctl.names import RETRY_SUFFIX, parse_topic

_triple, _untriple = keys.triple, keys.unpack_triple
KINDS = (NACK, ACK_TIMEOUT, "delayed", "retry", "ttl", "lease")
TIMER_KINDS = (NACK, ACK_TIMEOUT)
LABELS = {NACK: "nack", ACK_TIMEOUT: "ack timeout", "delayed": "delayed", "retry": "retry",
          "ttl": "TTL", "lease": "lease"}


def empty(kinds=KINDS) -> dict:
    return {k: 0 for k in kinds}


def text(fired: dict) -> str:
    """'2 nack, 1 ack timeout, 3 delayed' (the kinds that fired), or 'nothing'."""
    parts = [f"{fired[k]} {LABELS.get(k, k)}" for k in KINDS if fired.get(k)]
    return ", ".join(parts) or "nothing"


# -- timers (nack delays and ack timeouts) ----------------------------------------------------
def before_firing(ctx, c) -> dict:
    """{offset: (kind, redelivery count, acked)} for each message of c with a timer due by now
    (a nack before an ack timeout: a nack voids the ack timeout of its delivery)."""
    out: dict = {}
    for o, due in timers.pending(ctx, c.id).items():
        kinds = [timer.kind for at, timer in due if at <= ctx.now]
        if kinds:
            kind = timers.NACK if timers.NACK in kinds else kinds[0]
            out[o] = (kind, redelivery_state.get(ctx, c.id, o),
                      ctx.cursors.is_acked(ctx.txn, c, o))
    return out


def tally(ctx, c, before: dict, into: dict) -> None:
    """Add to into, by kind, the messages of before that firing redelivered or dead-lettered."""
    for o, (kind, rc, acked) in before.items():
        if acked:
            continue
        if ctx.cursors.is_acked(ctx.txn, c, o) or redelivery_state.get(ctx, c.id, o) > rc:
            into[kind] = into.get(kind, 0) + 1


# -- delayed delivery -------------------------------------------------------------------------
def came_due(ctx, moved_ms: int) -> dict:
    """{"delayed": n, "retry": m}: held messages that the last moved_ms of the clock (up to
    ctx.now) made deliverable, as the next fetch will take them (delayed.cutoff: now + tick).
    A message on a retry letter topic (reconsume-later) counts as retry."""
    out = {"delayed": 0, "retry": 0}
    cur = ctx.txn.cursor(db=ctx.env.db["delayed"])
    if not cur.first() or moved_ms <= 0:
        return out
    subs_by_id, retry_names = _cursors(ctx)
    while True:
        k = cur.key()
        if not k:
            break
        cid = _untriple(k)[0]
        found = subs_by_id.get(cid)
        if found is not None:
            name, c = found
            hi = delayed.cutoff(ctx, name)
            if hi < delayed.NEVER_HELD:  # with delayed delivery off, nothing was held
                kind = "retry" if _is_retry(name, retry_names) else "delayed"
                out[kind] += _count(ctx, cur, c, max(0, hi - moved_ms) + 1, hi)
        if not cur.set_range(keys.u64(cid + 1)):
            break
    return out


def _count(ctx, cur, c, lo: int, hi: int) -> int:
    """Entries of c's delayed index due in [lo, hi], not acknowledged."""
    n = 0
    prefix = keys.u64(c.id)
    if not cur.set_range(_triple(c.id, lo, 0)):
        return 0
    for k in cur.iternext(values=False):
        if not k.startswith(prefix):
            break
        _cid, at, o = _untriple(k)
        if at > hi:
            break
        if not ctx.cursors.is_acked(ctx.txn, c, o):
            n += 1
    return n


def _cursors(ctx):
    """{cursor id: (topic partition name, cursor)} and the retry letter topics that
    subscription policies name."""
    by_id, retry_names = {}, set()
    for name, ml_id in list(ctx.ledgers.names(ctx.txn)):
        for c in ctx.cursors.list(ctx.txn, ml_id):
            by_id[c.id] = (name, c)
            rt = state(c).policy.get("retryLetterTopic")
            if rt:
                try:
                    retry_names.add(str(parse_topic(rt)))
                except InvalidTopicName:
                    pass  # a policy naming no valid topic retries nothing
    return by_id, retry_names


def _is_retry(name: str, retry_names: set) -> bool:
    base = str(parse_topic(name).partitioned_topic_name)
    return base.endswith(RETRY_SUFFIX) or base in retry_names or name in retry_names
