"""The listener (Pulsar's PulsarService/BrokerService for this one process): the TCP (and
TLS) server sockets and their lifecycle, the one worker thread every Broker call runs in, the
store's wake-ups fanned out to waiting consumers, and what is shared across connections:
consumer and producer names, fencing, Failover notifications. Each accepted socket is a
Connection (connection.py)."""
from __future__ import annotations

import asyncio
import itertools
import os
import socket
from concurrent.futures import ThreadPoolExecutor

from pulsarctl.auth.service import Authentication
from pulsarctl.broker.consumers import this_process
from pulsarctl.serve.connection import Connection
from pulsarctl.serve.entry_cache import DEFAULT_SIZE_MB, EntryCache
from pulsarctl.serve.group_commit import GroupCommit
from pulsarctl.serve import pulsar_api_pb2 as api
from pulsarctl.serve.wire_errors import error_text
from pulsarctl import wake_events

T = api.BaseCommand
HANDSHAKE_TIMEOUT_S = 10.0   # a TLS client that does not finish its handshake is dropped
# The listen queue, as netty's (Pulsar's) default: the kernel's somaxconn. asyncio's 100 drops
# the SYNs of a burst of clients beyond it, each then waiting a second to try again.
LISTEN_BACKLOG = socket.SOMAXCONN
# activeConsumerFailoverDelayTimeMillis: when a Failover subscription's active consumer changes
# (to its first consumer too), Pulsar reads for the new one only this long after, so that acks
# the old one sent meanwhile land before the rewind; a redelivery asked for in between is
# ignored (PersistentDispatcherSingleActiveConsumer.scheduleReadOnActiveConsumer).
FAILOVER_DELAY_S = 1.0


class Server:
    """Pulsar's binary protocol over broker, on host:port (127.0.0.1 unless told otherwise)."""

    def __init__(self, broker, host: str = "127.0.0.1", port: int = 6650,
                 max_message_size: int = 5 * 1024 * 1024, log=None, *, tls_port=None,
                 ssl=None, authentication=None, authorization=None, advertised=None,
                 listeners=None, keep_alive_s: int = 30, max_pending_sends: int = 1000,
                 entry_cache_bytes: int = DEFAULT_SIZE_MB * 1024 * 1024):
        self.broker = broker
        self.keep_alive_s = keep_alive_s  # keepAliveIntervalSeconds; 0: no checks
        # maxPendingSendRequests: a connection with this many SENDs awaiting their receipts is
        # not read until half of them went out (ServerCnx's autoRead off, back on at half).
        # 0: no window (Pulsar's counter never meets 0 either).
        self.max_pending_sends = max_pending_sends
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
        # The one worker thread every Broker call runs in, the REST API's too (run.py hands it
        # over): one writer, calls in the order they came.
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker")
        self._server = None
        self._connections: set = set()
        self._wake = None
        self._watcher = None
        self._names = itertools.count()
        self._serials = itertools.count()   # connections and producers, for producer tokens
        self._in_use: set = set()
        # Failover: (topic, subscription) -> the active consumer on this server, as last seen
        self._failover_active: dict = {}
        # How often a waiting consumer fetches anyway: never (None) while the timers run, in
        # serve or in a daemon, whose firing wakes it; timers.py sets it when they cannot run.
        self.idle_poll_s: float | None = None
        # SENDs that arrive during a commit share the next one (group_commit.py).
        self.commits = GroupCommit(self.call, broker.publish_many)
        # ACKs likewise: they never wait in a connection's read loop, and those that arrive
        # during a commit share the next one (pending_acks.py).
        self.acks = GroupCommit(self.call, broker.ack_many)
        # The batches producers sent here, as sent, for their consumers (entry_cache.py).
        self.entry_cache = EntryCache(entry_cache_bytes)

        self.pid, self.pid_start = this_process()

    # -- the worker thread ---------------------------------------------------------------------
    def call(self, fn, *args, **kwargs):
        """fn(*args) in the broker's thread, in submission order; an awaitable of its result."""
        return asyncio.get_running_loop().run_in_executor(self.worker, lambda: fn(*args, **kwargs))

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
        # A store change (a publish, a nack, a closed consumer, the CLI's included) wakes the
        # waiting consumers through inotify (wake_events.py; a 5 ms look at the file where
        # inotify is missing), not a poll. Set up in a thread (ctypes, and a run of ldconfig
        # to find libc: tens of ms) while the loop already answers the first connections; a
        # change made before it watched is looked at by the kick once it does.
        loop = asyncio.get_running_loop()
        self._watcher = await loop.run_in_executor(None, wake_events.watch, self.broker.wake_path)
        self._watcher.attach(loop, self.kick)
        self.kick()
        return self.url

    def stop_accepting(self) -> None:
        """No new connection: the listening sockets close (those open go on)."""
        if self._server is not None:
            self._server.close()
        if self._tls_server is not None:
            self._tls_server.close()

    async def stop(self, *, keep_worker: bool = False):
        """Stop accepting, close every connection (its consumers and producers leave the
        store), then let the broker's thread finish (keep_worker: not yet, the REST API still
        runs on it; the caller shuts it down). The broker itself stays open."""
        self.stop_accepting()
        for conn in list(self._connections):
            await conn.close()
        if self._watcher is not None:
            self._watcher.detach()
        if self._server is not None:
            await self._server.wait_closed()
        if self._tls_server is not None:
            await self._tls_server.wait_closed()
        await self.commits.close()
        await self.acks.close()
        if not keep_worker:
            self.worker.shutdown(wait=True)

    def kick(self):
        """Wake every consumer waiting for messages."""
        ev, self._wake = self._wake, asyncio.Event()
        ev.set()

    async def notify_failover(self, topic: str, sub: str) -> None:
        """ACTIVE_CONSUMER_CHANGE to each consumer of a Failover subscription on this server
        whose standing changed (and to a new one at once), as Pulsar's dispatcher notifies
        them: the active consumer is the one the store's cursor names."""
        try:
            active = await self.call(
                lambda: self.broker.subscription(topic, sub).failover_active_name())
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


def advertised_host(bind: str) -> str:
    """The address a client should dial for a server bound to bind: the wildcard addresses
    are no address to dial, loopback is."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(bind, bind)
