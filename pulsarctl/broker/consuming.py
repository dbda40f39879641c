"""The consumer side of the data plane, each function the body of one Broker transaction:
subscribe (attach a consumer), fetch (flow permits: deliver), ack, nack, reconsume-later,
redeliver-unacked, close, and the non-durable reader's read. As Pulsar's ServerCnx hands a
client's commands to the subscription and its dispatcher, these hand each call to the concept
modules: subscriptions (cursors), consumers (who is attached), dispatch (who gets what), nacks,
retry, batches and chunks.

One-shot `produce` never loads this module (Broker imports it on first use)."""
from __future__ import annotations

from store import codec
from pulsarctl.broker import (
    batches, chunks, compaction, consumers, cursor_admin, deadletter, dispatch, expiry, history,
    nacks, partitions, redelivery, topics, unpack, subscriptions as subs,
)
from pulsarctl.broker.targets import by_owner, expand, topic_name, with_subscription
from pulsarctl.broker.subscription_state import state
from pulsarctl.consumer_policy import ConsumerPolicy
from pulsarctl.errors import MessageNotFound
from pulsarctl.messages import MessageId
from pulsarctl.names import TopicName


def subscribe(ctx, names, subscription, consumer_name, sub_type, position, *, priority=0,
              pid=None, pid_start=None, lease_ms=None, fetch=0, policy=None, settings=None):
    """Create the subscription where needed and attach a consumer on every topic that names
    stands for; with fetch > 0, also deliver up to that many messages. Returns (topic names,
    messages)."""
    sub_type = subs.normalize_type(sub_type)
    if isinstance(settings, ConsumerPolicy):
        settings = settings.to_store()
    targets = expand(ctx, names)
    # Flags left out keep the stored values: retry stays on, with its names and limit.
    info0 = topics.lookup(ctx, targets[0])
    c0 = subs.get(ctx, info0, subscription) if info0 is not None else None
    stored = state(c0).policy if c0 is not None else {}
    given = {k: v for k, v in (settings or {}).items() if v is not None}
    if given.get("enableRetry") or stored.get("enableRetry"):
        first = str(topic_name(names if isinstance(names, (str, TopicName)) else names[0]))
        settings = deadletter.settings_for(first, subscription, {**stored, **given}, ctx)
        for rt in partitions.expand(ctx, topic_name(settings["retryLetterTopic"])):
            if rt not in targets:
                targets.append(rt)
    non_persistent = ctx.broker.non_persistent
    for p in targets:
        info = topics.ensure(ctx, p)
        if non_persistent:
            _np_attach(ctx, info, subscription)
        c = subs.create(ctx, info, subscription, "Latest" if non_persistent else position,
                        sub_type)
        consumers.attach(ctx, info, c, consumer_name, sub_type, priority=priority,
                         pid=pid, pid_start=pid_start, lease_ms=lease_ms, policy=policy)
        if settings:
            subs.update_policy(ctx, c, settings)
    msgs = deliver(ctx, targets, subscription, consumer_name, fetch, 0) if fetch else []
    if isinstance(names, (str, TopicName)) and len(targets) == 1:
        return str(targets[0]), msgs
    return [str(p) for p in targets], msgs


def refused(ctx, names, subscription, consumer_name, error: str, reason: str) -> None:
    """A consumer the subscription turned away (error: Pulsar's ServerError name): the message
    it would have been given next says so (history.refused), on every topic of names that has
    the subscription. A subscription with nothing waiting has no message to tell it."""
    for _p, info, c in with_subscription(ctx, expand(ctx, names), subscription):
        o = dispatch.next_waiting(ctx, info, c)
        if o is not None:
            history.refused(ctx, info, o, c.name, consumer_name, error, reason)


def _np_attach(ctx, info, subscription) -> None:
    """A non-persistent subscription with no consumer left starts over at the newest
    message: what was published while nobody listened is not delivered."""
    c = subs.get(ctx, info, subscription)
    if c is not None and not consumers.sweep(ctx, info, c):
        subs.clear_delivery_state(ctx, c)
        if c.mark_delete < info.last_offset:
            cursor_admin.clear_backlog(ctx, info, c)


def deliver(ctx, targets, subscription, consumer_name, max_n, start, whole_batches=False):
    """Up to max_n messages for the consumer from its topics, starting at topic index start:
    due nack timers fire and TTL applies first, then the subscription's dispatcher picks.
    whole_batches: see dispatch.fetch."""
    out = []
    got = 0
    k = len(targets)
    for j in range(k):
        if got >= max_n:
            break
        p = targets[(start + j) % k]
        info = topics.lookup(ctx, p)
        if info is None:
            continue
        c = subs.get(ctx, info, subscription)
        if c is None:
            continue
        live = consumers.sweep(ctx, info, c)
        rec = next((r for r in live if r.name == consumer_name), None)
        if rec is None:
            continue
        redelivery.fire(ctx, info, c)
        expiry.apply(ctx, info, [c])
        if state(c).policy.get("readCompacted"):
            compaction.skip_obscured(ctx, info, c)
        more = dispatch.fetch(ctx, info, c, rec, live, max_n - got, str(p), p.partition_index,
                              whole_batches)
        got += batches.message_count(more) if whole_batches else len(more)
        out.extend(more)
    return out


