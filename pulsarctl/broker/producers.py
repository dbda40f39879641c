"""Publishing: producer names, sequence ids, the maximum message size, appends."""
from __future__ import annotations

from store import codec
from pulsarctl.broker import topics
from pulsarctl.errors import MessageTooLarge, TopicTerminated
from pulsarctl.messages import MessageId, OutgoingMessage, build_entry
from pulsarctl.names import TopicName

_encode = codec.encode


def check_sizes(ctx, messages: list[OutgoingMessage]) -> None:
    limit = ctx.setting("maxMessageSize")
    for i, m in enumerate(messages):
        if len(m.payload) > limit:
            raise MessageTooLarge(
                f"message {i + 1} is {len(m.payload)} bytes, over maxMessageSize {limit}")


def new_producer_name(ctx) -> str:
    """Broker-generated names, as a standalone Pulsar gives them: standalone-0-N."""
    n = (ctx.get("counter", "producer") or 0)
    ctx.put(n + 1, "counter", "producer")
    return f"standalone-0-{n}"


def publish(ctx, topic: TopicName, messages: list[OutgoingMessage], producer_name: str | None,
            partition: int = -1) -> tuple[str, list[MessageId]]:
    """Append messages in this transaction. Returns (producer name, message ids)."""
    check_sizes(ctx, messages)
    info = topics.ensure(ctx, topic)
    if topics.meta(ctx, topic).get("terminated"):
        raise TopicTerminated(f"topic {topic} is terminated; it accepts no more messages",
                              hint="produce to another topic")
    if producer_name is None:
        producer_name = new_producer_name(ctx)
    last = ctx.get("producer", info.ml_id, producer_name)
    seq = -1 if last is None else last
    now = ctx.now
    entries = []
    add = entries.append
    for m in messages:
        s = m.sequence_id
        if s is None:
            s = seq = seq + 1
        elif s > seq:
            seq = s
        add(_encode(build_entry(now, producer_name, s, m)))
    ctx.put(seq, "producer", info.ml_id, producer_name)
    ids = []
    for lid, e0, n in ctx.ledgers.append(ctx.txn, info, entries, now):
        ids.extend([MessageId(lid, e, partition) for e in range(e0, e0 + n)])
    return producer_name, ids
