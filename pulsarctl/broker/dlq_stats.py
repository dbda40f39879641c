"""`dlq stats`: the waiting dead letters of one DLQ counted by REAL_TOPIC, REAL_SUBSCRIPTION,
age and a property.

The age buckets, the "(none)" value and the order of the counts are the command's contract,
shared with a remote Pulsar's DLQ (pulsarctl/remote/dlq.py), which counts the same way from
messages it reads over the wire: they have one home here, apart from the reading of a DLQ
(dlq.py) that the local count builds on.
"""
from __future__ import annotations

from pulsarctl.broker.dlq import read_messages, unhandled
from pulsarctl.messages import iso_ms
from pulsarctl.names import REAL_SUBSCRIPTION, REAL_TOPIC

# `dlq stats` age buckets, by time since the message landed in the DLQ (its publish time there).
AGE_BUCKETS = (("<1m", 60_000), ("<1h", 3_600_000), ("<1d", 86_400_000),
               ("<7d", 7 * 86_400_000))
AGE_OLDEST = ">=7d"
NO_VALUE = "(none)"


def age_bucket(age_ms: int) -> str:
    for name, limit in AGE_BUCKETS:
        if age_ms < limit:
            return name
    return AGE_OLDEST


def stats(ctx, t, info, c, by_property: str | None) -> dict:
    by_topic: dict = {}
    by_sub: dict = {}
    by_prop: dict = {}
    ages = {name: 0 for name, _ in AGE_BUCKETS}
    ages[AGE_OLDEST] = 0
    total, oldest, newest = 0, None, None
    for m in (m for o in unhandled(ctx, info, c) for m in read_messages(ctx, info, t, c, o)):
        props = m.properties_ or {}
        total += 1
        oldest = m.publish_time if oldest is None else oldest
        newest = m.publish_time
        for counts, key in ((by_topic, REAL_TOPIC), (by_sub, REAL_SUBSCRIPTION),
                            (by_prop, by_property)):
            if key is not None:
                v = props.get(key, NO_VALUE)
                counts[v] = counts.get(v, 0) + 1
        ages[age_bucket(max(0, ctx.now - m.publish_time))] += 1
    doc = {
        "topic": str(t), "total": total,
        "oldestPublishTime": iso_ms(oldest), "newestPublishTime": iso_ms(newest),
        "byRealTopic": _sorted(by_topic), "byRealSubscription": _sorted(by_sub),
        "byAge": ages,
    }
    if by_property is not None:
        doc["byProperty"] = {"name": by_property, "counts": _sorted(by_prop)}
    return doc


def _sorted(counts: dict) -> dict:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