def fetch(ctx, names, subscription, consumer_name, max_n, acks=(), renew=False, start=0,
          whole_batches=False):
    """Apply acks (grouped, as the client's ack grouping does), then deliver up to max_n
    messages to the consumer from its topics, starting at topic index start. whole_batches:
    a batch entry comes as one batches.Batch (serve forwards it unopened)."""
    targets = expand(ctx, names)
    if acks:
        ack_ids(ctx, targets, subscription, acks, False)
    attached = False
    for _p, info, c in with_subscription(ctx, targets, subscription):
        if any(r.name == consumer_name for r in consumers.sweep(ctx, info, c)):
            attached = True
            if renew:
                consumers.renew(ctx, c, [consumer_name])
    if not attached:
        info = topics.require(ctx, targets[0])
        c = subs.require(ctx, info, subscription)
        consumers.require(ctx, c, consumer_name)  # raises: we were disconnected
    return deliver(ctx, targets, subscription, consumer_name, max_n, start, whole_batches)


def ack_ids(ctx, targets, subscription, ids, cumulative) -> int:
    """Group ids by the partition their ledger belongs to and ack each group; an id on no
    topic of targets is MessageNotFound, and then nothing is acked (one transaction)."""
    allowed = {str(p): p for p in targets}
    if len(targets) == 1:
        groups = {str(targets[0]): list(ids)}
    else:
        groups: dict[str, list] = {}
        owners: dict[int, str | None] = {}
        for mid in ids:
            lid = mid.ledger_id
            owner = owners.get(lid) if lid in owners else owners.setdefault(
                lid, partitions.owner_topic(ctx, lid))
            if owner not in allowed:
                where = ", ".join(list(allowed)[:3])
                raise MessageNotFound(f"message {mid} not found on {where}")
            groups.setdefault(owner, []).append(mid)
    total = 0
    for owner, mids in groups.items():
        info = topics.require(ctx, allowed[owner])
        c = subs.require(ctx, info, subscription)
        if any(m.batch_index >= 0 for m in mids):
            # Batch indexes: acked in part until every index of the entry is.
            offsets, newly_idx, completed, held = batches.resolve(ctx, info, c, mids,
                                                                  cumulative)
            consumers.renew(ctx, c, held)
            if not offsets:
                ctx.cursors.save(ctx.txn, c)
                total += newly_idx
                continue
            total += newly_idx - completed
        else:
            offsets = subs.offsets_of(ctx, info, mids)
        if not offsets:
            continue
        if not cumulative:
            # The id of a chunked message (its last chunk's) acks every chunk; the count
            # is of the ids given.
            rest = chunks.earlier(ctx, info, offsets)
            if rest:
                consumers.renew(ctx, c, subs.ack(ctx, info, c, rest)[1])
        newly, holders = subs.ack(ctx, info, c, offsets, cumulative)
        consumers.renew(ctx, c, holders)
        total += newly
    return total


def ack(ctx, names, subscription, ids, cumulative=False) -> int:
    """Acknowledge message ids. Any id that names no message: nothing is acked (exit 3)."""
    targets = expand(ctx, names)
    if len(targets) == 1:
        info = topics.require(ctx, targets[0])
        subs.require(ctx, info, subscription)
    return ack_ids(ctx, targets, subscription, ids, cumulative)


def nack(ctx, names, subscription, ids) -> int:
    """Negatively acknowledge message ids: each is redelivered after the nack delay (or
    backoff), or dead-lettered past maxRedeliverCount. Returns how many were nacked."""
    total = 0
    for owner, mids in by_owner(ctx, expand(ctx, names), ids).items():
        info = topics.require(ctx, owner)
        c = subs.require(ctx, info, subscription)
        redelivery.fire(ctx, info, c)
        # A batch index names its entry: the whole batch is redelivered (Pulsar's
        # NegativeAcksTracker collapses indexes to the entry).
        offsets = subs.offsets_of(ctx, info, mids)
        rest = chunks.earlier(ctx, info, offsets)  # a chunked message's other chunks
        if rest:
            consumers.renew(ctx, c, nacks.nack(ctx, info, c, rest)[1])
        n, holders = nacks.nack(ctx, info, c, offsets)
        consumers.renew(ctx, c, holders)
        total += n
    return total


