"""Broker: the public face of the semantics. Each method is one transaction: it opens the
store's write (or read) transaction, runs the concept modules inside it, and commits all or
nothing."""
from __future__ import annotations

import importlib
import os

from store import (
    Env, LedgerError, ManagedLedgers, Cursors, StoreDamaged, StoreDiskFull, StoreError,
    StoreNotFound, StoreReadOnly,
)
from store import codec
from pulsarctl import clock as clocks
from pulsarctl import offload
from pulsarctl.broker import partitions, policies, producers, tenants, topics
from pulsarctl.broker.context import Ctx
from pulsarctl.broker.cursor_admin import CursorAdmin
from pulsarctl.broker.dlq import DlqAdmin
from pulsarctl.config import BROKER_DEFAULTS, coerce_setting
from pulsarctl.errors import (
    DamagedStore, DiskFull, InvalidValue, MessageNotFound, PulsarctlError, StoreUnavailable,
    TopicNotFound,
)
from pulsarctl.messages import MessageId
from pulsarctl.names import TopicName, parse_topic


class _Lazy:
    """A module imported on first use: one-shot `produce` never loads dispatch or stats."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        mod = importlib.import_module(self._name)
        self.__dict__.update(vars(mod))
        return getattr(mod, attr)


cascade = _Lazy("pulsarctl.broker.cascade")
consumers = _Lazy("pulsarctl.broker.consumers")
dispatch = _Lazy("pulsarctl.broker.dispatch")
stats = _Lazy("pulsarctl.broker.stats")
subs = _Lazy("pulsarctl.broker.subscriptions")
nacks = _Lazy("pulsarctl.broker.nacks")
timers = _Lazy("pulsarctl.broker.timers")
fired = _Lazy("pulsarctl.broker.fired")
expiry = _Lazy("pulsarctl.broker.expiry")
chunks = _Lazy("pulsarctl.broker.chunks")


def _wakes(method):
    """After the transaction commits, wake consumers waiting on this store (unless nothing
    happened: a count of 0)."""
    def wrapper(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        if result != 0 or isinstance(result, bool):
            from pulsarctl import wake

            wake.notify(self.wake_path)
        return result
    wrapper.__name__, wrapper.__doc__ = method.__name__, method.__doc__
    return wrapper


def _topic(name) -> TopicName:
    return name if isinstance(name, TopicName) else parse_topic(name)


def _store_failure(exc: StoreError):
    """A store error as the pulsarctl error saying what to do: a damaged store points to doctor,
    a full disk says so; anything else is an unusable store."""
    if isinstance(exc, StoreDiskFull):
        return DiskFull(exc.file)
    if isinstance(exc, StoreDamaged | LedgerError):
        return DamagedStore(str(exc))
    return StoreUnavailable(str(exc))


class Broker(CursorAdmin, DlqAdmin):
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
        rollover = BROKER_DEFAULTS["managedLedgerMaxEntriesPerLedger"]
        self.ledgers = ManagedLedgers(self.env, rollover, offloaded_reader=offload.read_ledger)
        self.cursors = Cursors(self.env)
        if not self.readonly:
            # Write only when there is something to set up: a write commit costs an fsync.
            if self.read(self._needs_init):
                self.write(tenants.ensure_defaults)
            self.ledgers.rollover_entries = self.read(
                lambda ctx: ctx.setting("managedLedgerMaxEntriesPerLedger"))

    @staticmethod
    def _needs_init(ctx) -> bool:
        return ctx.get("tenant", "public") is None

    # -- transactions --------------------------------------------------------------------------
    def clock_for(self, txn) -> clocks.Clock:
        if self._clock is not None:
            return self._clock
        return clocks.from_state(self.env.get(txn, "meta", b"clock"))

    def write(self, fn, *args, **kwargs):
        def body(txn):
            ctx = Ctx(self, txn, self.clock_for(txn).now_ms(), True)
            return fn(ctx, *args, **kwargs)
        try:
            return self.env.write(body)
        except StoreReadOnly as exc:
            raise StoreUnavailable(str(exc), hint="this command writes; use a writable store "
                                   "with --store PATH") from None
        except StoreError as exc:
            raise _store_failure(exc) from None

    def read(self, fn, *args, **kwargs):
        try:
            with self.env.read() as txn:
                ctx = Ctx(self, txn, self.clock_for(txn).now_ms(), False)
                return fn(ctx, *args, **kwargs)
        except StoreError as exc:
            raise _store_failure(exc) from None

    def close(self) -> None:
        if self._np is not None:
            self._np.close()
            self._np = None
        self.env.close()

    def _non_persistent(self) -> "Broker":
        """The Broker over this store's non-persistent topics (created on first use)."""
        if self._np is None:
            from pulsarctl.broker import nonpersistent

            np = Broker(nonpersistent.path_for(self.path), self._clock)
            np.non_persistent = True
            np.wake_path = self.path
            np.parent = self
            self._np = np
        return self._np

    def _np_if_open(self):
        """The non-persistent Broker if its store exists (store-wide chores skip it else)."""
        if self._np is None and not self.non_persistent:
            from pulsarctl.broker import nonpersistent

            if not os.path.exists(os.path.join(nonpersistent.path_for(self.path), "data.mdb")):
                return None
            return self._non_persistent()
        return self._np

    # -- tenants and namespaces --------------------------------------------------------------
    def list_tenants(self):
        return self.read(tenants.list_tenants)

    def get_tenant(self, name):
        return self.read(tenants.get_tenant, name)

    def create_tenant(self, name, admin_roles=(), allowed_clusters=()):
        return self.write(tenants.create_tenant, name, admin_roles, allowed_clusters)

    def delete_tenant(self, name, force=False):
        return self.write(cascade.delete_tenant, name, force)

    def list_namespaces(self, tenant):
        return self.read(tenants.list_namespaces, tenant)

    def create_namespace(self, name):
        return self.write(tenants.create_namespace, name)

    def delete_namespace(self, name, force=False):
        return self.write(cascade.delete_namespace, name, force)

    def namespace_policies(self, name):
        """Every policy field, null where the namespace does not set it (the broker default
        applies), as pulsar-admin namespaces policies shows Pulsar's Policies object."""
        def run(ctx):
            own = policies.ns_policies(ctx, name)
            return {**{f: None for f in policies.NAMES.values()}, **own}
        return self.read(run)

    # -- namespace and topic policies -----------------------------------------------------------
    def set_policy(self, scope, target, field, value):
        if scope == "namespace":
            return self.write(policies.set_ns, target, field, value)
        return self.write(policies.set_topic, _topic(target), field, value)

    def get_policy(self, scope, target, field, applied=False):
        if scope == "namespace":
            return self.read(policies.get_ns, target, field)
        return self.read(policies.get_topic, _topic(target), field, applied)

    def topic_policies(self, topic):
        """The value of every policy in force on the topic."""
        def run(ctx):
            t = _topic(topic)
            policies.get_topic(ctx, t, policies.TTL)  # the topic must exist
            return policies.applied(ctx, t)
        return self.read(run)

    def remove_policy(self, scope, target, field, part=None):
        if scope == "namespace":
            return self.write(policies.remove_ns, target, field, part)
        return self.write(policies.remove_topic, _topic(target), field, part)

    # -- topics ----------------------------------------------------------------------------
    def list_topics(self, namespace):
        names = self.read(topics.list_topics, namespace)
        np = self._np_if_open()
        if np is not None:
            names += np.read(topics.list_np_topics, namespace)
        return names

    def list_partitioned_topics(self, namespace):
        return self.read(partitions.list_partitioned, namespace)

    def create_topic(self, name):
        t = _topic(name)

        def run(ctx):
            if partitions.get(ctx, t):
                from pulsarctl.errors import AlreadyExists

                raise AlreadyExists(f"{t} already exists as a partitioned topic")
            topics.create_topic(ctx, t)
        self.write(run)
        return str(t)

    def create_partitioned_topic(self, name, n: int):
        t = _topic(name)
        self.write(partitions.create, t, n)
        return str(t)

    def update_partitioned_topic(self, name, n: int):
        t = _topic(name)
        return self.write(cascade.update_partitions, t, n)

    def partitioned_metadata(self, name) -> dict:
        t = _topic(name)
        return self.read(lambda ctx: {"partitions": partitions.get(ctx, t)})

    def delete_topic(self, name, force=False):
        t = _topic(name)

        def run(ctx):
            if partitions.get(ctx, t):
                cascade.delete_partitioned(ctx, t, force)
            else:
                cascade.delete_topic(ctx, t, force)
        self.write(run)
        return str(t)

    def _each(self, ctx, t: TopicName):
        """(partition topic, ledger info) for every partition of t (or t itself)."""
        names = partitions.expand(ctx, t)
        if len(names) == 1:
            return [(names[0], topics.require(ctx, names[0]))]
        return [(p, topics.require(ctx, p)) for p in names]

    def _subscribed(self, ctx, t: TopicName, subscription: str):
        """(partition, ledger info, cursor) for every partition of t (or t) that has the
        subscription; SubscriptionNotFound (exit 3) when none has it."""
        parts = self._each(ctx, t)
        out = []
        for p, info in parts:
            c = subs.get(ctx, info, subscription)
            if c is not None:
                out.append((p, info, c))
        if not out:
            subs.require(ctx, parts[0][1], subscription)
        return out

    def topic_stats(self, name):
        t = _topic(name)

        def run(ctx):
            parts = self._each(ctx, t)
            if len(parts) == 1 and not partitions.get(ctx, t):
                return stats.topic_stats(ctx, parts[0][1])
            return stats.aggregate([stats.topic_stats(ctx, info) for _, info in parts])
        return self.read(run)

    def partitioned_stats(self, name, per_partition: bool = False):
        t = _topic(name)

        def run(ctx):
            n = partitions.get(ctx, t)
            if not n:
                raise TopicNotFound(f"{t} is not a partitioned topic",
                                    hint=f"use `pulsarctl topics stats {t}`")
            each = {str(p): stats.topic_stats(ctx, info) for p, info in self._each(ctx, t)}
            out = stats.aggregate(list(each.values()))
            out["metadata"] = {"partitions": n}
            if per_partition:
                out["partitions"] = each
            return out
        return self.read(run)

    def internal_stats(self, name):
        t = _topic(name)

        def run(ctx):
            n = partitions.get(ctx, t)
            if not n:
                return stats.internal_stats(ctx, topics.require(ctx, t))
            return {"metadata": {"partitions": n},
                    "partitions": {str(p): stats.internal_stats(ctx, info)
                                   for p, info in self._each(ctx, t)}}
        return self.read(run)

    def list_subscriptions(self, name):
        t = _topic(name)

        def run(ctx):
            names = []
            for _p, info in self._each(ctx, t):
                for c in self.cursors.list(ctx.txn, info.ml_id):
                    if c.name not in names:
                        names.append(c.name)
            return names
        return self.read(run)

    def last_message_id(self, name) -> MessageId:
        t = _topic(name)

        def run(ctx):
            if partitions.get(ctx, t):
                raise InvalidValue(f"{t} is a partitioned topic; ask one partition",
                                   hint=f"e.g. `pulsarctl topics last-message-id {t.partition(0)}`")
            info = topics.require(ctx, t)
            p = info.mark_position(info.last_offset)
            return MessageId(p.ledger_id, p.entry_id, t.partition_index)
        return self.read(run)

    def get_message_by_id(self, name, ledger_id: int, entry_id: int):
        t = _topic(name)

        def run(ctx):
            target = t
            if partitions.get(ctx, t):
                owner = partitions.owner_topic(ctx, ledger_id)
                if owner is None or _topic(owner) not in partitions.expand(ctx, t):
                    raise MessageNotFound(f"message {ledger_id}:{entry_id} not found on {t}")
                target = _topic(owner)
            info = topics.require(ctx, target)
            mid = MessageId(ledger_id, entry_id, target.partition_index)
            o = subs.offset_of(ctx, info, mid)
            from pulsarctl.broker import batches

            # A batch entry shows its first message, as pulsar-admin's getMessageById does.
            m = batches.first_message(codec.decode(self.ledgers.read(ctx.txn, info, o)),
                                      ledger_id, entry_id, target.partition_index, str(target))
            # A message has a redelivery count per subscription, not one of its own.
            m.redelivery_count_ = stats.redelivery_counts(ctx, info, o)
            return m
        return self.read(run)

    def peek(self, name, subscription: str, n: int = 1):
        """peek-messages: from after mark-delete, skipping acked ones; changes nothing. On a
        partitioned topic, partition by partition."""
        t = _topic(name)

        def run(ctx):
            from pulsarctl.broker import batches

            out = []
            for p, info, c in self._subscribed(ctx, t, subscription):
                replay = dict(subs.replay_items(ctx, c.id))
                pending = {o: r[2] for o, r in subs.pending_items(ctx, c.id)}
                for o in self.cursors.unacked(ctx.txn, c, c.mark_delete + 1, info.next_offset):
                    if len(out) >= n:
                        break
                    pos = info.position(o)
                    rc = replay.get(o, pending.get(o, 0))
                    # A batch shows its messages not acked yet, each with its batch index.
                    out.extend(batches.messages(
                        codec.decode(self.ledgers.read(ctx.txn, info, o)), pos.ledger_id,
                        pos.entry_id, p.partition_index, str(p), rc,
                        skip=batches.acked_indexes(ctx, c, o))[:n - len(out)])
            return out
        return self.read(run)

    # -- producing ---------------------------------------------------------------------------
    def check_sizes(self, messages, compression=0, chunking=False):
        if chunking:  # any size goes, in chunks
            return None
        sizes = None
        if compression:
            from pulsarctl.compression import compress

            sizes = [len(compress(compression, m.payload)) for m in messages]
        return self.read(producers.check_sizes, messages, sizes)

    def partitions_of(self, name) -> int:
        t = _topic(name)
        return self.read(partitions.get, t)

    @_wakes
    def publish(self, name, messages, producer_name=None, route=None, compression=0,
                schema=None, chunking=False, batching=None):
        """Append messages in one transaction. For a partitioned topic, route(n) gives the
        producer's router for n partitions, a function (key, now_ms) -> partition; ids come
        back in message order. compression: a pulsarctl.compression code. chunking: split
        messages over maxMessageSize into chunks (a chunked message's id is its last chunk's).
        batching: a batches.Spec: the messages go into batch entries, per partition."""
        t = _topic(name)

        def run(ctx):
            n = partitions.get(ctx, t) if not t.is_partition else 0
            if not n:
                return producers.publish(ctx, t, messages, producer_name, t.partition_index,
                                         compression=compression, schema=schema,
                                         chunking=chunking, batching=batching)
            if route is None:
                from pulsarctl.broker.routing import PartitionRouter

                chooser = PartitionRouter(n).choose
            else:
                chooser = route(n)
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
                                           compression=compression, schema=schema,
                                           chunking=chunking, batching=batching)
                ids_by[i] = ids[::-1]
            return name_out, [ids_by[i].pop() for i in order]
        return self.write(run)

    def producer_acquire(self, name, producer_name, mode, pid, pid_start):
        """Make producer_name the exclusive producer of the topic (ProducerFenced if another
        holds it); returns (producer name, the holder record)."""
        from pulsarctl.broker import access

        t = _topic(name)

        def run(ctx):
            pname = producer_name or producers.new_producer_name(ctx)
            return pname, access.acquire(ctx, t, pname, mode, pid, pid_start)
        return self.write(run)

    def schema_get(self, name, version=None):
        """pulsar-admin schemas get: the latest version (or the given one)."""
        from pulsarctl.broker import schemas

        def run(ctx):
            t = _topic(name)
            vs = schemas.versions(ctx, t)
            pick = vs[-1] if vs and version is None else next(
                (v for v in vs if v["version"] == version), None)
            if pick is None:
                raise MessageNotFound(f"topic {t} has no schema"
                                      + ("" if version is None else f" version {version}"),
                                      hint="a producer with --value-schema string|json sets one")
            return {"version": pick["version"], "schemaInfo": {
                "name": t.local_name, "schema": pick["schema"], "type": pick["type"],
                "properties": pick["properties"], "timestamp": pick["timestamp"]}}
        return self.read(run)

    def schema_delete(self, name) -> bool:
        from pulsarctl.broker import schemas

        return self.write(lambda ctx: schemas.delete(ctx, _topic(name)))

    def schema_check_consumer(self, names, schema) -> None:
        from pulsarctl.broker import schemas

        typ = schemas.check_type(schema)

        def run(ctx):
            for p in self._targets(ctx, names):
                schemas.for_consumer(ctx, p, typ)
        self.read(run)

    @_wakes
    def producer_release(self, name, producer_name, pid, pid_start) -> bool:
        from pulsarctl.broker import access

        return self.write(access.release, _topic(name), producer_name, pid, pid_start)

    # -- subscriptions and consumers ---------------------------------------------------------
    def _targets(self, ctx, names) -> list[TopicName]:
        if isinstance(names, (str, TopicName)):
            names = [names]
        out = []
        for name in names:
            for p in partitions.expand(ctx, _topic(name)):
                if p not in out:
                    out.append(p)
        return out

    def create_subscription(self, name, subscription, position="Latest"):
        t = _topic(name)

        def run(ctx):
            targets = self._targets(ctx, t)
            if isinstance(position, MessageId) and position not in (MessageId.earliest,
                                                                     MessageId.latest):
                owner = partitions.owner_topic(ctx, position.ledger_id)
                targets = [p for p in targets if str(p) == owner] or targets[:1]
            for p in targets:
                info = topics.ensure(ctx, p)
                subs.create(ctx, info, subscription, position, exist_ok=False)
        self.write(run)

    def unsubscribe(self, name, subscription, force=False):
        t = _topic(name)

        def run(ctx):
            for _p, info, _c in self._subscribed(ctx, t, subscription):
                consumers.unsubscribe(ctx, info, subscription, force)
        self.write(run)

    def subscribe(self, names, subscription, consumer_name, sub_type="Exclusive",
                  position="Latest", *, priority=0, pid=None, pid_start=None, lease_ms=None,
                  fetch=0, policy=None, settings=None):
        """Create the subscription where needed and attach a consumer on every topic that names
        stands for (one topic, a partitioned topic, or several). With fetch > 0, also deliver
        up to that many messages in the same transaction. Returns (topic names, messages).
        settings: the consumer's ConsumerPolicy (or its stored dict); policy: Key_Shared's."""
        sub_type = subs.normalize_type(sub_type)
        from pulsarctl.consumer_policy import ConsumerPolicy

        if isinstance(settings, ConsumerPolicy):
            settings = settings.to_store()

        def run(ctx):
            targets = self._targets(ctx, names)
            nonlocal settings
            # Flags left out keep the stored values: retry stays on, with its names and limit.
            info0 = topics.lookup(ctx, targets[0])
            c0 = subs.get(ctx, info0, subscription) if info0 is not None else None
            stored = (c0.props.get("policy") or {}) if c0 is not None else {}
            given = {k: v for k, v in (settings or {}).items() if v is not None}
            if given.get("enableRetry") or stored.get("enableRetry"):
                from pulsarctl.broker import retry

                first = str(_topic(names if isinstance(names, (str, TopicName)) else names[0]))
                settings = retry.settings_for(first, subscription, {**stored, **given}, ctx)
                for rt in partitions.expand(ctx, _topic(settings["retryLetterTopic"])):
                    if rt not in targets:
                        targets.append(rt)
            for p in targets:
                info = topics.ensure(ctx, p)
                if self.non_persistent:
                    self._np_attach(ctx, info, subscription)
                c = subs.create(ctx, info, subscription,
                                "Latest" if self.non_persistent else position, sub_type)
                consumers.attach(ctx, info, c, consumer_name, sub_type, priority=priority,
                                 pid=pid, pid_start=pid_start, lease_ms=lease_ms, policy=policy)
                if settings:
                    subs.update_policy(ctx, c, settings)
            msgs = self._deliver(ctx, targets, subscription, consumer_name, fetch, 0) if fetch else []
            if isinstance(names, (str, TopicName)) and len(targets) == 1:
                return str(targets[0]), msgs
            return [str(p) for p in targets], msgs
        return self.write(run)

    @staticmethod
    def _np_attach(ctx, info, subscription) -> None:
        """A non-persistent subscription with no consumer left starts over at the newest
        message: what was published while nobody listened is not delivered."""
        from pulsarctl.broker import cursor_admin

        c = subs.get(ctx, info, subscription)
        if c is not None and not consumers.sweep(ctx, info, c):
            subs.clear_delivery_state(ctx, c)
            if c.mark_delete < info.last_offset:
                cursor_admin.clear_backlog(ctx, info, c)

    def _deliver(self, ctx, targets, subscription, consumer_name, max_n, start):
        out = []
        k = len(targets)
        for j in range(k):
            if len(out) >= max_n:
                break
            p = targets[(start + j) % k]
            info = topics.lookup(ctx, p)
            if info is None:
                continue
            c = subs.get(ctx, info, subscription)
            if c is None:
                continue
            live = consumers.sweep(ctx, info, c)
            rec = next((r for r in live if r["name"] == consumer_name), None)
            if rec is None:
                continue
            nacks.fire(ctx, info, c)
            expiry.apply(ctx, info, [c])
            out.extend(dispatch.fetch(ctx, info, c, rec, live, max_n - len(out), str(p),
                                      p.partition_index))
        return out

    def fetch(self, names, subscription, consumer_name, max_n, acks=(), renew=False, start=0):
        """Apply acks (grouped, as the client's ack grouping does), then deliver up to max_n
        messages to the consumer from its topics, starting at topic index start — one
        transaction for both."""
        def run(ctx):
            targets = self._targets(ctx, names)
            if acks:
                self._ack(ctx, targets, subscription, acks, False)
            attached = False
            for p in targets:
                info = topics.lookup(ctx, p)
                c = subs.get(ctx, info, subscription) if info is not None else None
                if c is None:
                    continue
                if any(r["name"] == consumer_name for r in consumers.sweep(ctx, info, c)):
                    attached = True
                    if renew:
                        consumers.renew(ctx, c, [consumer_name])
            if not attached:
                info = topics.require(ctx, targets[0])
                c = subs.require(ctx, info, subscription)
                consumers.require(ctx, c, consumer_name)  # raises: we were disconnected
            return self._deliver(ctx, targets, subscription, consumer_name, max_n, start)
        return self.write(run)

    def _ack(self, ctx, targets, subscription, ids, cumulative) -> int:
        """Group ids by the partition their ledger belongs to and ack each group; an id on no
        topic of targets is MessageNotFound, and then nothing is acked (one transaction)."""
        allowed = {str(p): p for p in targets}
        if len(targets) == 1:
            groups = {str(targets[0]): list(ids)}
        else:
            groups: dict[str, list] = {}
            owners: dict[int, str | None] = {}
            for mid in ids:
                lid = mid.ledger_id
                owner = owners.get(lid) if lid in owners else owners.setdefault(
                    lid, partitions.owner_topic(ctx, lid))
                if owner not in allowed:
                    where = ", ".join(list(allowed)[:3])
                    raise MessageNotFound(f"message {mid} not found on {where}")
                groups.setdefault(owner, []).append(mid)
        total = 0
        for owner, mids in groups.items():
            info = topics.require(ctx, allowed[owner])
            c = subs.require(ctx, info, subscription)
            if any(m.batch_index >= 0 for m in mids):
                # Batch indexes: acked in part until every index of the entry is.
                from pulsarctl.broker import batches

                offsets, newly_idx, completed, held = batches.resolve(ctx, info, c, mids,
                                                                      cumulative)
                consumers.renew(ctx, c, held)
                if not offsets:
                    ctx.cursors.save(ctx.txn, c)
                    total += newly_idx
                    continue
                total += newly_idx - completed
            else:
                offsets = subs.offsets_of(ctx, info, mids)
            if not offsets:
                continue
            if not cumulative:
                # The id of a chunked message (its last chunk's) acks every chunk; the count
                # is of the ids given.
                rest = chunks.earlier(ctx, info, offsets)
                if rest:
                    consumers.renew(ctx, c, subs.ack(ctx, info, c, rest)[1])
            newly, holders = subs.ack(ctx, info, c, offsets, cumulative)
            consumers.renew(ctx, c, holders)
            total += newly
        return total

    @_wakes
    def ack(self, names, subscription, ids, cumulative=False):
        """Acknowledge message ids. Any id that names no message: nothing is acked (exit 3)."""
        ids = list(ids)

        def run(ctx):
            targets = self._targets(ctx, names)
            if len(targets) == 1:
                info = topics.require(ctx, targets[0])
                subs.require(ctx, info, subscription)
            return self._ack(ctx, targets, subscription, ids, cumulative)
        return self.write(run)

    @_wakes
    def nack(self, names, subscription, ids) -> int:
        """Negatively acknowledge message ids: each is redelivered after the nack delay (or
        backoff), or dead-lettered past maxRedeliverCount. Returns how many were nacked."""
        ids = list(ids)

        def run(ctx):
            targets = self._targets(ctx, names)
            total = 0
            for owner, mids in self._by_owner(ctx, targets, ids).items():
                info = topics.require(ctx, owner)
                c = subs.require(ctx, info, subscription)
                nacks.fire(ctx, info, c)
                # A batch index names its entry: the whole batch is redelivered (Pulsar's
                # NegativeAcksTracker collapses indexes to the entry).
                offsets = subs.offsets_of(ctx, info, mids)
                rest = chunks.earlier(ctx, info, offsets)  # a chunked message's other chunks
                if rest:
                    consumers.renew(ctx, c, nacks.nack(ctx, info, c, rest)[1])
                n, holders = nacks.nack(ctx, info, c, offsets)
                consumers.renew(ctx, c, holders)
                total += n
            return total
        return self.write(run)

    @_wakes
    def reconsume_later(self, names, subscription, ids, delay_ms: int, properties=None,
                        level: int | None = None, increment: bool = False) -> dict:
        """Move messages to the retry letter topic (or the DLQ past the limit) and ack them, in
        one transaction. Ids may be on the topics or on their retry topic."""
        ids = list(ids)

        def run(ctx):
            from pulsarctl.broker import retry

            targets = self._targets(ctx, names)
            for p in list(targets):
                info = topics.lookup(ctx, p)
                c = subs.get(ctx, info, subscription) if info is not None else None
                rt = ((c.props.get("policy") or {}).get("retryLetterTopic") if c else None)
                for q in (partitions.expand(ctx, _topic(rt)) if rt else ()):
                    if q not in targets:
                        targets.append(q)
            out = {"retry": 0, "dlq": 0}
            for owner, mids in self._by_owner(ctx, targets, ids).items():
                info = topics.require(ctx, owner)
                c = subs.require(ctx, info, subscription)
                subs.offsets_of(ctx, info, mids)  # every id names a message, or nothing moves
                for mid in mids:
                    got = subs.offsets_of(ctx, info, [mid])
                    if not got or self.cursors.is_acked(ctx.txn, c, got[0]):
                        continue
                    o = got[0]
                    for where in retry.reconsume_later(ctx, info, c, o, delay_ms, properties,
                                                       level, increment, mid.batch_index):
                        out[where] += 1
            return out
        return self.write(run)

    def requeue(self, names, subscription, consumer_name, ids) -> int:
        """Batch messages a leaving `receive` fetched but did not hand out: kept for the
        consumer's next fetch, which continues the batch (batches.queue). Returns how many."""
        ids = list(ids)

        def run(ctx):
            from pulsarctl.broker import batches

            n = 0
            for owner, mids in self._by_owner(ctx, self._targets(ctx, names), ids).items():
                info = topics.lookup(ctx, owner)
                c = subs.get(ctx, info, subscription) if info is not None else None
                if c is not None:
                    n += batches.queue(ctx, info, c, consumer_name, mids)
                    self.cursors.save(ctx.txn, c)
            return n
        return self.write(run) if ids else 0

    @_wakes
    def redeliver_unacked(self, names, subscription, consumer_name=None) -> int:
        """redeliverUnacknowledgedMessages: a consumer's (or every consumer's) pending messages
        go back now, counted as redeliveries. Returns how many."""
        def run(ctx):
            n = 0
            targets = self._targets(ctx, names)
            found = False
            for p in targets:
                info = topics.lookup(ctx, p)
                c = subs.get(ctx, info, subscription) if info is not None else None
                if c is None:
                    continue
                found = True
                live = {r["name"] for r in consumers.sweep(ctx, info, c)}
                if consumer_name is not None and consumer_name not in live:
                    continue
                offsets = [o for o, r in subs.pending_items(ctx, c.id)
                           if consumer_name is None or r[0] == consumer_name]
                if offsets:
                    nacks.redeliver(ctx, info, c, offsets)
                    n += len(offsets)
            if not found:
                subs.require(ctx, topics.require(ctx, targets[0]), subscription)
            return n
        return self.write(run)

    @_wakes
    def fire_due(self, by_kind: bool = False):
        """Fire every timer due by now, store-wide (clock advance, daemon run-once). Returns
        how many messages were redelivered or dead-lettered; with by_kind, that count by timer
        kind ({"nack": n, "ackTimeout": m}, broker/fired.py)."""
        def run(ctx):
            n, kinds = 0, fired.empty(fired.TIMER_KINDS)
            for ml_id, sub in timers.due_subscriptions(ctx, ctx.now):
                try:
                    info = self.ledgers.info(ctx.txn, ml_id)
                except KeyError:
                    continue
                c = subs.get(ctx, info, sub)
                if c is not None:
                    before = fired.before_firing(ctx, c) if by_kind else None
                    n += nacks.fire(ctx, info, c)
                    if by_kind:
                        fired.tally(ctx, c, before, kinds)
            return kinds if by_kind else n
        return self.write(run)

    def offload(self, topic: str, to: str, size_threshold: int | None = None,
                older_than_ms: int | None = None) -> dict:
        """Offload a topic's oldest closed ledgers to Parquet files (pulsarctl/offload.py)."""
        return offload.offload(self, topic, to, size_threshold, older_than_ms)

    def offload_status(self, topic: str) -> dict:
        return offload.status(self, topic)

    def enforce_policies(self) -> dict:
        """Message TTL and retention on every topic, store-wide (the daemon's tick)."""
        from pulsarctl.broker import expiry, retention

        def run(ctx):
            expired = trimmed = 0
            for _name, ml_id in list(self.ledgers.names(ctx.txn)):
                info = self.ledgers.info(ctx.txn, ml_id)
                before = len(info.ledgers)
                expired += expiry.apply(ctx, info)  # may trim, too, as any ack does
                retention.trim(ctx, info)
                trimmed += before - len(info.ledgers)
            return {"expired": expired, "trimmedLedgers": trimmed}
        return self.write(run)

    @_wakes
    def sweep_consumers(self) -> int:
        """Disconnect every consumer whose process is gone or whose lease ended, store-wide
        (the daemon's tick). Returns how many were disconnected."""
        def run(ctx):
            n = 0
            for _name, ml_id in list(self.ledgers.names(ctx.txn)):
                info = self.ledgers.info(ctx.txn, ml_id)
                for c in self.cursors.list(ctx.txn, ml_id):
                    before = len(consumers.records(ctx, c))
                    if before:
                        n += before - len(consumers.sweep(ctx, info, c))
            return n
        return self.write(run)

    def timers_due(self) -> int:
        return self.read(lambda ctx: timers.count(ctx, due_by=ctx.now))

    def timer_counts(self) -> dict:
        """Store-wide: timersScheduled (every timer: nack delays, ack timeouts) and timersDue
        (those of them due by now, which the next command or daemon tick fires)."""
        return self.read(lambda ctx: {"timersScheduled": timers.count(ctx),
                                      "timersDue": timers.count(ctx, due_by=ctx.now)})

    def _by_owner(self, ctx, targets, ids) -> dict:
        """ids grouped by the topic (partition) they belong to, which must be one of targets."""
        allowed = {str(p): p for p in targets}
        if len(targets) == 1:
            return {targets[0]: list(ids)}
        groups: dict = {}
        for mid in ids:
            owner = partitions.owner_topic(ctx, mid.ledger_id)
            if owner not in allowed:
                raise MessageNotFound(f"message {mid} not found on {', '.join(list(allowed)[:3])}")
            groups.setdefault(allowed[owner], []).append(mid)
        return groups

    @_wakes
    def close_consumer(self, names, subscription, consumer_name, acks=()):
        """Apply the last acks and disconnect: what the consumer received comes back, what it
        nacked stays held until its nack timer fires (nacks.py)."""
        def run(ctx):
            targets = self._targets(ctx, names)
            if acks:
                self._ack(ctx, targets, subscription, acks, False)
            for p in targets:
                info = topics.lookup(ctx, p)
                if info is None:
                    continue
                c = subs.get(ctx, info, subscription)
                if c is not None:
                    consumers.detach(ctx, info, c, consumer_name)
        self.write(run)

    @_wakes
    def disconnect_consumer(self, name, subscription, consumer_name) -> int:
        """subscriptions close-consumer: like the consumer's connection dropping. Returns how
        many pending messages it gave back; ConsumerNotFound if it is not connected."""
        t = _topic(name)

        def run(ctx):
            found, returned = False, 0
            subscribed = self._subscribed(ctx, t, subscription)
            for _p, info, c in subscribed:
                rec = ctx.get("consumer", c.id, consumer_name)
                if rec is None:
                    continue
                found = True
                # Not the ones it nacked: those stay held for their nack timers.
                returned += sum(1 for _o, r in subs.pending_items(ctx, c.id)
                                if r[0] == consumer_name and not (len(r) > 3 and r[3]))
                consumers.remove(ctx, info, c, rec)
            if not found:
                consumers.require(ctx, subscribed[0][2], consumer_name)
            return returned
        return self.write(run)

    def subscription_policy(self, name, subscription) -> dict:
        """The policy stored with a subscription ({} when it does not exist)."""
        t = _topic(name)

        def run(ctx):
            for p in partitions.expand(ctx, t):
                info = topics.lookup(ctx, p)
                c = subs.get(ctx, info, subscription) if info is not None else None
                if c is not None:
                    return dict(c.props.get("policy") or {})
            return {}
        return self.read(run)

    def describe_subscription(self, name, subscription) -> dict:
        """Type, the effective policy, the derived dead letter and retry topic names, and the
        cursor, for `subscriptions describe`."""
        t = _topic(name)

        def run(ctx):
            from pulsarctl.broker import deadletter
            from pulsarctl.broker.nacks import DEFAULT_NACK_DELAY_MS
            from pulsarctl.names import retry_topic

            info = topics.require(ctx, t)
            c = subs.require(ctx, info, subscription)
            policy = {"negativeAckRedeliveryDelayMs": DEFAULT_NACK_DELAY_MS,
                      **{k: v for k, v in (c.props.get("policy") or {}).items() if v is not None}}
            return {
                "topic": str(t), "subscription": subscription,
                "type": c.props.get("type", subs.EXCLUSIVE), "durable": True,
                "policy": policy,
                "deadLetterTopic": deadletter.dlq_topic(str(t), subscription, policy),
                "retryLetterTopic": policy.get("retryLetterTopic") or retry_topic(str(t), subscription),
                "markDeletePosition": str(info.mark_position(c.mark_delete)),
                "readPosition": str(info.position(c.read_position)),
                "msgBacklog": c.backlog(info.next_offset),
                "individuallyDeletedMessages": stats._ranges_text(
                    info, self.cursors.individually_deleted(ctx.txn, c)),
                "timersScheduled": timers.count(ctx, c.id),
                "timersDue": timers.count(ctx, c.id, due_by=ctx.now),
            }
        return self.read(run)

    def pending_messages(self, name, subscription) -> list[dict]:
        """Delivered, unacknowledged messages: consumer, idle time, redelivery count and the
        next redelivery (a nack timer), for `subscriptions pending`."""
        t = _topic(name)

        def run(ctx):
            from pulsarctl.messages import iso_ms

            out = []
            for p, info, c in self._subscribed(ctx, t, subscription):
                due = timers.pending(ctx, c.id)
                for o, rec in subs.pending_items(ctx, c.id):
                    pos = info.position(o)
                    # The first timer that still applies to this delivery (a nack voids the
                    # ack timeout; a redelivery voids both).
                    nxt = next((d for d in due.get(o, ()) if nacks.applies(d[1], rec)), None)
                    out.append({
                        "messageId": str(MessageId(pos.ledger_id, pos.entry_id, p.partition_index)),
                        "topic": str(p), "consumerName": rec[0],
                        "deliveredAt": iso_ms(rec[1]), "idleMs": max(0, ctx.now - rec[1]),
                        "redeliveryCount": rec[2] if len(rec) > 2 else 0,
                        "nextRedelivery": iso_ms(nxt[0]) if nxt else None,
                    })
            return out
        return self.read(run)

    def consumers(self, name, subscription):
        t = _topic(name)

        def run(ctx):
            out = []
            subscribed = self._subscribed(ctx, t, subscription)
            for p, info, c in subscribed:
                for r in stats.subscription_stats(ctx, info, c)["consumers"]:
                    if p.is_partition:
                        r["topic"] = str(p)
                    out.append(r)
            return out
        return self.read(run)

    # -- reading (non-durable) -----------------------------------------------------------------
    def read_entries(self, name, start_offset: int | None, limit: int, after_id=None,
                     inclusive=False):
        """For readers: up to limit messages from an offset (or from a message id), in a read
        transaction. Returns (messages, next offset, last offset)."""
        t = _topic(name)

        def run(ctx):
            from pulsarctl.broker import batches

            info = topics.require(ctx, t)
            start = start_offset
            skip_in, skip = None, None
            if start is None:
                if after_id == MessageId.earliest:
                    start = info.first_offset
                elif after_id == MessageId.latest or after_id is None:
                    start = info.next_offset if not inclusive else max(info.last_offset, info.first_offset)
                else:
                    o = info.offset(after_id.ledger_id, after_id.entry_id)
                    if o is None:
                        raise MessageNotFound(f"message {after_id} not found on {t}")
                    start = o if inclusive else o + 1
                    if after_id.batch_index >= 0:
                        # The reader drops the batch indexes before its start in the start
                        # entry (isPriorEntryIndex: idx <= start exclusive, < start inclusive).
                        start, skip_in = o, o
                        skip = set(range(after_id.batch_index + (0 if inclusive else 1)))
            start = max(start, info.first_offset)
            out = []
            nxt = start
            for o, lid, eid, raw in self.ledgers.scan(ctx.txn, info, start, start + limit):
                out.extend(batches.messages(codec.decode(raw), lid, eid, t.partition_index,
                                            str(t), skip=skip if o == skip_in else None))
                nxt = o + 1
            return out, nxt, info.last_offset
        return self.read(run)

    def topic_exists(self, name) -> bool:
        t = _topic(name)
        return self.read(lambda ctx: topics.lookup(ctx, t) is not None)

    # -- broker settings and the clock ---------------------------------------------------------
    def get_settings(self) -> dict:
        return self.read(lambda ctx: {k: ctx.setting(k) for k in BROKER_DEFAULTS})

    def update_setting(self, name: str, value: str):
        v = coerce_setting(name, value)
        self.write(lambda ctx: ctx.put(v, "setting", name))
        if name == "managedLedgerMaxEntriesPerLedger":
            self.ledgers.rollover_entries = v  # other processes: see producers.publish
        return v

    def clock_state(self) -> dict:
        def run(ctx):
            state = self.env.get(ctx.txn, "meta", b"clock") or {"mode": "real"}
            mode = state.get("mode", "real")
            if mode == "simulated" and not clocks.in_range(ctx.now):
                # Saved by a version that did not check: say so rather than fail to show it.
                raise PulsarctlError(
                    f"the store's simulated clock is at {ctx.now!r} epoch milliseconds, which "
                    f"is no time a clock can show (1970 to {clocks.MAX_TEXT})",
                    hint="go back to the real clock with `pulsarctl clock real`, or set a time "
                    "with `pulsarctl clock simulate --at TIME`")
            return {"mode": mode, "now": ctx.now}
        return self.read(run)

    def clock_simulate(self, at_ms: int | None):
        def run(ctx):
            at = ctx.now if at_ms is None else at_ms
            if not clocks.in_range(at):
                raise InvalidValue(f"the clock cannot be set to {at!r} epoch milliseconds: "
                                   f"times run from 1970 to {clocks.MAX_TEXT}",
                                   hint="give a time with --at (ISO 8601 or epoch milliseconds)")
            self.env.put(ctx.txn, "meta", b"clock", {"mode": "simulated", "at": at})
            return at
        return self.write(run)

    @_wakes
    def clock_advance(self, ms: int, by_kind: bool = False):
        """Move the simulated clock forward and fire what became due, as a daemon tick would.
        Returns the new time; with by_kind, (new time, what fired by kind: broker/fired.py)."""
        if ms < 0:
            raise InvalidValue("the clock cannot go back", hint="give a positive duration")

        def run(ctx):
            state = self.env.get(ctx.txn, "meta", b"clock")
            if not state or state.get("mode") != "simulated":
                raise InvalidValue("the store runs on the real clock",
                                   hint="switch with `pulsarctl clock simulate` first")
            at = state["at"] + ms
            if not clocks.in_range(at):
                raise InvalidValue(f"the clock cannot move past {clocks.MAX_TEXT}: {ms} ms "
                                   f"from now is after it", hint="advance it by less")
            state["at"] = at
            self.env.put(ctx.txn, "meta", b"clock", state)
            # What the move makes deliverable, counted as the clock moves (in this transaction).
            ctx.now = at
            return at, (fired.came_due(ctx, ms) if by_kind else None)
        at, came = self.write(run)
        # As a daemon tick would: consumers whose lease ended are disconnected, what became due
        # fires now, TTL and retention apply.
        swept = self.sweep_consumers()
        timer_kinds = self.fire_due(by_kind=by_kind)
        pol = self.enforce_policies()
        if not by_kind:
            return at
        return at, {**fired.empty(), **timer_kinds, **came, "ttl": pol.get("expired", 0),
                    "lease": swept}

    def clock_real(self):
        self.write(lambda ctx: self.env.put(ctx.txn, "meta", b"clock", {"mode": "real"}))


