"""pulsar-admin topics: list, create, delete, partitions, stats, messages by id, terminate,
examine, offload."""
from __future__ import annotations

from store import codec
from pulsarctl import offload
from pulsarctl.broker import (
    cascade, compaction, consumers, cursor_admin, partitions, stats, topics, unpack,
    subscriptions as subs,
)
from pulsarctl.broker.admin.base import Noun
from pulsarctl.broker.nonpersistent import routed
from pulsarctl.broker.targets import each, topic_name
from pulsarctl.errors import (
    AlreadyExists, ConsumerBusy, InvalidValue, MessageNotFound, TopicNotFound,
)
from pulsarctl.messages import MessageId
from pulsarctl.wake import wakes


def per_partition(ctx, t, what: str, command: str, advice: str = "ask one partition") -> None:
    """Refuse, as Pulsar's admin does (405 Method Not Allowed), what only a partition has:
    exit 2 with the partition-level command to run instead."""
    if partitions.get(ctx, t):
        raise InvalidValue(f"{what} on a partitioned topic is not allowed ({t})",
                           hint=f"{advice}, e.g. `pulsarctl {command} {t.partition(0)}`")


class Topics(Noun):
    __slots__ = ()

    def list(self, namespace):
        """The namespace's topics, persistent and (when its store exists) non-persistent."""
        b = self._broker
        names = b._read(topics.list_topics, namespace)
        np = b.non_persistent_if_open()
        if np is not None:
            names += np._read(topics.list_np_topics, namespace)
        return names

    def list_partitioned(self, namespace):
        return self._broker._read(partitions.list_partitioned, namespace)

    @routed
    def create(self, name):
        t = topic_name(name)

        def run(ctx):
            if partitions.get(ctx, t):
                raise AlreadyExists(f"{t} already exists as a partitioned topic")
            topics.create_topic(ctx, t)
        self._broker._write(run)
        return str(t)

    def create_partitioned(self, name, n: int):
        t = topic_name(name)
        self._broker._write(partitions.create, t, n)
        return str(t)

    def update_partitioned(self, name, n: int):
        return self._broker._write(cascade.update_partitions, topic_name(name), n)

    def partitioned_metadata(self, name) -> dict:
        t = topic_name(name)
        return self._broker._read(lambda ctx: {"partitions": partitions.get(ctx, t)})

    # A deleted or terminated topic's consumers (serve's waiting ones too) learn of it at their
    # next fetch: the wake file tells them to look now.
    @routed
    @wakes
    def delete(self, name, force=False):
        t = topic_name(name)

        def run(ctx):
            if partitions.get(ctx, t):
                cascade.delete_partitioned(ctx, t, force)
            else:
                cascade.delete_topic(ctx, t, force)
        self._broker._write(run)
        return str(t)

    @routed
    def delete_unless_busy(self, name) -> str:
        """Delete a topic (every partition of a partitioned one) as Pulsar's broker decides it
        when pulsar-admin does not force it: with its subscriptions, unless consumers are
        connected (ConsumerBusy: Pulsar's 412). `topics delete` on the command line refuses a
        topic with subscriptions unless --force (cascade.delete_topic)."""
        t = topic_name(name)

        def run(ctx):
            targets = partitions.expand(ctx, t) if partitions.get(ctx, t) else [t]
            connected = 0
            for p in targets:
                info = topics.lookup(ctx, p) if p != t else topics.require(ctx, t)
                if info is None:
                    continue
                for c in ctx.cursors.list(ctx.txn, info.ml_id):
                    connected += sum(1 for r in consumers.records(ctx, c)
                                     if consumers.alive(ctx, r))
            if connected:
                clients = "client" if connected == 1 else "clients"
                raise ConsumerBusy(f"Topic has {connected} {clients} connected Including "
                                   f"{connected} consumers, 0 producers, and 0 replicators.")
            if partitions.get(ctx, t):
                cascade.delete_partitioned(ctx, t, True)
            else:
                cascade.delete_topic(ctx, t, True)
        self._broker._write(run)
        return str(t)

    @routed
    def exists(self, name) -> bool:
        t = topic_name(name)
        return self._broker._read(lambda ctx: topics.lookup(ctx, t) is not None)

    # -- stats ---------------------------------------------------------------------------------
    @routed
    def stats(self, name, pulsar: bool = False):
        """The topic's stats; pulsar: as Pulsar's admin REST answers them (stats.py)."""
        t = topic_name(name)
        one, whole = _stats_makers(pulsar)

        def run(ctx):
            parts = each(ctx, t)
            if len(parts) == 1 and not partitions.get(ctx, t):
                return one(ctx, parts[0][1])
            return whole([one(ctx, info) for _, info in parts])
        return self._broker._read(run)

    def partitioned_stats(self, name, per_partition: bool = False, pulsar: bool = False):
        t = topic_name(name)
        one, whole = _stats_makers(pulsar)

        def run(ctx):
            n = partitions.get(ctx, t)
            if not n:
                raise TopicNotFound(f"{t} is not a partitioned topic",
                                    hint=f"use `pulsarctl topics stats {t}`")
            every = {str(p): one(ctx, info) for p, info in each(ctx, t)}
            out = whole(list(every.values()))
            out["metadata"] = {"partitions": n}
            if per_partition:
                out["partitions"] = every
            return out
        return self._broker._read(run)

    @routed
    def internal_stats(self, name, pulsar: bool = False):
        """stats-internal; pulsar: as Pulsar's admin REST answers them (stats.py)."""
        t = topic_name(name)
        one = stats.pulsar_internal_stats if pulsar else stats.internal_stats

        def run(ctx):
            n = partitions.get(ctx, t)
            if not n:
                return one(ctx, topics.require(ctx, t))
            return {"metadata": {"partitions": n},
                    "partitions": {str(p): one(ctx, info) for p, info in each(ctx, t)}}
        return self._broker._read(run)

    @routed
    def subscriptions(self, name):
        t = topic_name(name)

        def run(ctx):
            names = []
            for _p, info in each(ctx, t):
                for c in ctx.cursors.list(ctx.txn, info.ml_id):
                    if c.name not in names:
                        names.append(c.name)
            return names
        return self._broker._read(run)

    # -- messages --------------------------------------------------------------------------------
    @routed
    def ensure(self, name) -> None:
        """Create the topic if it is missing, as a producer's attach does in Pulsar
        (allowAutoTopicCreation: TopicNotFound when that is off)."""
        t = topic_name(name)

        def run(ctx):
            topics.ensure(ctx, t)
        self._broker._write(run)

    @routed
    def last_message_id(self, name) -> MessageId:
        t = topic_name(name)

        def run(ctx):
            per_partition(ctx, t, "GetLastMessageId", "topics last-message-id")
            info = topics.require(ctx, t)
            p = info.mark_position(info.last_offset)
            return MessageId(p.ledger_id, p.entry_id, t.partition_index)
        return self._broker._read(run)

    # -- a reader's positions (what its connection asks: Pulsar's ServerCnx) -------------------
    @routed
    def reader_mark_delete_position(self, name, next_offset: int | None = None, start=None,
                                    inclusive: bool = False) -> MessageId:
        """GET_LAST_MESSAGE_ID's consumer_mark_delete_position for a reader: the position just
        before what it reads next (its next offset, else where its start message id puts it)."""
        from pulsarctl.broker import consuming  # lazy: one-shot produce never needs it

        return self._broker._read(consuming.mark_delete_position, topic_name(name), None,
                                  next_offset, start, inclusive)

    @routed
    def reader_reached_end(self, name, next_offset: int) -> bool:
        """Whether a reader at next_offset has read all a terminated topic will ever hold."""
        from pulsarctl.broker import consuming  # lazy: one-shot produce never needs it

        return self._broker._read(consuming.reached_end, topic_name(name), None, next_offset)

    @routed
    def offset_for_publish_time(self, name, time_ms: int) -> int:
        """A reader's seek(timestamp): the offset of the first message published at or after
        time_ms (the topic's end when there is none)."""
        from pulsarctl.broker import consuming  # lazy: one-shot produce never needs it

        return self._broker._read(consuming.offset_for_publish_time, topic_name(name), time_ms)

    @routed
    def get_message_by_id(self, name, ledger_id: int, entry_id: int):
        t = topic_name(name)

        def run(ctx):
            target = t
            if partitions.get(ctx, t):
                owner = partitions.owner_topic(ctx, ledger_id)
                if owner is None or topic_name(owner) not in partitions.expand(ctx, t):
                    raise MessageNotFound(f"message {ledger_id}:{entry_id} not found on {t}")
                target = topic_name(owner)
            info = topics.require(ctx, target)
            mid = MessageId(ledger_id, entry_id, target.partition_index)
            o = subs.offset_of(ctx, info, mid)
            # A batch entry shows its first message, as pulsar-admin's getMessageById does.
            m = unpack.first_message(codec.decode(ctx.ledgers.read(ctx.txn, info, o)),
                                      ledger_id, entry_id, target.partition_index, str(target))
            # A message has a redelivery count per subscription, not one of its own.
            m.redelivery_count_ = stats.redelivery_counts(ctx, info, o)
            return m
        return self._broker._read(run)

    @routed
    def examine_message(self, name, initial_position: str = "latest", n: int = 1):
        t = topic_name(name)
        cursor_admin.check_examine(initial_position, n)

        def run(ctx):
            per_partition(ctx, t, "Examine messages", "topics examine-message")
            return cursor_admin.examine(ctx, topics.require(ctx, t), t, initial_position, n)
        return self._broker._read(run)

    def entry(self, name, ledger_id: int, entry_id: int) -> list:
        """The stored record of one entry of a topic or partition, whole (a batch is one), as
        Pulsar's getMessageById over REST reads it."""
        t = topic_name(name)

        def run(ctx):
            info = topics.require(ctx, t)
            o = subs.offset_of(ctx, info, MessageId(ledger_id, entry_id, t.partition_index))
            return codec.decode(ctx.ledgers.read(ctx.txn, info, o))
        return self._broker._read(run)

    def examine_entry(self, name, initial_position: str = "latest", n: int = 1):
        """examine-message over REST: the nth entry from the first (earliest) or the last
        (latest) one, whole: (ledger id, entry id, stored record), or None when the topic has
        none; entries are counted, a batch is one, as Pulsar's examineMessage counts them."""
        t = topic_name(name)
        pos = cursor_admin.check_examine(initial_position, n)

        def run(ctx):
            info = topics.require(ctx, t)
            if info.entries <= 0:
                return None
            o = info.first_offset + n - 1 if pos == "earliest" else info.last_offset - n + 1
            if not info.contains(o):
                raise MessageNotFound(f"{t} has {info.entries} message(s); there is no "
                                      f"message {n} from the {pos}",
                                      hint=f"use -m 1 to -m {info.entries}")
            p = info.position(o)
            return p.ledger_id, p.entry_id, codec.decode(ctx.ledgers.read(ctx.txn, info, o))
        return self._broker._read(run)

    @routed
    @wakes
    def terminate(self, name) -> MessageId | dict:
        """The last message id; for a partitioned topic, each partition's."""
        t = topic_name(name)

        def run(ctx):
            if partitions.get(ctx, t):
                return {str(p): cursor_admin.terminate(ctx, p) for p in partitions.expand(ctx, t)}
            return cursor_admin.terminate(ctx, t)
        return self._broker._write(run)

    # -- compaction (broker/compaction.py) -----------------------------------------------------
    @routed
    def compact(self, name) -> dict:
        """Compact the topic now (pulsar-admin topics compact); returns its status."""
        t = topic_name(name)

        def run(ctx):
            per_partition(ctx, t, "Compaction", "topics compact", "compact each partition")
            if not t.persistent:
                raise InvalidValue(f"{t} is non-persistent: only persistent topics compact")
            return compaction.compact(ctx, t)
        return self._broker._write(run)

    @routed
    def compaction_status(self, name) -> dict:
        t = topic_name(name)

        def run(ctx):
            per_partition(ctx, t, "Compaction status", "topics compaction-status")
            return compaction.status(ctx, topics.require(ctx, t))
        return self._broker._read(run)

    # -- tiered storage ------------------------------------------------------------------------
    @routed
    def offload(self, name: str, to: str, size_threshold: int | None = None,
                older_than_ms: int | None = None) -> dict:
        """Offload a topic's oldest closed ledgers to Parquet files (pulsarctl/offload.py)."""
        return offload.offload(self._broker, name, to, size_threshold, older_than_ms)

    @routed
    def offload_status(self, name: str) -> dict:
        return offload.status(self._broker, name)


def _stats_makers(pulsar: bool):
    """A topic's stats and the whole of a partitioned topic's: the command line's, or as
    Pulsar's admin REST answers them."""
    if pulsar:
        return stats.pulsar_topic_stats, stats.pulsar_aggregate
    return stats.topic_stats, stats.aggregate
