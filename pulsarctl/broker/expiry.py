"""Message TTL (Pulsar's PersistentMessageExpiryMonitor): a message has expired when
now > publishTime + TTL; expiring mark-deletes every subscription up to its newest expired
message. It runs on each daemon tick (Pulsar: every messageExpiryCheckIntervalInMinutes), on
`topics expire-messages`, and lazily whenever a consumer fetches from the subscription."""
from __future__ import annotations

from pulsarctl.broker import policies, cursor_admin


def ttl_ms(ctx, info) -> int:
    return (policies.effective(ctx, info.name, policies.TTL) or 0) * 1000


def apply(ctx, info, cursors=None) -> int:
    """Expire what the topic's TTL says on its subscriptions (or the given ones)."""
    ttl = ttl_ms(ctx, info)
    if not ttl:
        return 0

    n = 0
    for c in cursors if cursors is not None else ctx.cursors.list(ctx.txn, info.ml_id):
        if c.mark_delete + 1 < info.next_offset:
            n += cursor_admin.expire(ctx, info, c, ttl)
    return n
