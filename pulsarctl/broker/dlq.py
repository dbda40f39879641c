"""Dead letter tooling: what the `dlq` commands do to a dead letter topic (CLI.md "Dead letters").

A dead letter topic keeps its messages until they are drained, replayed or purged. The commands
work through the DLQ's own durable subscription `pulsarctl-dlq`: what it has acknowledged is
handled; the rest (its backlog, or every message while it does not exist) is waiting. Drain,
replay and purge create it at Earliest on first use; list, stats and peek only read, and never
create it.

Replay republishes a dead letter (payload, key, ordering key, event time and properties kept;
REPLAY_COUNT added or incremented) and acknowledges it on `pulsarctl-dlq` in the same write
transaction, so a replay killed at any point neither loses nor duplicates a message. A dead
letter whose REPLAY_COUNT already reached the limit is refused: it stays in the DLQ.

Concurrency: drain, replay and purge of one DLQ hold an exclusive file lock in the store
directory (`dlq-<sha1 of the full topic name, 16 hex>.lock`, fcntl.flock) for the whole command,
so two of them never take the same message. The kernel drops the lock when its process dies.
"""
from __future__ import annotations

import os
from contextlib import contextmanager

import hashlib
import errno
import fcntl
from store import codec
from pulsarctl.broker import (
    chunks, topics, partitions, subscriptions as subs, batches, unpack, deadletter, policies,
    tenants, producers,
)
from pulsarctl.entries import batch_size, chunk_of, is_batch
from pulsarctl.errors import (
    Conflict, InvalidValue, LockBusy, StoreUnavailable, SubscriptionNotFound, TopicNotFound,
    UsageError, InvalidMessageId,
)
from pulsarctl.messages import (
    MessageId, OutgoingMessage, copied, iso_ms, message_from_entry, parse_message_id,
)
from pulsarctl.names import (
    DLQ_SUFFIX, ORIGIN_MESSAGE_ID, REAL_SUBSCRIPTION, REAL_TOPIC, RETRY_SUFFIX, TopicName,
    parse_topic, parse_namespace, check_subscription,
)
from store.ledger import LedgerInfo
from pulsarctl.replay import REPLAY_COUNT, replay_row
from pulsarctl.broker.routing import PartitionRouter

SUBSCRIPTION = "pulsarctl-dlq"
REPLAY_PRODUCER = "pulsarctl-dlq-replay"
DEFAULT_MAX_REPLAYS = 3
# `dlq stats` age buckets, by time since the message landed in the DLQ (its publish time there).
AGE_BUCKETS = (("<1m", 60_000), ("<1h", 3_600_000), ("<1d", 86_400_000),
               ("<7d", 7 * 86_400_000))
AGE_OLDEST = ">=7d"
NO_VALUE = "(none)"
ALL = 1 << 62  # a limit that is no limit
MISSING = 0    # the managed-ledger id of a missing DLQ read as empty (real ids start at 1)


def _topic(name) -> TopicName:
    return name if isinstance(name, TopicName) else parse_topic(name)


# -- the per-DLQ lock -------------------------------------------------------------------------
def lock_path(store_dir: str, topic) -> str:
    digest = hashlib.sha1(str(_topic(topic)).encode()).hexdigest()[:16]
    return os.path.join(store_dir, f"dlq-{digest}.lock")


