"""The server: Pulsar's binary protocol on asyncio TCP, over one Broker.

Each connection reads frames (frames.py), answers CONNECT, PING, LOOKUP and
PARTITIONED_METADATA itself, and turns producers' and consumers' commands into Broker calls
(publish, subscribe, fetch, ack, nack, redeliver_unacked, close_consumer). The Broker is
synchronous (one LMDB transaction per call), so every call runs in one worker thread, in the
order the commands came: a SEND_RECEIPT goes out only after its publish committed. A consumer
with flow permits fetches until they run out or nothing is left, then waits for the store's
wake file (pulsarctl/wake.py), which every publish, nack and closed consumer touches, the CLI's
included. A frame that cannot be read closes its connection (and only it) with one line on the
log; a command that fails gets Pulsar's error response; a SEND whose checksum is wrong gets
SEND_ERROR ChecksumError and the connection goes on. As Pulsar's PulsarHandler, every
keepAliveIntervalSeconds a connection that has not sent CONNECT is closed, and a connected one
is sent a PING, and closed at the next check if nothing came back in between. Nothing is fetched
for a consumer while its connection's write buffer is over asyncio's high-water mark.

As ServerCnx: a second CONNECT, a command before CONNECT and a SEND for a producer that is not
ready on the connection close it (a SEND for one the broker just closed is dropped); a client
refused at CONNECT is answered as unauthenticated.py says. A producer is attached to its topic
in its access mode (broker/access.py, durable, so the CLI's producers count too): refused,
attached, or queued (WaitForExclusive: PRODUCER_SUCCESS producer_ready=false, then ready once it
holds the topic); the producers an ExclusiveWithFencing one fences are sent CLOSE_PRODUCER."""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import operator
import os
import socket
import struct
from concurrent.futures import ThreadPoolExecutor

from pulsarctl import compression
from pulsarctl.auth import authorization
from pulsarctl.auth.service import Authentication, common_name
from pulsarctl.consumer_policy import ConsumerPolicy
from pulsarctl.errors import (
    AuthenticationFailed, InvalidTopicName, NotFound, ProtocolError, PulsarctlError,
    SubscriptionNotFound, TopicNotFound,
)
from pulsarctl.errors import ChecksumMismatch
from pulsarctl.entries import F_PRODUCER_NAME, F_PUBLISH_TIME, F_SCHEMA_VERSION, F_SEQUENCE_ID
from pulsarctl.messages import MessageId, OutgoingMessage
from pulsarctl.serve import frames, schema_commands, unauthenticated
from pulsarctl.serve.group_commit import GroupCommit
from pulsarctl.serve import pulsar_api_pb2 as api
from pulsarctl.serve.wire_errors import error_text, server_error
from pulsarctl.wake import Waiter
from pulsarctl.broker.consumers import this_process
from pulsarctl.broker import consuming, topics
from pulsarctl.broker.access import FENCED, READY, SHARED
from pulsarctl.broker.batches import Batch, Spec
from pulsarctl.broker.producers import last_sequence_id
from pulsarctl.broker.targets import topic_name

T = api.BaseCommand
PROTOCOL_VERSION = 20
SERVER_VERSION = "pulsarctl"
SUB_TYPES = {0: "Exclusive", 1: "Shared", 2: "Failover", 3: "Key_Shared"}
ACCESS_MODES = {1: "Exclusive", 2: "WaitForExclusive", 3: "ExclusiveWithFencing"}
FETCH_MAX = 1000
IDLE_POLL_S = 0.5     # a waiting consumer fetches at least this often (timers, other brokers)
WAKE_POLL_S = 0.005   # how often the wake file is looked at
HANDSHAKE_TIMEOUT_S = 10.0   # a TLS client that does not finish its handshake is dropped
# CommandConnect.auth_method (deprecated AuthMethod enum) as method names.
LEGACY_AUTH_METHODS = {0: "none", 1: "yca", 2: "athens"}
_U64 = struct.Struct(">q")
# The listen queue, as netty's (Pulsar's) default: the kernel's somaxconn. asyncio's 100 drops
# the SYNs of a burst of clients beyond it, each then waiting a second to try again.
LISTEN_BACKLOG = socket.SOMAXCONN
# A client negatively acknowledges by asking for redelivery once its own nack delay has passed:
# the store then redelivers after the shortest delay it allows, not its default minute.
MIN_NACK_DELAY_MS = 100   # NegativeAcksTracker.MIN_NACK_DELAY_MS
# Schema.type on the wire (PulsarApi.proto's Schema.Type: None=0 ... ProtobufNative=20), as
# the registry names the types (broker/schemas.py).
SCHEMA_TYPES = ("NONE", "STRING", "JSON", "PROTOBUF", "AVRO", "BOOLEAN", "INT8", "INT16",
                "INT32", "INT64", "FLOAT", "DOUBLE", "DATE", "TIME", "TIMESTAMP", "KEY_VALUE",
                "INSTANT", "LOCAL_DATE", "LOCAL_TIME", "LOCAL_DATE_TIME", "PROTOBUF_NATIVE")
# The subscription types whose deliveries carry the redelivery count. Pulsar's Exclusive and
# Failover dispatchers keep none (RedeliveryTrackerDisabled): their consumers always see 0, and a
# client's dead letter policy, which acts on that count, never fires there. The store counts for
# every type; sent to an Exclusive consumer, a count past its policy's limit makes the client ask
# for redelivery of everything at once, over and over.
COUNTED = ("Shared", "Key_Shared")
# activeConsumerFailoverDelayTimeMillis: when a Failover subscription's active consumer changes
# (to its first consumer too), Pulsar reads for the new one only this long after, so that acks
# the old one sent meanwhile land before the rewind; a redelivery asked for in between is
# ignored (PersistentDispatcherSingleActiveConsumer.scheduleReadOnActiveConsumer).
FAILOVER_DELAY_S = 1.0
WIRE_POLICY = ConsumerPolicy.from_client(negative_ack_redelivery_delay_ms=MIN_NACK_DELAY_MS)

# What this broker supports of CommandConnected.feature_flags: PIP-344's partitioned metadata
# without auto-creation (the Java client asks it before naming its retry and dead letter topics).
FEATURE_FLAGS = api.FeatureFlags(supports_get_partitioned_metadata_without_auto_creation=True)


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


