"""Namespace and topic policies (pulsar-admin namespaces/topics set-/get-/remove-...).

A policy set on a topic overrides its namespace's, which overrides the broker default, as
Pulsar's topic policies do; a policy on a partitioned topic covers every partition. Values are
stored under pulsar-admin's Policies field names, so `namespaces policies` reads like Pulsar's.
"""
from __future__ import annotations

from pulsarctl.broker import tenants, topics, partitions
from pulsarctl.config import SCHEMA_STRATEGIES
from pulsarctl.errors import InvalidValue, TopicNotFound
from pulsarctl.names import TopicName, parse_topic

TTL = "message_ttl_in_seconds"
RETENTION = "retention_policies"
DEDUP = "deduplicationEnabled"
BACKLOG_QUOTA = "backlog_quota_map"
DELAYED = "delayed_delivery_policies"
DEAD_LETTER = "deadLetterPolicy"
MAX_UNACKED_CONSUMER = "max_unacked_messages_per_consumer"
MAX_UNACKED_SUBSCRIPTION = "max_unacked_messages_per_subscription"
# A namespace's schema compatibility strategy (REST namespaces/{ns}/schemaCompatibilityStrategy;
# no command of its own yet, so it is not in NAMES); the broker's setting when not set.
SCHEMA_STRATEGY = "schema_compatibility_strategy"

# The command-line name of each policy (set-<name>, get-<name>, remove-<name>) and its field.
NAMES = {
    "message-ttl": TTL,
    "retention": RETENTION,
    "deduplication": DEDUP,
    "backlog-quota": BACKLOG_QUOTA,
    "delayed-delivery": DELAYED,
    "dead-letter-policy": DEAD_LETTER,
    "max-unacked-messages-per-consumer": MAX_UNACKED_CONSUMER,
    "max-unacked-messages-per-subscription": MAX_UNACKED_SUBSCRIPTION,
}

QUOTA_TYPES = ("destination_storage", "message_age")
QUOTA_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")


def broker_default(ctx, field: str):
    """What applies when neither the topic nor its namespace sets the policy (broker.conf)."""
    if field == TTL:
        return ctx.setting("ttlDurationDefaultInSeconds")
    if field == RETENTION:
        return {"retentionTimeInMinutes": ctx.setting("defaultRetentionTimeInMinutes"),
                "retentionSizeInMB": ctx.setting("defaultRetentionSizeInMB")}
    if field == DEDUP:
        return ctx.setting("brokerDeduplicationEnabled")
    if field == BACKLOG_QUOTA:
        return {}
    if field == DELAYED:
        return {"tickTime": ctx.setting("delayedDeliveryTickTimeMillis"),
                "active": ctx.setting("delayedDeliveryEnabled"),
                "maxDeliveryDelayInMillis": 0}
    if field == DEAD_LETTER:
        return None
    if field == MAX_UNACKED_CONSUMER:
        return ctx.setting("maxUnackedMessagesPerConsumer")
    if field == MAX_UNACKED_SUBSCRIPTION:
        return ctx.setting("maxUnackedMessagesPerSubscription")
    if field == SCHEMA_STRATEGY:
        return ctx.setting("schemaCompatibilityStrategy")
    raise KeyError(field)


