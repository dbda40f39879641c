"""`dlq list`: finding the dead letter topics of a store, with what waits in each.

Pulsar keeps no list of dead letter topics: a DLQ is an ordinary topic that a client's dead
letter policy publishes to. A topic counts as one when a subscription's policy names it, when it
ends in -DLQ, when pulsarctl-dlq reads it, or when its first and last messages carry a
REAL_TOPIC naming another topic. This scan reads every topic's cursors and policies, which no
other `dlq` command needs: it is apart from the reading of one DLQ (dlq.py) it builds on.
"""
from __future__ import annotations

from pulsarctl.broker import subscriptions as subs, deadletter, policies, tenants
from pulsarctl.broker.dlq import SUBSCRIPTION, as_topic, read_message, unhandled, waiting
from pulsarctl.errors import UsageError
from pulsarctl.messages import iso_ms
from pulsarctl.names import (
    DLQ_SUFFIX, REAL_SUBSCRIPTION, REAL_TOPIC, RETRY_SUFFIX, TopicName, parse_topic,
)


def _origins(ctx) -> tuple[dict, set]:
    """The dead letter topic of every subscription with a dead letter or retry policy:
    {dlq name: (origin topic, subscription)}, and the names of retry letter topics."""
    dlqs, retries = {}, set()
    for name, ml_id in list(ctx.ledgers.names(ctx.txn)):
        for c in ctx.cursors.list(ctx.txn, ml_id):
            policy = subs.state(c).policy
            if not (policy.get("maxRedeliverCount") or policy.get("deadLetterTopic")
                    or policy.get("enableRetry")):
                continue
            try:
                dl = str(parse_topic(deadletter.dlq_topic(name, c.name, policy)))
                origin = str(parse_topic(name).partitioned_topic_name)
            except UsageError:
                continue
            dlqs.setdefault(dl, (origin, c.name))
            if policy.get("retryLetterTopic"):
                retries.add(policy["retryLetterTopic"])
    return dlqs, retries


def _looks_dead(ctx, info, t) -> bool:
    """The first and the last stored message both carry REAL_TOPIC naming another topic (a
    message replayed to its origin names the topic it is on)."""
    if info.entries <= 0:
        return False
    for o in {info.first_offset, info.last_offset}:
        props = read_message(ctx, info, t, o).properties_ or {}
        real = props.get(REAL_TOPIC)
        if not real:
            return False
        try:
            if as_topic(real).partitioned_topic_name == t.partitioned_topic_name:
                return False
        except UsageError:
            pass
    return True


def retention(ctx, t: TopicName) -> bool:
    """A retention policy in force on the topic (neither its time nor its size is 0)."""
    r = policies.effective(ctx, t, policies.RETENTION) or {}
    return bool(r.get("retentionTimeInMinutes")) and bool(r.get("retentionSizeInMB"))


def list_dlqs(ctx, namespace: str | None = None) -> list[dict]:
    if namespace:
        tenants.get_namespace(ctx, namespace)
        prefix = f"persistent://{namespace}/"
    else:
        prefix = ""
    origins, retries = _origins(ctx)
    out = []
    for name, ml_id in list(ctx.ledgers.names(ctx.txn, prefix)):
        if namespace and "/" in name[len(prefix):]:
            continue
        t = parse_topic(name)
        info = ctx.ledgers.info(ctx.txn, ml_id)
        cursors = ctx.cursors.list(ctx.txn, ml_id)
        c = next((x for x in cursors if x.name == SUBSCRIPTION), None)
        base = t.partitioned_topic_name.local_name
        is_dlq = (base.endswith(DLQ_SUFFIX) or name in origins or c is not None
                  or (not base.endswith(RETRY_SUFFIX) and name not in retries
                      and _looks_dead(ctx, info, t)))
        if is_dlq:
            out.append(_record(ctx, t, info, c, cursors, origins.get(name)))
    return out


def _record(ctx, t, info, c, cursors, origin) -> dict:
    n = waiting(ctx, info, t, c)
    first = next(iter(unhandled(ctx, info, c)), None) if n else None
    m = read_message(ctx, info, t, first) if first is not None else None
    if origin is None:
        sample = m
        if sample is None and info.entries > 0:
            sample = read_message(ctx, info, t, info.last_offset)
        props = (sample.properties_ or {}) if sample is not None else {}
        origin = (props.get(REAL_TOPIC), props.get(REAL_SUBSCRIPTION))
    return {
        "topic": str(t),
        "originTopic": _full_name(origin[0]),
        "originSubscription": origin[1],
        "backlog": n,
        "oldestPublishTime": iso_ms(m.publish_time) if m is not None else None,
        "oldestAgeMs": max(0, ctx.now - m.publish_time) if m is not None else None,
        "retained": bool(cursors),
        "retention": retention(ctx, t),
        "subscriptions": [x.name for x in cursors],
    }


def _full_name(name):
    try:
        return str(as_topic(name)) if name else None
    except UsageError:
        return name

