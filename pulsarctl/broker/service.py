"""Broker: the data plane. Each method is one transaction: it opens the store's write (or
read) transaction, runs the concept modules inside it, and commits all or nothing.

The Broker does what a client's connection does: publish (and the producer's access mode),
subscribe, fetch (flow), ack, nack, reconsume-later, redeliver-unacked, close, and a reader's
read. Administration is on small noun objects it hands out (pulsarctl/broker/admin/):
broker.tenants, broker.namespaces, broker.topics, broker.subscription(topic, name),
broker.dlq(topic), broker.policies, broker.schemas, broker.clock, broker.chores,
broker.offloader and broker.scans. Transactions are private: callers use these.

A call naming non-persistent topics runs on a second Broker over their tmpfs store: each such
method is decorated @routed (nonpersistent.py), which asks owner_of."""
from __future__ import annotations

import functools
import os

from store import (
    Env, LedgerError, ManagedLedgers, Cursors, StoreDamaged, StoreDiskFull, StoreError,
    StoreNotFound, StoreReadOnly,
)
from pulsarctl import clock as clocks
from pulsarctl import offload
from pulsarctl.broker import access, history, nonpersistent, partitions, producers, tenants
from pulsarctl.broker.context import Ctx
from pulsarctl.broker.nested_jobs import ack_jobs as _ack_jobs, nested as _nested
from pulsarctl.broker.nonpersistent import routed
from pulsarctl.broker.routing import PartitionRouter
from pulsarctl.config import BROKER_DEFAULTS
from pulsarctl.errors import (
    ConsumerAssignError, ConsumerBusy, DamagedStore, DiskFull, PulsarctlError, StoreUnavailable,
)
from pulsarctl.messages import SentBatch
from pulsarctl.names import topic_name
from pulsarctl.wake import notify, wakes
from pulsarctl.compression import compress


def _consuming():
    """The consumer side (pulsarctl/broker/consuming.py), imported on first use: one-shot
    `produce` never loads it, nor dispatch, subscriptions and the rest below it."""
    from pulsarctl.broker import consuming  # lazy: one-shot produce never needs it

    return consuming


def _publish(ctx, name, messages, producer_name=None, route=None, compression=0, schema=None,
             chunking=False, batching=None, publisher=None):
    """Broker.publish's transaction body (see there)."""
    t = topic_name(name)
    n = partitions.get(ctx, t) if not t.is_partition else 0
    if type(messages) is SentBatch:   # a wire client's batch of plain messages (serve)
        if not n and producer_name is not None and batching is not None and batching.as_sent:
            done = producers.publish_as_sent(ctx, t, messages, producer_name,
                                             t.partition_index, compression, publisher)
            if done is not None:
                return done
        messages = messages.outgoing()
    if not n:
        return producers.publish(ctx, t, messages, producer_name, t.partition_index,
                                 compression=compression, schema=schema, chunking=chunking,
                                 batching=batching, publisher=publisher)
    chooser = PartitionRouter(n).choose if route is None else route(n)
    groups: dict[int, list] = {}
    order = []
    for m in messages:
        i = chooser(m.key, ctx.now)
        groups.setdefault(i, []).append(m)
        order.append(i)
    name_out = producer_name
    ids_by: dict[int, list] = {}
    if name_out is None:
        name_out = producers.new_producer_name(ctx)
    for i, msgs in groups.items():
        _, ids = producers.publish(ctx, t.partition(i), msgs, name_out, i,
                                   compression=compression, schema=schema, chunking=chunking,
                                   batching=batching, publisher=publisher)
        ids_by[i] = ids[::-1]
    return name_out, [ids_by[i].pop() for i in order]


def _publish_payloads(ctx, name, payloads, producer_name, compression, batching, breaks,
                      publisher=None):
    """Broker.publish_payloads's transaction body (see there)."""
    t = topic_name(name)
    if not t.is_partition and partitions.get(ctx, t):
        return None   # routed message by message: publish
    return producers.publish_payloads(ctx, t, payloads, producer_name, t.partition_index,
                                      compression, batching, breaks, publisher)


CLIENT_TIME_WINDOW_MS = 10_000


