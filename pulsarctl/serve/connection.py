"""A client's connection (Pulsar's ServerCnx): frames in (frames.py), the CONNECT and
authentication state, and one handler per command. It answers CONNECT, PING, LOOKUP,
PARTITIONED_METADATA and GET_TOPICS_OF_NAMESPACE itself; the producer commands are in
producers.py, the consumer commands in consumers.py, pending_acks.py and
subscription_commands.py, the schema commands in schema_commands.py, and the frames it sends
are built by command_sender.py. The Broker is synchronous (one LMDB transaction per call), so
every call runs in the listener's one worker thread, in the order the commands came.

A frame that cannot be read closes its connection (and only it) with one line on the log; a
command that fails gets Pulsar's error response; a SEND whose checksum is wrong gets SEND_ERROR
ChecksumError and the connection goes on. As Pulsar's PulsarHandler, every
keepAliveIntervalSeconds a connection that has not sent CONNECT is closed, and a connected one
is sent a PING, and closed at the next check if nothing came back in between. As ServerCnx: a
second CONNECT, a command before CONNECT and a SEND for a producer that is not ready on the
connection close it (a SEND for one the broker just closed is dropped); a client refused at
CONNECT is answered as unauthenticated.py says."""
from __future__ import annotations

import asyncio

from pulsarctl.auth.service import common_name
from pulsarctl.errors import AuthenticationFailed, ChecksumMismatch, InvalidTopicName, ProtocolError
from pulsarctl.serve import frames, schema_commands, unauthenticated
from pulsarctl.serve import pulsar_api_pb2 as api
from pulsarctl.serve.consumers import Consumer, ConsumerCommands
from pulsarctl.serve.pending_acks import PendingAcks
from pulsarctl.serve.producers import Producer, ProducerCommands
from pulsarctl.serve.subscription_commands import SubscriptionCommands
from pulsarctl.serve.wire_errors import error_text, server_error

T = api.BaseCommand
PROTOCOL_VERSION = 20
SERVER_VERSION = "pulsarctl"
# CommandConnect.auth_method (deprecated AuthMethod enum) as method names.
LEGACY_AUTH_METHODS = {0: "none", 1: "yca", 2: "athens"}
# What this broker supports of CommandConnected.feature_flags: PIP-344's partitioned metadata
# without auto-creation (the Java client asks it before naming its retry and dead letter topics).
FEATURE_FLAGS = api.FeatureFlags(supports_get_partitioned_metadata_without_auto_creation=True)
_request_id = unauthenticated.request_id


class Connection(ProducerCommands, ConsumerCommands, PendingAcks, SubscriptionCommands):
    def __init__(self, server, reader, writer):
        # server: the listener (listener.Server) that accepted it; what connections share
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
        self.acks_in_flight: set = set()   # ACKs in the group commit (pending_acks.py)
        self.sends_in_flight = 0           # SENDs whose receipt has not gone out (producers.py)
        self.reads_resumed = asyncio.Event()   # set while the connection may be read
        self.reads_resumed.set()

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
                if not self.reads_resumed.is_set():   # too many sends in flight: wait
                    await self.reads_resumed.wait()
                    continue
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
            elif self.awaiting_pong and not self.reads_resumed.is_set():
                # Not read while its sends wait for the store: its PONG is in the socket.
                continue
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
        self.reads_resumed.set()   # a read loop paused by flow control sees it closed
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
                now = await s.call(s.broker.clock.now)
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
            return await s.call(s.broker.allowed, self.role, topic, action,
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


async def _on_transaction(self, cmd, meta, payload):
    """The transaction commands, answered as a Pulsar broker without a transaction
    coordinator answers them (transactionCoordinatorEnabled=false)."""
    rid = _request_id(cmd)
    if rid is not None:
        self.error(rid, api.NotAllowedError, "Transactions are not enabled.")


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
