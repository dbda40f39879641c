"""Producer, as pulsar-client's: send() is synchronous and durable; send_async() buffers until
flush() or batch_size messages, so bulk producing commits many messages per transaction. With
batching enabled, what goes out together is stored in batch entries (client/batcher.py); a
message sent with send() goes alone, a plain entry, as a synchronous send of a batching Pulsar
producer does (its batch of one is sent as a plain message).

A producer made by Client.create_producer (auto_flush) also sends what send_async buffered
without being asked, as pulsar-client does: a daemon thread sends it once the batching publish
delay has run out, or at once when batching is off, and calls the callbacks from that thread
("Ok" and the message id, or the error's name and None when the send failed).

A producer is attached to its topic while it is open (broker/access.py: its access mode is
judged then, and `topics stats` lists it), unless register=False: a one-shot producer, as
one-shot `produce` makes, which each publish admits and leaves nothing behind.

Kept apart from client.py so that one-shot `produce` imports nothing else."""
from __future__ import annotations

import itertools
import threading

from pulsarctl import clock as clocks
from pulsarctl.errors import InvalidValue, ProducerFenced
from pulsarctl.messages import MessageId, OutgoingMessage
from pulsarctl.compression import code_of
from pulsarctl.broker.schemas import check_type
from pulsarctl.broker.access import FENCED, READY, SHARED, check_mode
from pulsarctl.client import batcher as batchers
from pulsarctl.broker.routing import PartitionRouter
from pulsarctl.broker.backlog_quota import BacklogQuotaHold
from pulsarctl.wake import Waiter

_ids = itertools.count()   # producer ids of this process, as a client numbers its producers