# -- validation: the value a set- command stores ----------------------------------------------
def _whole(v, what: str, low: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise InvalidValue(f"{what} must be a whole number of at least {low}, not {v!r}")
    return v


def check(field: str, value):
    if field == TTL:
        return _whole(value, "the message TTL in seconds", 0)
    if field in (MAX_UNACKED_CONSUMER, MAX_UNACKED_SUBSCRIPTION):
        return _whole(value, "the maximum of unacked messages (0 = no limit)", 0)
    if field == DEDUP:
        return bool(value)
    if field == SCHEMA_STRATEGY:
        v = str(value).upper()
        if v not in SCHEMA_STRATEGIES:
            raise InvalidValue(f"unknown schema compatibility strategy {value!r}",
                               hint=f"use one of {', '.join(SCHEMA_STRATEGIES)}")
        return v
    if field == RETENTION:
        t = _whole(value.get("retentionTimeInMinutes"), "the retention time (-1 = forever)", -1)
        s = _whole(value.get("retentionSizeInMB"), "the retention size (-1 = no limit)", -1)
        if (t == 0) != (s == 0):
            # As Pulsar's validateRetentionPolicies: either limit deletes, so a 0 next to a
            # real limit would delete everything at once and make the other limit pointless.
            raise InvalidValue(f"a retention of {t} min and {s} MB sets one limit to 0: give "
                               "both as 0, or -1 for the limit you do not want (sizes are "
                               "whole MB)")
        return {"retentionTimeInMinutes": t, "retentionSizeInMB": s}
    if field == DELAYED:
        return {"tickTime": _whole(value.get("tickTime"), "the delayed delivery tick in ms", 1),
                "active": bool(value.get("active")),
                "maxDeliveryDelayInMillis": _whole(value.get("maxDeliveryDelayInMillis", 0),
                                                   "the maximum delivery delay in ms", 0)}
    if field == DEAD_LETTER:
        n = _whole(value.get("maxRedeliverCount"), "--max-redeliver-count", 1)
        out = {"maxRedeliverCount": n}
        for k in ("deadLetterTopic", "initialSubscriptionName"):
            if value.get(k):
                out[k] = value[k]
        if out.get("deadLetterTopic"):
            out["deadLetterTopic"] = str(parse_topic(out["deadLetterTopic"]))
        return out
    if field == BACKLOG_QUOTA:
        out = {}
        for typ, q in value.items():
            if typ not in QUOTA_TYPES:
                raise InvalidValue(f"backlog quota type must be one of {', '.join(QUOTA_TYPES)}, "
                                   f"not {typ!r}")
            if q.get("policy") not in QUOTA_POLICIES:
                raise InvalidValue(f"backlog quota policy must be one of "
                                   f"{', '.join(QUOTA_POLICIES)}, not {q.get('policy')!r}")
            size = _whole(q.get("limitSize", -1), "the backlog quota size limit", -1)
            secs = _whole(q.get("limitTime", -1), "the backlog quota time limit", -1)
            if typ == "destination_storage" and size < 0:
                raise InvalidValue("a destination_storage backlog quota needs --limit SIZE")
            if typ == "message_age" and secs < 0:
                raise InvalidValue("a message_age backlog quota needs --limitTime DURATION")
            out[typ] = {"limitSize": size, "limitTime": secs, "policy": q["policy"]}
        return out
    raise KeyError(field)


# -- where policies live ---------------------------------------------------------------------
def _base(topic: TopicName) -> str:
    return str(topic.partitioned_topic_name) if topic.is_partition else str(topic)


def _topic_record(ctx, topic: TopicName, must_exist: bool) -> tuple[str, dict]:
    key = _base(topic)
    if must_exist and topics.lookup(ctx, topic) is None:
        if not partitions.get(ctx, parse_topic(key)):
            raise TopicNotFound(f"topic {topic} does not exist",
                                hint=f"create it with `pulsarctl topics create {topic}`")
    return key, ctx.get("topicpol", key) or {}


def ns_policies(ctx, ns: str) -> dict:
    return tenants.get_namespace(ctx, ns).get("policies", {})


def set_ns(ctx, ns: str, field: str, value) -> dict:
    rec = tenants.get_namespace(ctx, ns)
    pol = rec.setdefault("policies", {})
    if field == BACKLOG_QUOTA:
        value = {**pol.get(field, {}), **value}
    pol[field] = check(field, value)
    tenants.put_namespace(ctx, ns, rec)
    return pol[field]


def remove_ns(ctx, ns: str, field: str, part: str | None = None) -> None:
    rec = tenants.get_namespace(ctx, ns)
    pol = rec.setdefault("policies", {})
    if part is not None and field == BACKLOG_QUOTA:
        pol.get(field, {}).pop(part, None)
        if not pol.get(field):
            pol.pop(field, None)
    else:
        pol.pop(field, None)
    tenants.put_namespace(ctx, ns, rec)


def get_ns(ctx, ns: str, field: str):
    return ns_policies(ctx, ns).get(field)


def set_topic(ctx, topic: TopicName, field: str, value):
    key, pol = _topic_record(ctx, topic, True)
    if field == BACKLOG_QUOTA:
        value = {**pol.get(field, {}), **value}
    pol[field] = check(field, value)
    ctx.put(pol, "topicpol", key)
    return pol[field]


def remove_topic(ctx, topic: TopicName, field: str, part: str | None = None) -> None:
    key, pol = _topic_record(ctx, topic, True)
    if part is not None and field == BACKLOG_QUOTA:
        pol.get(field, {}).pop(part, None)
        if not pol.get(field):
            pol.pop(field, None)
    else:
        pol.pop(field, None)
    if pol:
        ctx.put(pol, "topicpol", key)
    else:
        ctx.delete("topicpol", key)


def get_topic(ctx, topic: TopicName, field: str, applied: bool = False):
    """The topic's own value, or with applied the one in force (topic, namespace, broker).
    Either way the topic must exist (TopicNotFound, exit 3), as pulsar-admin answers 404."""
    _key, pol = _topic_record(ctx, topic, True)
    if applied:
        return effective(ctx, topic, field)
    return pol.get(field)


def drop_topic(ctx, topic: TopicName) -> None:
    ctx.delete("topicpol", _base(topic))


def effective(ctx, topic, field: str):
    """The value in force for a topic (a TopicName or its full name)."""
    name = topic if isinstance(topic, str) else str(topic)
    cache = ctx.policy_cache
    hit = cache.get((name, field), cache)
    if hit is not cache:
        return hit
    t = topic if isinstance(topic, TopicName) else parse_topic(topic)
    own = ctx.get("topicpol", _base(t)) or {}
    if field in own:
        v = own[field]
    else:
        ns = ctx.get("ns", *tenants.parse_namespace(t.namespace)) or {}
        v = (ns.get("policies") or {}).get(field, cache)
        if v is cache:
            v = broker_default(ctx, field)
    cache[(name, field)] = v
    return v


def applied(ctx, topic: TopicName) -> dict:
    return {f: effective(ctx, topic, f) for f in NAMES.values()}
