"""Producer, as pulsar-client's: send() is synchronous and durable; send_async() buffers until
flush() or batch_size messages, so bulk producing commits many messages per transaction. With
batching enabled, what goes out together is stored in batch entries (client/batcher.py); a
message sent with send() goes alone, a plain entry, as a synchronous send of a batching Pulsar
producer does (its batch of one is sent as a plain message).

Kept apart from client.py so that one-shot `produce` imports nothing else."""
from __future__ import annotations

from pulsarctl import clock as clocks
from pulsarctl.errors import InvalidValue
from pulsarctl.messages import MessageId, OutgoingMessage


class Producer:
    """send() is synchronous and durable; send_async() buffers until flush() (or
    batch_size messages), so bulk producing commits many messages per transaction."""

    def __init__(self, broker, topic: str, producer_name: str | None, batch_size: int = 1000,
                 message_routing_mode: str = "RoundRobinPartition",
                 hashing_scheme: str = "JavaStringHash", send_timeout_ms: int = 30_000,
                 compression_type=None, access_mode="Shared", schema=None,
                 chunking: bool = False, batching: bool = False,
                 batching_max_messages: int | None = None, batching_max_bytes: int | None = None,
                 batching_max_publish_delay_ms: int | None = None, batching_type=None):
        if chunking and batching:
            raise InvalidValue("Batching and chunking of messages can't be enabled together",
                               hint="disable batching (batching_enabled=False, or -db)")
        self._chunking = bool(chunking)
        self._batcher = None
        given = (batching_max_messages, batching_max_bytes, batching_max_publish_delay_ms,
                 batching_type)
        if batching or any(v is not None for v in given):
            # Settings given are checked even when batching is off, as pulsar-client does.
            from pulsarctl.client import batcher as batchers

            b = batchers.Batcher(
                batchers.DEFAULT_MAX_MESSAGES if batching_max_messages is None
                else batching_max_messages,
                batchers.DEFAULT_MAX_BYTES if batching_max_bytes is None else batching_max_bytes,
                batchers.DEFAULT_DELAY_MS if batching_max_publish_delay_ms is None
                else batching_max_publish_delay_ms,
                batchers.DEFAULT if batching_type is None else batching_type)
            self._batcher = b if batching else None
        self._broker = broker
        self._topic = topic
        self._name = producer_name
        self._routing = (message_routing_mode, hashing_scheme)
        self._router = None
        self._buffer: list[OutgoingMessage] = []
        self._callbacks: list = []
        self.batch_size = batch_size
        self.send_timeout_ms = send_timeout_ms
        from pulsarctl.compression import code_of

        self._compression = code_of(compression_type or "none")
        from pulsarctl.broker.schemas import check_type

        self._schema = check_type(schema)
        from pulsarctl.broker.access import SHARED, check_mode

        self._mode = check_mode(getattr(access_mode, "name", access_mode))
        self._held_topic = False
        if self._mode != SHARED:
            self._acquire()
        self.last_ids: list[MessageId] = []

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str | None:
        return self._name

    @staticmethod
    def _message(content, properties=None, partition_key=None, ordering_key=None,
                 sequence_id=None, event_timestamp=None, deliver_at=None, deliver_after=None,
                 now_ms=None) -> OutgoingMessage:
        if isinstance(content, str):
            content = content.encode()
        if not isinstance(content, (bytes, bytearray, memoryview)):
            raise InvalidValue(f"message content must be bytes or str, not {type(content).__name__}")
        if isinstance(ordering_key, str):
            ordering_key = ordering_key.encode()
        if properties is not None:
            properties = {str(k): str(v) for k, v in properties.items()}
        da = 0
        if deliver_at is not None:
            da = int(deliver_at)
        elif deliver_after is not None:
            ms = int(deliver_after.total_seconds() * 1000) if hasattr(deliver_after, "total_seconds") else int(deliver_after)
            da = (now_ms if now_ms is not None else clocks.wall_ms()) + ms
        return OutgoingMessage(bytes(content), properties, partition_key, ordering_key,
                               int(event_timestamp or 0), da, sequence_id)

    def send(self, content, properties=None, partition_key=None, ordering_key=None,
             sequence_id=None, event_timestamp=None, deliver_at=None, deliver_after=None) -> MessageId:
        self.flush()
        m = self._message(self._encode(content), properties, partition_key, ordering_key,
                          sequence_id,
                          event_timestamp, deliver_at, deliver_after)
        return self._publish([m], False)[0]

    def send_async(self, content, callback=None, **kw) -> None:
        self._buffer.append(self._message(self._encode(content), **kw))
        self._callbacks.append(callback)
        b = self._batcher
        if b is None:
            if len(self._buffer) >= self.batch_size:
                self.flush()
            return
        b.added()
        if len(self._buffer) >= max(self.batch_size, b.spec.max_messages) or b.due():
            self.flush()

    def _encode(self, content):
        """A JSON-schema producer also takes what json.dumps takes (pulsar-client takes a
        Record); everything else is bytes or str."""
        if self._schema == "JSON" and not isinstance(content, (bytes, bytearray, memoryview,
                                                               str)):
            import json

            return json.dumps(content).encode()
        return content

    def check_sizes(self, messages: list[OutgoingMessage]) -> None:
        """Raise MessageTooLarge before anything is written."""
        self._broker.check_sizes(messages, self._compression, self._chunking)

    def send_many(self, messages: list[OutgoingMessage], batching: bool = True) -> list[MessageId]:
        """Publish prepared messages in one transaction (in batches, when the producer batches;
        batching=False stores each alone, as send() does)."""
        self.flush()
        return self._publish(messages, batching)

    def _route(self, n: int):
        """The router for a partitioned topic of n partitions, kept across sends as a Java
        producer keeps its MessageRouter (so round robin continues where it stopped)."""
        if self._router is None or self._router.num_partitions != n:
            from pulsarctl.broker.hashing import PartitionRouter

            b = self._batcher
            self._router = PartitionRouter(n, *self._routing, batching=b is not None,
                                           switch_ms=b.switch_ms if b is not None else 10)
        return self._router.choose

    def _publish(self, msgs, batching: bool = True) -> list[MessageId]:
        name, ids = self._held(msgs, batching)
        self._name = name
        self.last_ids = ids
        return ids

    def _held(self, msgs, batching: bool = True):
        """Publish; while a producer_request_hold backlog quota holds the producer, try again
        until the send timeout, then fail as Pulsar's ProducerBlockedQuotaExceededError."""
        from pulsarctl.broker.backlog_quota import BacklogQuotaHold

        deadline = None
        while True:
            try:
                return self._broker.publish(self._topic, msgs, self._name, self._route,
                                            self._compression, self._schema, self._chunking,
                                            self._batcher.spec if self._batcher and batching
                                            else None)
            except BacklogQuotaHold:
                now = clocks.monotonic()
                if deadline is None:
                    deadline = now + self.send_timeout_ms / 1000
                if now >= deadline:
                    raise
                clocks.sleep(min(0.1, deadline - now))

    def flush(self) -> list[MessageId]:
        if not self._buffer:
            return []
        msgs, cbs = self._buffer, self._callbacks
        self._buffer, self._callbacks = [], []
        if self._batcher is not None:
            self._batcher.sent()
        ids = self._publish(msgs)
        for cb, mid in zip(cbs, ids):
            if cb is not None:
                cb("Ok", mid)
        return ids

    def _acquire(self) -> None:
        """Become the exclusive producer; WaitForExclusive waits (real time) until it can,
        woken at once when the holder closes, polling every 100 ms for one that died."""
        from pulsarctl.broker.access import WAIT_FOR_EXCLUSIVE
        from pulsarctl.broker.consumers import this_process
        from pulsarctl.errors import ProducerFenced

        waiter = None
        while True:
            try:
                self._name, _rec = self._broker.producer_acquire(
                    self._topic, self._name, self._mode, *this_process())
                self._held_topic = True
                return
            except ProducerFenced:
                if self._mode != WAIT_FOR_EXCLUSIVE:
                    raise
            if waiter is None:
                from pulsarctl.wake import Waiter

                waiter = Waiter(self._broker.path)
            waiter.sleep(0.1)

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._held_topic:
                from pulsarctl.broker.consumers import this_process

                self._held_topic = False
                self._broker.producer_release(self._topic, self._name, *this_process())
