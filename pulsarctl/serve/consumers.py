"""Consumers on a connection (ServerCnx.handleSubscribe/handleFlow, Pulsar's Consumer and its
dispatcher): SUBSCRIBE attaches a durable consumer to its subscription in the store, or opens a
reader (a non-durable subscription that keeps no cursor there); FLOW gives permits; each
consumer's delivery task fetches while it has permits and there are messages, then waits for
the store's wake (a publish, a nack, a closed consumer, the CLI's included) or its next FLOW.
Nothing is fetched for a consumer while its connection's write buffer is over asyncio's
high-water mark. What went out and is not acked yet (Consumer.delivered) is what the acks are
read by (pending_acks.py)."""
from __future__ import annotations

import asyncio
import dataclasses

from pulsarctl.broker.batches import Batch
from pulsarctl.consumer_policy import ConsumerPolicy
from pulsarctl.errors import NotFound, SubscriptionNotFound, TopicNotFound
from pulsarctl.messages import MessageId
from pulsarctl.serve import schema_commands
from pulsarctl.serve import pulsar_api_pb2 as api
from pulsarctl.serve.command_sender import (
    batch_frame, message_frame, message_id_of, whole_batch_frame,
)
from pulsarctl.serve.wire_errors import error_text

T = api.BaseCommand
SUB_TYPES = {0: "Exclusive", 1: "Shared", 2: "Failover", 3: "Key_Shared"}
FETCH_MAX = 1000
# Without the timers (serve could not use the daemon lock), a waiting consumer fetches at least
# this often, which fires its own subscription's timers; else it waits for a wake (listener.py).
IDLE_POLL_S = 0.5
# A client negatively acknowledges by asking for redelivery once its own nack delay has passed:
# the store then redelivers after the shortest delay it allows, not its default minute.
MIN_NACK_DELAY_MS = 100   # NegativeAcksTracker.MIN_NACK_DELAY_MS
# The subscription types whose deliveries carry the redelivery count. Pulsar's Exclusive and
# Failover dispatchers keep none (RedeliveryTrackerDisabled): their consumers always see 0, and a
# client's dead letter policy, which acts on that count, never fires there. The store counts for
# every type; sent to an Exclusive consumer, a count past its policy's limit makes the client ask
# for redelivery of everything at once, over and over.
COUNTED = ("Shared", "Key_Shared")
WIRE_POLICY = ConsumerPolicy.from_client(negative_ack_redelivery_delay_ms=MIN_NACK_DELAY_MS)


def _key_shared_policy(c, sub_type: str) -> dict | None:
    """A Key_Shared consumer's keySharedMeta as the broker's policy record: STICKY with its
    fixed hash ranges (checked there, as Pulsar's HashRangeExclusiveStickyKeyConsumerSelector
    does); AUTO_SPLIT, or none, is what Pulsar's broker makes of it by default, consistent
    hashing (subscriptionKeySharedUseConsistentHashing=true); and allowOutOfOrderDelivery."""
    if sub_type != "Key_Shared":
        return None
    meta = c.keySharedMeta if c.HasField("keySharedMeta") else None
    if meta is not None and meta.keySharedMode == api.STICKY:
        out = {"keySharedPolicy": "sticky",
               "ranges": [[r.start, r.end] for r in meta.hashRanges]}
    else:
        out = {"keySharedPolicy": "consistent-hashing"}
    if meta is not None and meta.allowOutOfOrderDelivery:
        out["allowOutOfOrderDelivery"] = True
    return out


class Consumer:
    __slots__ = ("id", "topic", "sub", "name", "permits", "delivered", "task", "kick", "closed",
                 "reader", "start", "inclusive", "next", "sub_type", "priority", "epoch",
                 "compacted", "active_sent", "ended", "base", "acked", "hold_until")

    def __init__(self, cid, topic, sub, name, reader=False, start=None):
        self.id = cid
        self.topic = topic
        self.sub = sub
        self.name = name
        self.permits = 0
        # What went out and is not acked yet: (ledger, entry) -> (partition, batch indexes),
        # {-1} for a message that is not in a batch.
        self.delivered: dict[tuple, tuple[int, set]] = {}
        self.task = None
        self.kick = asyncio.Event()
        self.closed = False
        # A reader (a non-durable subscription) keeps no cursor in the store: it reads entries
        # after start (read_entries), from the offset next once it has read.
        self.reader = reader
        self.compacted = False  # a reader that reads the compacted view (compaction.py)
        self.start = start
        self.inclusive = False
        self.next = None
        self.sub_type = "Exclusive"
        self.priority = 0
        self.epoch = 0   # raised by a seek: what was fetched before it is not sent
        self.active_sent = None   # Failover: the standing last told (ACTIVE_CONSUMER_CHANGE)
        self.ended = False        # REACHED_END_OF_TOPIC was sent
        self.base = None          # a reader: the offset it started at (None: topic unknown)
        self.acked = None         # a reader: the highest id its client acknowledged
        self.hold_until = 0.0     # Failover: nothing is read for it before (loop time)


