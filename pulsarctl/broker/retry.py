"""Retry letter topics: reconsumeLater (Java's ConsumerImpl.doReconsumeLater).

With retry enabled a consumer also consumes <topic>-<subscription>-RETRY under the same
subscription (or the older <namespace>/<subscription>-RETRY where that is a partitioned topic,
see settings_for). reconsume-later writes a new message there — properties copied, REAL_TOPIC and
ORIGIN_MESSAGE_ID kept from the first origin (putIfAbsent), custom properties added,
RECONSUMETIMES counting up, DELAY_TIME in ms, delivered after the delay — and acks the original,
in one transaction. Past maxRedeliverCount (16 when retry is enabled without a policy) the
message goes to the dead letter topic instead."""
from __future__ import annotations

from store import codec
from pulsarctl.broker import deadletter, producers, subscriptions as subs, topics
from pulsarctl.errors import Conflict
from pulsarctl.messages import MessageId, OutgoingMessage, message_from_entry
from pulsarctl.names import (
    DELAY_TIME, DLQ_SUFFIX, RECONSUMETIMES, RETRY_SUFFIX, group_letter_topic, letter_topic,
    parse_topic,
)

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
    from pulsarctl.broker import partitions
    from pulsarctl.errors import InvalidTopicName

    try:
        old = parse_topic(group_letter_topic(topic, subscription, suffix))
    except InvalidTopicName:
        return new  # no such topic can exist
    return str(old) if partitions.get(ctx, old) > 0 else new


def level_delay_ms(ctx, level: int) -> int:
    """TDMQ's delay levels: level N (1-based) of messageDelayLevel; past the last, the last."""
    from pulsarctl.errors import InvalidValue
    from pulsarctl.units import parse_duration_ms

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
    policy = c.props.get("policy") or {}
    if not policy.get("enableRetry"):
        raise Conflict(f"retry is not enabled on subscription '{c.name}' (reconsumeLater method "
                       f"not support!)", hint="consume with --enable-retry first")
    origin = parse_topic(info.name)
    rec = codec.decode(ctx.ledgers.read(ctx.txn, info, offset))
    from pulsarctl.broker import batches, chunks

    if batches.is_batch(rec):
        pos = info.position(offset)
        mid = MessageId(pos.ledger_id, pos.entry_id, origin.partition_index, batch_index)
        skip = batches.acked_indexes(ctx, c, offset)
        if batch_index in skip:
            return []  # acked already: nothing to retry
        msgs = [m for m in batches.messages(rec, pos.ledger_id, pos.entry_id,
                                             origin.partition_index, info.name, skip=skip)
                if batch_index < 0 or m.id.batch_index == batch_index]
        if batch_index >= 0 and not msgs:
            batches.resolve(ctx, info, c, [mid])  # raises: the batch has no such index
        where = [_move(ctx, info, c, m, None, policy, origin, delay_ms, custom, level,
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
    where = _move(ctx, info, c, m, copy, policy, origin, delay_ms, custom, level, increment)
    subs.ack(ctx, info, c, acked)
    return [where]


def _move(ctx, info, c, m, copy, policy, origin, delay_ms, custom, level, increment) -> str:
    """Publish the retry (or dead letter) copy of message m; returns where it went."""
    mid = m.id
    props = dict(m.properties_ or {})
    props.setdefault(deadletter.REAL_TOPIC, str(origin.partitioned_topic_name))
    props.setdefault(deadletter.ORIGIN_MESSAGE_ID_DEPRECATED, str(mid))
    props.setdefault(deadletter.ORIGIN_MESSAGE_ID, str(mid))
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
        props.setdefault(deadletter.REAL_SUBSCRIPTION, c.name)
    else:
        target = parse_topic(policy["retryLetterTopic"])
        deliver_at = ctx.now + delay_ms if delay_ms > 0 else 0
        where = "retry"
    target = deadletter.route(ctx, c, target, m.key)  # a partitioned one: to a partition
    topics.ensure(ctx, target)
    out = OutgoingMessage(m.payload, props, m.key, m.ordering_key_, m.event_time, deliver_at)
    out.chunks = copy[2] if copy else None
    producers.publish(ctx, target, [out], f"{info.name}-{c.name}-retry", target.partition_index,
                      internal=True)
    return where
