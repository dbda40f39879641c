"""Migration between the local store and a remote Pulsar (`pulsarctl migrate`).

Up (`--to CONTEXT`): tenants, namespaces and their policies, topics and partitions, the
subscriptions with their cursor positions, and the unacknowledged backlog (payload, key,
ordering key, properties, event time), from the local store to the remote target. Down
(`--from CONTEXT TOPIC..`): the messages of remote topics (a range by publish time, or what a
subscription has not acknowledged: a DLQ, say) into the local store.

Idempotent and resumable: every copied message carries the property MIGRATED_FROM, the id it
had at its source; a run starts each topic (each partition) after the last message the
destination already holds from it, so a second run copies nothing, and an interrupted one goes
on where it stopped. Up, messages are sent unbatched, at most WINDOW waiting for their receipts
at a time (one producer keeps them in order; the next is sent as soon as a receipt is back),
and counted as copied once their receipt is back: a crash loses none, and repeats at most
those whose receipts had not come back (at-least-once). Down, they are stored WINDOW a
transaction.

Cursor positions up: a subscription the remote topic does not have yet is created at the end
of it before the backlog is copied (so the whole copy is its backlog), then moved past the
copied messages its local mark-delete position covers (skip), and the copies of the messages
it acknowledged one by one after that position (whole entries, or messages of a batch) are
acknowledged on it by their new ids, as the copy got them: the same messages stay
unacknowledged. A subscription that exists on the target already is left as it is (a second
run changes nothing), so one created by a run interrupted before its skip and acks keeps the
whole copy as backlog: more to consume, never less.

Down copies messages, not cursors: with --subscription, what it has not acknowledged (from
its mark-delete position, without its individually deleted ranges) lands in the local topic,
which has no subscription of that name until one is made."""
from __future__ import annotations

from pulsarctl.errors import AlreadyExists, Conflict, NotFound, PulsarctlError
from pulsarctl.messages import MessageId, OutgoingMessage, parse_message_id
from pulsarctl.names import parse_topic

MIGRATED_FROM = "MIGRATED_FROM"
READ_MS = 10_000
ALL_INDEXES = 1 << 31  # a key past every batch index of an entry
WINDOW = 1000  # up: messages in flight at a time; down: messages a local transaction


def _id_key(text: str | None):
    if not text:
        return None
    try:
        m = parse_message_id(text)
    except PulsarctlError:
        return None
    return (m.ledger_id, m.entry_id, m.batch_index)


def _quietly(fn, *args):
    """Run a create; one that exists already is what a second run finds (idempotent)."""
    try:
        fn(*args)
        return True
    except (AlreadyExists, Conflict):
        return False


class Summary:
    def __init__(self):
        self.counts = {"tenants": 0, "namespaces": 0, "policies": 0, "topics": 0,
                       "subscriptions": 0, "messages": 0}
        self.warnings: list[str] = []

    def doc(self) -> dict:
        return {**self.counts, "warnings": self.warnings}


# -- up: the local store to a remote Pulsar ----------------------------------------------------------
def _last_marker_remote(remote, topic: str):
    """The MIGRATED_FROM of the remote topic's last message (None: it has none)."""
    try:
        last = remote.topics.last_message_id(topic)
    except NotFound:
        return None
    if last.entry_id < 0:
        return None
    try:
        msgs = remote.topics.get_message_by_id(topic, last.ledger_id, last.entry_id)
    except NotFound:
        return None
    return _id_key((msgs.properties_ or {}).get(MIGRATED_FROM))


def _copy(read_source, sink, after_key, keep=lambda m: True, stop=lambda m: False,
          progress=None) -> list:
    """Read every message of the source, send those after after_key that keep() allows, until
    stop(); returns (the source id, the id it got at the destination) of each sent, in order.
    sink: send(out) -> how many have been stored so far (for the progress count), and
    finish() -> the ids they got, in order, once all are stored."""
    sources, shown = [], 0

    def show(stored):
        nonlocal shown
        if progress is not None and stored > shown:
            progress(stored - shown)
            shown = stored

    while read_source.has_message_available():
        m = read_source.read_next(READ_MS)
        k = (m.id.ledger_id, m.id.entry_id, m.id.batch_index)
        if after_key is not None and k <= after_key:
            continue
        if stop(m):
            break
        if not keep(m):
            continue
        props = dict(m.properties_ or {})
        props[MIGRATED_FROM] = str(m.id)
        sources.append(m.id)
        show(sink.send(OutgoingMessage(m.payload, props, m.key, m.ordering_key_, m.event_time)))
    got = sink.finish()
    show(len(got))
    return list(zip(sources, got))


