"""Dead letter and retry letter moves (Pulsar's DeadLetterPolicy: deadLetterTopic and
retryLetterTopic): the two ways a message leaves its subscription for another topic. Each
publishes the copy and acknowledges the original in one transaction, so a crash can neither
lose the message nor leave it in both places (Pulsar's client does the two as separate network
calls). The tooling that reads and replays dead letter topics is dlq.py.

Dead letter (move): past maxRedeliverCount, the redelivery controller (redelivery.py) moves a
message to <topic>-<subscription>-DLQ. The copy keeps payload, key, ordering key, event time
and properties, and gains REAL_TOPIC, ORIGIN_MESSAGE_ID (and its deprecated twin
ORIGIN_MESSAGE_IDY_TIME) and REAL_SUBSCRIPTION, each only if absent (putIfAbsent: the first
origin is kept through retries), as Java's ConsumerImpl.

Retry letter (reconsume_later: Java's ConsumerImpl.doReconsumeLater): with retry enabled a
consumer also consumes <topic>-<subscription>-RETRY under the same subscription (or the older
<namespace>/<subscription>-RETRY where that is a partitioned topic, see settings_for).
reconsume-later writes a new message there — properties copied, REAL_TOPIC and
ORIGIN_MESSAGE_ID kept from the first origin (putIfAbsent), custom properties added,
RECONSUMETIMES counting up, DELAY_TIME in ms, delivered after the delay — and acks the
original. Past maxRedeliverCount (16 when retry is enabled without a policy) the message goes
to the dead letter topic instead.

Both route a letter to a partition when the target topic is partitioned (route)."""
from __future__ import annotations

import itertools
import secrets
import string

from store import codec
from pulsarctl.broker import (
    producers, subscriptions as subs, topics, unpack, batches, chunks, partitions, history,
)
from pulsarctl.errors import Conflict, InvalidTopicName, InvalidValue
from pulsarctl.messages import MessageId, OutgoingMessage, copied, message_from_entry
from pulsarctl import names
from pulsarctl.names import (
    DELAY_TIME, DLQ_SUFFIX, ORIGIN_MESSAGE_ID, ORIGIN_MESSAGE_ID_DEPRECATED, REAL_SUBSCRIPTION,
    REAL_TOPIC, RECONSUMETIMES, RETRY_SUFFIX, TopicName, group_letter_topic, letter_topic,
    parse_topic,
)
from pulsarctl.entries import is_batch
from pulsarctl.units import parse_duration_ms
from pulsarctl.broker.routing import PartitionRouter
from pulsarctl.broker.subscription_state import state


# -- dead letters ------------------------------------------------------------------------------
_ALNUM = string.ascii_letters + string.digits


def dlq_topic(topic: str, subscription: str, policy: dict) -> str:
    """--dead-letter-topic, else <topic>-<subscription>-DLQ; topic is the partition for a
    partitioned topic, as ConsumerImpl's topic is."""
    return policy.get("deadLetterTopic") or names.dlq_topic(topic, subscription)


def producer_name(topic: str, subscription: str, consumer: str) -> str:
    """Pulsar 4.x: <topic>-<subscription>-<consumerName>-<5 random alphanumerics>-DLQ."""
    rand = "".join(secrets.choice(_ALNUM) for _ in range(5))
    return names.dlq_producer_name(topic, subscription, consumer, rand)


def dlq_producer(ctx, c, topic: str, dlq: TopicName, consumer: str) -> str:
    """The one producer subscription c moves dead letters to dlq with: named once, as a Pulsar
    consumer names its DLQ producer when it first needs it (ConsumerImpl's
    initDeadLetterProducerIfNeeded), then kept with the subscription, so its sequence ids rise
    from one move to the next, in later commands too (each partition of a partitioned dead
    letter topic counts its own, as each partition's producer does)."""
    key = str(dlq.partitioned_topic_name)
    s = state(c)
    made = s.letter_producers
    name = made.get(key)
    if name is None:
        name = producer_name(topic, c.name, consumer)
        s.letter_producers = {**made, key: name}
    return name


