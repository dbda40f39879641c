"""Shared: messages spread over the consumers; redeliveries (the replay set) go first, then
new entries from the read position. A pending message is never handed to a second consumer."""
from __future__ import annotations

from pulsarctl.broker import delayed, redelivery_state
from pulsarctl.broker.dispatch import exclusive


def select(ctx, info, c, consumer, live, max_n):
    if len(live) > 1:
        # Pull-based fairness: a consumer takes its share of the receiver queue per fetch, so
        # concurrent consumers interleave (Pulsar's round robin over permits).
        batch = ctx.setting("dispatcherMaxRoundRobinBatchSize")
        max_n = min(max_n, max(batch, max_n // len(live)))
    out = [(o, 0) for o in delayed.take_due(ctx, c, max_n, delayed.cutoff(ctx, info.name))]
    out.extend(redelivery_state.take_replay(ctx, info, c, max_n - len(out)))
    if len(out) < max_n:
        # A due message just taken from the delayed index may also lie ahead of a rewound read
        # position: it goes out once, from the index.
        due = {o for o, _rc in out}
        out.extend(x for x in exclusive.take_new(ctx, info, c, max_n - len(out))
                   if x[0] not in due)
    return out