class _Windows:
    """A sink of the local store's producer: WINDOW messages a transaction."""

    def __init__(self, producer):
        self.producer, self.window, self.ids = producer, [], []

    def _flush(self):
        if self.window:
            self.ids += self.producer.send_many(self.window, batching=False)
            self.window = []

    def send(self, out) -> int:
        self.window.append(out)
        if len(self.window) >= WINDOW:
            self._flush()
        return len(self.ids)

    def finish(self) -> list:
        self._flush()
        return self.ids


def up(broker, remote, conn, only=None, backlog: bool = True, progress=None) -> dict:
    """Copy the local store (or only these namespaces / topics) to the remote target. conn: a
    remote/data.py Connection for the messages."""
    # lazy: the local client reads the store's topics
    from pulsarctl.client import Client

    s = Summary()
    only = list(only or [])
    want_ns = {o for o in only if o.count("/") == 1 and "://" not in o}
    want_topics = {str(parse_topic(o)) for o in only if o not in want_ns}
    local = Client(broker=broker)
    remote_tenants = set(remote.tenants.list() or [])
    for tenant in broker.tenants.list():
        spaces = [ns for ns in broker.namespaces.list(tenant)
                  if not only or ns in want_ns
                  or any(t.startswith(f"persistent://{ns}/") for t in want_topics)]
        if not spaces:
            continue
        if tenant not in remote_tenants:
            info = broker.tenants.get(tenant) or {}
            if _quietly(remote.tenants.create, tenant, info.get("adminRoles") or ()):
                s.counts["tenants"] += 1
        for ns in spaces:
            if _quietly(remote.namespaces.create, ns):
                s.counts["namespaces"] += 1
            _policies(broker, remote, ns, s)
            _topics(broker, remote, conn, local, ns, want_topics if only and ns not in want_ns
                    else None, backlog, s, progress)
    return s.doc()


def _policies(broker, remote, ns, s: Summary) -> None:
    # lazy: the REST resources of each policy field
    from pulsarctl.remote.admin import BACKLOG_QUOTA, NS_RESOURCE

    pol = broker.namespaces.policies(ns) or {}
    for field in list(NS_RESOURCE) + [BACKLOG_QUOTA]:
        value = pol.get(field)
        if value in (None, {}, []):
            continue
        try:
            remote.policies.set("namespace", ns, field, value)
            s.counts["policies"] += 1
        except PulsarctlError as exc:
            s.warnings.append(f"{ns}: {field} not set: {exc}")


def _topics(broker, remote, conn, local, ns, only, backlog, s: Summary, progress) -> None:
    names = [t for t in broker.topics.list(ns) if t.startswith("persistent://")]
    partitioned = set(broker.topics.list_partitioned(ns) or [])
    remote_topics = set(remote.topics.list(ns) or []) | set(
        remote.topics.list_partitioned(ns) or [])
    for p in partitioned:
        if only is not None and p not in only:
            continue
        n = int(broker.topics.partitioned_metadata(p).get("partitions") or 0)
        if p not in remote_topics and _quietly(remote.topics.create_partitioned, p, n):
            s.counts["topics"] += 1
    for t in names:
        tn = parse_topic(t)
        base = str(tn.partitioned_topic_name) if tn.is_partition else t
        if only is not None and base not in only:
            continue
        if not tn.is_partition and t not in remote_topics:
            if _quietly(remote.topics.create, t):
                s.counts["topics"] += 1
        _subscriptions_and_backlog(broker, remote, conn, local, t, backlog, s, progress)


def _subscriptions_and_backlog(broker, remote, conn, local, t, backlog, s, progress) -> None:
    cursors = (broker.topics.internal_stats(t) or {}).get("cursors") or {}
    have = set(remote.topics.subscriptions(t) or [])
    made = []
    for sub in cursors:
        if sub not in have:
            remote.subscription(t, sub).create(MessageId.latest)
            made.append(sub)
            s.counts["subscriptions"] += 1
    if not backlog or not cursors:
        return
    # the backlog: what the least advanced subscription has not acknowledged
    # a mark-delete position is a whole entry: every message of a batch there is acknowledged
    marks = {sub: _entry_end(_id_key(c.get("markDeletePosition")) or (-1, -1, -1))
             for sub, c in cursors.items()}
    low = min(marks.values())
    resume = _last_marker_remote(remote, t)
    after = max(low, resume) if resume is not None else low
    reader = local.create_reader(t, MessageId(after[0], after[1], parse_topic(t).partition_index)
                                 if after[0] >= 0 else MessageId.earliest)
    # The library's queue holds more than the window: the window (Stream) is what waits.
    producer = conn.producer(t, batching_enabled=False, block_if_queue_full=True,
                             max_pending_messages=2 * WINDOW)
    try:
        sent = _copy(reader, producer.stream(WINDOW), after, progress=progress)
    finally:
        producer.close()
        reader.close()
    s.counts["messages"] += len(sent)
    for sub in made:
        covered = sum(1 for i, _r in sent if _key(i) <= marks[sub])
        if covered:
            remote.subscription(t, sub).skip(covered)
        acked = _acked_past_mark(broker, t, sub, marks[sub], sent)
        if acked:
            consumer = conn.consumer(t, sub, consumer_type=conn.pulsar.ConsumerType.Shared,
                                     receiver_queue_size=0)
            try:
                consumer.acknowledge_ids(acked)
            finally:
                consumer.close()


