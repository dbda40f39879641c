"""Client, Producer, Consumer and Reader over a store, as pulsar-client's are over a broker.

Like the real client, a consumer keeps a receiver queue (prefetched messages, default 1000) and
groups acknowledgements (flushed every 100 ms, at 1000 acks, on the next fetch, or on close):
that is what makes per-message acks cheap. A message in the receiver queue is pending for the
consumer in the store, so no other consumer can get it; if the process dies, it goes back.
"""
from __future__ import annotations

import enum
import os
import uuid

import re
from pulsarctl import clock as clocks
from pulsarctl.broker import Broker
from pulsarctl.config import resolve_store
from pulsarctl.consumer_policy import ConsumerPolicy, check_max_redeliver_count
from pulsarctl.errors import InvalidValue, MessageNotFound, Timeout
from pulsarctl.client.producer import Producer
from pulsarctl.messages import Message, MessageId, parse_message_id
from pulsarctl.wake import Waiter
from pulsarctl.client.chunks import Assembler
from pulsarctl.client import reading
from pulsarctl.broker.batches import Batch
from pulsarctl.broker.consumers import this_process

_WAIT_MIN, _WAIT_MAX = 0.002, 0.1


class ConsumerType(enum.Enum):
    Exclusive = "Exclusive"
    Shared = "Shared"
    Failover = "Failover"
    KeyShared = "Key_Shared"


class InitialPosition(enum.Enum):
    Latest = "Latest"
    Earliest = "Earliest"


class ConsumerDeadLetterPolicy:
    """pulsar-client's dead letter policy: max_redeliver_count must be greater than 0."""

    def __init__(self, max_redeliver_count: int, dead_letter_topic: str | None = None,
                 initial_subscription_name: str | None = None):
        self.max_redeliver_count = check_max_redeliver_count(max_redeliver_count,
                                                             "max_redeliver_count")
        self.dead_letter_topic = dead_letter_topic
        self.initial_subscription_name = initial_subscription_name


def _next(q, fill, timeout_millis):
    """The next message of a receiver queue (q._queue, q._qi), refilled by fill(): waits with
    a growing sleep (2 ms to 100 ms, real time) up to timeout_millis, then Timeout."""
    if q._qi < len(q._queue):
        m = q._queue[q._qi]
        q._qi += 1
        return m
    deadline = None if timeout_millis is None else clocks.monotonic() + timeout_millis / 1000
    wait = _WAIT_MIN
    waiter = None
    while True:
        if fill():
            q._qi = 1
            return q._queue[0]
        now = clocks.monotonic()
        if deadline is not None and now >= deadline:
            raise Timeout("no message arrived within the timeout")
        if waiter is None:
            waiter = Waiter(q._broker.path)
        if waiter.sleep(wait if deadline is None else max(0, min(wait, deadline - now))):
            wait = _WAIT_MIN  # woken: something changed, poll again at once
        else:
            wait = min(wait * 2, _WAIT_MAX)


def _ids(message) -> list:
    """The ids a nack or retry of message covers: a chunked message's are all its chunks'."""
    if isinstance(message, Message):
        return list(message.chunk_ids_ or [message.message_id()])
    return [message]


class ProducerAccessMode(enum.Enum):
    """pulsar-client's ProducerAccessMode."""
    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class CompressionType(enum.Enum):
    """pulsar-client's CompressionType; values are Pulsar's codes."""
    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4


class BatchingType(enum.Enum):
    """pulsar-client's BatchingType: one batch in send order, or one batch per key."""
    Default = 0
    KeyBased = 1


class PartitionsRoutingMode(enum.Enum):
    RoundRobinDistribution = "RoundRobinPartition"
    UseSinglePartition = "SinglePartition"


class HashingScheme(enum.Enum):
    JavaStringHash = "JavaStringHash"
    Murmur3_32Hash = "Murmur3_32Hash"


def _enum_value(v) -> str:
    return v.value if isinstance(v, enum.Enum) else str(v)


def _type_name(t) -> str:
    return t.value if isinstance(t, ConsumerType) else str(t)


def _position_name(p) -> str:
    return p.value if isinstance(p, InitialPosition) else str(p)