def reconsume_later(ctx, names, subscription, ids, delay_ms: int, properties=None,
                    level: int | None = None, increment: bool = False) -> dict:
    """Move messages to the retry letter topic (or the DLQ past the limit) and ack them. Ids
    may be on the topics or on their retry topic."""
    targets = expand(ctx, names)
    for _p, _info, c in list(with_subscription(ctx, targets, subscription)):
        rt = state(c).policy.get("retryLetterTopic")
        for q in (partitions.expand(ctx, topic_name(rt)) if rt else ()):
            if q not in targets:
                targets.append(q)
    out = {"retry": 0, "dlq": 0}
    for owner, mids in by_owner(ctx, targets, ids).items():
        info = topics.require(ctx, owner)
        c = subs.require(ctx, info, subscription)
        subs.offsets_of(ctx, info, mids)  # every id names a message, or nothing moves
        for mid in mids:
            got = subs.offsets_of(ctx, info, [mid])
            if not got or ctx.cursors.is_acked(ctx.txn, c, got[0]):
                continue
            for where in deadletter.reconsume_later(ctx, info, c, got[0], delay_ms, properties,
                                               level, increment, mid.batch_index):
                out[where] += 1
    return out


def requeue(ctx, names, subscription, consumer_name, ids) -> int:
    """Batch messages a leaving `receive` fetched but did not hand out: kept for the
    consumer's next fetch, which continues the batch (batches.queue). Returns how many."""
    n = 0
    for owner, mids in by_owner(ctx, expand(ctx, names), ids).items():
        info = topics.lookup(ctx, owner)
        c = subs.get(ctx, info, subscription) if info is not None else None
        if c is not None:
            n += batches.queue(ctx, info, c, consumer_name, mids)
            ctx.cursors.save(ctx.txn, c)
    return n


def redeliver_unacked(ctx, names, subscription, consumer_name=None, ids=None) -> int:
    """redeliverUnacknowledgedMessages: a consumer's (or every consumer's) pending messages
    go back now, counted as redeliveries; with ids, only those (what a Pulsar client sends
    once its own nack delay or ack timeout ran out: CommandRedeliverUnacknowledgedMessages
    with message ids). Returns how many."""
    if ids is not None:
        return _redeliver_ids(ctx, expand(ctx, names), subscription, consumer_name, ids)
    n = 0
    targets = expand(ctx, names)
    found = False
    for _p, info, c in with_subscription(ctx, targets, subscription):
        found = True
        live = {r.name for r in consumers.sweep(ctx, info, c)}
        if consumer_name is not None and consumer_name not in live:
            continue
        offsets = [o for o, r in subs.pending_items(ctx, c.id)
                   if consumer_name is None or r.consumer == consumer_name]
        if offsets:
            redelivery.redeliver(ctx, info, c, offsets, reason="redeliverUnacknowledgedMessages")
            n += len(offsets)
    if not found:
        subs.require(ctx, topics.require(ctx, targets[0]), subscription)
    return n


def _redeliver_ids(ctx, targets, subscription, consumer_name, ids) -> int:
    """A client's nack, as Pulsar's broker takes it: the client has held each message for its
    nack delay already (NegativeAcksTracker; or its ack timeout, UnAckedMessageTracker), so the
    dispatcher redelivers them at once, counted (redeliverUnacknowledgedMessages(consumer,
    positions)); no timer of the broker's is involved. Ids the consumer no longer holds (acked
    or redelivered meanwhile) are passed over, as Pulsar passes them over; so are ids on no
    topic of targets: a client's stale request is no error."""
    n = 0
    for owner, mids in by_owner(ctx, targets, [m for m in ids if _owned(ctx, targets, m)]).items():
        info = topics.lookup(ctx, owner)
        c = subs.get(ctx, info, subscription) if info is not None else None
        if c is None:
            continue
        redelivery.fire(ctx, info, c)
        offsets = sorted({o for o in (info.offset(m.ledger_id, m.entry_id) for m in mids)
                          if o is not None and info.contains(o)})
        offsets += chunks.earlier(ctx, info, offsets) if offsets else []
        n += nacks.asked(ctx, info, c, consumer_name, offsets)
    return n


def _owned(ctx, targets, mid) -> bool:
    if len(targets) == 1:
        return True
    return partitions.owner_topic(ctx, mid.ledger_id) in {str(p) for p in targets}


def close_consumer(ctx, names, subscription, consumer_name, acks=()) -> None:
    """Apply the last acks and disconnect: what the consumer received comes back, what it
    nacked stays held until its nack timer fires (nacks.py)."""
    targets = expand(ctx, names)
    if acks:
        ack_ids(ctx, targets, subscription, acks, False)
    for _p, info, c in with_subscription(ctx, targets, subscription):
        consumers.detach(ctx, info, c, consumer_name)


