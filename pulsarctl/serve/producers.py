"""Producers on a connection (ServerCnx.handleProducer/handleSend, Pulsar's Producer):
the PRODUCER command attaches one to its topic in its access mode (broker/access.py), as
AbstractTopic.addProducer decides: refused (ProducerBusy, ProducerFenced), attached, or queued
(WaitForExclusive: PRODUCER_SUCCESS producer_ready=false, then ready once it holds the topic);
the producers an ExclusiveWithFencing one fences are sent CLOSE_PRODUCER. A SEND is decoded
here (outgoing) and handed to the group commit; its SEND_RECEIPT goes out, in the order of the
sends, once its publish committed. With deduplication a producer goes on from the last
sequence id its name published."""
from __future__ import annotations

import asyncio
import struct

from pulsarctl import compression
from pulsarctl.broker.access import FENCED, READY, SHARED
from pulsarctl.broker.batches import Spec
from pulsarctl.errors import ChecksumMismatch, ProtocolError, PulsarctlError
from pulsarctl.messages import MessageId, OutgoingMessage, SentBatch
from pulsarctl.serve import frames, schema_commands
from pulsarctl.serve import pulsar_api_pb2 as api
from pulsarctl.serve.command_sender import id_data
from pulsarctl.serve.wire_errors import error_text, server_error

T = api.BaseCommand
_U64 = struct.Struct(">q")
ACCESS_MODES = {1: "Exclusive", 2: "WaitForExclusive", 3: "ExclusiveWithFencing"}
# A queued WaitForExclusive producer asks again at least this often (a holder that died).
RETRY_EXCLUSIVE_S = 0.5


class Producer:
    __slots__ = ("id", "topic", "name", "mode", "token", "who", "epoch", "ready", "waiter",
                 "receipts", "drainer", "schema_version")

    def __init__(self, pid, topic, name, mode, token, who, epoch):
        self.id = pid
        self.topic = topic
        self.name = name
        self.mode = mode
        self.token = token   # names it in the store's producer records (broker/access.py)
        self.who = who
        self.epoch = epoch   # the topic epoch its client came back with
        self.ready = False   # False while it waits for exclusive access (WaitForExclusive)
        self.waiter = None
        self.receipts: asyncio.Queue = asyncio.Queue()
        self.drainer = None
        self.schema_version = b""   # what PRODUCER_SUCCESS says, again on a retry