def _client_publish_time(client_ms, now_ms: int) -> int:
    """The publish time a wire producer's message is stored with: the client's own, as in
    Pulsar (its producer stamps MessageMetadata.publish_time before sending, and seeks and
    TTL read that), when it lies in the last CLIENT_TIME_WINDOW_MS of the store's clock;
    otherwise (a client clock ahead or far behind, a store on a simulated clock) the store's."""
    if client_ms and now_ms - CLIENT_TIME_WINDOW_MS <= client_ms <= now_ms:
        return client_ms
    return now_ms


def _publish_jobs(ctx, jobs) -> list:
    """Broker.publish_many's transaction body: each job in its own nested transaction (_nested),
    at its client's publish time."""
    def one(jc, name, messages, producer_name, kwargs):
        return _publish(jc, name, messages, producer_name, **kwargs)
    out = []
    for name, messages, producer_name, kwargs in jobs:
        kwargs = dict(kwargs)
        now = _client_publish_time(kwargs.pop("publish_time", None), ctx.now)
        out.append(_nested(ctx, now, one, name, messages, producer_name, kwargs))
    return out


def _store_failure(exc: StoreError):
    """A store error as the pulsarctl error saying what to do: a damaged store points to doctor,
    a full disk says so; anything else is an unusable store."""
    if isinstance(exc, StoreDiskFull):
        return DiskFull(exc.file)
    if isinstance(exc, StoreDamaged | LedgerError):
        return DamagedStore(str(exc))
    return StoreUnavailable(str(exc))


