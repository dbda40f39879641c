"""`explain`: a message's life read back from the message history (history.py), oldest first.

A message is named by its id, with its topic or without: ledger ids are unique in a store
(store/ledger.py's owners), so an id alone finds its topic. The store of the non-persistent
topics counts its own ledger ids (and keeps no history): an id whose ledger both stores hold is
ambiguous, and explain says so rather than guess. A batch index names one message of a batch
entry; on an entry that is not a batch, or past the batch's size, it names nothing.

A dead letter or retry copy's life starts with its original's, followed back through the
published event that names it (a copy of a copy too: a retry, then the dead letter)."""
from __future__ import annotations

from store import codec
from pulsarctl.broker import partitions, policies, topics
from pulsarctl.broker.history import as_doc, events_of, retention_ms, with_entry
from pulsarctl.entries import batch_size, is_batch
from pulsarctl.errors import MessageNotFound, SubscriptionNotFound, UsageError
from pulsarctl.message_events import PUBLISHED
from pulsarctl.messages import parse_message_id
from pulsarctl.names import topic_name

_FOLLOW_LIMIT = 16  # copies of copies followed back (a retry of a retry... then the DLQ)


# The topic (partition) a ledger belongs to in this store, or None.
ledger_topic = partitions.owner_topic


def explain(ctx, topic, mid, sub: str | None = None, elsewhere: str | None = None) -> dict:
    """A message's life, oldest first: {"messageId", "topic", "events"}. A dead letter or
    retry copy's life starts with its original's (each event names its topic). topic None:
    the topic that holds the id's ledger (elsewhere: the non-persistent topic that holds a
    ledger of that id too, which makes the id ambiguous: UsageError). MessageNotFound when the
    id names no entry of the topic, ever, or a batch index the entry does not have."""
    if topic is None:
        topic = _topic_of(ctx, mid, elsewhere)
    t = topic_name(topic)
    if mid.partition >= 0 and not t.is_partition:
        t = t.partition(mid.partition)
    info = topics.lookup(ctx, t)
    if info is None:
        raise MessageNotFound(f"message {mid} not found: topic {t} does not exist",
                              hint="list topics with `pulsarctl topics list`")
    o = info.offset(mid.ledger_id, mid.entry_id)
    if o is not None and mid.entry_id >= 0 and mid.batch_index >= 0:
        _check_batch_index(ctx, info, o, mid)
    values = events_of(ctx, info.ml_id, o) if o is not None and mid.entry_id >= 0 else []
    if o is not None and mid.entry_id >= 0:
        values = with_entry(ctx, info, o, values)
        if values and not info.contains(o):
            # Trimmed: a range event still held by its newer entries is this one's only
            # within the history's retention, as its own events are.
            keep = retention_ms(ctx, policies.effective(ctx, info.name, policies.RETENTION)[
                "retentionTimeInMinutes"])
            if keep is not None:
                values = [v for v in values if v.at > ctx.now - keep]
    if not values and (o is None or mid.entry_id < 0 or not info.contains(o)):
        hint = (f"ids on this topic run up to {info.position(info.last_offset)}"
                if info.entries else "the topic has no messages")
        raise MessageNotFound(f"message {mid} not found on {info.name}", hint=hint)
    events = _docs(values, str(t), sub, mid.batch_index)
    if sub is not None and not any(e["subscription"] == sub for e in events) \
            and ctx.cursors.get(ctx.txn, info.ml_id, sub) is None:
        # A typo would only filter everything out: say so (a deleted subscription's events
        # still show).
        raise SubscriptionNotFound(
            f"subscription '{sub}' not found on {info.name}, and no event of the message "
            f"names it", hint="list them with `pulsarctl topics subscriptions "
            f"{info.name.split('/')[-1]}`")
    seen = 0
    while values and seen < _FOLLOW_LIMIT:
        origin = values[0].detail if values[0].kind == PUBLISHED else {}
        if not origin.get("fromTopic"):
            break
        seen += 1
        try:
            back = parse_message_id(origin["fromMessageId"])
            bt = topic_name(origin["fromTopic"])
        except Exception:  # an origin we cannot read back: the copy's own life is all we show
            break
        if back.partition >= 0 and not bt.is_partition:
            bt = bt.partition(back.partition)
        binfo = topics.lookup(ctx, bt)
        bo = binfo.offset(back.ledger_id, back.entry_id) if binfo is not None else None
        values = with_entry(ctx, binfo, bo, events_of(ctx, binfo.ml_id, bo)) \
            if bo is not None else []
        events = _docs(values, str(bt), None, back.batch_index) + events
    return {"messageId": str(mid), "topic": str(t), "events": events}


def _topic_of(ctx, mid, elsewhere: str | None) -> str:
    """The topic an id names without one: its ledger's (store/ledger.py's owners)."""
    name = ledger_topic(ctx, mid.ledger_id)
    if name is None:
        raise MessageNotFound(f"message {mid} not found: no topic of this store has ledger "
                              f"{mid.ledger_id}", hint="give its topic with -t TOPIC")
    if elsewhere is not None:
        raise UsageError(f"message id {mid} is ambiguous: ledger {mid.ledger_id} is on {name} "
                         f"and on {elsewhere}", hint="give its topic with -t TOPIC")
    t = topic_name(name)
    if mid.partition >= 0 and t.partition_index != mid.partition:
        raise MessageNotFound(f"message {mid} not found: ledger {mid.ledger_id} is on {name}, "
                              f"not on partition {mid.partition}",
                              hint=f"its id there ends in :{t.partition_index}")
    return name


def _check_batch_index(ctx, info, o: int, mid) -> None:
    """A batch index names a message of a batch entry: refuse one the entry does not have (an
    entry trimmed already cannot be read: its history is all there is, left as it is)."""
    if not info.contains(o):
        return
    try:
        rec = codec.decode(ctx.ledgers.read(ctx.txn, info, o))
    except Exception:  # offloaded or unreadable: nothing to check against
        return
    size = batch_size(rec)
    whole = f"{mid.ledger_id}:{mid.entry_id}:{mid.partition}"
    if not is_batch(rec):
        raise MessageNotFound(f"message {mid} not found: {whole} is not a batch, so it has no "
                              f"batch index {mid.batch_index}", hint=f"explain {whole}")
    if mid.batch_index >= size:
        raise MessageNotFound(f"message {mid} not found: {whole} is a batch of {size} "
                              f"messages, indexes 0 to {size - 1}",
                              hint=f"explain {whole}:{size - 1}")


def _docs(values, topic: str, sub, batch_index: int) -> list[dict]:
    out = []
    for v in values:
        d = as_doc(v, sub)
        if d is None:
            continue
        idx = d.get("batchIndexes")
        if idx is not None and batch_index >= 0 and batch_index not in idx:
            continue  # another index of the batch was acked
        d["topic"] = topic
        out.append(d)
    return out