class ProducerCommands:
    """The producer commands of a Connection (connection.py), which inherits them."""

    async def on_producer(self, cmd, meta, payload):
        """ServerCnx.handleProducer: the topic is made, the schema registered, then the
        producer attached in its access mode (broker/access.py), as AbstractTopic.addProducer
        decides: refused (ProducerBusy, ProducerFenced), attached, or queued (a
        WaitForExclusive producer is told PRODUCER_SUCCESS producer_ready=false, and again,
        ready, once it holds the topic)."""
        c = cmd.producer
        s = self.server
        if c.producer_id in self.producers:  # a retry of one that succeeded, or still queued
            p = self.producers[c.producer_id]
            if not p.ready:
                self.error(c.request_id, api.ServiceNotReady,
                           "Producer is already present on the connection")
                return
            self.reply(T.PRODUCER_SUCCESS, "producer_success", request_id=c.request_id,
                       producer_name=p.name, last_sequence_id=-1,
                       schema_version=p.schema_version)
            return
        if not await self.allowed(c.topic, "produce"):
            self.error(c.request_id, api.AuthorizationError, "Client is not authorized to Produce")
            return
        name = c.producer_name if c.HasField("producer_name") and c.producer_name else None
        name = name or s.producer_name()
        mode = ACCESS_MODES.get(c.producer_access_mode, SHARED)
        try:
            await s.call(s.broker.partitions_of, c.topic)  # a valid topic name
            await s.call(ensure_topic, s.broker, c.topic)
        except Exception as exc:
            self.error(c.request_id, exc)
            return
        version = None
        typ = schema_commands.wire_type(c.schema) if c.HasField("schema") else None
        if typ is not None:
            # A typed producer registers its schema (broker/schemas.py): its version, new or
            # existing, or IncompatibleSchema under the compatibility strategy.
            try:
                version = await s.call(s.broker.schemas.register, c.topic,
                                       typ, c.schema.schema_data,
                                       {kv.key: kv.value for kv in c.schema.properties})
            except Exception as exc:
                self.error(c.request_id, exc)
                return
        # unique to this PRODUCER command: a client that comes back with the same producer id
        # after the broker closed it is a new producer
        token = f"{s.pid}:{s.pid_start}:{self.serial}:{c.producer_id}:{next(s._serials)}"
        who = {"token": token, "pid": s.pid,
               "pidStart": s.pid_start, "id": c.producer_id, "address": "/" + self.peer,
               "clientVersion": self.client_version,
               "metadata": {kv.key: kv.value for kv in c.metadata}}
        p = Producer(c.producer_id, c.topic, name, mode, who["token"], who,
                     c.topic_epoch if c.HasField("topic_epoch") else None)
        # Always there, as Pulsar's Commands.newProducerSuccess sets it: empty without a schema
        # (SchemaVersion.Empty). The Java client reads it unconditionally and drops the
        # connection when it is missing (pulsar-perf's BYTES producer could never start).
        p.schema_version = b"" if version is None else _U64.pack(version)
        extra = {"schema_version": p.schema_version}
        self.producers[c.producer_id] = p
        try:
            got = await self._attach(p)
        except Exception as exc:
            self.producers.pop(c.producer_id, None)
            self.error(c.request_id, exc)
            return
        if got["state"] == FENCED:
            await self._drop_producer(p)
            self.error(c.request_id, api.ProducerFenced, "Fenced out")
            return
        if got["state"] != READY:
            # Queued: the client stops timing its request out and waits (producer_ready).
            self.reply(T.PRODUCER_SUCCESS, "producer_success", request_id=c.request_id,
                       producer_name=name, last_sequence_id=-1, producer_ready=False, **extra)
            p.waiter = asyncio.create_task(self._await_exclusive(p, c.request_id, extra))
            return
        await self._ready(p, c.request_id, got, extra)

    async def _attach(self, p: Producer) -> dict:
        """producer_acquire for p (again, while it waits): how it stands; those it fenced out
        are closed."""
        s = self.server
        _name, got = await s.call(s.broker.producer_acquire, p.topic, p.name, p.mode, p.who,
                                  topic_epoch=p.epoch)
        if got["fenced"]:
            s.fence(got["fenced"])
        return got

    async def _ready(self, p: Producer, request_id: int, got: dict, extra: dict) -> None:
        s = self.server
        try:
            # With deduplication, where this producer name left off (Pulsar's
            # getLastPublishedSequenceId): the client goes on from it.
            last = await s.call(s.broker.last_sequence_id, p.topic, p.name)
        except Exception as exc:
            await self._drop_producer(p)
            self.error(request_id, exc)
            return
        p.ready = True
        p.drainer = asyncio.create_task(self._receipts(p))
        if got.get("epoch") is not None:
            extra = dict(extra, topic_epoch=got["epoch"])
        self.reply(T.PRODUCER_SUCCESS, "producer_success", request_id=request_id,
                   producer_name=p.name, last_sequence_id=last, producer_ready=True, **extra)

    async def _await_exclusive(self, p: Producer, request_id: int, extra: dict) -> None:
        """A queued WaitForExclusive producer: asks again whenever the store changes (the wake
        file: a producer closed) and every RETRY_EXCLUSIVE_S (one that died), until it holds the
        topic; one fenced out while it waits is refused ProducerFenced "Fenced out"."""
        s = self.server
        while not self.closed and self.producers.get(p.id) is p:
            wake = s._wake
            try:
                await asyncio.wait_for(wake.wait(), RETRY_EXCLUSIVE_S)
            except asyncio.TimeoutError:
                pass
            if self.closed or self.producers.get(p.id) is not p:
                return
            try:
                got = await self._attach(p)
            except Exception as exc:
                await self._drop_producer(p)
                self.error(request_id, exc)
                return
            if got["state"] == READY:
                p.waiter = None
                await self._ready(p, request_id, got, extra)
                return
            if got["state"] == FENCED:
                p.waiter = None
                await self._drop_producer(p)
                self.error(request_id, api.ProducerFenced, "Fenced out")
                return

    async def on_send(self, cmd, meta, payload):
        c = cmd.send
        p = self.producers.get(c.producer_id)
        if p is None or not p.ready:
            # ServerCnx.handleSend: a SEND for a producer the broker just closed is expected
            # (it was in flight) and dropped; for one that is not there or not ready, the
            # connection is closed.
            until = self.recently_closed.get(c.producer_id)
            if p is None and until is not None and until > asyncio.get_running_loop().time():
                return
            raise ProtocolError(f"SEND for producer {c.producer_id}, which is not "
                                f"{'ready' if p is not None else 'open'} on this connection")
        try:
            if meta is None:
                raise ProtocolError("SEND without a payload")
            messages, code, batched, as_sent = outgoing(meta, payload)
        except PulsarctlError as exc:
            self.reply(T.SEND_ERROR, "send_error", producer_id=p.id, sequence_id=c.sequence_id,
                       error=api.UnknownError, message=exc.message)
            return
        s = self.server
        kwargs = {"compression": code, "publish_time": meta.publish_time,
                  "publisher": p.token}
        if batched:
            kwargs["batching"] = Spec(len(messages), 0, as_sent=True)
        fut = s.commits.submit(p.topic, messages, p.name, kwargs)
        self._send_started()
        p.receipts.put_nowait((c.sequence_id, c.highest_sequence_id, fut, messages, as_sent))

    def _send_started(self) -> None:
        """One more SEND awaits its receipt; at maxPendingSendRequests the connection is not
        read any further (ServerCnx.startSendOperation turns autoRead off): a client that
        sends faster than the store commits waits in its own socket, not in serve's memory."""
        self.sends_in_flight += 1
        if 0 < self.server.max_pending_sends <= self.sends_in_flight:
            self.reads_resumed.clear()

    def _send_done(self) -> None:
        """A SEND's receipt (or error) went out; reading resumes once half of the window is
        free again (ServerCnx.completedSendOperation's resumeReadsThreshold)."""
        self.sends_in_flight -= 1
        if self.sends_in_flight <= self.server.max_pending_sends // 2:
            self.reads_resumed.set()

    async def _receipts(self, p: Producer):
        """SEND_RECEIPTs in the order of the sends, each once its publish committed."""
        while True:
            item = await p.receipts.get()
            if item is None:
                return
            seq, highest, fut, messages, as_sent = item
            try:
                _name, ids = await fut
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.reply(T.SEND_ERROR, "send_error", producer_id=p.id, sequence_id=seq,
                           error=server_error(exc), message=error_text(exc))
                self._send_done()
                continue
            if as_sent is not None:
                self.server.entry_cache.put(p.topic, ids, p.name, messages, as_sent)
            first = ids[0]
            mid = MessageId(first.ledger_id, first.entry_id, first.partition)
            self.reply(T.SEND_RECEIPT, "send_receipt", producer_id=p.id, sequence_id=seq,
                       message_id=id_data(mid), highest_sequence_id=highest)
            self._send_done()
            await self.drained()

    def _refuse_send(self, send) -> None:
        """A SEND whose checksum failed: SEND_ERROR ChecksumError, in its place among the
        producer's receipts (the client matches it to its oldest pending message), and one line
        on the log; the connection goes on (Producer.checkAndStartPublish)."""
        p = self.producers.get(send.producer_id)
        self.server.log(f"checksum mismatch on a SEND from {self.peer} (producer "
                        f"{send.producer_id}, sequence {send.sequence_id}): answered ChecksumError")
        exc = ChecksumMismatch(send, "Checksum failed on the broker")
        if p is None:
            self.reply(T.SEND_ERROR, "send_error", producer_id=send.producer_id,
                       sequence_id=send.sequence_id, error=api.ChecksumError, message=exc.message)
            return
        fut = asyncio.get_running_loop().create_future()
        fut.set_exception(exc)
        fut.exception()   # retrieved: no "never retrieved" warning if the connection ends first
        self._send_started()
        p.receipts.put_nowait((send.sequence_id, send.highest_sequence_id, fut, None, None))

    async def on_close_producer(self, cmd, meta, payload):
        c = cmd.close_producer
        p = self.producers.get(c.producer_id)
        if p is not None:
            await self._drop_producer(p)
        self.reply(T.SUCCESS, "success", request_id=c.request_id)

    async def _drop_producer(self, p: Producer):
        if self.producers.get(p.id) is p:
            del self.producers[p.id]
        if p.waiter is not None and p.waiter is not asyncio.current_task():
            p.waiter.cancel()
        if p.drainer is not None:
            if self.closed:
                p.drainer.cancel()
            else:   # the receipts of what was sent go out first
                p.receipts.put_nowait(None)
                await p.drainer
        s = self.server
        try:
            await s.call(s.broker.producer_release, p.topic, p.name, p.token)
        except Exception as exc:
            s.log(f"closing producer {p.name} on {p.topic}: {error_text(exc)}")

    def close_producer_by_broker(self, p: Producer) -> None:
        """CLOSE_PRODUCER to the client (request id -1, as Pulsar's), which reconnects; its
        SENDs already on the way are dropped for one keep-alive interval."""
        self.producers.pop(p.id, None)
        loop = asyncio.get_running_loop()
        self.recently_closed[p.id] = loop.time() + max(self.server.keep_alive_s, 1)
        self.reply(T.CLOSE_PRODUCER, "close_producer", producer_id=p.id, request_id=2**64 - 1)
        loop.create_task(self._drop_producer(p))


