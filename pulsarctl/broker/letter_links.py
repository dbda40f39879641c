"""Dead letter and retry copies that a client makes, linked to their originals in the message
history (history.py), as the broker's own moves are (deadletter.py).

A Pulsar client dead-letters a message itself: past maxRedeliverCount its consumer publishes a
copy to the dead letter topic through its own producer, with the properties REAL_TOPIC and
ORIGIN_MESSAGE_ID naming the original, then acknowledges the original (ConsumerImpl's
processPossibleToDLQ, in Java and in the C++ client under the Python one); Java's
reconsumeLater publishes a retry copy the same way (doReconsumeLater). The broker sees only a
publish and an ack. So a publish that is not a broker move and whose message carries both
properties is taken for such a copy: its published event names the original (explain follows it
back), and the original gets a deadLettered (or retried) event naming the copy, so its life ends
where it went.

What the properties look like (pulsar-semantics.md §6.3): Java writes REAL_TOPIC without the
-partition-N suffix and ORIGIN_MESSAGE_ID as 12:3:1 (the partition in the id); the C++ client
writes the partition's own name and (12,3,1,-1), a chunked message as (first);(last). Java 3.2+
adds REAL_SUBSCRIPTION; the C++ client does not, and then the subscription is the one that
holds the original as delivered and not yet acknowledged (one, or none is named).

A dead letter or a retry: the copy's topic says which when it ends in -DLQ or -RETRY (the
default names); another name is a retry when the copy is delivered later (reconsumeLater's
deliverAfter), else a dead letter. A copy pulsarctl's `dlq replay` makes (REPLAY_COUNT) is no
client's dead letter, nor is a copy published back to its own topic. Only a copy stored as an
entry of its own is looked at: the clients' dead letter and retry producers never batch
(enableBatching(false)), so a batch entry's messages are taken for what they say they are."""
from __future__ import annotations

from pulsarctl.broker import history, topics
from pulsarctl.broker.records import Pending
from pulsarctl.messages import MessageId, parse_message_id
from pulsarctl.names import (
    DELAY_TIME, DLQ_SUFFIX, ORIGIN_MESSAGE_ID, REAL_SUBSCRIPTION, REAL_TOPIC, RECONSUMETIMES,
    RETRY_SUFFIX, topic_name,
)
from pulsarctl.replay import REPLAY_COUNT  # a replay's copy carries it
from store import codec, keys


def copies(messages) -> list | None:
    """Per message of a publish, its origin when it is a client's copy ((topic, MessageId) of
    the original, its properties, its delivery time), else None; None for the whole publish
    when no message is one (the usual case: one look at each message's properties)."""
    out = None
    for i, m in enumerate(messages):
        props = m.properties
        if not props or ORIGIN_MESSAGE_ID not in props or REAL_TOPIC not in props \
                or REPLAY_COUNT in props:
            continue
        origin = _original(props[REAL_TOPIC], props[ORIGIN_MESSAGE_ID])
        if origin is None:
            continue
        if out is None:
            out = [None] * len(messages)
        out[i] = (origin[0], origin[1], props, m.deliver_at or 0)
    return out


def _original(real_topic: str, origin_id: str):
    """(TopicName of the partition, MessageId) the two properties name, or None when they do
    not read as a topic and an id."""
    try:
        mid = parse_message_id(str(origin_id).split(";")[-1].strip())
        t = topic_name(real_topic)
    except Exception:  # a property a client wrote some other way: no link, the copy stays
        return None
    if mid.partition >= 0 and not t.is_partition:
        t = t.partition(mid.partition)
    return t, mid


def origin_of(copy) -> tuple[str, str] | None:
    """What the copy's published event names: (topic of the original, its id)."""
    if copy is None:
        return None
    return str(copy[0]), str(copy[1])


def link(ctx, info, first_offset: int, per_entry: list, producer: str) -> None:
    """After a publish appended entries from first_offset to info's ledger: the original of each
    client copy among them (per_entry: copies()'s item for each entry, None for the others) gets
    its deadLettered or retried event, naming the copy."""
    if not history.on(ctx):
        return
    here = topic_name(info.name)
    for i, copy in enumerate(per_entry):
        if copy is None:
            continue
        t, mid, props, deliver_at = copy
        if t.partitioned_topic_name == here.partitioned_topic_name:
            continue   # published back to its own topic: a replay, not a move
        binfo = topics.lookup(ctx, t)
        bo = binfo.offset(mid.ledger_id, mid.entry_id) if binfo is not None else None
        if bo is None or mid.entry_id < 0:
            continue   # the original is not in this store
        pos = info.position(first_offset + i)
        to_id = MessageId(pos.ledger_id, pos.entry_id, here.partition_index)
        sub, consumer, rc = _holder(ctx, binfo, bo, props.get(REAL_SUBSCRIPTION))
        extra = {"toTopic": info.name, "toMessageId": str(to_id), "byClient": True,
                 "producer": producer}
        if mid.batch_index >= 0:
            extra["batchIndexes"] = [mid.batch_index]
        name = info.name
        retry = name.endswith(RETRY_SUFFIX) or (not name.endswith(DLQ_SUFFIX) and deliver_at)
        if retry:
            extra["delay"] = _int(props.get(DELAY_TIME))
            extra["reconsumeTimes"] = _int(props.get(RECONSUMETIMES))
        history.record(ctx, binfo, bo, history.RETRIED if retry else history.DEAD_LETTERED,
                       sub, consumer, rc, **extra)


def _holder(ctx, info, offset: int, named: str | None):
    """(subscription, consumer, redelivery count) of the delivery the copy came from: the
    subscription named (REAL_SUBSCRIPTION), else the one subscription that holds the original
    as delivered and not acknowledged; (None, None, None) when there is none or several."""
    pdb = ctx.env.db["pending"]
    found = []
    for c in ctx.cursors.list(ctx.txn, info.ml_id):
        if named is not None and c.name != named:
            continue
        raw = ctx.txn.get(keys.pair(c.id, offset), db=pdb)
        if raw is not None:
            rec = Pending.from_stored(codec.decode(raw))
            found.append((c.name, rec.consumer, rec.redelivery_count))
        elif named is not None:
            found.append((c.name, None, None))
    return found[0] if len(found) == 1 else (named, None, None)


def _int(text) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None
