"""Retention (Pulsar's managed-ledger trimming under a RetentionPolicies): a ledger every
subscription has acknowledged is deleted, oldest first, once it is older than the retention
time or the topic is over the retention size (either limit; -1 means no limit, and -1/-1 keeps
everything); the default 0/0 deletes it at once. As in Pulsar, only whole closed ledgers go, so
the ledger taking appends stays. LMDB reuses the freed pages for new entries.

A topic without any subscription keeps its messages: nothing has acknowledged them, and we do not
drop unread messages (Pulsar would, after retention)."""
from __future__ import annotations

from store.ledger_row import rows as ledger_rows
from pulsarctl.broker import history, policies

_MB = 1024 * 1024


def trim(ctx, info) -> int:
    """Delete the ledgers retention no longer covers, and the message history of trimmed
    entries once it is older than messageHistoryRetention (or the retention time, if longer).
    Returns how many ledgers went."""
    n = _trim_ledgers(ctx, info)
    if info.first_offset > 0 and ctx.write:
        minutes = policies.effective(ctx, info.name, policies.RETENTION)["retentionTimeInMinutes"]
        history.trim(ctx, info, history.retention_ms(ctx, minutes))
    return n


def _trim_ledgers(ctx, info) -> int:
    if len(info.ledgers) < 2:
        return 0
    cursors = ctx.cursors.list(ctx.txn, info.ml_id)
    if not cursors:
        if ctx.broker.non_persistent:  # nobody listens: nobody will ever get these
            return len(ctx.ledgers.trim(ctx.txn, info, info.next_offset))
        return 0
    low = min(c.mark_delete for c in cursors)
    pol = policies.effective(ctx, info.name, policies.RETENTION)
    minutes, mb = pol["retentionTimeInMinutes"], pol["retentionSizeInMB"]
    if minutes < 0 and mb < 0:
        return 0
    size, cut = info.total_size, None
    rows = ledger_rows(info)
    for i in range(len(rows) - 1):
        first, n, ledger_size = rows[i].first_offset, rows[i].entries, rows[i].size
        if first + n - 1 > low:
            break  # not acknowledged by every subscription yet
        closed_at = rows[i + 1].created_ms  # a ledger closes when the next one is created
        expired = minutes >= 0 and ctx.now - closed_at > minutes * 60_000
        over = mb >= 0 and size > mb * _MB
        if not (expired or over):
            break
        size -= ledger_size
        cut = first + n
    if cut is None:
        return 0
    history.keep_published(ctx, info, cut)
    return len(ctx.ledgers.trim(ctx.txn, info, cut))