def ensure_topic(broker, name: str) -> None:
    """Pulsar creates a topic when a producer attaches to it (allowAutoTopicCreation), not at
    its first message: a reader, a regex consumer or a lookup sees it at once."""
    if not broker.topics.exists(name):
        broker.topics.ensure(name)


def _props(kvs) -> dict | None:
    return {kv.key: kv.value for kv in kvs} or None


def outgoing(meta: api.MessageMetadata, payload: bytes):
    """A SEND's metadata and payload -> (OutgoingMessages or a SentBatch, compression code,
    batched, the uncompressed batch payload if the entry cache may keep it as sent, else None).
    One
    chunk of a chunked message (uuid, chunk_id) is stored as it came, its piece of the
    compressed payload with the chunk metadata (OutgoingMessage.chunks): the consumer's
    client joins the chunks and decompresses, as with Pulsar's broker."""
    chunk = meta.HasField("uuid") or meta.HasField("chunk_id")
    code = meta.compression
    if len(meta.encryption_keys) and not chunk:
        return [_encrypted(meta, payload)], 0, False, None
    if code and not chunk:
        payload = compression.decompress(code, payload, meta.uncompressed_size, "in a SEND")
    deliver_at = meta.deliver_at_time if meta.HasField("deliver_at_time") else 0
    sv = _schema_version(meta.schema_version) if meta.HasField("schema_version") else None
    if not meta.HasField("num_messages_in_batch") or chunk:
        m = _one(meta, payload, deliver_at, sv)
        if chunk:
            n = meta.num_chunks_from_msg
            if not 0 <= meta.chunk_id < n:
                raise ProtocolError(f"chunk {meta.chunk_id} of a message of {n} chunks")
            m.chunks = (code, meta.uncompressed_size, n, meta.total_chunk_msg_size,
                        [(meta.chunk_id, payload)], meta.uuid)
            return [m], 0, False, None
        return [m], code, False, None
    count, first = meta.num_messages_in_batch, meta.sequence_id
    plain = frames.plain_batch(payload, count, first) if first >= 0 else None
    if plain is not None:
        return SentBatch(plain, first, deliver_at, sv), code, True, \
            payload if plain.canonical else None
    out = []
    for i, (smm, data) in enumerate(frames.split_batch(payload, count)):
        out.append(OutgoingMessage(
            data, _props(smm.properties),
            smm.partition_key if smm.HasField("partition_key") else None,
            smm.ordering_key if smm.HasField("ordering_key") else None,
            smm.event_time, deliver_at,
            smm.sequence_id if smm.HasField("sequence_id") else meta.sequence_id + i, sv))
        out[-1].null_value = smm.null_value
        out[-1].key_b64 = smm.partition_key_b64_encoded
    # a batch even of one message: stored as the client sent it (batches.Spec.as_sent)
    return out, code, True, None


