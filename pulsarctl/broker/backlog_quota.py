"""Backlog quotas (Pulsar's BacklogQuotaManager): a limit on the backlog of the slowest durable
subscription, by estimated size (destination_storage) or by the age of its oldest unacknowledged
message (message_age), checked when a producer publishes. What happens when it is reached:
producer_exception fails the publish, producer_request_hold makes the producer wait (the client
retries until its send timeout), consumer_backlog_eviction acknowledges the oldest messages of
the subscriptions over the limit (down to 90% of a size limit, as Pulsar's eviction does)."""
from __future__ import annotations

from store import codec
from pulsarctl.broker import policies
from pulsarctl.errors import BacklogQuotaExceeded, BacklogQuotaHold

EVICTION_TARGET = 0.9


def backlog_bytes(info, start: int) -> int:
    """Estimated bytes of the entries at offsets >= start, from the ledgers' sizes (as Pulsar's
    estimated backlog size)."""
    total = 0
    for _lid, first, n, size, *_rest in info.ledgers:
        k = first + n - max(start, first)
        if k > 0 and n:
            total += size if k >= n else size * k // n
    return total


def oldest_age_ms(ctx, info, c) -> int:
    o = c.mark_delete + 1
    if o >= info.next_offset or o < info.first_offset:
        return 0
    return ctx.now - codec.decode(ctx.ledgers.read(ctx.txn, info, o))[0]


def check(ctx, info) -> None:
    """Before a publish to info: apply the topic's backlog quotas."""
    quotas = policies.effective(ctx, info.name, policies.BACKLOG_QUOTA)
    if not quotas:
        return
    cursors = ctx.cursors.list(ctx.txn, info.ml_id)
    if not cursors:
        return  # no subscription, no backlog
    for typ, q in quotas.items():
        if typ == "destination_storage":
            limit = q["limitSize"]
            over = [c for c in cursors if backlog_bytes(info, c.mark_delete + 1) > limit]
            what = f"backlog of {{}} bytes is over the limit of {limit} bytes"
            measure = lambda c: backlog_bytes(info, c.mark_delete + 1)  # noqa: E731
        else:
            limit = q["limitTime"] * 1000
            over = [c for c in cursors if oldest_age_ms(ctx, info, c) > limit]
            what = f"oldest unacknowledged message is {{}} ms old, over the limit of {limit} ms"
            measure = lambda c: oldest_age_ms(ctx, info, c)  # noqa: E731
        if not over:
            continue
        if q["policy"] == "consumer_backlog_eviction":
            for c in over:
                _evict(ctx, info, c, typ, limit)
            continue
        cls = BacklogQuotaHold if q["policy"] == "producer_request_hold" else BacklogQuotaExceeded
        worst = max(over, key=measure)
        raise cls(f"backlog quota {typ} exceeded on {info.name}: subscription "
                  f"'{worst.name}': " + what.format(measure(worst))
                  + f" (policy {q['policy']})")


def _evict(ctx, info, c, typ: str, limit: int) -> None:
    from pulsarctl.broker import cursor_admin  # lazy: one-shot produce never needs it

    if typ == "message_age":
        cursor_admin.expire(ctx, info, c, max(limit, 1))
        return
    target = int(limit * EVICTION_TARGET)
    lo, hi = c.mark_delete + 1, info.next_offset
    while lo < hi:  # the first offset from which the backlog fits the target
        mid = (lo + hi) // 2
        if backlog_bytes(info, mid) <= target:
            hi = mid
        else:
            lo = mid + 1
    if lo - 1 > c.mark_delete:
        ctx.cursors.ack_cumulative(ctx.txn, c, lo - 1)
        cursor_admin._advanced(ctx, info, c)
