"""Dead letter moves: publish a copy to the dead letter topic and acknowledge the original, in
one transaction, so a crash can neither lose the message nor leave it in both places (Pulsar's
client does the two as separate network calls).

The copy keeps payload, key, ordering key, event time and properties, and gains REAL_TOPIC,
ORIGIN_MESSAGE_ID (and its deprecated twin ORIGIN_MESSAGE_IDY_TIME) and REAL_SUBSCRIPTION, each
only if absent (putIfAbsent: the first origin is kept through retries), as Java's ConsumerImpl."""
from __future__ import annotations

import itertools
import secrets
import string

from store import codec
from pulsarctl.broker import producers, subscriptions as subs, topics
from pulsarctl.messages import MessageId, OutgoingMessage, message_from_entry
from pulsarctl import names
from pulsarctl.names import (
    ORIGIN_MESSAGE_ID, ORIGIN_MESSAGE_ID_DEPRECATED, REAL_SUBSCRIPTION, REAL_TOPIC, TopicName,
    parse_topic,
)

_ALNUM = string.ascii_letters + string.digits


def dlq_topic(topic: str, subscription: str, policy: dict) -> str:
    """--dead-letter-topic, else <topic>-<subscription>-DLQ; topic is the partition for a
    partitioned topic, as ConsumerImpl's topic is."""
    return policy.get("deadLetterTopic") or names.dlq_topic(topic, subscription)


def producer_name(topic: str, subscription: str, consumer: str) -> str:
    """Pulsar 4.x: <topic>-<subscription>-<consumerName>-<5 random alphanumerics>-DLQ."""
    rand = "".join(secrets.choice(_ALNUM) for _ in range(5))
    return names.dlq_producer_name(topic, subscription, consumer, rand)


def move(ctx, info, c, offset: int, consumer: str | None = None) -> MessageId | None:
    """Publish the message at offset to the subscription's dead letter topic and ack it. A
    chunk moves with every other chunk of its message: their stored pieces are copied (still
    compressed), so a consumer of the dead letter topic joins them as it would have here. A
    batch moves as one dead letter per message. Returns the (first) dead letter's id."""
    policy = c.props.get("policy") or {}
    origin = parse_topic(info.name)
    rec = codec.decode(ctx.ledgers.read(ctx.txn, info, offset))
    from pulsarctl.broker import batches, chunks

    copy = chunks.copy_of(ctx, info, offset, rec)
    acked, last = (copy[0], copy[1]) if copy else ([offset], offset)
    pos = info.position(last)
    if batches.is_batch(rec):
        # The whole entry goes, one dead letter per batch index, acked at the entry level.
        # With acknowledgmentAtBatchIndexLevelEnabled the acked indexes were never delivered
        # again, so the client would not have them to forward.
        skip = batches.acked_indexes(ctx, c, offset) if batches.index_level(ctx) else None
        msgs = batches.messages(rec, pos.ledger_id, pos.entry_id, origin.partition_index,
                                info.name, skip=skip)
    else:
        msgs = [message_from_entry(
            rec, MessageId(pos.ledger_id, pos.entry_id, origin.partition_index), info.name)]
    dlq = parse_topic(dlq_topic(info.name, c.name, policy))
    init = policy.get("initialSubscriptionName")
    holder = consumer or "consumer"
    pname = producer_name(info.name, c.name, holder)
    routed = []  # (target, dead letter): a partitioned DLQ spreads them over its partitions
    for m in msgs:
        props = dict(m.properties_ or {})
        props.setdefault(REAL_TOPIC, str(origin.partitioned_topic_name))
        props.setdefault(ORIGIN_MESSAGE_ID, str(m.id))
        props.setdefault(ORIGIN_MESSAGE_ID_DEPRECATED, str(m.id))
        props.setdefault(REAL_SUBSCRIPTION, c.name)
        out = OutgoingMessage(m.payload, props, m.key, m.ordering_key_, m.event_time)
        out.chunks = copy[2] if copy else None
        routed.append((route(ctx, c, dlq, m.key), out))
    first = None
    for target, group in itertools.groupby(routed, key=lambda r: r[0]):
        dlq_info = topics.ensure(ctx, target)
        if init and subs.get(ctx, dlq_info, init) is None:
            # PIP-124: the broker creates it whenever it is missing, before the dead letter
            # lands.
            subs.create(ctx, dlq_info, init, "Earliest")
        # The DLQ producer does not batch (enableBatching(false)): one entry per dead letter.
        _name, ids = producers.publish(ctx, target, [out for _t, out in group], pname,
                                       target.partition_index, internal=True)
        if first is None and ids:
            first = ids[0]
    subs.ack(ctx, info, c, acked)
    return first


_ROUND_ROBIN = "letterRR"  # the cursor property that keeps the letter producers' counter


def route(ctx, c, target: TopicName, key: str | None) -> TopicName:
    """Where a dead (or retry) letter from subscription c goes on target: the topic itself, or
    for a partitioned topic (the older <namespace>/<subscription>-DLQ names are partitioned,
    see retry.settings_for) the partition the client's producer would pick: RoundRobinPartition,
    the key's hash if it has one, else the next partition in turn (the counter lives with the
    subscription, as the producer lives with its consumer)."""
    from pulsarctl.broker import partitions

    if target.is_partition:
        return target
    n = partitions.get(ctx, target)
    if not n:
        return target
    from pulsarctl.broker.routing import PartitionRouter

    router = PartitionRouter(n, start=c.props.get(_ROUND_ROBIN, 0))
    i = router.choose(key)
    if key is None:
        c.props[_ROUND_ROBIN] = router.counter
    return target.partition(i)
