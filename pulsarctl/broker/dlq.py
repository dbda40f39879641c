"""Dead letter tooling: a dead letter topic as the `dlq` commands see it (CLI.md "Dead letters").

A dead letter topic keeps its messages until they are drained, replayed or purged. The commands
work through the DLQ's own durable subscription `pulsarctl-dlq`: what it has acknowledged is
handled; the rest (its backlog, or every message while it does not exist) is waiting. Drain,
replay and purge create it at Earliest on first use; list, stats and peek only read, and never
create it.

This module holds what every `dlq` command shares: the per-DLQ lock and reading the waiting
dead letters (messages, not entries: a batch counts each of its messages). What one command
does on top is apart: dlq_list.py (finding the DLQs), dlq_stats.py (counting them),
dlq_replay.py (republishing them); broker.dlq(topic), the handle over all of them, is
broker/admin/dlq.py.

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
from pulsarctl.broker import chunks, topics, partitions, subscriptions as subs, batches, unpack
from pulsarctl.entries import batch_size, chunk_of, is_batch
from pulsarctl.errors import InvalidValue, LockBusy, StoreUnavailable, TopicNotFound
from pulsarctl.names import TopicName, parse_topic
from store.ledger import LedgerInfo

SUBSCRIPTION = "pulsarctl-dlq"
ALL = 1 << 62  # a limit that is no limit
MISSING = 0    # the managed-ledger id of a missing DLQ read as empty (real ids start at 1)


def as_topic(name) -> TopicName:
    return name if isinstance(name, TopicName) else parse_topic(name)


# -- the per-DLQ lock -------------------------------------------------------------------------
def lock_path(store_dir: str, topic) -> str:
    digest = hashlib.sha1(str(as_topic(topic)).encode()).hexdigest()[:16]
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
            raise LockBusy(f"another dlq command is working on {as_topic(topic)}"
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


def wanted_offsets(ctx, info, ids) -> dict:
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
        wanted = wanted_offsets(ctx, info, ids)
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

