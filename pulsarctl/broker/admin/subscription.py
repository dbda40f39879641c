"""One subscription of a topic (broker.subscription(topic, name)): create, unsubscribe,
describe, its pending messages and consumers, peek, and the cursor administration of
pulsar-admin (skip, clear-backlog, reset-cursor, expire-messages: cursor_admin.py)."""
from __future__ import annotations

from store import codec
from pulsarctl.broker import (
    batches, consumers, cursor_admin, deadletter, partitions, redelivery, redelivery_state, stats,
    timers, topics, unpack, subscriptions as subs,
)
from pulsarctl.broker import cursor_view as pictures
from pulsarctl.broker.nacks import DEFAULT_NACK_DELAY_MS
from pulsarctl.broker.subscription_state import state
from pulsarctl.broker.targets import expand, subscribed, topic_name
from pulsarctl.errors import InvalidValue, MessageNotFound
from pulsarctl.messages import MessageId, iso_ms, parse_message_id
from pulsarctl.names import retry_topic
from pulsarctl.wake import wakes


def _consuming():
    # lazy: broker/consuming.py imports dispatch and the rest, which one-shot produce never needs
    from pulsarctl.broker import consuming

    return consuming


# What the cursor commands add up over the partitions of a partitioned topic.
_COUNTS = ("skipped", "cleared", "expired", "msgBacklog")