def move(ctx, info, c, offset: int, consumer: str | None = None) -> MessageId | None:
    """Publish the message at offset to the subscription's dead letter topic and ack it. A
    chunk moves with every other chunk of its message: their stored pieces are copied (still
    compressed), so a consumer of the dead letter topic joins them as it would have here. A
    batch moves as one dead letter per message. Returns the (first) dead letter's id."""
    policy = state(c).policy
    origin = parse_topic(info.name)
    rec = codec.decode(ctx.ledgers.read(ctx.txn, info, offset))

    copy = chunks.copy_of(ctx, info, offset, rec)
    acked, last = (copy[0], copy[1]) if copy else ([offset], offset)
    pos = info.position(last)
    if is_batch(rec):
        # The whole entry goes, one dead letter per batch index, acked at the entry level.
        # With acknowledgmentAtBatchIndexLevelEnabled the acked indexes were never delivered
        # again, so the client would not have them to forward.
        skip = batches.acked_indexes(ctx, c, offset) if batches.index_level(ctx) else None
        msgs = unpack.messages(rec, pos.ledger_id, pos.entry_id, origin.partition_index,
                                info.name, skip=skip)
    else:
        msgs = [message_from_entry(
            rec, MessageId(pos.ledger_id, pos.entry_id, origin.partition_index), info.name)]
    dlq = parse_topic(dlq_topic(info.name, c.name, policy))
    init = policy.get("initialSubscriptionName")
    pname = dlq_producer(ctx, c, info.name, dlq, consumer or "consumer")
    routed = []  # (target, dead letter): a partitioned DLQ spreads them over its partitions
    for m in msgs:
        props = dict(m.properties_ or {})
        props.setdefault(REAL_TOPIC, str(origin.partitioned_topic_name))
        props.setdefault(ORIGIN_MESSAGE_ID, str(m.id))
        props.setdefault(ORIGIN_MESSAGE_ID_DEPRECATED, str(m.id))
        props.setdefault(REAL_SUBSCRIPTION, c.name)
        out = copied(m, OutgoingMessage(m.payload, props, m.key, m.ordering_key_, m.event_time))
        out.chunks = copy[2] if copy else None
        routed.append((route(ctx, c, dlq, m.key), out))
    first = None
    ctx.origin = (info.name, str(msgs[0].id) if msgs else str(pos))
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
            beyond = {history.BEYOND: history.DLQ_NOTE} if history.single_active(c) else {}
            history.record(ctx, info, offset, history.DEAD_LETTERED, c.name, consumer,
                           reason="maxRedeliverCount reached", toTopic=str(target),
                           toMessageId=str(first), **beyond)
    ctx.origin = None
    subs.ack(ctx, info, c, acked)
    return first


# -- retry letters -----------------------------------------------------------------------------
MAX_RECONSUMETIMES = 16


def settings_for(topic: str, subscription: str, settings: dict, ctx=None) -> dict:
    """Retry enabled: the RETRY and DLQ names derived from the first topic as given (so all
    partitions share them, as ConsumerBuilderImpl does) and the default limit of 16.

    Pulsar's compatibility rule (ConsumerBuilderImpl, issue 9327): when either name is left to
    the default, a partitioned topic <tenant>/<namespace>/<subscription>-RETRY (or -DLQ), the
    default before 2.8, is used instead of <topic>-<subscription>-RETRY (-DLQ) wherever it
    exists. ctx: the transaction to look it up in (without one, the new names)."""
    out = dict(settings)
    out["enableRetry"] = True
    if not out.get("retryLetterTopic") or not out.get("deadLetterTopic"):
        out["retryLetterTopic"] = out.get("retryLetterTopic") or _default_name(
            ctx, topic, subscription, RETRY_SUFFIX)
        out["deadLetterTopic"] = out.get("deadLetterTopic") or _default_name(
            ctx, topic, subscription, DLQ_SUFFIX)
    if not out.get("maxRedeliverCount"):
        out["maxRedeliverCount"] = MAX_RECONSUMETIMES
    return out


def _default_name(ctx, topic: str, subscription: str, suffix: str) -> str:
    new = letter_topic(topic, subscription, suffix)
    if ctx is None:
        return new

    try:
        old = parse_topic(group_letter_topic(topic, subscription, suffix))
    except InvalidTopicName:
        return new  # no such topic can exist
    return str(old) if partitions.get(ctx, old) > 0 else new


def level_delay_ms(ctx, level: int) -> int:
    """TDMQ's delay levels: level N (1-based) of messageDelayLevel; past the last, the last."""
    levels = ctx.setting("messageDelayLevel").split()
    if level < 1:
        raise InvalidValue(f"delay level {level} is out of range",
                           hint=f"levels run from 1 to {len(levels)}: {' '.join(levels)}")
    return parse_duration_ms(levels[min(level, len(levels)) - 1], "delay level")