class Producer:
    """send() is synchronous and durable; send_async() buffers until flush() (or
    batch_size messages), so bulk producing commits many messages per transaction."""

    def __init__(self, broker, topic: str, producer_name: str | None, batch_size: int = 1000,
                 message_routing_mode: str = "RoundRobinPartition",
                 hashing_scheme: str = "JavaStringHash", send_timeout_ms: int = 30_000,
                 compression_type=None, access_mode="Shared", schema=None,
                 chunking: bool = False, batching: bool = False,
                 batching_max_messages: int | None = None, batching_max_bytes: int | None = None,
                 batching_max_publish_delay_ms: int | None = None, batching_type=None,
                 auto_flush: bool = False, register: bool = True):
        if chunking and batching:
            raise InvalidValue("Batching and chunking of messages can't be enabled together",
                               hint="disable batching (batching_enabled=False, or -db)")
        self._chunking = bool(chunking)
        self._batcher = None
        given = (batching_max_messages, batching_max_bytes, batching_max_publish_delay_ms,
                 batching_type)
        if batching or any(v is not None for v in given):
            # Settings given are checked even when batching is off, as pulsar-client does.

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

        self._compression = code_of(compression_type or "none")

        self._schema = check_type(schema)

        self._mode = check_mode(getattr(access_mode, "name", access_mode))
        self._token = None   # set while the producer is attached to its topic
        if register or self._mode != SHARED:
            self._attach()
        self.last_ids: list[MessageId] = []
        # send_async, flush and the flusher thread take turns on the buffer.
        self._cond = threading.Condition(threading.RLock())
        self._auto_flush = auto_flush
        self._flusher: threading.Thread | None = None
        self._closing = False
        self._reporting = 0  # flusher sends whose callbacks are running

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

    def _now_for(self, deliver_at, deliver_after) -> int | None:
        """The store's time, which deliver_after counts from (a simulated clock too, as
        `produce --deliver-after` does); None when no delay is asked for."""
        if deliver_after is None or deliver_at is not None:
            return None
        return self._broker.clock.state()["now"]

    def send(self, content, properties=None, partition_key=None, ordering_key=None,
             sequence_id=None, event_timestamp=None, deliver_at=None, deliver_after=None) -> MessageId:
        m = self._message(self._encode(content), properties, partition_key, ordering_key,
                          sequence_id, event_timestamp, deliver_at, deliver_after,
                          self._now_for(deliver_at, deliver_after))
        with self._cond:
            self.flush()
            return self._publish([m], False)[0]

    def send_async(self, content, callback=None, **kw) -> None:
        now = self._now_for(kw.get("deliver_at"), kw.get("deliver_after"))
        m = self._message(self._encode(content), **kw, now_ms=now)
        with self._cond:
            self._buffer.append(m)
            self._callbacks.append(callback)
            b = self._batcher
            if b is None:
                if len(self._buffer) >= self.batch_size:
                    self.flush()
            else:
                b.added()
                if len(self._buffer) >= max(self.batch_size, b.spec.max_messages) or b.due():
                    self.flush()
            if self._auto_flush and self._buffer:
                self._wake_flusher()

    def _wake_flusher(self) -> None:
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._flush_loop, daemon=True,
                                             name=f"pulsarctl-producer-{self._topic}")
            self._flusher.start()
        self._cond.notify()

    def _flush_loop(self) -> None:
        """Send what send_async left once it has waited the publish delay (at once without
        batching), as pulsar-client's batch timer does. The callbacks run after the lock is
        let go, so a callback may send again."""
        while True:
            with self._cond:
                while True:
                    if self._closing:
                        return
                    if not self._buffer:
                        self._cond.wait()
                        continue
                    left = self._batcher.left_s() if self._batcher is not None else 0.0
                    if left <= 0:
                        break
                    self._cond.wait(left)
                cbs, ids, err = self._take_and_publish()
                self._reporting += 1
            try:
                _report(cbs, ids, err)
            finally:
                with self._cond:
                    self._reporting -= 1
                    self._cond.notify_all()

    def _take_and_publish(self):
        """Publish the buffer (under the lock, so sends keep their order): (callbacks, ids,
        None), or (callbacks, None, the error) when the send failed; the buffer is emptied
        either way, as a failed send_async is reported, not retried."""
        msgs, cbs = self._buffer, self._callbacks
        self._buffer, self._callbacks = [], []
        if self._batcher is not None:
            self._batcher.sent()
        try:
            return cbs, self._publish(msgs), None
        except Exception as exc:  # noqa: BLE001 - reported to each message's callback
            return cbs, None, exc

    def _encode(self, content):
        """A JSON-schema producer also takes what json.dumps takes (pulsar-client takes a
        Record); everything else is bytes or str."""
        if self._schema == "JSON" and not isinstance(content, (bytes, bytearray, memoryview,
                                                               str)):
            import json  # lazy: one-shot produce never needs it

            return json.dumps(content).encode()
        return content

    def check_sizes(self, messages: list[OutgoingMessage]) -> None:
        """Raise MessageTooLarge before anything is written."""
        self._broker.check_sizes(messages, self._compression, self._chunking)

    def send_many(self, messages: list[OutgoingMessage], batching: bool = True) -> list[MessageId]:
        """Publish prepared messages in one transaction (in batches, when the producer batches;
        batching=False stores each alone, as send() does)."""
        with self._cond:
            self.flush()
            return self._publish(messages, batching)

    def _route(self, n: int):
        """The router for a partitioned topic of n partitions, kept across sends as a Java
        producer keeps its MessageRouter (so round robin continues where it stopped)."""
        if self._router is None or self._router.num_partitions != n:
            b = self._batcher
            self._router = PartitionRouter(n, *self._routing, batching=b is not None,
                                           switch_ms=b.switch_ms if b is not None else 10)
        return self._router.choose

    def _publish(self, msgs, batching: bool = True) -> list[MessageId]:
        name, ids = self._held(msgs, batching)
        self._name = name
        self.last_ids = ids
        return ids

    def send_payloads(self, payloads: list[bytes], breaks=()) -> list | None:
        """Publish plain messages from their payloads alone, in batches, in one transaction
        (`produce --stdin`'s bulk path: no OutgoingMessage or MessageId per message); breaks:
        indexes that start a new batch. Returns [(ledger id, entry id, partition, messages in
        the entry)], or None (nothing sent) where send_many must do it: a producer that does
        not batch or has a schema, a partitioned topic, a message or batch over
        maxMessageSize."""
        if self._batcher is None or self._schema not in (None, "BYTES") or self._chunking:
            return None
        with self._cond:
            self.flush()
            got = self._held_call(lambda: self._broker.publish_payloads(
                self._topic, payloads, self._name, self._compression, self._batcher.spec,
                breaks, publisher=self._token))
        if got is None:
            return None
        self._name = got[0]
        return got[1]

    def _held(self, msgs, batching: bool = True):
        """Publish; while a producer_request_hold backlog quota holds the producer, try again
        until the send timeout, then fail as Pulsar's ProducerBlockedQuotaExceededError."""
        return self._held_call(lambda: self._broker.publish(
            self._topic, msgs, self._name, self._route, self._compression, self._schema,
            self._chunking, self._batcher.spec if self._batcher and batching else None,
            publisher=self._token))

    def _held_call(self, publish):
        deadline = None
        while True:
            try:
                return publish()
            except BacklogQuotaHold:
                now = clocks.monotonic()
                if deadline is None:
                    deadline = now + self.send_timeout_ms / 1000
                if now >= deadline:
                    raise
                clocks.sleep(min(0.1, deadline - now))

    def flush(self) -> list[MessageId]:
        """Send what send_async buffered and wait until every callback has run (also those of
        what the flusher thread sent meanwhile); returns the ids of what this call sent. A
        failure is reported to the callbacks and raised here."""
        with self._cond:
            cbs, ids, err = self._take_and_publish() if self._buffer else ([], [], None)
            if threading.current_thread() is not self._flusher:
                while self._reporting:
                    self._cond.wait()
        _report(cbs, ids, err)
        if err is not None:
            raise err
        return ids

    def _attach(self) -> None:
        """Attach to the topic (ProducerBusy or ProducerFenced if the access modes refuse it);
        a queued WaitForExclusive producer waits (real time) until it holds the topic, woken at
        once when a producer closes, polling every 100 ms for one that died."""
        # lazy: one-shot produce never needs it
        from pulsarctl.broker.consumers import this_process

        pid, start = this_process()
        pid_id = next(_ids)
        token = f"{pid}:{start}:{pid_id}"
        who = {"token": token, "pid": pid, "pidStart": start, "id": pid_id,
               "address": f"pid:{pid}", "clientVersion": "pulsarctl"}
        waiter = None
        try:
            while True:
                self._name, got = self._broker.producer_acquire(self._topic, self._name,
                                                                self._mode, who)
                self._token = token
                if got["state"] == READY:
                    return
                if got["state"] == FENCED:   # an ExclusiveWithFencing producer took over
                    raise ProducerFenced(f"producer '{self._name}' was fenced out of "
                                         f"{self._topic} while it waited: Fenced out")
                if waiter is None:
                    waiter = Waiter(self._broker.path)
                waiter.sleep(0.1)
        except BaseException:
            self._detach()   # a refused, fenced or interrupted producer leaves nothing behind
            raise

    def _detach(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            self._broker.producer_release(self._topic, self._name, token)

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        t = self._flusher
        if t is not None and t is not threading.current_thread():
            t.join()
        try:
            self.flush()
        finally:
            self._detach()


def _report(callbacks: list, ids, err) -> None:
    """Each send_async callback gets ("Ok", its message id), or (the error's name, None)."""
    for i, cb in enumerate(callbacks):
        if cb is not None:
            if err is None:
                cb("Ok", ids[i])
            else:
                cb(type(err).__name__, None)