class ConsumerCommands:
    """The consumer commands of a Connection (connection.py), which inherits them."""

    async def on_subscribe(self, cmd, meta, payload):
        c = cmd.subscribe
        s = self.server
        if c.consumer_id in self.consumers:
            self.reply(T.SUCCESS, "success", request_id=c.request_id)
            return
        if not await self.allowed(c.topic, "consume"):
            self.error(c.request_id, api.AuthorizationError, "Client is not authorized to subscribe")
            return
        if not c.durable:
            await self._subscribe_reader(c)
            return
        sub_type = SUB_TYPES.get(c.subType, "Exclusive")
        position = "Earliest" if c.initialPosition == 1 else "Latest"
        policy = WIRE_POLICY
        if c.read_compacted:
            if sub_type not in ("Exclusive", "Failover"):
                self.reply(T.ERROR, "error", request_id=c.request_id,
                           error=api.NotAllowedError,
                           message="Read compacted can only be used with exclusive or failover "
                                   "persistent subscriptions")
                return
            policy = dataclasses.replace(WIRE_POLICY, read_compacted=True)
        if not await schema_commands.subscribe_schema(self, c):
            return
        name = s.consumer_name(c.topic, c.subscription, c.consumer_name)
        try:
            names, _ = await s.call(s.broker.subscribe, c.topic, c.subscription, name, sub_type,
                                    position, priority=c.priority_level, pid=s.pid,
                                    pid_start=s.pid_start, settings=policy,
                                    policy=_key_shared_policy(c, sub_type))
        except Exception as exc:
            s._in_use.discard((c.topic, c.subscription, name))
            self.error(c.request_id, exc)
            return
        con = Consumer(c.consumer_id, c.topic, c.subscription, name)
        con.sub_type, con.priority = sub_type, c.priority_level
        self.consumers[c.consumer_id] = con
        con.task = asyncio.create_task(self._deliver(con))
        self.reply(T.SUCCESS, "success", request_id=c.request_id)
        if sub_type == "Failover":
            await s.notify_failover(c.topic, c.subscription)

    async def _subscribe_reader(self, c):
        s = self.server
        resume = self.reader_resume.pop((c.topic, c.subscription), None)
        if c.HasField("start_message_id"):
            start = message_id_of(c.start_message_id)
        else:
            start = MessageId.earliest if c.initialPosition == 1 else MessageId.latest
        if resume is not None:   # back after a seek: from where the seek put it
            start, nxt = resume
            if start is None:
                con = Consumer(c.consumer_id, c.topic, c.subscription, c.consumer_name,
                               reader=True, start=None)
                con.next = con.base = nxt
                return self._start_reader(con, c)
        if not await schema_commands.subscribe_schema(self, c):
            return
        await schema_commands.reader_topic(self, c)
        # as Pulsar's non-durable cursor, a reader started (or sought) at a message id gets
        # that message first, and its client drops it unless its start is inclusive; latest
        # is the topic's end
        inclusive = start not in (MessageId.latest, MessageId.earliest)
        nxt = None
        try:
            _msgs, nxt, _last = await s.call(s.broker.read_entries, c.topic, None, 0,
                                             after_id=start, inclusive=inclusive)
        except Exception as exc:
            if not isinstance(exc, NotFound) or start not in (MessageId.earliest,
                                                              MessageId.latest):
                self.error(c.request_id, exc)
                return
        con = Consumer(c.consumer_id, c.topic, c.subscription, c.consumer_name, reader=True,
                       start=start)
        # where it starts, fixed now: "latest" is the topic's end at subscribe, not whenever
        # the reader first reads (hasMessageAvailable compares against it)
        con.base = nxt
        if start == MessageId.latest:
            con.next = nxt
        con.inclusive = inclusive
        self._start_reader(con, c)

    def _start_reader(self, con: Consumer, c) -> None:
        con.compacted = bool(c.read_compacted)
        self.consumers[c.consumer_id] = con
        con.task = asyncio.create_task(self._deliver(con))
        self.reply(T.SUCCESS, "success", request_id=c.request_id)

    async def _read(self, c: Consumer, n: int):
        s = self.server
        try:
            msgs, nxt, _last = await s.call(s.broker.read_entries, c.topic, c.next, n,
                                            after_id=c.start, inclusive=c.inclusive,
                                            compacted=c.compacted)
        except NotFound:
            return []   # a reader of a topic that does not exist yet
        c.next = nxt
        return msgs

    async def on_flow(self, cmd, meta, payload):
        c = self.consumers.get(cmd.flow.consumer_id)
        if c is not None:
            c.permits += cmd.flow.messagePermits
            c.kick.set()

    async def _deliver(self, c: Consumer):
        """Fetch while the consumer has permits and there are messages; then wait for a wake."""
        s = self.server
        while not c.closed:
            if c.permits <= 0:
                c.kick.clear()
                await c.kick.wait()
                continue
            hold = c.hold_until - asyncio.get_running_loop().time()
            if hold > 0:   # a new Failover active consumer: read after the failover delay
                c.kick.clear()
                try:
                    await asyncio.wait_for(c.kick.wait(), hold)
                except asyncio.TimeoutError:
                    pass
                continue
            # Nothing more is fetched for a client that is not reading what it was sent.
            if not await self.drained():
                return
            wake = s._wake
            epoch = c.epoch
            early: list = []   # [True] once the fetch's messages went out before its commit
            try:
                if c.reader:
                    msgs = await self._read(c, min(c.permits, FETCH_MAX))
                else:
                    loop = asyncio.get_running_loop()

                    def chosen(got, c=c, epoch=epoch, early=early, loop=loop):
                        # the worker thread, before the fetch's commit: they go out while it
                        # syncs (and before the fetch's result comes back, the loop running
                        # callbacks in order)
                        if got:
                            loop.call_soon_threadsafe(self._send_early, c, epoch, got, early)
                    msgs = await s.call(s.broker.fetch, c.topic, c.sub, c.name,
                                        min(c.permits, FETCH_MAX), whole_batches=True,
                                        on_chosen=chosen)
            except asyncio.CancelledError:
                raise
            except (TopicNotFound, SubscriptionNotFound) as exc:
                # Deleted under it (topics delete, subscriptions delete, by the CLI or REST):
                # the broker closes the consumer, as Pulsar does; the client reconnects.
                s.log(f"consumer {c.name} on {c.topic}: {error_text(exc)}; closing it")
                await self._gone_under(c)
                return
            except Exception as exc:
                s.log(f"consumer {c.name} on {c.topic}: {error_text(exc)}")
                msgs = []
            if c.closed:
                return
            if c.epoch != epoch:
                continue
            if msgs:
                if not early:
                    c.permits -= self._send_messages(c, msgs)
                if not await self.drained():
                    return
                continue
            if not c.ended and await self._reached_end(c):
                c.ended = True
                self.reply(T.REACHED_END_OF_TOPIC, "reachedEndOfTopic", consumer_id=c.id)
            c.kick.clear()
            waits = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(c.kick.wait())]
            try:
                await asyncio.wait(waits, timeout=s.idle_poll_s,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    def _send_early(self, c: Consumer, epoch: int, msgs, early: list) -> None:
        """What a fetch chose, sent before its commit (Broker.fetch's on_chosen), unless the
        consumer closed or sought meanwhile (then, as after the commit, nothing goes out)."""
        if c.closed or c.epoch != epoch:
            return
        early.append(True)
        c.permits -= self._send_messages(c, msgs)

    async def _gone_under(self, c: Consumer) -> None:
        """Called by c's own delivery task, which returns after it (so it is not cancelled,
        which would cut this short at its first await)."""
        c.task = None
        self._tell_closed(c)
        await self._drop_consumer(c)

    async def _reached_end(self, c: Consumer) -> bool:
        s = self.server
        try:
            if c.reader:
                return await s.call(s.broker.topics.reader_reached_end, c.topic, c.next)
            return await s.call(lambda: s.broker.subscription(c.topic, c.sub).reached_end())
        except Exception:   # a topic deleted meanwhile: the next fetch says so
            return False

    def _send_messages(self, c: Consumer, msgs) -> int:
        """Each plain message as a MESSAGE, each batch (a Batch, or a run of Messages of one
        entry) as one batch MESSAGE; what went out is kept (c.delivered) to read the acks by.
        Returns how many messages went out."""
        counted = c.sub_type in COUNTED
        i, n = 0, len(msgs)
        sent = 0
        delivered = c.delivered
        cached = self.server.entry_cache.payload
        while i < n:
            m = msgs[i]
            if type(m) is Batch:
                mid = m.id
                idx = set(range(m.size))
                if m.skip:
                    idx -= m.skip
                _sent_indexes(delivered, mid, idx)
                self.send(whole_batch_frame(c.id, m, counted, cached(c.topic, m)))
                sent += m.count
                i += 1
                continue
            mid = m.id
            if mid.batch_index < 0:
                delivered[(mid.ledger_id, mid.entry_id)] = (mid.partition, {-1})
                self.send(message_frame(c.id, m, counted))
                sent += 1
                i += 1
                continue
            lid, eid = mid.ledger_id, mid.entry_id
            j = i + 1
            while j < n:
                x = msgs[j]
                if type(x) is Batch:
                    break
                x = x.id
                if x.entry_id != eid or x.ledger_id != lid or x.batch_index < 0:
                    break
                j += 1
            group = msgs[i:j]
            by_index = {g.id.batch_index: g for g in group}
            _sent_indexes(delivered, mid, set(by_index))
            self.send(batch_frame(c.id, group, counted, by_index))
            sent += j - i
            i = j
        return sent

    async def on_close_consumer(self, cmd, meta, payload):
        c = self.consumers.get(cmd.close_consumer.consumer_id)
        if c is not None:
            await self._drop_consumer(c)
        self.reply(T.SUCCESS, "success", request_id=cmd.close_consumer.request_id)

    async def _drop_consumer(self, c: Consumer, in_store: bool = True):
        """in_store False: its record is gone already, with its subscription (it unsubscribed
        as the subscription's one consumer: nobody is left to tell of a failover)."""
        self.consumers.pop(c.id, None)
        c.closed = True
        if c.task is not None:
            c.task.cancel()
        s = self.server
        if c.reader:
            return
        if not in_store:
            s._in_use.discard((c.topic, c.sub, c.name))
            return
        await self.acks_landed()   # what it acked before it left stays acked
        try:
            await s.call(s.broker.close_consumer, c.topic, c.sub, c.name)
        except Exception as exc:
            s.log(f"closing consumer {c.name} on {c.topic}: {error_text(exc)}")
        s._in_use.discard((c.topic, c.sub, c.name))
        if c.sub_type == "Failover":
            await s.notify_failover(c.topic, c.sub)

    def _close_by_broker(self, c: Consumer) -> None:
        """CLOSE_CONSUMER to the client (it reconnects with the same consumer id) and forget
        the consumer here; the caller settles it with the store."""
        self.consumers.pop(c.id, None)
        c.closed = True
        if c.task is not None:
            c.task.cancel()
        self._tell_closed(c)

    def _tell_closed(self, c: Consumer) -> None:
        # the broker's CLOSE_CONSUMER carries request id -1, as Pulsar's does
        self.reply(T.CLOSE_CONSUMER, "close_consumer", consumer_id=c.id, request_id=2**64 - 1)

    def _consumer(self, consumer_id: int, request_id: int) -> Consumer | None:
        """The connection's consumer, or None after answering ConsumerNotFound."""
        c = self.consumers.get(consumer_id)
        if c is None:
            self.error(request_id, api.ConsumerNotFound, f"no consumer {consumer_id}")
        return c


def _sent_indexes(delivered: dict, mid: MessageId, indexes: set) -> None:
    """Note the batch indexes of mid's entry that went out (added to those out already)."""
    key = (mid.ledger_id, mid.entry_id)
    sent = delivered.get(key)
    if sent is None:
        delivered[key] = (mid.partition, indexes)
    else:
        sent[1].update(indexes)
