"""What a call names, inside one transaction: the topic, a partitioned topic's partitions, the
partitions that have a subscription, and the partition each message id belongs to. The Broker
and its admin nouns start every call here."""
from __future__ import annotations

from pulsarctl.broker import partitions, subscriptions as subs, topics
from pulsarctl.errors import MessageNotFound
from pulsarctl.names import TopicName, topic_name  # noqa: F401 - callers take it from here


def expand(ctx, names) -> list[TopicName]:
    """Every topic the names stand for (one topic, a partitioned topic's partitions, or several
    of either), each once, in order."""
    if isinstance(names, (str, TopicName)):
        names = [names]
    out = []
    for name in names:
        for p in partitions.expand(ctx, topic_name(name)):
            if p not in out:
                out.append(p)
    return out


def each(ctx, t: TopicName):
    """(partition topic, ledger info) for every partition of t (or t itself); TopicNotFound
    when one is missing."""
    return [(p, topics.require(ctx, p)) for p in partitions.expand(ctx, t)]


def subscribed(ctx, t: TopicName, subscription: str):
    """(partition, ledger info, cursor) for every partition of t (or t) that has the
    subscription; SubscriptionNotFound (exit 3) when none has it."""
    parts = each(ctx, t)
    out = []
    for p, info in parts:
        c = subs.get(ctx, info, subscription)
        if c is not None:
            out.append((p, info, c))
    if not out:
        subs.require(ctx, parts[0][1], subscription)
    return out


def with_subscription(ctx, targets: list[TopicName], subscription: str):
    """(topic, ledger info, cursor) for each of targets that exists and has the subscription;
    the others are passed over."""
    for p in targets:
        info = topics.lookup(ctx, p)
        c = subs.get(ctx, info, subscription) if info is not None else None
        if c is not None:
            yield p, info, c


def by_owner(ctx, targets: list[TopicName], ids) -> dict:
    """ids grouped by the topic (partition) they belong to, which must be one of targets;
    MessageNotFound for an id on none of them."""
    allowed = {str(p): p for p in targets}
    if len(targets) == 1:
        return {targets[0]: list(ids)}
    groups: dict = {}
    owners: dict[int, str | None] = {}
    for mid in ids:
        lid = mid.ledger_id
        owner = owners[lid] if lid in owners else owners.setdefault(
            lid, partitions.owner_topic(ctx, lid))
        if owner not in allowed:
            raise MessageNotFound(f"message {mid} not found on {', '.join(list(allowed)[:3])}")
        groups.setdefault(allowed[owner], []).append(mid)
    return groups