def _entry_end(k):
    return (k[0], k[1], ALL_INDEXES) if k[0] >= 0 else k


def _key(i: MessageId):
    return (i.ledger_id, i.entry_id, i.batch_index)


def _acked_past_mark(broker, t, sub, mark, sent) -> list:
    """The destination ids of the copies of what `sub` acknowledged one by one past its
    mark-delete position (whole entries or a batch's messages): the copied messages after the
    mark that the subscription's peek, which leaves the acknowledged out, does not hold."""
    past = [(i, r) for i, r in sent if _key(i) > mark]
    if not past:
        return []
    unacked = {_key(m.id) for m in broker.subscription(t, sub).peek(1 << 62)}
    return [r for i, r in past if _key(i) not in unacked]


# -- down: a remote Pulsar's topics to the local store -----------------------------------------------
def _last_marker_local(broker, topic: str):
    try:
        last = broker.topics.last_message_id(topic)
        if last.entry_id < 0:
            return None
        m = broker.topics.get_message_by_id(topic, last.ledger_id, last.entry_id)
    except (NotFound, PulsarctlError):
        return None
    return _id_key((m.properties_ or {}).get(MIGRATED_FROM))


def down(broker, remote, conn, topics, subscription=None, since_ms=None, until_ms=None,
         progress=None) -> dict:
    """Copy remote topics (each partition) into the local store: all, a publish-time range,
    or what `subscription` has not acknowledged (from its mark-delete position, without the
    individually acknowledged)."""
    # lazy: the local client writes the store's topics
    from pulsarctl.client import Client
    # lazy: the acked ranges as `topics cursor` reads them
    from pulsarctl.remote.cursor import _Ledgers, acked_ranges

    s = Summary()
    local = Client(broker=broker)
    for topic in topics:
        tn = parse_topic(topic)
        name = str(tn)
        if tn.tenant not in (broker.tenants.list() or []) and _quietly(
                broker.tenants.create, tn.tenant):
            s.counts["tenants"] += 1
        if tn.namespace not in (broker.namespaces.list(tn.tenant) or []) and _quietly(
                broker.namespaces.create, tn.namespace):
            s.counts["namespaces"] += 1
        n = remote.topics.partitions(name)
        if n:
            try:
                broker.topics.create_partitioned(name, n)
                s.counts["topics"] += 1
            except (AlreadyExists, Conflict):
                pass
        for part in remote.topics.partition_names(name):
            start, skip = MessageId.earliest, lambda m: False
            if subscription is not None:
                internal = remote.topics.internal_stats(part) or {}
                cur = (internal.get("cursors") or {}).get(subscription)
                if cur is None:
                    raise NotFound(f"subscription '{subscription}' not found on {part}")
                led = _Ledgers(internal)
                ranges = acked_ranges(cur.get("individuallyDeletedMessages"), led)
                lid, _, eid = (cur.get("markDeletePosition") or "-1:-1").partition(":")
                if int(lid) >= 0:
                    start = MessageId(int(lid), int(eid), parse_topic(part).partition_index)

                def skip(m, led=led, ranges=ranges):
                    o = led.offset(m.id.ledger_id, m.id.entry_id)
                    return any(lo < o <= hi for lo, hi in ranges)
            resume = _last_marker_local(broker, part)
            reader = conn.reader(part, start)
            producer = local.create_producer(part)
            try:
                sent = _copy(
                    reader, _Windows(producer), resume,
                    keep=lambda m: not skip(m) and (since_ms is None or m.publish_time >= since_ms),
                    stop=lambda m: until_ms is not None and m.publish_time > until_ms,
                    progress=progress)
            finally:
                producer.close()
                reader.close()
            s.counts["messages"] += len(sent)
    return s.doc()