class Broker:
    def __init__(self, path: str, clock: clocks.Clock | None = None, *, readonly: bool = False,
                 create: bool = True, map_size: int | None = None):
        try:
            try:
                self.env = Env(path, readonly=readonly, create=create, map_size=map_size)
            except StoreReadOnly:
                if readonly:
                    raise
                # A store we may only read still serves reading commands; a write then fails
                # with StoreReadOnly, as one clear error.
                self.env = Env(path, readonly=True, create=False, map_size=map_size)
                readonly = True
        except StoreReadOnly as exc:
            raise StoreUnavailable(str(exc), hint="use a writable store with --store PATH") from None
        except StoreNotFound as exc:
            raise StoreUnavailable(str(exc), hint="produce to a topic to create it, or pass "
                                   "--store PATH") from None
        except StoreError as exc:
            raise _store_failure(exc) from None
        self.readonly = readonly
        self.path = self.env.path
        self.wake_path = self.path
        self.non_persistent = False  # this Broker serves the tmpfs store of another
        self.parent = None
        self._np = None
        self._clock = clock
        # Dynamic settings' values from the broker.conf a server runs with (serve --config):
        # they replace the built-in defaults; the store's own (update-dynamic-config) still win,
        # as ZooKeeper's dynamic config wins over broker.conf in Pulsar.
        self.conf_defaults: dict = {}
        rollover = BROKER_DEFAULTS["managedLedgerMaxEntriesPerLedger"]
        self.ledgers = ManagedLedgers(self.env, rollover, offloaded_reader=offload.read_ledger)
        self.cursors = Cursors(self.env)
        if not self.readonly:
            # Write only when there is something to set up: a write commit costs an fsync.
            if self._read(self._needs_init):
                self._write(tenants.ensure_defaults)
            self.ledgers.rollover_entries = self._read(
                lambda ctx: ctx.setting("managedLedgerMaxEntriesPerLedger"))

    @staticmethod
    def _needs_init(ctx) -> bool:
        return ctx.get("tenant", "public") is None

    # -- transactions --------------------------------------------------------------------------
    def _clock_for(self, txn) -> clocks.Clock:
        if self._clock is not None:
            return self._clock
        return clocks.from_state(self.env.get(txn, "meta", b"clock"))

    # Transactions are the Broker's own business: callers outside pulsarctl/broker use its
    # named methods and nouns, so a call naming a non-persistent topic cannot miss the routing
    # to the Broker that owns it (a transaction body run here would read this store's copy:
    # none). tests/cli/test_layers.py checks that nothing outside pulsarctl/broker calls these.
    def _write(self, fn, *args, _announce=None, **kwargs):
        """fn(ctx, ...) in one write transaction. _announce(result): called before the commit
        (store's write_announced)."""
        made = []  # the last Ctx (write() runs body again when it grows the map)

        def body(txn):
            ctx = Ctx(self, txn, self._clock_for(txn).now_ms(), True)
            made[:] = [ctx]
            return fn(ctx, *args, **kwargs)
        try:
            result = (self.env.write(body) if _announce is None
                      else self.env.write_announced(body, _announce))
            history.committed(made[0].events)  # --explain: these changes are now true
            return result
        except StoreReadOnly as exc:
            raise StoreUnavailable(str(exc), hint="this command writes; use a writable store "
                                   "with --store PATH") from None
        except StoreError as exc:
            raise _store_failure(exc) from None

    def _read(self, fn, *args, **kwargs):
        return self._run_read(False, fn, args, kwargs)

    def _read_in_place(self, fn, *args, **kwargs):
        """_read(), in a transaction whose values are memoryviews into the store's map (no
        copy): valid only while fn runs, so fn must copy whatever it returns. For bulk readers
        that copy the entries once anyway (the Spark source's scans, admin/scans.py)."""
        return self._run_read(True, fn, args, kwargs)

    def _run_read(self, buffers: bool, fn, args, kwargs):
        try:
            with self.env.read(buffers=buffers) as txn:
                ctx = Ctx(self, txn, self._clock_for(txn).now_ms(), False)
                return fn(ctx, *args, **kwargs)
        except StoreError as exc:
            raise _store_failure(exc) from None

    def close(self) -> None:
        if self._np is not None:
            self._np.close()
            self._np = None
        self.env.close()

    # -- which Broker owns a topic -------------------------------------------------------------
    @property
    def _broker(self) -> "Broker":
        return self  # as an admin noun's, for @routed and @wakes

    def _on(self, broker: "Broker") -> "Broker":
        return broker

    def owner_of(self, names) -> "Broker":
        """This Broker, or the one over this store's non-persistent topics when names are
        non-persistent topics (created on first use)."""
        if self.non_persistent or not nonpersistent.is_non_persistent(names):
            return self
        return self._open_np()

    def _open_np(self) -> "Broker":
        if self._np is None:
            np = Broker(nonpersistent.path_for(self.path), self._clock)
            np.non_persistent = True
            np.wake_path = self.path
            np.parent = self
            np.conf_defaults = self.conf_defaults
            self._np = np
        return self._np

    def non_persistent_if_open(self) -> "Broker | None":
        """The non-persistent Broker if its store exists (store-wide chores skip it else)."""
        if self._np is None and not self.non_persistent:
            path = nonpersistent.path_for(self.path)
            if not os.path.exists(os.path.join(path, "data.mdb")):
                return None
            return self._open_np()
        return self._np

    # -- administration: the noun objects (each module loaded on first use; one-shot `produce`
    # needs none of them) ------------------------------------------------------------------------
    @functools.cached_property
    def tenants(self):
        from pulsarctl.broker.admin.tenants import Tenants  # lazy: one-shot produce never needs it

        return Tenants(self)

    @functools.cached_property
    def namespaces(self):
        # lazy: one-shot produce never needs it
        from pulsarctl.broker.admin.tenants import Namespaces

        return Namespaces(self)

    @functools.cached_property
    def topics(self):
        from pulsarctl.broker.admin.topics import Topics  # lazy: one-shot produce never needs it

        return Topics(self)

    @functools.cached_property
    def policies(self):
        # lazy: one-shot produce never needs it
        from pulsarctl.broker.admin.policies import Policies

        return Policies(self)

    @functools.cached_property
    def schemas(self):
        from pulsarctl.broker.admin.schemas import Schemas  # lazy: one-shot produce never needs it

        return Schemas(self)

    @functools.cached_property
    def clock(self):
        # lazy: one-shot produce never needs it
        from pulsarctl.broker.admin.clock import StoreClock

        return StoreClock(self)

    @functools.cached_property
    def chores(self):
        from pulsarctl.broker.admin.chores import Chores  # lazy: one-shot produce never needs it

        return Chores(self)

    @functools.cached_property
    def offloader(self):
        # lazy: one-shot produce never needs it
        from pulsarctl.broker.admin.offloader import Offloader

        return Offloader(self)

    @functools.cached_property
    def scans(self):
        # lazy: only the Spark source reads in bulk
        from pulsarctl.broker.admin.scans import Scans

        return Scans(self)

    def subscription(self, topic, name: str):
        """A handle on one subscription of topic (broker/admin/subscription.py)."""
        # lazy: one-shot produce never needs it
        from pulsarctl.broker.admin.subscription import Subscription

        return Subscription(self.owner_of(topic), topic, name)

    def dlq(self, topic):
        """A handle on one dead letter topic and its pulsarctl-dlq subscription
        (broker/admin/dlq.py)."""
        from pulsarctl.broker.admin.dlq import Dlq  # lazy: one-shot produce never needs it

        return Dlq(self, topic)

    def dlqs(self, namespace: str | None = None) -> list[dict]:
        """Every dead letter topic (of a namespace), with what waits in it."""
        from pulsarctl.broker.admin import dlq  # lazy: one-shot produce never needs it

        return dlq.list_all(self, namespace)

    def snapshot(self, namespace: str | None = None) -> dict:
        """What `pulsarctl top` shows of a namespace (every one when None), read in one
        transaction: topics, subscriptions, consumers, dead letter topics, the clock
        (broker/snapshot.py; rates come from two of them, snapshot.rates)."""
        from pulsarctl.broker import snapshot  # lazy: one-shot produce never needs it

        return self._read(snapshot.take, namespace)

    def allowed(self, role: str | None, topic: str, action: str, settings,
                missing: bool = False) -> bool:
        """Whether role may do action on topic under the authorization settings
        (auth/authorization.allowed; missing: the answer when the topic's namespace does not
        exist). Not routed: permissions are namespace policies, and the namespaces of both
        kinds of topic are this store's."""
        from pulsarctl.auth import authorization  # lazy: only a server with authorization

        return self._read(authorization.allowed, role, topic, action, settings, missing)

    # -- producing ---------------------------------------------------------------------------
    def check_sizes(self, messages, compression=0, chunking=False):
        if chunking:  # any size goes, in chunks
            return None
        sizes = None
        if compression:
            sizes = [len(compress(compression, m.payload)) for m in messages]
        return self._read(producers.check_sizes, messages, sizes)

    @routed
    def partitions_of(self, name) -> int:
        t = topic_name(name)
        return self._read(partitions.get, t)

    @routed
    @wakes
    def publish(self, name, messages, producer_name=None, route=None, compression=0,
                schema=None, chunking=False, batching=None, publisher=None):
        """Append messages in one transaction. For a partitioned topic, route(n) gives the
        producer's router for n partitions, a function (key, now_ms) -> partition; ids come
        back in message order. compression: a pulsarctl.compression code. chunking: split
        messages over maxMessageSize into chunks (a chunked message's id is its last chunk's).
        batching: a batches.Spec: the messages go into batch entries, per partition.
        publisher: the token of a producer attached with producer_acquire (its publishes are
        counted for its stats); None for a producer of this one transaction."""
        return self._write(_publish, name, messages, producer_name, route, compression, schema,
                           chunking, batching, publisher)

    @routed
    @wakes
    def publish_payloads(self, name, payloads, producer_name=None, compression=0,
                         batching=None, breaks=(), publisher=None):
        """publish for plain messages given as their payloads, in batch entries (batching: a
        batches.Spec; breaks: indexes that start a new batch): one transaction, no object per
        message. Returns (producer name, [(ledger id, entry id, partition, messages in the
        entry)]), or None when publish must do it (a partitioned topic, a payload or batch
        over maxMessageSize, key-based batching): then nothing was written."""
        return self._write(_publish_payloads, name, payloads, producer_name, compression,
                           batching, breaks, publisher)

    def publish_many(self, jobs) -> list:
        """Group commit: publish several producers' sends, each a (topic, messages, producer
        name, publish's keyword arguments) job, in one write transaction per store (one fsync
        for all of them). Each job runs in a transaction nested in it, so a job that fails
        (a quota, a terminated topic, a bad name) is undone alone and the others commit.
        A job's keyword arguments may carry publish_time, the client's (see
        _client_publish_time).
        Returns, in job order, what publish would have returned, or the job's exception.
        Jobs run in the order given: one producer's ids increase in its send order."""
        return self._group_commit(jobs, _publish_jobs, lambda r: True)

    def ack_many(self, jobs) -> list:
        """Group commit of acks: each a (topics, subscription, ids, cumulative) job, as ack()
        takes them, in one write transaction per store, each nested so that one that fails
        (an id that names no message) is undone alone. Returns, in job order, what ack would
        have returned, or the job's exception."""
        return self._group_commit(jobs, _ack_jobs, lambda n: n != 0)

    def _group_commit(self, jobs, body, woke) -> list:
        """body(ctx, jobs of one store) in one write transaction per store (this one, the
        non-persistent topics'); each store's consumers are woken when a job's result
        says something became deliverable (woke)."""
        results: list = [None] * len(jobs)
        owners: dict[int, tuple] = {}
        for i, (name, *_rest) in enumerate(jobs):
            try:
                owner = self.owner_of(name)
            except Exception as exc:
                results[i] = exc
                continue
            owners.setdefault(id(owner), (owner, []))[1].append(i)
        for owner, idx in owners.values():
            try:
                got = owner._write(body, [jobs[i] for i in idx])
            except Exception as exc:  # the transaction itself failed: every job of it did
                got = [exc] * len(idx)
            for i, r in zip(idx, got):
                results[i] = r
            if any(not isinstance(r, Exception) and woke(r) for r in got):
                notify(owner.wake_path)
        return results

    @routed
    def producer_acquire(self, name, producer_name, mode, who: dict, topic_epoch=None):
        """Attach a producer to the topic in its access mode, as Pulsar's addProducer does
        (access.py): ProducerBusy or ProducerFenced when it may not. who: token (names this
        producer in later calls), pid, pidStart, and for its stats id, address,
        clientVersion, metadata. Called again with the same token: how it stands now (a
        WaitForExclusive producer polls so). Returns (producer name, {"state", "epoch",
        "fenced"}) (access.add)."""
        t = topic_name(name)

        def run(ctx):
            producers.refuse_terminated(ctx, t)
            pname = producer_name or producers.new_producer_name(ctx)
            return pname, access.add(ctx, t, pname, mode, who, topic_epoch)
        return self._write(run)

    @routed
    def last_sequence_id(self, name, producer_name: str) -> int:
        """The sequence id a producer of that name goes on from (PRODUCER_SUCCESS's
        last_sequence_id): the highest stored while deduplication is on, -1 otherwise."""
        return self._read(producers.last_sequence_id, topic_name(name), producer_name)

    @routed
    @wakes
    def producer_release(self, name, producer_name, token) -> list:
        """Detach the producer; returns the queued producers that took the topic."""
        return self._write(access.remove, topic_name(name), producer_name, token)


    # -- consuming (broker/consuming.py) -----------------------------------------------------
    @routed
    def subscribe(self, names, subscription, consumer_name, sub_type="Exclusive",
                  position="Latest", *, priority=0, pid=None, pid_start=None, lease_ms=None,
                  fetch=0, policy=None, settings=None):
        """Create the subscription where needed and attach a consumer on every topic that names
        stands for (one topic, a partitioned topic, or several). With fetch > 0, also deliver
        up to that many messages in the same transaction. Returns (topic names, messages).
        settings: the consumer's ConsumerPolicy (or its stored dict); policy: Key_Shared's."""
        try:
            return self._write(_consuming().subscribe, names, subscription, consumer_name,
                               sub_type, position, priority=priority, pid=pid,
                               pid_start=pid_start, lease_ms=lease_ms, fetch=fetch,
                               policy=policy, settings=settings)
        except (ConsumerBusy, ConsumerAssignError) as exc:
            # Refused: the subscribe rolled back whole. Why the consumer got nothing goes in
            # the message history after it, in a write of its own (history.refused); failing
            # to write it changes nothing of the refusal.
            try:
                self._write(_consuming().refused, names, subscription, consumer_name,
                            type(exc).__name__, exc.message)
            except PulsarctlError:
                pass
            raise

    @routed
    def fetch(self, names, subscription, consumer_name, max_n, acks=(), renew=False, start=0,
              whole_batches=False, on_chosen=None):
        """Apply acks (grouped, as the client's ack grouping does), then deliver up to max_n
        messages to the consumer from its topics, starting at topic index start — one
        transaction for both. whole_batches: a batch entry comes as one batches.Batch, not a
        Message per index (serve forwards it as it is). on_chosen(messages): called with what
        goes out before the transaction commits, so the caller sends while the commit syncs
        (a crash before the commit leaves them undelivered in the store: delivered again,
        as Pulsar, whose dispatch state is in memory, delivers again after a crash)."""
        return self._write(_consuming().fetch, names, subscription, consumer_name, max_n, acks,
                           renew, start, whole_batches, _announce=on_chosen)

    @routed
    @wakes
    def ack(self, names, subscription, ids, cumulative=False):
        """Acknowledge message ids. Any id that names no message: nothing is acked (exit 3)."""
        return self._write(_consuming().ack, names, subscription, list(ids), cumulative)

    @routed
    @wakes
    def nack(self, names, subscription, ids) -> int:
        """Negatively acknowledge message ids: each is redelivered after the nack delay (or
        backoff), or dead-lettered past maxRedeliverCount. Returns how many were nacked."""
        return self._write(_consuming().nack, names, subscription, list(ids))

    @routed
    @wakes
    def reconsume_later(self, names, subscription, ids, delay_ms: int, properties=None,
                        level: int | None = None, increment: bool = False) -> dict:
        """Move messages to the retry letter topic (or the DLQ past the limit) and ack them, in
        one transaction. Ids may be on the topics or on their retry topic."""
        return self._write(_consuming().reconsume_later, names, subscription, list(ids),
                           delay_ms, properties, level, increment)

    @routed
    @wakes
    def redeliver_unacked(self, names, subscription, consumer_name=None, ids=None) -> int:
        """redeliverUnacknowledgedMessages: a consumer's (or every consumer's) pending messages
        go back now, counted as redeliveries; with ids (a client's nack once its own delay ran
        out), only those the consumer holds. Returns how many."""
        return self._write(_consuming().redeliver_unacked, names, subscription, consumer_name,
                           None if ids is None else list(ids))

    @routed
    def requeue(self, names, subscription, consumer_name, ids) -> int:
        """Batch messages a leaving `receive` fetched but did not hand out: kept for the
        consumer's next fetch, which continues the batch (batches.queue). Returns how many."""
        ids = list(ids)
        if not ids:
            return 0
        return self._write(_consuming().requeue, names, subscription, consumer_name, ids)

    @routed
    @wakes
    def close_consumer(self, names, subscription, consumer_name, acks=()):
        """Apply the last acks and disconnect: what the consumer received comes back, what it
        nacked stays held until its nack timer fires (nacks.py)."""
        self._write(_consuming().close_consumer, names, subscription, consumer_name, acks)

    @routed
    def seek(self, name, subscription, message_id=None, time_ms=None) -> dict:
        """Consumer.seek: the subscription delivers again from a message id (the message
        itself included) or from a publish time (the messages published after it), as
        pulsar-admin's reset-cursor; what was pending and waiting for redelivery is dropped.
        Exactly one of message_id and time_ms."""
        return self.subscription(name, subscription).reset_cursor(time_ms=time_ms,
                                                                  message_id=message_id)

    def explain(self, topic, message_id, subscription: str | None = None) -> dict:
        """A message's life from the message history (history.py), oldest first; a dead letter
        or retry copy's starts with its original's. topic None: the topic its ledger is on
        (broker/explain.py)."""
        from pulsarctl.broker import explain as life  # lazy: one-shot produce never needs it

        if topic is None:
            # Ledger ids are unique in a store; the non-persistent topics' store counts its own.
            np = self.non_persistent_if_open()
            other = None if np is None else np._read(life.ledger_topic, message_id.ledger_id)
            return self._read(life.explain, None, message_id, subscription, other)
        owner = self.owner_of(topic)
        return owner._read(life.explain, topic, message_id, subscription)

    # -- reading (non-durable) -----------------------------------------------------------------
    @routed
    def read_entries(self, name, start_offset: int | None, limit: int, after_id=None,
                     inclusive=False, compacted=False):
        """For readers: up to limit messages from an offset (or from a message id), in a read
        transaction. Returns (messages, next offset, last offset). compacted: the compacted
        view (latest message per key up to the compaction horizon)."""
        return self._read(_consuming().read_entries, topic_name(name), start_offset, limit,
                          after_id, inclusive, compacted)