def mark_delete_position(ctx, t: TopicName, sub: str | None = None, next_offset=None,
                         start=None, inclusive=False) -> MessageId:
    """GET_LAST_MESSAGE_ID's consumer_mark_delete_position, which the client compares with the
    last message id for hasMessageAvailable: a subscription's mark-delete position; for a
    reader (sub None) the position just before what it reads next."""
    info = topics.lookup(ctx, t)
    if info is None:
        return MessageId(-1, -1, t.partition_index)
    if sub is not None:
        off = subs.require(ctx, info, sub).mark_delete
    else:
        if next_offset is not None:
            nxt = next_offset
        elif start == MessageId.earliest:
            nxt = info.first_offset
        elif start is None or start == MessageId.latest:
            nxt = info.next_offset
        else:
            o = info.offset(start.ledger_id, start.entry_id)
            nxt = info.next_offset if o is None else (o if inclusive else o + 1)
        off = nxt - 1
    p = info.mark_position(off)
    return MessageId(p.ledger_id, p.entry_id, t.partition_index)


def reached_end(ctx, t: TopicName, sub: str | None = None, next_offset=None) -> bool:
    """Whether a consumer has read everything a terminated topic will ever hold (Pulsar's
    ReachedEndOfTopic): the subscription's read position (a reader's next offset) is at the
    topic's end and the topic is terminated."""
    info = topics.lookup(ctx, t)
    if info is None or not topics.meta(ctx, t).get("terminated"):
        return False
    if sub is None:
        return next_offset is not None and next_offset >= info.next_offset
    c = subs.get(ctx, info, sub)
    return c is not None and c.read_position >= info.next_offset


def consumer_stats(ctx, t: TopicName, sub: str, name: str) -> dict | None:
    """CONSUMER_STATS's answer: the subscription's stats (stats.subscription_stats) with the
    one consumer's record under "consumer", or None when there is no such subscription."""
    from pulsarctl.broker import stats  # lazy: only a client asking for stats needs it

    info = topics.lookup(ctx, t)
    c = subs.get(ctx, info, sub) if info is not None else None
    if c is None:
        return None
    out = stats.subscription_stats(ctx, info, c)
    out["consumer"] = next((r for r in out["consumers"] if r["consumerName"] == name), {})
    return out


def failover_active_name(ctx, t: TopicName, sub: str) -> str | None:
    """The consumer a Failover subscription's cursor names active (consumers.note_active)."""
    info = topics.lookup(ctx, t)
    c = subs.get(ctx, info, sub) if info is not None else None
    return None if c is None else state(c).active


def offset_for_publish_time(ctx, t: TopicName, time_ms: int) -> int:
    """A reader's seek(timestamp): the offset of the first message published at or after
    time_ms (the topic's end when there is none)."""
    return cursor_admin.offset_for_time(ctx, topics.require(ctx, t), time_ms - 1)


def read_entries(ctx, t: TopicName, start_offset: int | None, limit: int, after_id=None,
                 inclusive=False, compacted=False):
    """For readers: up to limit messages from an offset (or from a message id). Returns
    (messages, next offset, last offset). compacted: read the compacted copy up to its horizon
    (compaction.py), the topic after it."""
    info = topics.require(ctx, t)
    start = start_offset
    skip_in, skip = None, None
    if start is None:
        if after_id == MessageId.earliest:
            start = info.first_offset
        elif after_id == MessageId.latest or after_id is None:
            start = info.next_offset if not inclusive else max(info.last_offset, info.first_offset)
        else:
            o = info.offset(after_id.ledger_id, after_id.entry_id)
            if o is None:
                raise MessageNotFound(f"message {after_id} not found on {t}")
            start = o if inclusive else o + 1
            if after_id.batch_index >= 0:
                # The reader drops the batch indexes before its start in the start
                # entry (isPriorEntryIndex: idx <= start exclusive, < start inclusive).
                start, skip_in = o, o
                skip = set(range(after_id.batch_index + (0 if inclusive else 1)))
    if compacted:
        if start_offset is None and after_id == MessageId.earliest:
            start = 0  # the copy may reach below the topic's first entry: retention keeps it
        out, nxt = compaction.read(ctx, info, t, start, limit, skip_in, skip)
        return out, nxt, info.last_offset
    start = max(start, info.first_offset)
    out = []
    nxt = start
    for o, lid, eid, raw in ctx.ledgers.scan(ctx.txn, info, start, start + limit):
        out.extend(unpack.messages(codec.decode(raw), lid, eid, t.partition_index,
                                    str(t), skip=skip if o == skip_in else None))
        nxt = o + 1
    return out, nxt, info.last_offset
