"""Broker: the public face of the semantics. Each method is one transaction: it opens the
store's write (or read) transaction, runs the concept modules inside it, and commits all or
nothing."""
from __future__ import annotations

import importlib

from store import Env, ManagedLedgers, Cursors, StoreError, StoreNotFound, StoreReadOnly
from store import codec
from pulsarctl import clock as clocks
from pulsarctl.broker import producers, tenants, topics
from pulsarctl.broker.context import Ctx
from pulsarctl.config import BROKER_DEFAULTS, coerce_setting
from pulsarctl.errors import InvalidValue, MessageNotFound, NotSupportedYet, StoreUnavailable
from pulsarctl.messages import MessageId, message_from_entry
from pulsarctl.names import TopicName, parse_topic


class _Lazy:
    """A module imported on first use: one-shot `produce` never loads dispatch or stats."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        mod = importlib.import_module(self._name)
        self.__dict__.update(vars(mod))
        return getattr(mod, attr)


consumers = _Lazy("pulsarctl.broker.consumers")
dispatch = _Lazy("pulsarctl.broker.dispatch")
stats = _Lazy("pulsarctl.broker.stats")
subs = _Lazy("pulsarctl.broker.subscriptions")


def _topic(name) -> TopicName:
    return name if isinstance(name, TopicName) else parse_topic(name)


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
            raise StoreUnavailable(str(exc)) from None
        self.readonly = readonly
        self.path = self.env.path
        self._clock = clock
        rollover = BROKER_DEFAULTS["managedLedgerMaxEntriesPerLedger"]
        self.ledgers = ManagedLedgers(self.env, rollover)
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
            raise StoreUnavailable(str(exc)) from None

    def read(self, fn, *args, **kwargs):
        try:
            with self.env.read() as txn:
                ctx = Ctx(self, txn, self.clock_for(txn).now_ms(), False)
                return fn(ctx, *args, **kwargs)
        except StoreError as exc:
            raise StoreUnavailable(str(exc)) from None

    def close(self) -> None:
        self.env.close()

    # -- tenants and namespaces --------------------------------------------------------------
    def list_tenants(self):
        return self.read(tenants.list_tenants)

    def get_tenant(self, name):
        return self.read(tenants.get_tenant, name)

    def create_tenant(self, name, admin_roles=(), allowed_clusters=()):
        return self.write(tenants.create_tenant, name, admin_roles, allowed_clusters)

    def delete_tenant(self, name, force=False):
        return self.write(tenants.delete_tenant, name, force)

    def list_namespaces(self, tenant):
        return self.read(tenants.list_namespaces, tenant)

    def create_namespace(self, name):
        return self.write(tenants.create_namespace, name)

    def delete_namespace(self, name, force=False):
        return self.write(tenants.delete_namespace, name, force)

    def namespace_policies(self, name):
        return self.read(lambda ctx: tenants.get_namespace(ctx, name).get("policies", {}))

    # -- topics ----------------------------------------------------------------------------
    def list_topics(self, namespace):
        return self.read(topics.list_topics, namespace)

    def create_topic(self, name):
        t = _topic(name)
        self.write(topics.create_topic, t)
        return str(t)

    def delete_topic(self, name, force=False):
        t = _topic(name)
        self.write(topics.delete_topic, t, force)
        return str(t)

    def topic_stats(self, name):
        t = _topic(name)
        return self.read(lambda ctx: stats.topic_stats(ctx, topics.require(ctx, t)))

    def internal_stats(self, name):
        t = _topic(name)
        return self.read(lambda ctx: stats.internal_stats(ctx, topics.require(ctx, t)))

    def list_subscriptions(self, name):
        t = _topic(name)
        return self.read(lambda ctx: [c.name for c in
                                      self.cursors.list(ctx.txn, topics.require(ctx, t).ml_id)])

    def last_message_id(self, name) -> MessageId:
        t = _topic(name)

        def run(ctx):
            info = topics.require(ctx, t)
            p = info.mark_position(info.last_offset)
            return MessageId(p.ledger_id, p.entry_id, t.partition_index)
        return self.read(run)

    def get_message_by_id(self, name, ledger_id: int, entry_id: int):
        t = _topic(name)

        def run(ctx):
            info = topics.require(ctx, t)
            mid = MessageId(ledger_id, entry_id, t.partition_index)
            o = subs.offset_of(ctx, info, mid)
            return message_from_entry(codec.decode(self.ledgers.read(ctx.txn, info, o)), mid, str(t))
        return self.read(run)

    def peek(self, name, subscription: str, n: int = 1):
        """peek-messages: from after mark-delete, skipping acked ones; changes nothing."""
        t = _topic(name)

        def run(ctx):
            info = topics.require(ctx, t)
            c = subs.require(ctx, info, subscription)
            replay = dict(subs.replay_items(ctx, c.id))
            pending = dict(subs.pending_items(ctx, c.id))
            out = []
            for o in self.cursors.unacked(ctx.txn, c, c.mark_delete + 1, info.next_offset):
                if len(out) >= n:
                    break
                p = info.position(o)
                rc = replay.get(o, pending.get(o, [None, None, 0])[2] if o in pending else 0)
                out.append(message_from_entry(codec.decode(self.ledgers.read(ctx.txn, info, o)),
                                              MessageId(p.ledger_id, p.entry_id, t.partition_index),
                                              str(t), rc))
            return out
        return self.read(run)

    # -- producing ---------------------------------------------------------------------------
    def check_sizes(self, messages):
        return self.read(producers.check_sizes, messages)

    def publish(self, name, messages, producer_name=None):
        t = _topic(name)
        return self.write(producers.publish, t, messages, producer_name, t.partition_index)

    # -- subscriptions and consumers ---------------------------------------------------------
    def create_subscription(self, name, subscription, position="Latest"):
        t = _topic(name)

        def run(ctx):
            info = topics.ensure(ctx, t)
            subs.create(ctx, info, subscription, position, exist_ok=False)
        self.write(run)

    def unsubscribe(self, name, subscription, force=False):
        t = _topic(name)
        self.write(lambda ctx: subs.unsubscribe(ctx, topics.require(ctx, t), subscription, force))

    def subscribe(self, name, subscription, consumer_name, sub_type="Exclusive",
                  position="Latest", *, priority=0, pid=None, pid_start=None, lease_ms=None,
                  fetch=0):
        """Create the subscription if needed and attach a consumer; with fetch > 0 also deliver
        up to that many messages in the same transaction."""
        t = _topic(name)
        sub_type = subs.normalize_type(sub_type)
        if sub_type == subs.KEY_SHARED:
            raise NotSupportedYet("Key_Shared subscriptions are not supported yet",
                                  hint="use Exclusive, Shared or Failover for now")

        def run(ctx):
            info = topics.ensure(ctx, t)
            c = subs.create(ctx, info, subscription, position, sub_type)
            rec = consumers.attach(ctx, info, c, consumer_name, sub_type, priority=priority,
                                   pid=pid, pid_start=pid_start, lease_ms=lease_ms)
            msgs = []
            if fetch:
                live = consumers.sweep(ctx, info, c)
                msgs = dispatch.fetch(ctx, info, c, rec, live, fetch, str(t), t.partition_index)
            return str(t), msgs
        return self.write(run)

    def fetch(self, name, subscription, consumer_name, max_n, acks=(), renew=False):
        """Apply acks (grouped, as the client's ack grouping does), then deliver up to max_n
        messages to the consumer — one transaction for both."""
        t = _topic(name)

        def run(ctx):
            info = topics.require(ctx, t)
            c = subs.require(ctx, info, subscription)
            if acks:
                subs.ack(ctx, info, c, subs.offsets_of(ctx, info, acks))
            live = consumers.sweep(ctx, info, c)
            rec = next((r for r in live if r["name"] == consumer_name), None)
            if rec is None:
                rec = consumers.require(ctx, c, consumer_name)  # raises: we were disconnected
            if renew:
                consumers.renew(ctx, c, [consumer_name])
            return dispatch.fetch(ctx, info, c, rec, live, max_n, str(t), t.partition_index)
        return self.write(run)

    def ack(self, name, subscription, ids, cumulative=False):
        """Acknowledge message ids. Any id that names no message: nothing is acked (exit 3)."""
        t = _topic(name)
        ids = list(ids)

        def run(ctx):
            info = topics.require(ctx, t)
            c = subs.require(ctx, info, subscription)
            offsets = subs.offsets_of(ctx, info, ids)
            if not offsets:
                return 0
            newly, holders = subs.ack(ctx, info, c, offsets, cumulative)
            consumers.renew(ctx, c, holders)
            return newly
        return self.write(run)

    def close_consumer(self, name, subscription, consumer_name, acks=()):
        t = _topic(name)

        def run(ctx):
            info = topics.lookup(ctx, t)
            if info is None:
                return
            c = subs.get(ctx, info, subscription)
            if c is None:
                return
            if acks:
                subs.ack(ctx, info, c, [subs.offset_of(ctx, info, m) for m in acks])
            consumers.detach(ctx, info, c, consumer_name)
        self.write(run)

    def consumers(self, name, subscription):
        t = _topic(name)

        def run(ctx):
            info = topics.require(ctx, t)
            c = subs.require(ctx, info, subscription)
            return stats.subscription_stats(ctx, info, c)["consumers"]
        return self.read(run)

    # -- reading (non-durable) -----------------------------------------------------------------
    def read_entries(self, name, start_offset: int | None, limit: int, after_id=None,
                     inclusive=False):
        """For readers: up to limit messages from an offset (or from a message id), in a read
        transaction. Returns (messages, next offset, last offset)."""
        t = _topic(name)

        def run(ctx):
            info = topics.require(ctx, t)
            start = start_offset
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
            start = max(start, info.first_offset)
            out = []
            nxt = start
            for o, lid, eid, raw in self.ledgers.scan(ctx.txn, info, start, start + limit):
                out.append(message_from_entry(codec.decode(raw),
                                              MessageId(lid, eid, t.partition_index), str(t)))
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
        return v

    def clock_state(self) -> dict:
        def run(ctx):
            state = self.env.get(ctx.txn, "meta", b"clock") or {"mode": "real"}
            return {"mode": state.get("mode", "real"), "now": ctx.now}
        return self.read(run)

    def clock_simulate(self, at_ms: int | None):
        def run(ctx):
            at = ctx.now if at_ms is None else at_ms
            self.env.put(ctx.txn, "meta", b"clock", {"mode": "simulated", "at": at})
            return at
        return self.write(run)

    def clock_advance(self, ms: int):
        if ms < 0:
            raise InvalidValue("the clock cannot go back", hint="give a positive duration")

        def run(ctx):
            state = self.env.get(ctx.txn, "meta", b"clock")
            if not state or state.get("mode") != "simulated":
                raise InvalidValue("the store runs on the real clock",
                                   hint="switch with `pulsarctl clock simulate` first")
            state["at"] += ms
            self.env.put(ctx.txn, "meta", b"clock", state)
            return state["at"]
        return self.write(run)

    def clock_real(self):
        self.write(lambda ctx: self.env.put(ctx.txn, "meta", b"clock", {"mode": "real"}))