class Subscription:
    """A handle: nothing is read until a method runs (each one transaction). The Broker that
    makes it is already the one that owns the topic (Broker.subscription)."""
    __slots__ = ("_broker", "topic", "name")

    def __init__(self, broker, topic, name: str):
        self._broker = broker
        self.topic = topic_name(topic)
        self.name = name

    # -- lifecycle ---------------------------------------------------------------------------
    def create(self, position="Latest"):
        t, name = self.topic, self.name

        def run(ctx):
            targets = expand(ctx, t)
            if isinstance(position, MessageId) and position not in (MessageId.earliest,
                                                                     MessageId.latest):
                owner = partitions.owner_topic(ctx, position.ledger_id)
                targets = [p for p in targets if str(p) == owner] or targets[:1]
            for p in targets:
                info = topics.ensure(ctx, p)
                c = subs.create(ctx, info, name, position, exist_ok=False)
                # No consumer has come, so no type yet: Pulsar reports "None" until one does
                # (its subscription has no dispatcher); the first consumer sets it.
                subs.clear_type(c)
                ctx.cursors.save(ctx.txn, c)
        self._broker._write(run)

    @wakes   # a waiting consumer of serve learns at once that its subscription went
    def unsubscribe(self, force=False, asker: str | None = None):
        """asker: the consumer that asks, as a client's unsubscribe does (consumers.unsubscribe)."""
        def run(ctx):
            for _p, info, _c in subscribed(ctx, self.topic, self.name):
                consumers.unsubscribe(ctx, info, self.name, force, asker)
        self._broker._write(run)

    # -- looking inside ----------------------------------------------------------------------
    # What a client's connection asks of its subscription (Pulsar's ServerCnx), on this topic
    # alone: the Broker that made the handle owns it, non-persistent included.
    def consumer_stats(self, consumer_name: str) -> dict | None:
        """CONSUMER_STATS's answer: the subscription's stats with the one consumer's record
        under "consumer"; None when there is no such subscription."""
        return self._broker._read(_consuming().consumer_stats, self.topic, self.name,
                                  consumer_name)

    def mark_delete_position(self) -> MessageId:
        """GET_LAST_MESSAGE_ID's consumer_mark_delete_position."""
        return self._broker._read(_consuming().mark_delete_position, self.topic, self.name)

    def failover_active_name(self) -> str | None:
        """The consumer a Failover subscription's cursor names active (None: no such
        subscription)."""
        return self._broker._read(_consuming().failover_active_name, self.topic, self.name)

    def reached_end(self) -> bool:
        """Whether the subscription has read all its terminated topic will ever hold
        (REACHED_END_OF_TOPIC)."""
        return self._broker._read(_consuming().reached_end, self.topic, self.name)

    def policy(self) -> dict:
        """The policy stored with the subscription ({} when it does not exist)."""
        def run(ctx):
            for p in partitions.expand(ctx, self.topic):
                info = topics.lookup(ctx, p)
                c = subs.get(ctx, info, self.name) if info is not None else None
                if c is not None:
                    return dict(state(c).policy)
            return {}
        return self._broker._read(run)

    def describe(self) -> dict:
        """Type, the effective policy, the derived dead letter and retry topic names, and the
        cursor, for `subscriptions describe`. On a partitioned topic the subscription is one
        (its type and policy are the same on every partition): the backlog and timers are
        added up, and each partition's cursor is under "partitions"."""
        t, name = self.topic, self.name

        def cursor(ctx, info, c) -> dict:
            return {
                "markDeletePosition": str(info.mark_position(c.mark_delete)),
                "readPosition": str(info.position(c.read_position)),
                "msgBacklog": c.backlog(info.next_offset),
                "individuallyDeletedMessages": stats._ranges_text(
                    info, ctx.cursors.individually_deleted(ctx.txn, c)),
                "timersScheduled": timers.count(ctx, c.id),
                "timersDue": timers.count(ctx, c.id, due_by=ctx.now),
            }

        def run(ctx):
            found = subscribed(ctx, t, name)
            c = found[0][2]
            policy = {"negativeAckRedeliveryDelayMs": DEFAULT_NACK_DELAY_MS,
                      **{k: v for k, v in state(c).policy.items() if v is not None}}
            doc = {
                "topic": str(t), "subscription": name,
                "type": subs.shown_type(c), "durable": True,
                "policy": policy,
                "deadLetterTopic": deadletter.dlq_topic(str(t), name, policy),
                "retryLetterTopic": policy.get("retryLetterTopic") or retry_topic(str(t), name),
            }
            each = {str(p): cursor(ctx, info, c) for p, info, c in found}
            if not partitions.get(ctx, t):
                doc.update(each[str(t)])
                return doc
            for key in ("msgBacklog", "timersScheduled", "timersDue"):
                doc[key] = sum(x[key] for x in each.values())
            doc["partitions"] = each
            return doc
        return self._broker._read(run)

    def pending(self) -> list[dict]:
        """Delivered, unacknowledged messages: consumer, idle time, redelivery count and the
        next redelivery (a nack timer), for `subscriptions pending`."""
        def run(ctx):
            out = []
            for p, info, c in subscribed(ctx, self.topic, self.name):
                due = timers.pending(ctx, c.id)
                for o, rec in subs.pending_items(ctx, c.id):
                    pos = info.position(o)
                    # The first timer that still applies to this delivery (a nack voids the
                    # ack timeout; a redelivery voids both).
                    nxt = next((when for when, timer in due.get(o, ())
                                if redelivery.applies(timer, rec)), None)
                    out.append({
                        "messageId": str(MessageId(pos.ledger_id, pos.entry_id, p.partition_index)),
                        "topic": str(p), "consumerName": rec.consumer,
                        "deliveredAt": iso_ms(rec.delivered_at),
                        "idleMs": max(0, ctx.now - rec.delivered_at),
                        "redeliveryCount": rec.redelivery_count,
                        "nextRedelivery": iso_ms(nxt) if nxt is not None else None,
                    })
            return out
        return self._broker._read(run)

    def cursor_view(self, around=None, n: int = pictures.DEFAULT_WINDOW):
        """The picture of the cursor (`topics cursor`): a window of n entries, around the
        mark-delete position or the message id around (a MessageId or its text), each entry's
        state; one read transaction, O(n) (broker/cursor_view.py). A cursor_view.Views."""
        if isinstance(around, str):
            around = parse_message_id(around)
        return self._broker._read(pictures.views, self.topic, self.name, around, n)

    def consumers(self):
        def run(ctx):
            out = []
            for p, info, c in subscribed(ctx, self.topic, self.name):
                for r in stats.subscription_stats(ctx, info, c)["consumers"]:
                    if p.is_partition:
                        r["topic"] = str(p)
                    out.append(r)
            return out
        return self._broker._read(run)

    def peek(self, n: int = 1):
        """peek-messages: from after mark-delete, skipping acked ones; changes nothing. On a
        partitioned topic, partition by partition."""
        def run(ctx):
            out = []
            for p, info, c in subscribed(ctx, self.topic, self.name):
                replay = dict(redelivery_state.replay_items(ctx, c.id))
                pending = {o: r.redelivery_count for o, r in subs.pending_items(ctx, c.id)}
                for o in ctx.cursors.unacked(ctx.txn, c, c.mark_delete + 1, info.next_offset):
                    if len(out) >= n:
                        break
                    pos = info.position(o)
                    rc = replay.get(o, pending.get(o, 0))
                    # A batch shows its messages not acked yet, each with its batch index.
                    out.extend(unpack.messages(
                        codec.decode(ctx.ledgers.read(ctx.txn, info, o)), pos.ledger_id,
                        pos.entry_id, p.partition_index, str(p), rc,
                        skip=batches.acked_indexes(ctx, c, o))[:n - len(out)])
            return out
        return self._broker._read(run)

    def peek_entry(self, n: int):
        """The nth entry (from 1) after the mark-delete position that is not acknowledged, whole
        (a batch is one entry), as Pulsar's peek over REST reads it (ManagedCursor.getNthEntry
        with the individually deleted entries left out): (ledger id, entry id, stored record),
        or None past the last one. On one topic or partition only."""
        if n < 1:
            raise InvalidValue(f"the message position must be 1 or more, not {n}")

        def run(ctx):
            info = topics.require(ctx, self.topic)
            c = subs.require(ctx, info, self.name)
            unacked = ctx.cursors.unacked(ctx.txn, c, c.mark_delete + 1, info.next_offset)
            for k, o in enumerate(unacked, 1):
                if k == n:
                    pos = info.position(o)
                    return pos.ledger_id, pos.entry_id, codec.decode(
                        ctx.ledgers.read(ctx.txn, info, o))
            return None
        return self._broker._read(run)

    # -- consumers -----------------------------------------------------------------------------
    @wakes
    def disconnect_consumer(self, consumer_name) -> int:
        """subscriptions close-consumer: like the consumer's connection dropping. Returns how
        many pending messages it gave back; ConsumerNotFound if it is not connected."""
        def run(ctx):
            found, returned = False, 0
            every = subscribed(ctx, self.topic, self.name)
            for _p, info, c in every:
                rec = ctx.get("consumer", c.id, consumer_name)
                if rec is None:
                    continue
                found = True
                # Not the ones it nacked: those stay held for their nack timers.
                returned += sum(1 for _o, r in subs.pending_items(ctx, c.id)
                                if r.consumer == consumer_name and not r.nacked)
                consumers.remove(ctx, info, c, rec)
            if not found:
                consumers.require(ctx, every[0][2], consumer_name)
            return returned
        return self._broker._write(run)

    # -- cursor administration (pulsar-admin topics skip/clear-backlog/reset-cursor/expire) ----
    @wakes   # a moved cursor may make messages deliverable to the consumers waiting
    def _each_partition(self, fn, message_id=None):
        """Run fn(ctx, topic) on the topic, or on each partition of a partitioned topic (only
        the partition a message id belongs to, for a reset to an id), as pulsar-admin does;
        the documents of the partitions are added up."""
        t = self.topic

        def run(ctx):
            if not partitions.get(ctx, t):
                return fn(ctx, t)
            parts = partitions.expand(ctx, t)
            if message_id is not None and message_id not in (MessageId.earliest,
                                                             MessageId.latest):
                owner = partitions.owner_topic(ctx, message_id.ledger_id)
                parts = [p for p in parts if str(p) == owner]
                if not parts:
                    raise MessageNotFound(f"message {message_id} not found on {t}")
            docs = {str(p): fn(ctx, p) for p in parts}
            out = {"topic": str(t)}
            for k in _COUNTS:
                if any(k in d for d in docs.values()):
                    out[k] = sum(d.get(k, 0) for d in docs.values())
            out["partitions"] = docs
            return out
        return self._broker._write(run)

    def skip(self, n: int) -> dict:
        def run(ctx, t):
            info, c = cursor_admin.open_cursor(ctx, t, self.name)
            done = cursor_admin.skip(ctx, info, c, n)
            return {"topic": str(t), "subscription": self.name, "skipped": done,
                    **cursor_admin.summary(ctx, info, c)}
        return self._each_partition(run)

    def clear_backlog(self) -> dict:
        def run(ctx, t):
            info, c = cursor_admin.open_cursor(ctx, t, self.name)
            done = cursor_admin.clear_backlog(ctx, info, c)
            return {"topic": str(t), "subscription": self.name, "cleared": done,
                    **cursor_admin.summary(ctx, info, c)}
        return self._each_partition(run)

    def reset_cursor(self, time_ms=None, message_id=None, exclude: bool = False) -> dict:
        """Reset to a time (epoch ms, or text for parse_reset_time, read at the store's now) or
        to a message id (a MessageId or its text), exactly one of them; exclude: to the entry
        after the message id (pulsar-admin reset-cursor -e)."""
        if (time_ms is None) == (message_id is None):
            raise InvalidValue("reset-cursor needs exactly one of a time and a message id",
                               hint="pass -t TIME_OR_DURATION or -m MESSAGE_ID")
        if isinstance(message_id, str):
            message_id = parse_message_id(message_id)

        def run(ctx, t):
            when = (cursor_admin.parse_reset_time(time_ms, ctx.now) if isinstance(time_ms, str)
                    else time_ms)
            info, c = cursor_admin.open_cursor(ctx, t, self.name)
            if message_id is not None:
                nxt = cursor_admin.offset_for_id(ctx, info, message_id)
                if exclude:
                    nxt = min(nxt + 1, info.next_offset)
            else:
                nxt = cursor_admin.offset_for_time(ctx, info, when)
            cursor_admin.reset(ctx, info, c, nxt)
            p = info.position(nxt)
            doc = {"topic": str(t), "subscription": self.name,
                   "nextMessageId": (str(MessageId(p.ledger_id, p.entry_id, t.partition_index))
                                     if info.contains(nxt) else None)}
            if message_id is None:
                doc["timestamp"] = when
            else:
                doc["messageId"] = str(message_id)
            doc.update(cursor_admin.summary(ctx, info, c))
            return doc
        return self._each_partition(run, message_id)

    def expire_messages(self, ttl_ms: int) -> dict:
        """expire-messages. A subscription with a backlog gets its lastExpireTimestamp (Pulsar
        stamps it when the expiry is issued; it refuses one on a subscription without a backlog:
        the REST answer, from msgBacklog + expired)."""
        def run(ctx, t):
            info, c = cursor_admin.open_cursor(ctx, t, self.name)
            if c.backlog(info.next_offset) > 0:
                state(c).last_expire = ctx.now
                ctx.cursors.save(ctx.txn, c)
            done = cursor_admin.expire(ctx, info, c, ttl_ms)
            return {"topic": str(t), "subscription": self.name, "expired": done,
                    "expireTimeMs": ttl_ms, **cursor_admin.summary(ctx, info, c)}
        return self._each_partition(run)
