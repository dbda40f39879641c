"""Partitioned topics: metadata ("partitions": N) over N ordinary topics named
<topic>-partition-<i>, created together, as Pulsar does."""
from __future__ import annotations

from pulsarctl.broker import tenants, topics
from pulsarctl.errors import AlreadyExists, Conflict, InvalidValue, TopicNotFound
from pulsarctl.names import TopicName, parse_topic

MAX_PARTITIONS = 10_000


def get(ctx, topic: TopicName) -> int:
    """Number of partitions, 0 for a topic that is not partitioned (Pulsar's metadata)."""
    rec = ctx.get("partitioned", str(topic))
    return rec["partitions"] if rec else 0


def partition_names(topic: TopicName, n: int) -> list[TopicName]:
    return [topic.partition(i) for i in range(n)]


def expand(ctx, topic: TopicName) -> list[TopicName]:
    """The topics a name stands for: its partitions if partitioned, else itself."""
    n = get(ctx, topic)
    return partition_names(topic, n) if n else [topic]


def _check_count(n: int) -> None:
    if not isinstance(n, int) or n < 1 or n > MAX_PARTITIONS:
        raise InvalidValue(f"the number of partitions must be between 1 and {MAX_PARTITIONS}, "
                           f"not {n}")


def create(ctx, topic: TopicName, n: int) -> None:
    _check_count(n)
    if topic.is_partition:
        raise InvalidValue(f"{topic} is a partition name; a partitioned topic cannot end with "
                           f"-partition-<n>")
    tenants.get_namespace(ctx, topic.namespace)
    if get(ctx, topic):
        raise AlreadyExists(f"partitioned topic {topic} already exists")
    if topics.lookup(ctx, topic) is not None:
        raise AlreadyExists(f"{topic} already exists as a non-partitioned topic",
                            hint="delete it first, or use another name")
    ctx.put({"partitions": n, "created": ctx.now}, "partitioned", str(topic))
    for p in partition_names(topic, n):
        topics.ensure(ctx, p)


def update(ctx, topic: TopicName, n: int) -> int:
    """Grow to n partitions (Pulsar never shrinks one). New partitions get the subscriptions
    the first partition has, so no subscriber misses their messages."""
    _check_count(n)
    old = get(ctx, topic)
    if not old:
        raise TopicNotFound(f"partitioned topic {topic} does not exist",
                            hint=f"create it with `pulsarctl topics create-partitioned-topic "
                                 f"{topic} -p N`")
    if n <= old:
        raise Conflict(f"partitioned topic {topic} has {old} partitions; the number can only grow",
                       hint=f"give more than {old}")
    from pulsarctl.broker import subscriptions

    first = topics.require(ctx, topic.partition(0))
    subs = [(c.name, c.props.get("type")) for c in ctx.cursors.list(ctx.txn, first.ml_id)]
    for i in range(old, n):
        info = topics.ensure(ctx, topic.partition(i))
        for name, typ in subs:
            subscriptions.create(ctx, info, name, "Earliest", typ or subscriptions.EXCLUSIVE)
    ctx.put({"partitions": n, "created": ctx.now}, "partitioned", str(topic))
    return n


def delete(ctx, topic: TopicName, force: bool) -> None:
    n = get(ctx, topic)
    for p in partition_names(topic, n):
        if topics.lookup(ctx, p) is not None:
            topics.delete_topic(ctx, p, force)
    ctx.delete("partitioned", str(topic))
    ctx.delete("topicpol", str(topic))


def list_partitioned(ctx, namespace: str) -> list[str]:
    tenants.get_namespace(ctx, namespace)
    prefix = f"persistent://{namespace}/"
    return [k[1] for k, _ in ctx.scan("partitioned") if k[1].startswith(prefix)]


def owner_topic(ctx, ledger_id: int) -> str | None:
    """The topic (partition) a ledger belongs to: message ids are unique in a store."""
    ml = ctx.ledgers.owner(ctx.txn, ledger_id)
    if ml is None:
        return None
    try:
        return ctx.ledgers.info(ctx.txn, ml).name
    except KeyError:
        return None


def parse(name) -> TopicName:
    return name if isinstance(name, TopicName) else parse_topic(name)