def _id_data(mid: MessageId, out=None) -> api.MessageIdData:
    d = out if out is not None else api.MessageIdData()
    d.ledgerId = mid.ledger_id % 2**64  # -1 (an empty topic's) as Pulsar writes it
    d.entryId = mid.entry_id % 2**64
    d.partition = mid.partition
    if mid.batch_index >= 0:
        d.batch_index = mid.batch_index
    return d


def _ack_set(indexes, size: int) -> list[int]:
    """java.util.BitSet.toLongArray of the indexes still to deliver, as signed longs."""
    words = [0] * ((size + 63) // 64)
    for i in indexes:
        words[i // 64] |= 1 << (i % 64)
    return [w - (1 << 64) if w >= 1 << 63 else w for w in words]


def _acked_indexes(ack_set, size: int) -> list[int]:
    """An ack's ack set: the bits cleared are the batch indexes acknowledged."""
    bits = [(w + (1 << 64)) % (1 << 64) for w in ack_set]
    return [i for i in range(size) if not (i // 64 < len(bits) and bits[i // 64] >> (i % 64) & 1)]


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


class Server:
    """Pulsar's binary protocol over broker, on host:port (127.0.0.1 unless told otherwise)."""

    def __init__(self, broker, host: str = "127.0.0.1", port: int = 6650,
                 max_message_size: int = 5 * 1024 * 1024, log=None, *, tls_port=None,
                 ssl=None, authentication=None, authorization=None, advertised=None,
                 listeners=None, keep_alive_s: int = 30):
        self.broker = broker
        self.keep_alive_s = keep_alive_s  # keepAliveIntervalSeconds; 0: no checks
        self.host = host
        # the host lookups and printed URLs name (advertisedAddress): a client cannot dial 0.0.0.0
        self.advertised = advertised or advertised_host(host)
        # advertisedListeners: name -> the pulsar:// URL a lookup naming it answers
        self.listeners = dict(listeners or {})
        self.port = port
        self.tls_port = tls_port if ssl is not None else None
        self.ssl = ssl
        self.max_message_size = max_message_size
        self.log = log or (lambda line: None)
        # Who a client is (auth/service.py) and, when authorizationEnabled, what it may do
        # (auth/authorization.py; None: everything is allowed to every client).
        self.authentication = authentication or Authentication()
        self.authorization = authorization
        self.url = None
        self.tls_url = None
        self._tls_server = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker")
        self._server = None
        self._connections: set = set()
        self._wake = None
        self._watcher = None
        self._names = itertools.count()
        self._serials = itertools.count()   # connections and producers, for producer tokens
        self._in_use: set = set()
        # Failover: (topic, subscription) -> the active consumer on this server, as last seen
        self._failover_active: dict = {}
        # SENDs that arrive during a commit share the next one (group_commit.py).
        self.commits = GroupCommit(self.call, broker.publish_many)

        self.pid, self.pid_start = this_process()

    # -- the worker thread ---------------------------------------------------------------------
    def call(self, fn, *args, **kwargs):
        """fn(*args) in the broker's thread, in submission order; an awaitable of its result."""
        return asyncio.get_running_loop().run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    # -- life ----------------------------------------------------------------------------------
    async def start(self):
        self._wake = asyncio.Event()
        self._server = await asyncio.start_server(self._connected, self.host, self.port,
                                                  reuse_address=True, backlog=LISTEN_BACKLOG)
        self.port = self._server.sockets[0].getsockname()[1]
        host = self.advertised if ":" not in self.advertised else f"[{self.advertised}]"
        self.url = f"pulsar://{host}:{self.port}"
        if self.tls_port is not None:
            try:
                self._tls_server = await asyncio.start_server(
                    self._connected, self.host, self.tls_port, reuse_address=True, ssl=self.ssl,
                    backlog=LISTEN_BACKLOG,
                    ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
            except OSError:
                self._server.close()
                raise
            self.tls_port = self._tls_server.sockets[0].getsockname()[1]
            self.tls_url = f"pulsar+ssl://{host}:{self.tls_port}"
        self._watcher = asyncio.create_task(self._watch_wake())
        return self.url

    def stop_accepting(self) -> None:
        """No new connection: the listening sockets close (those open go on)."""
        if self._server is not None:
            self._server.close()
        if self._tls_server is not None:
            self._tls_server.close()

    async def stop(self):
        """Stop accepting, close every connection (its consumers and producers leave the
        store), then let the broker's thread finish. The broker itself stays open."""
        self.stop_accepting()
        for conn in list(self._connections):
            await conn.close()
        if self._watcher is not None:
            self._watcher.cancel()
        if self._server is not None:
            await self._server.wait_closed()
        if self._tls_server is not None:
            await self._tls_server.wait_closed()
        await self.commits.close()
        self._pool.shutdown(wait=True)

    async def _watch_wake(self):
        waiter = Waiter(self.broker.wake_path)
        while True:
            await asyncio.sleep(WAKE_POLL_S)
            if waiter.sleep(0):
                self.kick()

    def kick(self):
        """Wake every consumer waiting for messages."""
        ev, self._wake = self._wake, asyncio.Event()
        ev.set()

    async def notify_failover(self, topic: str, sub: str) -> None:
        """ACTIVE_CONSUMER_CHANGE to each consumer of a Failover subscription on this server
        whose standing changed (and to a new one at once), as Pulsar's dispatcher notifies
        them: the active consumer is the one the store's cursor names."""
        try:
            active = await self.call(self.broker.read, consuming.failover_active_name,
                                     topic_name(topic), sub)
        except Exception as exc:  # the subscription went away meanwhile: nobody to tell
            self.log(f"failover of {sub} on {topic}: {error_text(exc)}")
            return
        held = None
        for conn in list(self._connections):
            for o in list(conn.consumers.values()):
                if o.reader or o.topic != topic or o.sub != sub or o.sub_type != "Failover":
                    continue
                is_active = o.name == active
                if is_active:
                    held = o
                if o.active_sent is not is_active:
                    o.active_sent = is_active
                    conn.reply(T.ACTIVE_CONSUMER_CHANGE, "active_consumer_change",
                               consumer_id=o.id, is_active=is_active)
        if held is not None and self._failover_active.get((topic, sub)) is not held:
            loop = asyncio.get_running_loop()
            held.hold_until = loop.time() + FAILOVER_DELAY_S
            loop.call_later(FAILOVER_DELAY_S, held.kick.set)
        self._failover_active[(topic, sub)] = held

    def consumer_name(self, topic, sub, name):
        """Consumer names are unique per subscription in the store; two clients may pick the
        same one (or none): the second gets a suffix."""
        base = name or f"consumer-{os.getpid()}-{next(self._names)}"
        out = base
        while (topic, sub, out) in self._in_use:
            out = f"{base}-{next(self._names)}"
        self._in_use.add((topic, sub, out))
        return out

    def producer_name(self):
        return f"standalone-{os.getpid()}-{next(self._names)}"

    def fence(self, fenced) -> None:
        """An ExclusiveWithFencing producer fenced out these (topic, name, token): this
        server's own are closed as Pulsar closes them (CLOSE_PRODUCER; the client reconnects
        and is refused). Other processes' producers find out at their next send."""
        tokens = {f[2] for f in fenced}
        for conn in list(self._connections):
            for p in list(conn.producers.values()):
                if p.token in tokens:
                    conn.close_producer_by_broker(p)

    async def _connected(self, reader, writer):
        conn = Connection(self, reader, writer)
        self._connections.add(conn)
        try:
            await conn.run()
        finally:
            self._connections.discard(conn)


class Connection:
    def __init__(self, server: Server, reader, writer):
        self.server = server
        self.reader = reader
        self.writer = writer
        self.connected = False
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self.closed = False
        self.awaiting_pong = False   # a PING went out and nothing has come in since
        self._keeper = None          # the keep-alive task
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.tls = writer.get_extra_info("sslcontext") is not None
        self.role = None   # the role CONNECT authenticated (None: authentication is off)
        self.refused = False   # its CONNECT failed authentication (serve/unauthenticated.py)
        self.client_version = None
        self.serial = next(server._serials)
        # producer id -> when it stops counting: producers the broker closed, whose SENDs in
        # flight are expected and ignored (ServerCnx.recentlyClosedProducers)
        self.recently_closed: dict[int, float] = {}
        # (topic, subscription) of a reader closed by its seek -> (message id, or offset)
        self.reader_resume: dict[tuple, tuple] = {}

    # -- writing -------------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        # Not to a transport that is closing (the client went away and a write failed):
        # asyncio would warn on stderr for every write after the fifth.
        if not self.closed and not self.writer.transport.is_closing():
            self.writer.write(data)

    def reply(self, type_, field: str, **values):
        cmd = api.BaseCommand(type=type_)
        sub = getattr(cmd, field)
        sub.SetInParent()
        for k, v in values.items():
            if isinstance(v, (api.MessageIdData, api.FeatureFlags)):
                getattr(sub, k).CopyFrom(v)
            elif v is not None:
                setattr(sub, k, v)
        self.send(frames.command(cmd))

    def error(self, request_id: int, exc_or_code, message: str | None = None):
        code = exc_or_code if isinstance(exc_or_code, int) else server_error(exc_or_code)
        text = message if message is not None else error_text(exc_or_code)
        self.reply(T.ERROR, "error", request_id=request_id, error=code, message=text)

    async def drained(self) -> bool:
        """Wait while the write buffer is over its high-water mark (the client reads slower than
        we write); False once the connection is gone."""
        try:
            await self.writer.drain()
        except (ConnectionError, RuntimeError):
            return False
        return not self.closed

    # -- reading -------------------------------------------------------------------------------
    async def run(self):
        if self.server.keep_alive_s > 0:
            self._keeper = asyncio.create_task(self._keep_alive(self.server.keep_alive_s))
        try:
            while not self.closed:
                try:
                    frame = await self._read_frame()
                except ChecksumMismatch as exc:
                    if exc.cmd.type != T.SEND or not self.connected:
                        raise
                    self.awaiting_pong = False
                    self._refuse_send(exc.cmd.send)
                    await self.drained()
                    continue
                if frame is None:
                    return
                self.awaiting_pong = False   # PulsarHandler.messageReceived: any frame will do
                cmd, meta, payload = frame
                if not self.connected and cmd.type != T.CONNECT:
                    raise ProtocolError(f"{T.Type.Name(cmd.type)} before CONNECT")
                await self.dispatch(cmd, meta, payload)
                await self.drained()
        except ProtocolError as exc:
            self._refused(exc.message)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception as exc:  # a bad client must never take the server down
            self._refused(error_text(exc))
        finally:
            await self.close()

    def _refused(self, why: str) -> None:
        """The one line of a connection closed for what its client did (none when the
        connection was already closed: by the keep-alive check, or the server stopping)."""
        if not self.closed:
            self.server.log(f"closing connection from {self.peer}: {why}")

    async def _read_frame(self):
        """The next frame as (command, metadata, payload); None when the client closed the
        connection between frames; ProtocolError for one that is too large, cut short by the
        end of the connection, or unreadable (nothing of a cut frame is acted on)."""
        try:
            head = await self.reader.readexactly(4)
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                return None
            raise ProtocolError(f"frame cut short: the connection ended after "
                                f"{len(exc.partial)} of its 4 size bytes") from None
        total = frames.frame_size(head, self.server.max_message_size + frames.PADDING)
        try:
            body = await self.reader.readexactly(total)
        except asyncio.IncompleteReadError as exc:
            raise ProtocolError(f"frame cut short: the connection ended after "
                                f"{len(exc.partial)} of its {total} bytes") from None
        except ConnectionError as exc:
            raise ProtocolError(f"frame cut short: {exc.strerror or exc} before its "
                                f"{total} bytes arrived") from None
        return frames.parse(body)

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
        p.receipts.put_nowait((send.sequence_id, send.highest_sequence_id, fut))

    async def _keep_alive(self, interval: float):
        """PulsarHandler.handleKeepAliveTimeout, every interval seconds."""
        while not self.closed:
            await asyncio.sleep(interval)
            if self.closed:
                return
            if not self.connected:
                why = f"no CONNECT within {interval:g} s (keepAliveIntervalSeconds)"
            elif self.refused:
                why = f"refused at CONNECT and nothing asked within {interval:g} s"
            elif self.awaiting_pong:
                why = f"no answer to PING within {interval:g} s (keepAliveIntervalSeconds)"
            else:
                self.awaiting_pong = True
                ping = api.BaseCommand(type=T.PING)
                ping.ping.SetInParent()
                self.send(frames.command(ping))
                continue
            self._refused(why)
            await self.close()
            return

    async def close(self, flush: bool = False):
        """flush: what was written still goes out before the socket closes (else what a client
        that stopped reading left in the buffer is dropped)."""
        if self.closed:
            return
        self.closed = True
        if self._keeper is not None and self._keeper is not asyncio.current_task():
            self._keeper.cancel()
        for c in list(self.consumers.values()):
            await self._drop_consumer(c)
        for p in list(self.producers.values()):
            await self._drop_producer(p)
        try:
            self.writer.close()
            # What a client that stopped reading left in the buffer would hold the socket open
            # until its TCP gave up: drop it.
            if not flush and self.writer.transport.get_write_buffer_size():
                self.writer.transport.abort()
        except Exception:
            pass

    async def dispatch(self, cmd, meta, payload):
        if self.refused and cmd.type not in (T.PING, T.PONG):
            # Its first request is answered AuthenticationError, and the connection ends.
            frame = unauthenticated.refusal(cmd)
            if frame is not None:
                self.send(frame)
            await self.close(flush=True)
            return
        handler = HANDLERS.get(cmd.type)
        if handler is None:
            name = T.Type.Name(cmd.type) if cmd.type in T.Type.values() else str(cmd.type)
            rid = _request_id(cmd)
            if rid is not None:
                self.error(rid, api.NotAllowedError, f"{name} is not supported by pulsarctl serve")
            else:
                self.server.log(f"ignored {name} from {self.peer}: not supported")
            return
        await handler(self, cmd, meta, payload)

    # -- connection ----------------------------------------------------------------------------
    async def on_connect(self, cmd, meta, payload):
        c = cmd.connect
        if self.connected:
            # ServerCnx.handleConnect checks state == Start; the exception closes the connection.
            raise ProtocolError("a second CONNECT on a connected connection")
        version = min(c.protocol_version, PROTOCOL_VERSION)
        auth = self.server.authentication
        if auth.enabled:
            method = c.auth_method_name if c.HasField("auth_method_name") else None
            if method is None and c.HasField("auth_method"):
                method = LEGACY_AUTH_METHODS.get(c.auth_method)
            peer_cn = common_name(self.writer.get_extra_info("peercert"))
            s = self.server
            try:
                # the store's clock (a simulated one included) says whether a token expired
                now = await s.call(s.broker.read, operator.attrgetter("now"))
                self.role = auth.connect_role(method, c.auth_data, peer_cn, now)
            except AuthenticationFailed as exc:
                # Refused: Pulsar's ERROR before CONNECTED to a client that reads it; a C++
                # client's first request is answered AuthenticationError instead, and the
                # connection ends (unauthenticated.py says why).
                self.server.log(f"refused connection from {self.peer}: {exc.message}")
                if unauthenticated.reads_refused_connect(c.client_version):
                    self.send(unauthenticated.refused_connect())
                    await self.close(flush=True)
                    return
                self.refused = True
        self.connected = True
        self.client_version = c.client_version or None
        self.reply(T.CONNECTED, "connected", server_version=SERVER_VERSION,
                   protocol_version=version, max_message_size=self.server.max_message_size,
                   feature_flags=FEATURE_FLAGS)

    async def allowed(self, topic: str, action: str) -> bool:
        """Whether this connection's role may do action on topic (always, when authorization
        is off). Refusals are Pulsar's AuthorizationError with its own texts, and say nothing
        of the topic's existence or contents."""
        s = self.server
        if s.authorization is None:
            return True
        try:
            return await s.call(s.broker.read, authorization.allowed, self.role, topic, action,
                                s.authorization, True)
        except (InvalidTopicName, ValueError):
            return False

    async def on_ping(self, cmd, meta, payload):
        self.reply(T.PONG, "pong")

    async def on_pong(self, cmd, meta, payload):
        pass

    async def on_lookup(self, cmd, meta, payload):
        c = cmd.lookupTopic
        listener = c.advertised_listener_name if c.HasField("advertised_listener_name") else ""
        if listener and listener not in self.server.listeners:
            # as Pulsar's lookup for a listener the broker does not advertise
            self.reply(T.LOOKUP_RESPONSE, "lookupTopicResponse", request_id=c.request_id,
                       response=2, error=api.ServiceNotReady,
                       message=f"the broker do not have {listener} listener")
            return
        if not await self.allowed(c.topic, "lookup"):
            self.reply(T.LOOKUP_RESPONSE, "lookupTopicResponse", request_id=c.request_id,
                       response=2, error=api.AuthorizationError,
                       message="Client is not authorized to Lookup")
            return
        url = self.server.listeners.get(listener, self.server.url)
        self.reply(T.LOOKUP_RESPONSE, "lookupTopicResponse", request_id=c.request_id,
                   brokerServiceUrl=url, brokerServiceUrlTls=self.server.tls_url,
                   response=1, authoritative=True)

    async def on_partitioned_metadata(self, cmd, meta, payload):
        c = cmd.partitionMetadata
        if not await self.allowed(c.topic, "lookup"):
            self.reply(T.PARTITIONED_METADATA_RESPONSE, "partitionMetadataResponse",
                       request_id=c.request_id, response=1, error=api.AuthorizationError,
                       message="Client is not authorized to Get Partition Metadata")
            return
        try:
            n = await self.server.call(self.server.broker.partitions_of, c.topic)
            # PIP-344: asked not to create it, a topic that does not exist is TopicNotFound (the
            # Java client takes any other answer for "it exists", say an old-style retry topic)
            missing = (n == 0 and not c.metadata_auto_creation_enabled and not await
                       self.server.call(self.server.broker.topics.exists, c.topic))
        except Exception as exc:
            self.reply(T.PARTITIONED_METADATA_RESPONSE, "partitionMetadataResponse",
                       request_id=c.request_id, response=1, error=server_error(exc),
                       message=error_text(exc))
            return
        if missing:
            self.reply(T.PARTITIONED_METADATA_RESPONSE, "partitionMetadataResponse",
                       request_id=c.request_id, response=1, error=api.TopicNotFound, message="")
            return
        self.reply(T.PARTITIONED_METADATA_RESPONSE, "partitionMetadataResponse",
                   request_id=c.request_id, partitions=n, response=0)

    # -- producers -----------------------------------------------------------------------------
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
        if c.HasField("schema") and 0 < c.schema.type < len(SCHEMA_TYPES):
            # A typed producer registers its schema (broker/schemas.py): its version, new or
            # existing, or IncompatibleSchema under the compatibility strategy.
            try:
                version = await s.call(s.broker.schemas.register, c.topic,
                                       SCHEMA_TYPES[c.schema.type], c.schema.schema_data,
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
            last = await s.call(s.broker.read, last_sequence_id, topic_name(p.topic), p.name)
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
        file: a producer closed) and every IDLE_POLL_S (one that died), until it holds the
        topic; one fenced out while it waits is refused ProducerFenced "Fenced out"."""
        s = self.server
        while not self.closed and self.producers.get(p.id) is p:
            wake = s._wake
            try:
                await asyncio.wait_for(wake.wait(), IDLE_POLL_S)
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
            messages, code, batched = outgoing(meta, payload)
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
        p.receipts.put_nowait((c.sequence_id, c.highest_sequence_id, fut))

    async def _receipts(self, p: Producer):
        """SEND_RECEIPTs in the order of the sends, each once its publish committed."""
        while True:
            item = await p.receipts.get()
            if item is None:
                return
            seq, highest, fut = item
            try:
                _name, ids = await fut
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.reply(T.SEND_ERROR, "send_error", producer_id=p.id, sequence_id=seq,
                           error=server_error(exc), message=error_text(exc))
                continue
            first = ids[0]
            mid = MessageId(first.ledger_id, first.entry_id, first.partition)
            self.reply(T.SEND_RECEIPT, "send_receipt", producer_id=p.id, sequence_id=seq,
                       message_id=_id_data(mid), highest_sequence_id=highest)
            await self.drained()

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

    # -- consumers -----------------------------------------------------------------------------
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
            start = _message_id(c.start_message_id)
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
            try:
                if c.reader:
                    msgs = await self._read(c, min(c.permits, FETCH_MAX))
                else:
                    msgs = await s.call(s.broker.fetch, c.topic, c.sub, c.name,
                                        min(c.permits, FETCH_MAX), whole_batches=True)
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
                await asyncio.wait(waits, timeout=IDLE_POLL_S, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    async def _gone_under(self, c: Consumer) -> None:
        """Called by c's own delivery task, which returns after it (so it is not cancelled,
        which would cut this short at its first await)."""
        c.task = None
        self._tell_closed(c)
        await self._drop_consumer(c)

    async def _reached_end(self, c: Consumer) -> bool:
        s = self.server
        try:
            return await s.call(s.broker.read, consuming.reached_end, topic_name(c.topic),
                                None if c.reader else c.sub, c.next)
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
        while i < n:
            m = msgs[i]
            if type(m) is Batch:
                mid = m.id
                idx = set(range(m.size))
                if m.skip:
                    idx -= m.skip
                _sent_indexes(delivered, mid, idx)
                self.send(whole_batch_frame(c.id, m, counted))
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

    def _ids_of(self, c: Consumer, d: api.MessageIdData, ack: bool = False) -> list[MessageId]:
        """What an acked MessageIdData stands for: the message, or the batch's messages it
        acknowledges (all delivered ones, or those its ack set clears)."""
        lid, eid = key = (d.ledgerId, d.entryId)
        sent = c.delivered.get(key)
        if not sent:
            return [MessageId(lid, eid, d.partition, d.batch_index)]
        part, known = sent
        if -1 in known:
            del c.delivered[key]
            return [MessageId(lid, eid, part)]
        if ack and not len(d.ack_set) and d.batch_index < 0:
            # The batch's own id: the client acks the entry once every message of it is
            # acked, and Pulsar's broker acks the entry: one id, not one per index (a batch
            # of 1000 resolved index by index cost its consumer a tenth of its time).
            del c.delivered[key]
            return [MessageId(lid, eid, part)]
        if len(d.ack_set):
            size = max(known) + 1 if not d.HasField("batch_size") else d.batch_size
            idx = _acked_indexes(d.ack_set, size)
        elif d.batch_index >= 0 and d.HasField("batch_size"):
            idx = [d.batch_index]
        else:
            idx = sorted(known)
        out = [MessageId(lid, eid, part, i) for i in idx if i in known]
        known.difference_update(idx)
        if not known:
            c.delivered.pop(key, None)
        return out

    async def on_ack(self, cmd, meta, payload):
        a = cmd.ack
        c = self.consumers.get(a.consumer_id)
        if c is None:
            return
        if c.reader:
            # A reader's acks move nothing in the store (it has no cursor there); the highest
            # one is its mark-delete position for hasMessageAvailable.
            for d in a.message_id:
                mid = MessageId(d.ledgerId, d.entryId, d.partition)
                if c.acked is None or (mid.ledger_id, mid.entry_id) > (c.acked.ledger_id,
                                                                       c.acked.entry_id):
                    c.acked = mid
            return
        s = self.server
        cumulative = a.ack_type == 1
        ids = []
        for d in a.message_id:
            if cumulative:
                sent = c.delivered.get((d.ledgerId, d.entryId))
                top = max(sent[1]) if sent else d.batch_index
                ids.append(MessageId(d.ledgerId, d.entryId, d.partition, top))
                for key in [k for k in c.delivered if k <= (d.ledgerId, d.entryId)]:
                    c.delivered.pop(key, None)
            else:
                ids += self._ids_of(c, d, ack=True)
        fut = s.call(s.broker.ack, c.topic, c.sub, ids, cumulative=cumulative)
        rid = a.request_id if a.HasField("request_id") else None
        try:
            await fut
        except Exception as exc:
            s.log(f"ack on {c.topic} ({c.sub}): {error_text(exc)}")
            if rid is not None:
                self.reply(T.ACK_RESPONSE, "ackResponse", consumer_id=c.id, request_id=rid,
                           error=server_error(exc), message=error_text(exc))
            return
        if rid is not None:
            self.reply(T.ACK_RESPONSE, "ackResponse", consumer_id=c.id, request_id=rid)

    async def on_redeliver(self, cmd, meta, payload):
        r = cmd.redeliverUnacknowledgedMessages
        c = self.consumers.get(r.consumer_id)
        if c is None:
            return
        if c.reader:
            c.kick.set()
            return
        if c.hold_until > asyncio.get_running_loop().time():
            return   # a Failover consumer waiting for its rewind: Pulsar ignores the request
        s = self.server
        try:
            if len(r.message_ids):
                ids = []
                for d in r.message_ids:
                    ids += self._ids_of(c, d)
                # The client held them for its nack delay: redelivered now (as Pulsar does).
                await s.call(s.broker.redeliver_unacked, c.topic, c.sub, c.name, ids)
            else:
                c.delivered.clear()
                await s.call(s.broker.redeliver_unacked, c.topic, c.sub, c.name)
        except Exception as exc:
            s.log(f"redeliver on {c.topic} ({c.sub}): {error_text(exc)}")
        c.kick.set()

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
        try:
            await s.call(s.broker.close_consumer, c.topic, c.sub, c.name)
        except Exception as exc:
            s.log(f"closing consumer {c.name} on {c.topic}: {error_text(exc)}")
        s._in_use.discard((c.topic, c.sub, c.name))
        if c.sub_type == "Failover":
            await s.notify_failover(c.topic, c.sub)

    async def on_unsubscribe(self, cmd, meta, payload):
        u = cmd.unsubscribe
        c = self._consumer(u.consumer_id, u.request_id)
        if c is None:
            return
        s = self.server
        # Refused unless it is the subscription's one consumer; then it goes with it, and a
        # refused one stays connected (PersistentSubscription.doUnsubscribe).
        try:
            await s.call(lambda: s.broker.subscription(c.topic, c.sub).unsubscribe(asker=c.name))
        except Exception as exc:
            self.error(u.request_id, exc)
            return
        await self._drop_consumer(c, in_store=False)
        self.reply(T.SUCCESS, "success", request_id=u.request_id)

    async def on_seek(self, cmd, meta, payload):
        """Seek by message id or publish time, as Pulsar's resetCursor: every consumer of the
        subscription on this server is sent CLOSE_CONSUMER first (the client reconnects and
        drops what it had queued, and the sought message itself unless inclusive), the
        cursor moves, then SUCCESS. A reader's position waits for its re-SUBSCRIBE, which
        carries a stale start id, in reader_resume."""
        k = cmd.seek
        c = self._consumer(k.consumer_id, k.request_id)
        if c is None:
            return
        s = self.server
        mid = _message_id(k.message_id) if k.HasField("message_id") else None
        if c.reader:
            try:
                nxt = None if mid is not None else await s.call(
                    s.broker.read, consuming.offset_for_publish_time, topic_name(c.topic),
                    k.message_publish_time)
            except Exception as exc:
                self.error(k.request_id, exc)
                return
            self._close_by_broker(c)
            self.reader_resume[(c.topic, c.sub)] = (mid, nxt)
            self.reply(T.SUCCESS, "success", request_id=k.request_id)
            return
        sharing = [(conn, o) for conn in list(s._connections) for o in list(conn.consumers.values())
                   if not o.reader and o.topic == c.topic and o.sub == c.sub]
        for conn, o in sharing:
            conn._close_by_broker(o)
        b = s.broker

        def seek():  # one job of the worker: no fetch comes in between
            for _conn, o in sharing:
                b.close_consumer(o.topic, o.sub, o.name)
            if mid is not None:
                b.subscription(c.topic, c.sub).reset_cursor(message_id=mid)
            else:
                # seek(timestamp) serves the first message published at or after it;
                # reset-cursor's time is exclusive.
                b.subscription(c.topic, c.sub).reset_cursor(time_ms=k.message_publish_time - 1)
        try:
            await s.call(seek)
        except Exception as exc:
            self.error(k.request_id, exc)
            return
        finally:
            for _conn, o in sharing:
                s._in_use.discard((o.topic, o.sub, o.name))
        self.reply(T.SUCCESS, "success", request_id=k.request_id)

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

    async def on_topics_of_namespace(self, cmd, meta, payload):
        g = cmd.getTopicsOfNamespace
        s = self.server
        # GET_TOPICS is allowed to a role that may produce or consume in the namespace.
        if not await self.allowed(f"persistent://{g.namespace}/-", "lookup"):
            self.error(g.request_id, api.AuthorizationError,
                       "Client is not authorized to GetTopicsOfNamespace")
            return
        try:
            names = await s.call(s.broker.topics.list, g.namespace)
        except Exception as exc:
            self.error(g.request_id, exc)
            return
        if g.mode == 0:
            names = [n for n in names if n.startswith("persistent://")]
        elif g.mode == 1:
            names = [n for n in names if n.startswith("non-persistent://")]
        r = api.BaseCommand(type=T.GET_TOPICS_OF_NAMESPACE_RESPONSE)
        r.getTopicsOfNamespaceResponse.request_id = g.request_id
        r.getTopicsOfNamespaceResponse.topics.extend(names)
        self.send(frames.command(r))

    async def on_consumer_stats(self, cmd, meta, payload):
        """CONSUMER_STATS: the consumer's record and its subscription's backlog, from the store
        (rates are not measured: 0, as `topics stats` says)."""
        q = cmd.consumerStats
        r = api.BaseCommand(type=T.CONSUMER_STATS_RESPONSE)
        out = r.consumerStatsResponse
        out.request_id = q.request_id
        c = self.consumers.get(q.consumer_id)
        st = None
        if c is not None and not c.reader:
            s = self.server
            try:
                st = await s.call(s.broker.read, consuming.consumer_stats, topic_name(c.topic),
                                  c.sub, c.name)
            except Exception as exc:
                out.error_code, out.error_message = server_error(exc), error_text(exc)
                self.send(frames.command(r))
                return
        if st is None:
            out.error_code = api.ConsumerNotFound
            out.error_message = f"Consumer {q.consumer_id} not found"
            self.send(frames.command(r))
            return
        rec = st["consumer"]
        out.msgRateOut, out.msgThroughputOut = st["msgRateOut"], st["msgThroughputOut"]
        out.msgRateRedeliver, out.msgRateExpired = st["msgRateRedeliver"], st["msgRateExpired"]
        out.consumerName = c.name
        out.availablePermits = max(c.permits, 0)
        out.unackedMessages = rec.get("unackedMessages", 0)
        out.blockedConsumerOnUnackedMsgs = False
        out.address = self.peer
        out.connectedSince = rec.get("connectedSince") or ""
        out.type = st["type"]
        out.msgBacklog = st["msgBacklog"]
        self.send(frames.command(r))

    async def on_get_last_message_id(self, cmd, meta, payload):
        g = cmd.getLastMessageId
        c = self._consumer(g.consumer_id, g.request_id)
        if c is None:
            return
        s = self.server
        try:
            mid = await s.call(s.broker.topics.last_message_id, c.topic)
            if c.reader:
                mdp = c.acked or await s.call(
                    s.broker.read, consuming.mark_delete_position, topic_name(c.topic), None,
                    c.base, c.start, c.inclusive)
            else:
                mdp = await s.call(s.broker.read, consuming.mark_delete_position,
                                   topic_name(c.topic), c.sub)
        except Exception as exc:
            self.error(g.request_id, exc)
            return
        self.reply(T.GET_LAST_MESSAGE_ID_RESPONSE, "getLastMessageIdResponse",
                   request_id=g.request_id, last_message_id=_id_data(mid),
                   consumer_mark_delete_position=_id_data(mdp))


async def _on_transaction(self, cmd, meta, payload):
    """The transaction commands, answered as a Pulsar broker without a transaction
    coordinator answers them (transactionCoordinatorEnabled=false)."""
    rid = _request_id(cmd)
    if rid is not None:
        self.error(rid, api.NotAllowedError, "Transactions are not enabled.")


def ensure_topic(broker, name: str) -> None:
    """Pulsar creates a topic when a producer attaches to it (allowAutoTopicCreation), not at
    its first message: a reader, a regex consumer or a lookup sees it at once."""
    if not broker.topics.exists(name):
        broker.owner_of(name).write(topics.ensure, topic_name(name))


def advertised_host(bind: str) -> str:
    """The address a client should dial for a server bound to bind: the wildcard addresses
    are no address to dial, loopback is."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(bind, bind)


def _signed(v: int) -> int:
    return v - 2**64 if v >= 2**63 else v


def _message_id(d: api.MessageIdData) -> MessageId:
    ledger, entry = _signed(d.ledgerId), _signed(d.entryId)
    if ledger < 0 or ledger == 2**63 - 1:   # earliest, latest
        return MessageId.earliest if ledger < 0 else MessageId.latest
    return MessageId(ledger, entry, d.partition, d.batch_index)


_request_id = unauthenticated.request_id


HANDLERS = {
    T.CONSUMER_STATS: Connection.on_consumer_stats,
    **{t: _on_transaction for t in (T.TC_CLIENT_CONNECT_REQUEST, T.NEW_TXN,
                                    T.ADD_PARTITION_TO_TXN, T.ADD_SUBSCRIPTION_TO_TXN, T.END_TXN,
                                    T.END_TXN_ON_PARTITION, T.END_TXN_ON_SUBSCRIPTION)},
    T.CONNECT: Connection.on_connect,
    T.PING: Connection.on_ping,
    T.PONG: Connection.on_pong,
    T.LOOKUP: Connection.on_lookup,
    T.PARTITIONED_METADATA: Connection.on_partitioned_metadata,
    T.PRODUCER: Connection.on_producer,
    T.SEND: Connection.on_send,
    T.CLOSE_PRODUCER: Connection.on_close_producer,
    T.SUBSCRIBE: Connection.on_subscribe,
    T.FLOW: Connection.on_flow,
    T.ACK: Connection.on_ack,
    T.REDELIVER_UNACKNOWLEDGED_MESSAGES: Connection.on_redeliver,
    T.CLOSE_CONSUMER: Connection.on_close_consumer,
    T.UNSUBSCRIBE: Connection.on_unsubscribe,
    T.GET_LAST_MESSAGE_ID: Connection.on_get_last_message_id,
    T.SEEK: Connection.on_seek,
    T.GET_TOPICS_OF_NAMESPACE: Connection.on_topics_of_namespace,
    T.GET_SCHEMA: schema_commands.on_get_schema,
    T.GET_OR_CREATE_SCHEMA: schema_commands.on_get_or_create_schema,
}


# -- messages in and out ------------------------------------------------------------------------
def _props(kvs) -> dict | None:
    return {kv.key: kv.value for kv in kvs} or None


def outgoing(meta: api.MessageMetadata, payload: bytes):
    """A SEND's metadata and payload -> (OutgoingMessages, compression code, batched). One
    chunk of a chunked message (uuid, chunk_id) is stored as it came, its piece of the
    compressed payload with the chunk metadata (OutgoingMessage.chunks): the consumer's
    client joins the chunks and decompresses, as with Pulsar's broker."""
    chunk = meta.HasField("uuid") or meta.HasField("chunk_id")
    code = meta.compression
    if len(meta.encryption_keys) and not chunk:
        return [_encrypted(meta, payload)], 0, False
    if code and not chunk:
        payload = compression.decompress(code, payload, meta.uncompressed_size, "in a SEND")
    deliver_at = meta.deliver_at_time if meta.HasField("deliver_at_time") else 0
    sv = _schema_version(meta.schema_version) if meta.HasField("schema_version") else None
    if not meta.HasField("num_messages_in_batch") or chunk:
        m = OutgoingMessage(payload, _props(meta.properties),
                            meta.partition_key if meta.HasField("partition_key") else None,
                            meta.ordering_key if meta.HasField("ordering_key") else None,
                            meta.event_time, deliver_at, meta.sequence_id, sv)
        m.null_value = meta.null_value
        m.key_b64 = meta.partition_key_b64_encoded
        if chunk:
            n = meta.num_chunks_from_msg
            if not 0 <= meta.chunk_id < n:
                raise ProtocolError(f"chunk {meta.chunk_id} of a message of {n} chunks")
            m.chunks = (code, meta.uncompressed_size, n, meta.total_chunk_msg_size,
                        [(meta.chunk_id, payload)], meta.uuid)
            return [m], 0, False
        return [m], code, False
    count, first = meta.num_messages_in_batch, meta.sequence_id
    plain = frames.plain_batch(payload, count, first) if first >= 0 else None
    if plain is not None:
        return [OutgoingMessage(data, None, None, None, 0, deliver_at, seq, sv)
                for seq, data in enumerate(plain, first)], code, True
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
    return out, code, True


def _encrypted(meta: api.MessageMetadata, payload: bytes) -> OutgoingMessage:
    """An end-to-end encrypted SEND as one message kept as sent: the ciphertext (of the
    compressed payload, or of a whole batch, which the broker cannot open any more than
    Pulsar's can), with what its consumer needs to decrypt it (entries.py's field 16)."""
    deliver_at = meta.deliver_at_time if meta.HasField("deliver_at_time") else 0
    sv = _schema_version(meta.schema_version) if meta.HasField("schema_version") else None
    m = OutgoingMessage(payload, _props(meta.properties),
                        meta.partition_key if meta.HasField("partition_key") else None,
                        meta.ordering_key if meta.HasField("ordering_key") else None,
                        meta.event_time, deliver_at, meta.sequence_id, sv)
    m.null_value = meta.null_value
    m.key_b64 = meta.partition_key_b64_encoded
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


def _encryption_metadata(md: api.MessageMetadata, e: dict) -> None:
    for name, value, meta in e["keys"]:
        k = md.encryption_keys.add(key=name, value=value)
        for mk, mv in (meta or {}).items():
            k.metadata.add(key=mk, value=mv)
    if e.get("algo") is not None:
        md.encryption_algo = e["algo"]
    if e.get("param") is not None:
        md.encryption_param = e["param"]
    if e.get("compression"):
        md.compression = e["compression"]
    md.uncompressed_size = e.get("uncompressedSize") or 0
    if e.get("numMessages"):
        md.num_messages_in_batch = e["numMessages"]


def _schema_version(raw: bytes):
    if len(raw) == 8:
        return _U64.unpack(raw)[0]
    return None


def _metadata(m) -> api.MessageMetadata:
    md = api.MessageMetadata(producer_name=m.producer_name or "", sequence_id=max(m.sequence_id or 0, 0),
                             publish_time=m.publish_time or 0)
    if m.event_time:
        md.event_time = m.event_time
    if m.schema_version_ is not None:
        md.schema_version = _U64.pack(m.schema_version_)
    return md


def message_frame(consumer_id: int, m, counted: bool = True) -> bytes:
    cmd = api.BaseCommand(type=T.MESSAGE)
    cmd.message.consumer_id = consumer_id
    _id_data(m.id, cmd.message.message_id)
    if counted:
        cmd.message.redelivery_count = m.redelivery_count_ or 0
    md = _metadata(m)
    _keys_and_properties(md, m)
    if m.deliver_at:
        md.deliver_at_time = m.deliver_at
    if m.null_value_:
        md.null_value = True
    payload = m.payload if m.payload is not None else b""
    md.uncompressed_size = len(payload)
    if m.encryption_:
        _encryption_metadata(md, m.encryption_)
    if m.chunk_ is not None:
        # A chunk as stored: its piece of the (compressed) payload, for the client to join.
        (uuid, cid, n, total), code, size = m.chunk_
        md.uuid, md.chunk_id, md.num_chunks_from_msg, md.total_chunk_msg_size = uuid, cid, n, total
        if code:
            md.compression = code
        md.uncompressed_size = size
    return frames.payload_command(cmd, md, payload)


def _keys_and_properties(md, m) -> None:
    """A message's properties, key and ordering key into a MessageMetadata or a batch's
    SingleMessageMetadata (the fields have the same names in both)."""
    for k, v in (m.properties_ or {}).items():
        md.properties.add(key=k, value=v)
    if m.key is not None:
        md.partition_key = m.key
        if m.key_b64_:
            md.partition_key_b64_encoded = True
    if m.ordering_key_ is not None:
        md.ordering_key = m.ordering_key_


def whole_batch_frame(consumer_id: int, b: Batch, counted: bool = True) -> bytes:
    """A Batch (a batch entry a fetch handed out whole) as one batch MESSAGE, built from its
    columns as batch_frame builds it from a Message per index: the batch runs to its highest
    index delivered, and an ack set leaves out the indexes not delivered (b.skip)."""
    rec, columns, skip = b.rec, b.columns, b.skip
    size = b.size
    first = 0
    if skip:
        sent = [i for i in range(size) if i not in skip]
        first, size = sent[0], sent[-1] + 1
    cmd = api.BaseCommand(type=T.MESSAGE)
    cmd.message.consumer_id = consumer_id
    _id_data(b.id, cmd.message.message_id)
    if counted:
        cmd.message.redelivery_count = b.redelivery_count or 0
    if skip:
        cmd.message.ack_set.extend(_ack_set(sent, size))
    seqs, events = columns[5], columns[4]
    first_seq = rec[F_SEQUENCE_ID]
    seq = seqs[first] if seqs else first_seq + first
    md = api.MessageMetadata(producer_name=rec[F_PRODUCER_NAME] or "",
                             sequence_id=max(seq or 0, 0), publish_time=rec[F_PUBLISH_TIME] or 0)
    if events and events[first]:
        md.event_time = events[first]
    sv = rec[F_SCHEMA_VERSION] if len(rec) > F_SCHEMA_VERSION else None
    if sv is not None:
        md.schema_version = _U64.pack(sv)
    md.num_messages_in_batch = size
    payload = frames.columns_payload(columns, size, first_seq, skip)
    md.uncompressed_size = len(payload)
    return frames.payload_command(cmd, md, payload)


def _sent_indexes(delivered: dict, mid: MessageId, indexes: set) -> None:
    """Note the batch indexes of mid's entry that went out (added to those out already)."""
    key = (mid.ledger_id, mid.entry_id)
    sent = delivered.get(key)
    if sent is None:
        delivered[key] = (mid.partition, indexes)
    else:
        sent[1].update(indexes)


def batch_frame(consumer_id: int, group, counted: bool = True,
                by_index: dict | None = None) -> bytes:
    """The delivered messages of one batch entry as one batch MESSAGE: the batch runs to the
    highest index delivered; indexes not delivered now (acked before, or for another consumer)
    are left out by the ack set. by_index: group by batch index, if the caller has it."""
    first = group[0]
    if by_index is None:
        by_index = {g.id.batch_index: g for g in group}
    size = max(by_index) + 1
    cmd = api.BaseCommand(type=T.MESSAGE)
    cmd.message.consumer_id = consumer_id
    _id_data(MessageId(first.id.ledger_id, first.id.entry_id, first.id.partition),
             cmd.message.message_id)
    if counted:
        cmd.message.redelivery_count = max(g.redelivery_count_ or 0 for g in group)
    if len(by_index) < size:
        cmd.message.ack_set.extend(_ack_set(by_index, size))
    md = _metadata(first)
    md.num_messages_in_batch = size
    one = frames.batch_message
    parts = []
    for i in range(size):
        g = by_index.get(i)
        if g is None:
            parts.append(one(b""))
            continue
        seq = g.sequence_id
        okey = g.ordering_key_
        parts.append(one(g.payload if g.payload is not None else b"",
                         seq if seq is not None and seq >= 0 else None, g.event_time,
                         g.properties_, g.key,
                         okey.encode() if isinstance(okey, str) else okey,
                         bool(g.null_value_), g.key_b64_))
    payload = b"".join(parts)
    md.uncompressed_size = len(payload)
    return frames.payload_command(cmd, md, payload)