def _one(meta: api.MessageMetadata, payload: bytes, deliver_at: int, sv) -> OutgoingMessage:
    """A SEND that is one message (not a batch) as the message to store: its key, ordering
    key, properties and times from the metadata."""
    m = OutgoingMessage(payload, _props(meta.properties),
                        meta.partition_key if meta.HasField("partition_key") else None,
                        meta.ordering_key if meta.HasField("ordering_key") else None,
                        meta.event_time, deliver_at, meta.sequence_id, sv)
    m.null_value = meta.null_value
    m.key_b64 = meta.partition_key_b64_encoded
    return m


def _encrypted(meta: api.MessageMetadata, payload: bytes) -> OutgoingMessage:
    """An end-to-end encrypted SEND as one message kept as sent: the ciphertext (of the
    compressed payload, or of a whole batch, which the broker cannot open any more than
    Pulsar's can), with what its consumer needs to decrypt it (entries.py's field 16)."""
    deliver_at = meta.deliver_at_time if meta.HasField("deliver_at_time") else 0
    sv = _schema_version(meta.schema_version) if meta.HasField("schema_version") else None
    m = _one(meta, payload, deliver_at, sv)
    m.encryption = {
        "keys": [[k.key, k.value, _props(k.metadata) or {}] for k in meta.encryption_keys],
        "algo": meta.encryption_algo if meta.HasField("encryption_algo") else None,
        "param": meta.encryption_param if meta.HasField("encryption_param") else None,
        "compression": meta.compression,
        "uncompressedSize": meta.uncompressed_size,
        "numMessages": (meta.num_messages_in_batch if meta.HasField("num_messages_in_batch")
                        else None),
    }
    return m


def _schema_version(raw: bytes):
    if len(raw) == 8:
        return _U64.unpack(raw)[0]
    return None
