"""Partitioned topics: metadata ("partitions": N) over N ordinary topics named
<topic>-partition-<i>, created together, as Pulsar does. Growing one (the new partitions get
the subscriptions) and deleting one are cascade.py's."""
from __future__ import annotations

from pulsarctl.broker import tenants, topics
from pulsarctl.errors import AlreadyExists, InvalidValue
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


def check_count(n: int) -> None:
    if not isinstance(n, int) or n < 1 or n > MAX_PARTITIONS:
        raise InvalidValue(f"the number of partitions must be between 1 and {MAX_PARTITIONS}, "
                           f"not {n}")


def create(ctx, topic: TopicName, n: int) -> None:
    check_count(n)
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