class Client:
    def __init__(self, service_url: str | None = None, *, store: str | None = None,
                 clock: clocks.Clock | None = None, broker: Broker | None = None):
        # A pulsar:// URL means nothing here; a path (or pulsarctl:// path) names the store.
        if store is None and service_url and not service_url.startswith(("pulsar://", "pulsar+ssl://", "http")):
            store = service_url.removeprefix("pulsarctl://")
        self.broker = broker or Broker(resolve_store(store), clock)
        self._open: list = []

    def create_producer(self, topic: str, producer_name: str | None = None,
                        message_routing_mode: str = "RoundRobinPartition",
                        hashing_scheme: str = "JavaStringHash", compression_type=None,
                        send_timeout_millis: int = 30_000, access_mode="Shared",
                        schema=None, chunking_enabled: bool = False,
                        batching_enabled: bool = False, batching_max_messages: int = 1000,
                        batching_max_allowed_size_in_bytes: int = 128 * 1024,
                        batching_max_publish_delay_ms: int = 10,
                        batching_type=None, **_ignored) -> "Producer":
        """chunking_enabled: a message over maxMessageSize is sent in chunks, which consumers
        and readers join (not together with batching_enabled, as in Pulsar).
        batching_enabled (off by default, as in pulsar-client-python): messages sent with
        send_async (or send_many) go into batch entries of at most batching_max_messages
        messages and batching_max_allowed_size_in_bytes bytes, waiting at most
        batching_max_publish_delay_ms for more; batching_type=BatchingType.KeyBased batches per
        key (for Key_Shared subscriptions). A send() goes alone. What send_async buffers is
        sent without a flush() too, as pulsar-client sends it: once the publish delay has run
        out, or at once without batching; the callback gets ("Ok", message id), or the error's
        name and None, from the producer's thread."""
        p = Producer(self.broker, topic, producer_name,
                     message_routing_mode=_enum_value(message_routing_mode),
                     hashing_scheme=_enum_value(hashing_scheme),
                     send_timeout_ms=send_timeout_millis, compression_type=compression_type,
                     access_mode=access_mode, schema=schema, chunking=chunking_enabled,
                     batching=batching_enabled, batching_max_messages=batching_max_messages,
                     batching_max_bytes=batching_max_allowed_size_in_bytes,
                     batching_max_publish_delay_ms=batching_max_publish_delay_ms,
                     batching_type=batching_type, auto_flush=True)
        self._open.append(p)
        return p

    def subscribe(self, topic: str, subscription_name: str,
                  consumer_type=ConsumerType.Exclusive,
                  initial_position=InitialPosition.Latest, consumer_name: str | None = None,
                  receiver_queue_size: int = 1000, priority_level: int = 0,
                  lease_ms: int | None = None, is_read_compacted: bool = False,
                  key_shared_policy: dict | None = None,
                  negative_ack_redelivery_delay_ms: int | None = None,
                  negative_ack_backoff=None, dead_letter_policy=None,
                  unacked_messages_timeout_ms: int | None = None,
                  enable_retry: bool = False, retry_letter_topic: str | None = None,
                  settings: ConsumerPolicy | dict | None = None, schema=None,
                  max_pending_chunked_message: int = 10,
                  auto_ack_oldest_chunked_message_on_queue_full: bool = False,
                  expire_time_of_incomplete_chunked_message_ms: int = 60_000,
                  **_ignored) -> "Consumer":
        """topic: a name, a list of names, or a compiled regular expression (re.compile) over
        full topic names of one namespace, as in pulsar-client. schema: refused (4) when it
        is not the topic's schema type. Chunked messages are joined (client/chunks.py): at
        most max_pending_chunked_message incomplete ones are kept, the oldest dropped for a
        new one (its chunks nacked, or acked with auto_ack_oldest_...), and incomplete ones
        expire after expire_time_of_incomplete_chunked_message_ms of the store's clock."""
        chunks = Assembler(max_pending_chunked_message,
                           expire_time_of_incomplete_chunked_message_ms)
        if schema is not None and not hasattr(topic, "pattern"):
            self.broker.schemas.check_consumer(topic, schema)
        # settings: a ConsumerPolicy (the command line's) or a stored policy dict by Pulsar's
        # configuration names; the keyword arguments above are put over it pulsar-client's way.
        policy = ConsumerPolicy.from_store(settings) if isinstance(settings, dict) else (
            settings or ConsumerPolicy())
        policy = policy.merge(ConsumerPolicy.from_client(
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
            negative_ack_backoff=negative_ack_backoff, dead_letter_policy=dead_letter_policy,
            unacked_messages_timeout_ms=unacked_messages_timeout_ms, enable_retry=enable_retry,
            retry_letter_topic=retry_letter_topic, read_compacted=is_read_compacted))
        if is_read_compacted and _type_name(consumer_type) not in ("Exclusive", "Failover"):
            # ConsumerBuilderImpl: compacted reads need one reader of the subscription
            raise InvalidValue("Read compacted can only be used with exclusive or "
                                       "failover persistent subscriptions")
        c = Consumer(self, topic, subscription_name, _type_name(consumer_type),
                     _position_name(initial_position), consumer_name, receiver_queue_size,
                     priority_level, lease_ms, key_shared_policy, policy)
        c._chunks = chunks
        c._auto_ack_oldest = bool(auto_ack_oldest_chunked_message_on_queue_full)
        self._open.append(c)
        return c

    def create_reader(self, topic: str, start_message_id, start_message_id_inclusive: bool = False,
                      reader_name: str | None = None, schema=None,
                      max_pending_chunked_message: int = 10,
                      expire_time_of_incomplete_chunked_message_ms: int = 60_000,
                      is_read_compacted: bool = False, **_ignored) -> "Reader":
        if schema is not None:
            self.broker.schemas.check_consumer(topic, schema)

        def chunks():  # one per topic read: a message's chunks are all in its partition
            return Assembler(max_pending_chunked_message,
                             expire_time_of_incomplete_chunked_message_ms)

        # Checked now, as the Assembler's own arguments are (a bad value is exit 2 at once).
        chunks()
        r = Reader(self, topic, start_message_id, start_message_id_inclusive, is_read_compacted,
                   make_chunks=chunks)
        self._open.append(r)
        return r

    def close(self) -> None:
        for x in reversed(self._open):
            x.close()
        self._open.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Consumer:
    ACK_GROUP_MAX = 1000
    ACK_GROUP_S = 0.1

    def __init__(self, client, topic, subscription, sub_type, position, consumer_name,
                 receiver_queue_size, priority, lease_ms, policy=None, settings=None):
        self._client = client
        self._broker = client.broker
        self._subscription = subscription
        self._name = consumer_name or f"consumer-{uuid.uuid4().hex[:10]}"
        self._queue: list[Message] = []
        self._qi = 0
        self._acks: list[MessageId] = []
        self._last_flush = clocks.monotonic()
        self.receiver_queue_size = max(1, receiver_queue_size)
        self._lease_ms = lease_ms
        pid = start = None
        if lease_ms is None:
            pid, start = this_process()
        self._sub_args = dict(sub_type=sub_type, position=position, priority=priority, pid=pid,
                              pid_start=start, lease_ms=lease_ms, policy=policy,
                              settings=settings)
        self._pattern = None
        if hasattr(topic, "pattern") and hasattr(topic, "fullmatch"):
            self._pattern = _Pattern(topic.pattern)
            topics = self._pattern.matches(self._broker)
            self._pattern_checked = clocks.monotonic()
        else:
            topics = [topic] if isinstance(topic, str) else list(topic)
        self._requested = topic
        self._topics = []
        self._rr = 0
        if topics:
            self._attach(topics)
            # The ack timeout starts when the application receives a message, not when it is
            # prefetched: with one set, take messages one at a time.
            if ConsumerPolicy.from_store(self._broker.subscription(self._topics[0], subscription).policy()).ack_timeout_ms:
                self.receiver_queue_size = 1
        self._type = sub_type
        self._closed = False

        self._chunks = Assembler()
        self._auto_ack_oldest = False
        # A bulk consumer (the CLI's consume -o ndjson) takes batch entries whole from the
        # fetch (batches.Batch: no Message per index) with receive_run; receive expands one.
        self.whole_batches = False

    def _attach(self, topics) -> None:
        names, _ = self._broker.subscribe(list(topics), self._subscription, self._name,
                                          **self._sub_args)
        for n in names:
            if n not in self._topics:
                self._topics.append(n)

    def _discover(self) -> None:
        """Pick up topics that match the pattern and appeared after we subscribed (Pulsar's
        pattern consumers re-check every minute; here at most once a second, when idle)."""
        if self._pattern is None or clocks.monotonic() - self._pattern_checked < 1.0:
            return
        self._pattern_checked = clocks.monotonic()
        new = [t for t in self._pattern.matches(self._broker) if t not in self._topics]
        if new:
            self._attach(new)

    def topic(self) -> str:
        return self._topics[0] if len(self._topics) == 1 else ",".join(self._topics)

    def topics(self) -> list[str]:
        return list(self._topics)

    def subscription_name(self) -> str:
        return self._subscription

    def consumer_name(self) -> str:
        return self._name

    def _fill(self, max_n: int | None = None) -> bool:
        n = max_n if max_n is not None else self.receiver_queue_size
        msgs = self._fetch(n)
        chunks = self._chunks
        while msgs and (len(chunks) or any(m.chunk_ is not None for m in msgs)):
            now = self._broker.clock.state()["now"]
            got = chunks.take(msgs, now)
            chunks.expire(now)
            self._drop(chunks.take_dropped())
            if got:
                msgs = got
                break
            # Only chunks so far: fetch the rest of the message at once.
            msgs = self._fetch(max(n, chunks.missing()))
        if not msgs and len(chunks):
            chunks.expire(self._broker.clock.state()["now"])
            self._drop(chunks.take_dropped())
        self._queue = msgs
        self._qi = 0
        return bool(msgs)

    def _drop(self, ids) -> None:
        """The chunks of incomplete messages dropped (pending limit, expiry) come again later
        (Pulsar's autoAckOldestChunkedMessageOnQueueFull=false), or are acked with it true."""
        if ids:
            self.flush_acks()
            if self._auto_ack_oldest:
                self._broker.ack(self._topics, self._subscription, ids)
            else:
                self._broker.nack(self._topics, self._subscription, ids)

    def _fetch(self, n: int) -> list:
        acks, self._acks = self._acks, []
        self._last_flush = clocks.monotonic()
        if not self._topics:
            self._discover()
            if not self._topics:
                self._acks = acks
                return []
        try:
            msgs = self._broker.fetch(self._topics, self._subscription, self._name, n, acks,
                                      renew=self._lease_ms is not None, start=self._rr,
                                      whole_batches=self.whole_batches)
        except BaseException:
            self._acks = acks + self._acks
            raise
        # Start the next fetch at the next topic: no topic starves the others.
        self._rr = (self._rr + 1) % len(self._topics)
        if not msgs:
            self._discover()
        return msgs

    def receive(self, timeout_millis: int | None = None, max_fetch: int | None = None) -> Message:
        """The next message; waits (without spinning) up to timeout_millis, then Timeout."""
        m = _next(self, lambda: self._fill(max_fetch), timeout_millis)
        if type(m) is Batch:   # whole_batches: the entry's messages take its place
            ms = m.messages()
            self._queue[self._qi - 1:self._qi] = ms
            m = ms[0]
        return m

    def receive_run(self, timeout_millis: int | None = None, max_n: int = 64,
                    max_fetch: int | None = None, limit: int | None = None) -> list:
        """The next messages: at least one (waiting as receive does) and what the receiver
        queue holds already, up to max_n messages; with whole_batches a batch entry comes as
        one batches.Batch (its count of messages), whole even past max_n when it comes first
        (never past limit). A bulk consumer's next run."""
        _next(self, lambda: self._fill(max_fetch), timeout_millis)
        self._qi -= 1   # _next took the first: take_queued takes it with the rest
        return self.take_queued(max_n, whole_first=True, limit=limit)

    def take_queued(self, max_n: int, whole_first: bool = False, limit: int | None = None
                    ) -> list:
        """Up to max_n of the messages in the receiver queue already (no wait, no fetch): what
        a bulk consumer takes after a receive, without a call per message. A Batch (with
        whole_batches) counts its messages; one that would pass max_n gives its messages,
        unless it comes first and whole_first (a run is then that batch, up to limit)."""
        q, i = self._queue, self._qi
        out: list = []
        n = 0
        while i < len(q) and n < max_n:
            m = q[i]
            if type(m) is Batch:
                if n + m.count > max_n and not (whole_first and not out and (
                        limit is None or m.count <= limit)):
                    q[i:i + 1] = m.messages()
                    continue
                n += m.count
            else:
                n += 1
            out.append(m)
            i += 1
        self._qi = i
        return out

    def acknowledge_many(self, messages: list) -> None:
        """acknowledge of each of messages (Messages, as receive_many gives them)."""
        acks = self._acks
        for m in messages:
            if type(m) is Batch:
                i = m.id   # the entry: every index of it this consumer was given
                acks.append(MessageId(i.ledger_id, i.entry_id, i.partition))
            elif m.chunk_ids_:
                acks.extend(m.chunk_ids_)
            else:
                acks.append(m.id)
        if len(acks) >= self.ACK_GROUP_MAX and self._qi < len(self._queue) or (
                acks and self._qi < len(self._queue)
                and clocks.monotonic() - self._last_flush >= self.ACK_GROUP_S):
            self.flush_acks()

    def acknowledge(self, message) -> None:
        acks = self._acks
        if isinstance(message, Message) and message.chunk_ids_:
            acks.extend(message.chunk_ids_)  # a chunked message: every chunk
        else:
            acks.append(message.id if type(message) is Message else
                        message.message_id() if isinstance(message, Message) else message)
        # Acks ride along with the next fetch when one is near (the receiver queue is empty);
        # otherwise they go out at the group size or age, as Pulsar's ack grouping does.
        if len(acks) & 63 == 0 and self._qi < len(self._queue) and (
                len(acks) >= self.ACK_GROUP_MAX
                or clocks.monotonic() - self._last_flush >= self.ACK_GROUP_S):
            self.flush_acks()

    def negative_acknowledge(self, message) -> None:
        """Redeliver after the nack delay (or backoff); past maxRedeliverCount, the message goes
        to the dead letter topic instead."""
        self.flush_acks()
        self._broker.nack(self._topics, self._subscription, _ids(message))

    def reconsume_later(self, message, delay_ms: int = 0, properties: dict | None = None,
                        delay_level: int | None = None, level_increment: bool = False) -> None:
        """Java's reconsumeLater: to the retry letter topic (needs retry enabled); TDMQ's delay
        levels with delay_level or level_increment."""
        self.flush_acks()
        self._broker.reconsume_later(self._topics, self._subscription, _ids(message), int(delay_ms),
                                     {str(k): str(v) for k, v in (properties or {}).items()},
                                     delay_level, level_increment)

    def redeliver_unacknowledged_messages(self) -> None:
        """Everything this consumer holds comes back now (the local queue is dropped)."""
        self.flush_acks()
        self._queue, self._qi = [], 0
        self._chunks.clear()
        self._broker.redeliver_unacked(self._topics, self._subscription, self._name)

    def seek(self, message_id_or_timestamp) -> None:
        """Deliver again from a message id, or from a publish time in epoch milliseconds (an
        int), as pulsar-client's Consumer.seek; the messages in the local queue are dropped."""
        self.flush_acks()
        self._queue, self._qi = [], 0
        self._chunks.clear()
        target = message_id_or_timestamp
        if isinstance(target, int) and not isinstance(target, bool):
            for t in self._topics:
                self._broker.seek(t, self._subscription, time_ms=target)
            return
        mid = target if isinstance(target, MessageId) else parse_message_id(str(target))
        if mid in (MessageId.earliest, MessageId.latest):
            for t in self._topics:
                self._broker.seek(t, self._subscription, message_id=mid)
            return
        # A message id is one partition's: that partition seeks (as the client routes it).
        for i, t in enumerate(self._topics):
            try:
                self._broker.seek(t, self._subscription, message_id=mid)
                return
            except MessageNotFound:
                if i == len(self._topics) - 1:
                    raise

    def acknowledge_cumulative(self, message) -> None:
        mid = message.message_id() if isinstance(message, Message) else message
        self.flush_acks()
        self._broker.ack(self._topics, self._subscription, [mid], cumulative=True)

    def flush_acks(self) -> None:
        if self._acks:
            acks, self._acks = self._acks, []
            self._broker.ack(self._topics, self._subscription, acks)
            self._last_flush = clocks.monotonic()

    def unsubscribe(self) -> None:
        self.flush_acks()
        self._broker.close_consumer(self._topics, self._subscription, self._name)
        for t in self._topics:
            self._broker.subscription(t, self._subscription).unsubscribe()
        self._closed = True

    def close(self) -> None:
        """Flush acks and disconnect: messages still in the receiver queue go back; nacked ones
        come back after their nack delay, counted (nack timers are durable)."""
        if self._closed:
            return
        self._closed = True
        acks, self._acks = self._acks, []
        if self._topics:
            self._broker.close_consumer(self._topics, self._subscription, self._name, acks)

    def detach(self) -> None:
        """Leave a leased consumer connected (its messages stay pending until the lease ends):
        what `receive` does between shell commands. Messages of a batch it fetched but did not
        hand out are kept for its next receive, which continues the batch."""
        self.flush_acks()
        left = [m.id for m in self._queue[self._qi:]
                if type(m) is Message and m.id is not None and m.id.batch_index >= 0]
        self._queue, self._qi = [], 0
        if left and self._topics:
            self._broker.requeue(self._topics, self._subscription, self._name, left)
        self._closed = True