def reconsume_later(ctx, info, c, offset: int, delay_ms: int, custom: dict | None,
                    level: int | None = None, increment: bool = False,
                    batch_index: int = -1) -> list[str]:
    """Move the message at offset to the retry topic (or past the limit to the DLQ). Returns
    where each message went. level picks a TDMQ delay level; increment waits one level longer
    per retry. In a batch, batch_index picks the message (as reconsumeLater takes one message,
    acked by its index); -1 moves every message of the entry not acked yet."""
    policy = state(c).policy
    if not policy.get("enableRetry"):
        raise Conflict(f"retry is not enabled on subscription '{c.name}' (reconsumeLater method "
                       f"not support!)", hint="consume with --enable-retry first")
    origin = parse_topic(info.name)
    rec = codec.decode(ctx.ledgers.read(ctx.txn, info, offset))

    if is_batch(rec):
        pos = info.position(offset)
        mid = MessageId(pos.ledger_id, pos.entry_id, origin.partition_index, batch_index)
        skip = batches.acked_indexes(ctx, c, offset)
        if batch_index in skip:
            return []  # acked already: nothing to retry
        msgs = [m for m in unpack.messages(rec, pos.ledger_id, pos.entry_id,
                                             origin.partition_index, info.name, skip=skip)
                if batch_index < 0 or m.id.batch_index == batch_index]
        if batch_index >= 0 and not msgs:
            batches.resolve(ctx, info, c, [mid])  # raises: the batch has no such index
        where = [_retry_one(ctx, info, c, m, None, policy, origin, delay_ms, custom, level,
                       increment) for m in msgs]
        acked = [offset] if batch_index < 0 else batches.resolve(ctx, info, c, [mid])[0]
        if acked:
            subs.ack(ctx, info, c, acked)
        else:
            ctx.cursors.save(ctx.txn, c)
        return where
    copy = chunks.copy_of(ctx, info, offset, rec)  # a chunked message moves whole
    acked, last = (copy[0], copy[1]) if copy else ([offset], offset)
    pos = info.position(last)
    mid = MessageId(pos.ledger_id, pos.entry_id, origin.partition_index)
    m = message_from_entry(rec, mid, info.name)
    where = _retry_one(ctx, info, c, m, copy, policy, origin, delay_ms, custom, level, increment)
    subs.ack(ctx, info, c, acked)
    return [where]


def _retry_one(ctx, info, c, m, copy, policy, origin, delay_ms, custom, level, increment) -> str:
    """Publish the retry (or dead letter) copy of message m; returns where it went."""
    mid = m.id
    props = dict(m.properties_ or {})
    props.setdefault(REAL_TOPIC, str(origin.partitioned_topic_name))
    props.setdefault(ORIGIN_MESSAGE_ID_DEPRECATED, str(mid))
    props.setdefault(ORIGIN_MESSAGE_ID, str(mid))
    props.update(custom or {})
    try:
        times = int(props.get(RECONSUMETIMES, "0")) + 1
    except ValueError:
        times = 1
    props[RECONSUMETIMES] = str(times)
    if increment:
        delay_ms = level_delay_ms(ctx, times)
    elif level is not None:
        delay_ms = level_delay_ms(ctx, level)
    props[DELAY_TIME] = str(max(delay_ms, 0))
    max_rc = policy.get("maxRedeliverCount") or MAX_RECONSUMETIMES
    if times > max_rc and policy.get("deadLetterTopic"):
        target, deliver_at, where = parse_topic(policy["deadLetterTopic"]), 0, "dlq"
        props.setdefault(REAL_SUBSCRIPTION, c.name)
        # The subscription's one DLQ producer, as a move's (Java's doReconsumeLater sends
        # through the consumer's deadLetterProducer too).
        pname = dlq_producer(ctx, c, info.name, target, "consumer")
    else:
        target = parse_topic(policy["retryLetterTopic"])
        deliver_at = ctx.now + delay_ms if delay_ms > 0 else 0
        where = "retry"
        pname = f"{info.name}-{c.name}-retry"
    target = route(ctx, c, target, m.key)  # a partitioned one: to a partition
    topics.ensure(ctx, target)
    out = copied(m, OutgoingMessage(m.payload, props, m.key, m.ordering_key_, m.event_time,
                                    deliver_at))
    out.chunks = copy[2] if copy else None
    ctx.origin = (info.name, str(mid))
    try:
        _n, ids = producers.publish(ctx, target, [out], pname, target.partition_index,
                                    internal=True)
    finally:
        ctx.origin = None
    o = info.offset(mid.ledger_id, mid.entry_id)
    if o is not None and ids:
        event = history.RETRIED if where == "retry" else history.DEAD_LETTERED
        history.record(ctx, info, o, event, c.name, None, None, toTopic=str(target),
                       toMessageId=str(ids[0]), delay=max(delay_ms, 0) if where == "retry"
                       else None, reconsumeTimes=times)
    return where


# -- where a letter goes -----------------------------------------------------------------------
def route(ctx, c, target: TopicName, key: str | None) -> TopicName:
    """Where a dead (or retry) letter from subscription c goes on target: the topic itself, or
    for a partitioned topic (the older <namespace>/<subscription>-DLQ names are partitioned,
    see settings_for) the partition the client's producer would pick: RoundRobinPartition,
    the key's hash if it has one, else the next partition in turn (the counter lives with the
    subscription, as the producer lives with its consumer)."""
    if target.is_partition:
        return target
    n = partitions.get(ctx, target)
    if not n:
        return target

    s = state(c)
    router = PartitionRouter(n, start=s.letter_round_robin)
    i = router.choose(key)
    if key is None:
        s.letter_round_robin = router.counter
    return target.partition(i)