# -- non-persistent topics: calls naming them go to the tmpfs store's Broker -------------------
_TOPIC_METHODS = (
    "create_topic", "delete_topic", "topic_stats", "internal_stats", "list_subscriptions",
    "last_message_id", "get_message_by_id", "peek", "publish", "producer_acquire",
    "producer_release", "schema_get", "schema_delete", "schema_check_consumer",
    "create_subscription", "unsubscribe", "subscribe", "fetch", "ack", "nack",
    "reconsume_later", "redeliver_unacked", "close_consumer", "disconnect_consumer",
    "subscription_policy", "describe_subscription", "pending_messages", "consumers",
    "read_entries", "topic_exists", "partitions_of", "check_sizes_for", "skip", "clear_backlog",
    "reset_cursor", "expire_messages", "terminate", "examine_message", "requeue", "offload",
    "offload_status",
)


def _routed(name: str):
    method = getattr(Broker, name)

    def wrapper(self, topic, *args, **kwargs):
        if not self.non_persistent:
            from pulsarctl.broker.nonpersistent import is_non_persistent

            if is_non_persistent(topic):
                return getattr(self._non_persistent(), name)(topic, *args, **kwargs)
        return method(self, topic, *args, **kwargs)
    wrapper.__name__, wrapper.__doc__ = method.__name__, method.__doc__
    return wrapper


def _store_wide(name: str):
    """A chore over the whole store (the daemon's tick) covers the non-persistent one too."""
    method = getattr(Broker, name)

    def wrapper(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        np = None if self.non_persistent else self._np_if_open()
        if np is not None:
            more = getattr(np, name)(*args, **kwargs)
            if isinstance(result, dict):
                result = {k: result[k] + more.get(k, 0) for k in result}
            else:
                result += more
        return result
    wrapper.__name__, wrapper.__doc__ = method.__name__, method.__doc__
    return wrapper


for _name in _TOPIC_METHODS:
    if hasattr(Broker, _name):
        setattr(Broker, _name, _routed(_name))
for _name in ("fire_due", "sweep_consumers", "enforce_policies", "timers_due", "timer_counts"):
    setattr(Broker, _name, _store_wide(_name))