class Reader:
    """A non-durable reader: it writes nothing to the store. On a partitioned topic it reads
    every partition, merged as client/reading.py says (Pulsar's MultiTopicsReaderImpl)."""

    def __init__(self, client, topic, start_message_id, inclusive=False, compacted=False,
                 make_chunks=Assembler):
        self._broker = client.broker
        self._topic = topic
        self._source = reading.open_source(client, topic, start_message_id, inclusive,
                                           compacted, make_chunks)
        self._queue: list[Message] = []
        self._qi = 0

    def topic(self) -> str:
        return self._topic

    def _fill(self, n=None) -> bool:
        self._queue, self._qi = self._source.read(n), 0
        return bool(self._queue)

    def read_next(self, timeout_millis: int | None = None) -> Message:
        return _next(self, self._fill, timeout_millis)

    def has_message_available(self) -> bool:
        if self._qi < len(self._queue):
            return True
        return self._fill()

    def stop_at_last(self) -> None:
        """[new] Read no further than the last message stored now (of each partition): what
        `read --until-end` does. has_message_available() is then False at that end."""
        self._source.stop_at_last()

    def seek(self, message_id) -> None:
        self._source.seek(reading.start_id(message_id))
        self._queue, self._qi = [], 0

    def close(self) -> None:
        pass


class _Pattern:
    """A topic pattern as Pulsar's pattern consumers take it: a regular expression over full
    topic names of one namespace (a short pattern means public/default)."""

    def __init__(self, text: str):
        full = text if "://" in text else (
            f"persistent://{text}" if text.count("/") == 2 else f"persistent://public/default/{text}")
        try:
            self.regex = re.compile(full)
        except re.error as exc:
            raise InvalidValue(f"invalid topic pattern {text!r}: {exc}") from None
        rest = full.split("://", 1)[1].split("/")
        if len(rest) < 3 or any(c in "".join(rest[:2]) for c in ".*+?[](){}|\\^$"):
            raise InvalidValue(f"invalid topic pattern {text!r}",
                               hint="the tenant and namespace must be literal, e.g. "
                                    "persistent://public/default/orders-.*")
        self.namespace = f"{rest[0]}/{rest[1]}"

    def matches(self, broker) -> list[str]:
        return [t for t in broker.topics.list(self.namespace) if self.regex.fullmatch(t)]