@contextmanager
def locked(store_dir: str, topic, wait: bool = True):
    """Hold the DLQ's exclusive lock for the body. wait=False: LockBusy (exit 5) at once when
    another command holds it. The lock file names its holder's pid, for the message."""
    path = lock_path(store_dir, topic)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StoreUnavailable(f"cannot open the lock file {path}: {exc.strerror}",
                               hint="drain, replay and purge need a writable store directory"
                               ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            raise LockBusy(f"another dlq command is working on {_topic(topic)}"
                           + (f" (pid {holder})" if holder.isdigit() else ""),
                           hint="run again later, or without --no-wait to wait for it") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


# -- reading a DLQ ----------------------------------------------------------------------------
def open_dlq(ctx, t: TopicName, missing_ok: bool = False):
    """The DLQ's ledger info and its pulsarctl-dlq cursor (None until first drain/replay/purge).
    missing_ok: a DLQ that does not exist reads as an empty one (an empty ledger info that is
    stored nowhere), so nothing is created for it."""
    info = topics.lookup(ctx, t)
    if info is None:
        if not t.is_partition and partitions.get(ctx, t):
            raise InvalidValue(f"{t} is a partitioned topic; dlq commands take one topic",
                               hint=f"name one partition, e.g. {t.partition(0)}")
        if missing_ok:
            return LedgerInfo(MISSING, str(t)), None
        raise TopicNotFound(f"dead letter topic {t} does not exist",
                            hint="list dead letter topics with `pulsarctl dlq list`")
    return info, subs.get(ctx, info, SUBSCRIPTION)


def ensure_subscription(ctx, info):
    """pulsarctl-dlq, created at Earliest (so it takes everything the DLQ holds) if missing."""
    return subs.create(ctx, info, SUBSCRIPTION, "Earliest", subs.SHARED)


def unhandled(ctx, info, c, start: int | None = None):
    """Offsets of the messages pulsarctl-dlq has not acknowledged (all while it is missing)."""
    lo = info.first_offset if start is None else max(start, info.first_offset)
    if c is None:
        return iter(range(lo, info.next_offset))
    return ctx.cursors.unacked(ctx.txn, c, lo, info.next_offset)


def _runs(offsets):
    """[start, stop) runs of consecutive offsets."""
    run = None
    for o in offsets:
        if run is not None and o == run[1]:
            run[1] = o + 1
            continue
        if run is not None:
            yield run
        run = [o, o + 1]
    if run is not None:
        yield run


def waiting(ctx, info, t, c) -> int:
    """How many messages wait on pulsarctl-dlq, as peek, drain, replay and purge see them: an
    entry not acknowledged counts its messages (a batch the indexes not acknowledged yet, a
    chunked message once, at its last chunk). The cursor's backlog counts entries, which is
    not what a person means: a DLQ filled in batches of 1000 holds 1000 times more. The
    entries are read in bulk (their payloads are not expanded)."""
    if info.entries <= 0:
        return 0
    chunked = chunks.has_chunks(ctx, info)
    step, n = 4096, 0
    for start, stop in _runs(unhandled(ctx, info, c)):
        for lo in range(start, stop, step):
            _r, values = ctx.ledgers.scan_values(ctx.txn, info, lo, min(stop, lo + step))
            for o, rec in enumerate(codec.decode_many(values), lo):
                if is_batch(rec):
                    size = batch_size(rec)
                    done = batches.acked_indexes(ctx, c, o) if c is not None else ()
                    n += size - sum(1 for i in done if 0 <= i < size)
                elif chunked and chunk_of(rec) is not None:
                    m = chunk_of(rec)
                    n += m.is_last and len(chunks.group(ctx, info, o, rec)) >= m.num_chunks
                else:
                    n += 1
    return n


def read_message(ctx, info, t: TopicName, offset: int):
    """The message at offset (a batch's first message)."""
    p = info.position(offset)
    raw = ctx.ledgers.read(ctx.txn, info, offset)
    return unpack.first_message(codec.decode(raw), p.ledger_id, p.entry_id, t.partition_index,
                                str(t))


def read_messages(ctx, info, t: TopicName, c, offset: int, skip=None) -> list:
    """The messages at offset waiting on pulsarctl-dlq: a batch's messages (each with its
    batch index) not acknowledged yet, less the indexes in skip; a chunked dead letter as one
    message, as consumers see it, at its last chunk (its id the last chunk's), nothing at its
    other chunks (acking the message acks them: see dlq_ack) or when a chunk is gone."""
    p = info.position(offset)
    rec = codec.decode(ctx.ledgers.read(ctx.txn, info, offset))
    done, pieces = None, None
    if is_batch(rec):
        done = batches.acked_indexes(ctx, c, offset) if c is not None else set()
        done |= skip or set()
    elif chunk_of(rec) is not None:
        pieces = chunks.pieces(ctx, info, offset, rec)
        if pieces is None:
            return []
    return unpack.messages(rec, p.ledger_id, p.entry_id, t.partition_index, str(t),
                           skip=done, pieces=pieces)


def _wanted(ctx, info, ids) -> dict:
    """{offset: batch indexes wanted, or None for the whole entry} for message ids; an id that
    names no message of the DLQ is MessageNotFound. Ids in ledgers already trimmed were
    handled: left out."""
    out: dict = {}
    for mid in ids:
        got = subs.offsets_of(ctx, info, [mid])
        if not got:
            continue
        o = got[0]
        if mid.batch_index < 0:
            out[o] = None
        elif o not in out:
            out[o] = {mid.batch_index}
        elif out[o] is not None:
            out[o].add(mid.batch_index)
    return out


def matches(m, filters) -> bool:
    """Every (property, value) of filters equals the message's property."""
    props = m.properties_ or {}
    return all(props.get(k) == v for k, v in filters or ())


def id_offsets(ctx, info, ids) -> list[int]:
    """The offsets of message ids on this DLQ, sorted; an id that names no message of it is
    MessageNotFound (nothing is done). Ids in ledgers already trimmed were handled: left out."""
    return sorted(set(subs.offsets_of(ctx, info, ids)))


def select(ctx, info, t, c, after, limit: int, filters=None, ids=None, cutoff=None):
    """Up to limit waiting messages after the scan position `after` that pass the filters, the
    id list and the publish-time cutoff. Returns (messages, last position looked at, done). A
    position is an offset, or (offset, batch index) inside a batch entry, where a limit can
    fall. Publish times never go down along a topic, so the cutoff ends the scan."""
    after_o, after_i = after if isinstance(after, (tuple, list)) else (after, None)
    first = after_o + 1 if after_i is None else after_o
    wanted = None
    if ids is not None:
        wanted = _wanted(ctx, info, ids)
        cands = (o for o in sorted(wanted)
                 if o >= first and info.contains(o)
                 and not (c is not None and ctx.cursors.is_acked(ctx.txn, c, o)))
    else:
        cands = unhandled(ctx, info, c, first)
    out, last = [], after
    for o in cands:
        if len(out) >= limit:
            return out, last, False
        skip = set(range(after_i + 1)) if o == after_o and after_i is not None else None
        msgs = read_messages(ctx, info, t, c, o, skip)
        if msgs and cutoff is not None and msgs[0].publish_time >= cutoff:
            return out, last, True
        pick = wanted.get(o) if wanted is not None else None
        for m in msgs:
            if len(out) >= limit:
                return out, last, False
            last = (o, m.id.batch_index) if m.id.batch_index >= 0 else o
            if (pick is None or m.id.batch_index in pick) and matches(m, filters):
                out.append(m)
        last = o
    return out, last, True


def count(ctx, info, t, c, filters=None, ids=None, cutoff=None) -> int:
    if not filters and ids is None and cutoff is None:
        return waiting(ctx, info, t, c)
    n, after = 0, -1
    while True:
        got, after, done = select(ctx, info, t, c, after, 10_000, filters, ids, cutoff)
        n += len(got)
        if done:
            return n


# -- dlq list ---------------------------------------------------------------------------------
def _origins(ctx) -> tuple[dict, set]:
    """The dead letter topic of every subscription with a dead letter or retry policy:
    {dlq name: (origin topic, subscription)}, and the names of retry letter topics."""
    dlqs, retries = {}, set()
    for name, ml_id in list(ctx.ledgers.names(ctx.txn)):
        for c in ctx.cursors.list(ctx.txn, ml_id):
            policy = subs.state(c).policy
            if not (policy.get("maxRedeliverCount") or policy.get("deadLetterTopic")
                    or policy.get("enableRetry")):
                continue
            try:
                dl = str(parse_topic(deadletter.dlq_topic(name, c.name, policy)))
                origin = str(parse_topic(name).partitioned_topic_name)
            except UsageError:
                continue
            dlqs.setdefault(dl, (origin, c.name))
            if policy.get("retryLetterTopic"):
                retries.add(policy["retryLetterTopic"])
    return dlqs, retries


def _looks_dead(ctx, info, t) -> bool:
    """The first and the last stored message both carry REAL_TOPIC naming another topic (a
    message replayed to its origin names the topic it is on)."""
    if info.entries <= 0:
        return False
    for o in {info.first_offset, info.last_offset}:
        props = read_message(ctx, info, t, o).properties_ or {}
        real = props.get(REAL_TOPIC)
        if not real:
            return False
        try:
            if _topic(real).partitioned_topic_name == t.partitioned_topic_name:
                return False
        except UsageError:
            pass
    return True


def retention(ctx, t: TopicName) -> bool:
    """A retention policy in force on the topic (neither its time nor its size is 0)."""
    r = policies.effective(ctx, t, policies.RETENTION) or {}
    return bool(r.get("retentionTimeInMinutes")) and bool(r.get("retentionSizeInMB"))


def list_dlqs(ctx, namespace: str | None = None) -> list[dict]:
    if namespace:
        tenants.get_namespace(ctx, namespace)
        prefix = f"persistent://{namespace}/"
    else:
        prefix = ""
    origins, retries = _origins(ctx)
    out = []
    for name, ml_id in list(ctx.ledgers.names(ctx.txn, prefix)):
        if namespace and "/" in name[len(prefix):]:
            continue
        t = parse_topic(name)
        info = ctx.ledgers.info(ctx.txn, ml_id)
        cursors = ctx.cursors.list(ctx.txn, ml_id)
        c = next((x for x in cursors if x.name == SUBSCRIPTION), None)
        base = t.partitioned_topic_name.local_name
        is_dlq = (base.endswith(DLQ_SUFFIX) or name in origins or c is not None
                  or (not base.endswith(RETRY_SUFFIX) and name not in retries
                      and _looks_dead(ctx, info, t)))
        if is_dlq:
            out.append(_record(ctx, t, info, c, cursors, origins.get(name)))
    return out


def _record(ctx, t, info, c, cursors, origin) -> dict:
    n = waiting(ctx, info, t, c)
    first = next(iter(unhandled(ctx, info, c)), None) if n else None
    m = read_message(ctx, info, t, first) if first is not None else None
    if origin is None:
        sample = m
        if sample is None and info.entries > 0:
            sample = read_message(ctx, info, t, info.last_offset)
        props = (sample.properties_ or {}) if sample is not None else {}
        origin = (props.get(REAL_TOPIC), props.get(REAL_SUBSCRIPTION))
    return {
        "topic": str(t),
        "originTopic": _full_name(origin[0]),
        "originSubscription": origin[1],
        "backlog": n,
        "oldestPublishTime": iso_ms(m.publish_time) if m is not None else None,
        "oldestAgeMs": max(0, ctx.now - m.publish_time) if m is not None else None,
        "retained": bool(cursors),
        "retention": retention(ctx, t),
        "subscriptions": [x.name for x in cursors],
    }


def _full_name(name):
    try:
        return str(_topic(name)) if name else None
    except UsageError:
        return name


# -- dlq stats --------------------------------------------------------------------------------
def age_bucket(age_ms: int) -> str:
    for name, limit in AGE_BUCKETS:
        if age_ms < limit:
            return name
    return AGE_OLDEST


def stats(ctx, t, info, c, by_property: str | None) -> dict:
    by_topic: dict = {}
    by_sub: dict = {}
    by_prop: dict = {}
    ages = {name: 0 for name, _ in AGE_BUCKETS}
    ages[AGE_OLDEST] = 0
    total, oldest, newest = 0, None, None
    for m in (m for o in unhandled(ctx, info, c) for m in read_messages(ctx, info, t, c, o)):
        props = m.properties_ or {}
        total += 1
        oldest = m.publish_time if oldest is None else oldest
        newest = m.publish_time
        for counts, key in ((by_topic, REAL_TOPIC), (by_sub, REAL_SUBSCRIPTION),
                            (by_prop, by_property)):
            if key is not None:
                v = props.get(key, NO_VALUE)
                counts[v] = counts.get(v, 0) + 1
        ages[age_bucket(max(0, ctx.now - m.publish_time))] += 1
    doc = {
        "topic": str(t), "total": total,
        "oldestPublishTime": iso_ms(oldest), "newestPublishTime": iso_ms(newest),
        "byRealTopic": _sorted(by_topic), "byRealSubscription": _sorted(by_sub),
        "byAge": ages,
    }
    if by_property is not None:
        doc["byProperty"] = {"name": by_property, "counts": _sorted(by_prop)}
    return doc


def _sorted(counts: dict) -> dict:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


# -- dlq replay -------------------------------------------------------------------------------
def _retry_topic(ctx, origin: TopicName, subscription: str) -> TopicName:
    """The retry letter topic of a subscription of the origin (it must exist, retry enabled)."""
    for p in partitions.expand(ctx, origin):
        info = topics.lookup(ctx, p)
        c = subs.get(ctx, info, subscription) if info is not None else None
        if c is None:
            continue
        policy = subs.state(c).policy
        if not policy.get("enableRetry") or not policy.get("retryLetterTopic"):
            raise Conflict(f"retry is not enabled on subscription '{subscription}' of {origin}: "
                           f"nothing reads its retry letter topic",
                           hint="consume with --enable-retry first, or replay without "
                                "--subscription")
        return _topic(policy["retryLetterTopic"])
    raise SubscriptionNotFound(f"subscription '{subscription}' not found on {origin}",
                               hint=f"list them with `pulsarctl topics subscriptions {origin}`")


class _Routes:
    """Where each replayed message goes: the topic, or for a partitioned topic the partition
    its ORIGIN_MESSAGE_ID names (replaying to the origin), else by key hash or round robin."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.routers: dict = {}

    def partition(self, target: TopicName, m, to_origin: bool) -> TopicName:
        if target.is_partition:
            return target
        n = partitions.get(self.ctx, target)
        if not n:
            return target
        if to_origin:
            try:
                i = parse_message_id((m.properties_ or {}).get(ORIGIN_MESSAGE_ID, "")).partition
            except InvalidMessageId:
                i = -1
            if 0 <= i < n:
                return target.partition(i)
        router = self.routers.get(str(target))
        if router is None:
            router = self.routers[str(target)] = PartitionRouter(n)
        return target.partition(router.choose(m.key, self.ctx.now))


def replay(ctx, t, ids, to=None, subscription=None, max_replays=DEFAULT_MAX_REPLAYS,
           dry_run=False, max_failures: int | None = None) -> list[dict]:
    """Republish the dead letters with these ids and ack them on pulsarctl-dlq, all in this
    transaction (with dry_run: only say what would happen). Ids already handled are left out.
    Returns one result per message: action replayed|skipped|failed (would-replay and
    would-skip on a dry run), target, newMessageId, replayCount, reason. max_failures: stop
    after that many failed (the messages after it are neither replayed nor in the results)."""
    info, c = open_dlq(ctx, t)
    if not dry_run:
        c = ensure_subscription(ctx, info)
    wanted = _wanted(ctx, info, ids)
    to_t = _topic(to) if to else None
    routes = _Routes(ctx)
    retry_topics: dict = {}
    results, acks, batch_acks = [], [], []

    def units():
        """(message, chunk copy, offsets its ack covers; None: ack its batch index)."""
        taken: set = set()  # chunks of a chunked dead letter replayed (or judged) with its first
        for o in sorted(wanted):
            if o in taken or (c is not None and ctx.cursors.is_acked(ctx.txn, c, o)):
                continue
            rec = codec.decode(ctx.ledgers.read(ctx.txn, info, o))
            if is_batch(rec):
                pick = wanted[o]
                for m in read_messages(ctx, info, t, c, o):
                    if pick is None or m.id.batch_index in pick:
                        yield m, None, None
                continue
            copy = chunks.copy_of(ctx, info, o, rec)  # a chunked message is replayed whole
            group = copy[0] if copy else [o]
            taken.update(group)
            m = read_message(ctx, info, t, copy[1]) if copy else message_from_entry(
                rec, MessageId(*info.position(o), t.partition_index), str(t))
            yield m, copy, group

    failed = 0
    for m, copy, group in units():
        if max_failures is not None and failed >= max_failures:
            break
        props = dict(m.properties_ or {})
        r = replay_row(m, max_replays, dry_run)
        rc = r["replayCount"]
        results.append(r)
        if r["action"]:
            continue
        origin = to_t
        if origin is None:
            real = props.get(REAL_TOPIC)
            try:
                origin = _topic(real) if real else None
            except UsageError:
                origin = None
            if origin is None:
                r["action"] = "failed"
                r["reason"] = (f"invalid {REAL_TOPIC} {real!r}" if real else
                               f"no {REAL_TOPIC} property") + "; replay it with --to TOPIC"
                failed += 1
                continue
        if subscription is not None:
            key = str(origin)
            if key not in retry_topics:
                retry_topics[key] = _retry_topic(ctx, origin, subscription)
            target = retry_topics[key]

            props.setdefault(REAL_TOPIC, str(origin.partitioned_topic_name))
            props.setdefault(ORIGIN_MESSAGE_ID, str(m.id))
            # A fresh retry budget: the next reconsume-later counts from 1 again.
            props[deadletter.RECONSUMETIMES] = "0"
            props[deadletter.DELAY_TIME] = "0"
        else:
            target = routes.partition(origin, m, to_t is None)
        props[REPLAY_COUNT] = str(rc + 1)
        r["target"], r["replayCount"] = str(target), rc + 1
        if target.partitioned_topic_name == t.partitioned_topic_name:
            r["action"] = "failed"
            r["reason"] = "its target is the dead letter topic itself; replay it with --to TOPIC"
            failed += 1
            continue
        if dry_run:
            r["action"] = "would-replay"
            continue
        out = copied(m, OutgoingMessage(m.payload, props, m.key, m.ordering_key_, m.event_time))
        out.chunks = copy[2] if copy else None
        _name, new_ids = producers.publish(ctx, target, [out], REPLAY_PRODUCER,
                                           target.partition_index)
        r["action"], r["newMessageId"] = "replayed", str(new_ids[0])
        if group is None:
            batch_acks.append(m.id)
        else:
            acks.extend(group)
    if batch_acks:
        acks.extend(batches.resolve(ctx, info, c, batch_acks)[0])
    if acks:
        subs.ack(ctx, info, c, acks)
    elif batch_acks:
        ctx.cursors.save(ctx.txn, c)
    return results


# -- the handle the Broker gives out: broker.dlq(topic) -------------------------------------------
def list_all(broker, namespace: str | None = None) -> list[dict]:
    """Every dead letter topic (of a namespace), with what waits in it (Broker.dlqs)."""
    if namespace:
        parse_namespace(namespace)
    return broker._read(list_dlqs, namespace)


class Dlq:
    """One dead letter topic and its subscription pulsarctl-dlq. Each method is one transaction
    (a read one where it changes nothing). missing_ok: a DLQ that does not exist is an empty
    one."""
    __slots__ = ("_broker", "topic")

    def __init__(self, broker, topic):
        self._broker = broker
        self.topic = _topic(topic)

    def stats(self, by_property: str | None = None, missing_ok: bool = False) -> dict:
        """Counts of the waiting dead letters (messages, not entries)."""
        t = self.topic
        return self._broker._read(
            lambda ctx: stats(ctx, t, *open_dlq(ctx, t, missing_ok), by_property))

    def peek(self, n: int = 10, filters=None, missing_ok: bool = False) -> list:
        """The first n waiting dead letters (n=0: all) that pass the filters; changes nothing."""
        t = self.topic

        def run(ctx):
            info, c = open_dlq(ctx, t, missing_ok)
            # n=0: no limit (not the entry count: a batch entry holds many messages)
            return select(ctx, info, t, c, -1, n or ALL, filters)[0]
        return self._broker._read(run)

    def check(self, missing_ok: bool = False) -> bool:
        """Whether the DLQ exists: a missing one is TopicNotFound (exit 3), or False with
        missing_ok; a partitioned topic's name is InvalidValue. Creates nothing."""
        t = self.topic
        return self._broker._read(lambda ctx: open_dlq(ctx, t, missing_ok)[0].ml_id != MISSING)

    def count(self, filters=None, ids=None, older_than_ms: int | None = None,
              missing_ok: bool = False) -> int:
        """How many waiting dead letters (messages) pass the filters, the ids and the age
        limit."""
        t = self.topic

        def run(ctx):
            info, c = open_dlq(ctx, t, missing_ok)
            cutoff = ctx.now - older_than_ms if older_than_ms is not None else None
            return count(ctx, info, t, c, filters, ids, cutoff)
        return self._broker._read(run)

    def subscribe(self) -> bool:
        """Create pulsarctl-dlq at Earliest if it is missing. Returns whether it was created."""
        t = self.topic

        def run(ctx):
            info, c = open_dlq(ctx, t)
            if c is None:
                ensure_subscription(ctx, info)
            return c is None
        return self._broker._write(run)

    def fetch(self, after: int = -1, limit: int = 100, filters=None, ids=None,
              older_than_ms: int | None = None) -> dict:
        """The next waiting dead letters after the scan position `after` (-1: from the start):
        {"messages", "after" (pass it to the next call), "done"}. Reads only."""
        t = self.topic

        def run(ctx):
            info, c = open_dlq(ctx, t)
            cutoff = ctx.now - older_than_ms if older_than_ms is not None else None
            msgs, last, done = select(ctx, info, t, c, after, limit, filters, ids, cutoff)
            return {"messages": msgs, "after": last, "done": done}
        return self._broker._read(run)

    def ack(self, ids) -> int:
        """Acknowledge dead letters on pulsarctl-dlq (they are handled). Returns how many."""
        t = self.topic
        ids = list(ids)

        def run(ctx):
            info, _c = open_dlq(ctx, t)
            c = ensure_subscription(ctx, info)
            if any(m.batch_index >= 0 for m in ids):
                # A batch's dead letters are handled one by one: acked by their batch index.

                offsets, newly, completed, _held = batches.resolve(ctx, info, c, ids)
                n = newly - completed
                if offsets:
                    n += subs.ack(ctx, info, c, sorted(set(offsets)))[0]
                else:
                    ctx.cursors.save(ctx.txn, c)
                return n
            offsets = id_offsets(ctx, info, ids)
            if not offsets:
                return 0
            # A chunked dead letter's id is its last chunk's: its other chunks go with it.
            rest = chunks.earlier(ctx, info, offsets)
            n = subs.ack(ctx, info, c, sorted(set(offsets) | set(rest)))[0]
            return n - len(rest) if rest else n
        return self._broker._write(run)

    def replay(self, ids, *, to=None, subscription: str | None = None,
               max_replays: int = DEFAULT_MAX_REPLAYS, dry_run: bool = False,
               max_failures: int | None = None) -> list[dict]:
        """Replay these dead letters: republish and ack in one write transaction (a read one
        for dry_run). to=None replays each to its REAL_TOPIC; subscription replays through that
        subscription's retry letter topic; max_failures stops after that many failed."""
        t = self.topic
        ids = list(ids)
        if max_replays < 0:
            raise InvalidValue(f"--max-replays must be zero or more, not {max_replays}")
        if to is not None and _topic(to).partitioned_topic_name == t.partitioned_topic_name:
            raise InvalidValue(f"cannot replay {t} into itself", hint="give another --to TOPIC")
        if subscription is not None:
            check_subscription(subscription)
        run = (self._broker._read if dry_run else self._broker._write)
        return run(replay, t, ids, to, subscription, max_replays, dry_run, max_failures)

    def lock(self, wait: bool = True):
        """A context manager holding the DLQ's exclusive lock (LockBusy when wait=False and
        another command holds it)."""
        return locked(self._broker.path, self.topic, wait)
