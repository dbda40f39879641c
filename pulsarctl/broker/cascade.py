"""Deletes and growth that cascade down through the layers: deleting a tenant deletes its
namespaces, a namespace its topics, a topic (or each partition of a partitioned topic) its
subscriptions (subscriptions.drop); growing a partitioned topic gives the new partitions the
subscriptions of the first. They sit above subscriptions.py, so tenants.py, topics.py and
partitions.py, which subscriptions and policies build on, never import upwards.
"""
from __future__ import annotations

from pulsarctl.broker import compaction, history, partitions, subscriptions, tenants, topics
from pulsarctl.errors import Conflict, NotEmpty, TopicNotFound
from pulsarctl.names import TopicName, parse_namespace, parse_topic


def delete_tenant(ctx, name: str, force: bool = False) -> None:
    tenants.get_tenant(ctx, name)
    namespaces = tenants.list_namespaces(ctx, name)
    if namespaces and not force:
        raise NotEmpty(f"tenant '{name}' still has namespaces: {', '.join(namespaces)}",
                       hint="delete them first, or pass --force to delete everything in it")
    for ns in namespaces:
        delete_namespace(ctx, ns, force=True)
    ctx.delete("tenant", name)


def delete_namespace(ctx, name: str, force: bool = False) -> None:
    tenants.get_namespace(ctx, name)
    names = topics.list_topics(ctx, name)
    if names and not force:
        raise NotEmpty(f"namespace '{name}' still has {len(names)} topic(s)",
                       hint="delete them first, or pass --force to delete them with it")
    for t in names:
        delete_topic(ctx, t, force=True)
    tenant, ns = parse_namespace(name)
    ctx.delete("ns", tenant, ns)


def delete_topic(ctx, name, force: bool = False) -> None:
    topic = parse_topic(name) if isinstance(name, str) else name
    info = topics.require(ctx, topic)
    subs = ctx.cursors.list(ctx.txn, info.ml_id)
    if subs and not force:
        raise NotEmpty(
            f"topic {topic} has {len(subs)} subscription(s): "
            + ", ".join(c.name for c in subs[:5]),
            hint="unsubscribe them first, or pass --force to delete the topic with them")
    for c in subs:
        subscriptions.drop(ctx, info, c)
    for k, _ in list(ctx.scan("producer", info.ml_id)):
        ctx.delete(*k)
    compaction.drop(ctx, info)
    ctx.delete("topicmeta", str(topic))
    ctx.delete("topicpol", str(topic))  # policies.py's record: a new topic starts without
    history.forget(ctx, info.ml_id)
    ctx.ledgers.delete(ctx.txn, info)


def update_partitions(ctx, topic: TopicName, n: int) -> int:
    """Grow to n partitions (Pulsar never shrinks one). New partitions get the subscriptions
    the first partition has, so no subscriber misses their messages."""
    partitions.check_count(n)
    old = partitions.get(ctx, topic)
    if not old:
        raise TopicNotFound(f"partitioned topic {topic} does not exist",
                            hint=f"create it with `pulsarctl topics create-partitioned-topic "
                                 f"{topic} -p N`")
    if n <= old:
        raise Conflict(f"partitioned topic {topic} has {old} partitions; the number can only grow",
                       hint=f"give more than {old}")
    first = topics.require(ctx, topic.partition(0))
    subs = [(c.name, subscriptions.stored_type(c))
            for c in ctx.cursors.list(ctx.txn, first.ml_id)]
    for i in range(old, n):
        info = topics.ensure(ctx, topic.partition(i))
        for name, typ in subs:
            subscriptions.create(ctx, info, name, "Earliest", typ)
    ctx.put({"partitions": n, "created": ctx.now}, "partitioned", str(topic))
    return n


def delete_partitioned(ctx, topic: TopicName, force: bool) -> None:
    n = partitions.get(ctx, topic)
    for p in partitions.partition_names(topic, n):
        if topics.lookup(ctx, p) is not None:
            delete_topic(ctx, p, force)
    ctx.delete("partitioned", str(topic))
    ctx.delete("topicpol", str(topic))
