"""Tiered storage: closed ledgers offloaded to Parquet files, as Pulsar offloads them to object
storage.

`topics offload T --size-threshold S | --older-than D --to DIR` picks a topic's oldest closed
ledgers (keeping at most S bytes in the store, as pulsar-admin's threshold does, or every ledger
whose entries were all published before now - D), writes each one as
DIR/<tenant>/<namespace>/<topic>/ledger-<id>.parquet, fsyncs it, and only then, in one write
transaction, records the file in the ledger's row and deletes its entries from LMDB
(store/ledger.py). A crash before that commit leaves a spare file that the next run overwrites;
the ledger stays in the store. After the commit, the topic's manifest.json is written again from
the store's rows, so it always lists what the store holds.

A file has one row per message (a batch entry gives one per batch index), in entry order, plus
one row for each entry that is no message by itself (a chunk before a message's last), with
    __ledgerId, __entryId       where the entry was
    __entry                     the stored entry, byte for byte, on the entry's first row (null
                                on the others): what consumers, readers and peek read back, so
                                an offloaded message is delivered exactly as it was
                                (compression, batches, chunks, schema version, properties)
    __visible                   true on rows that are messages (a chunked message is its last
                                chunk's row; its other chunks are false)
    value, __key, __topic, __messageId, __publishTime, __eventTime, __messageProperties,
    __producerName, __sequenceId, __redeliveryCount
                                the Spark data source's columns, so any Spark cluster reads the
                                files with its own Parquet reader (filter on __visible)
The payload is therefore held twice (value decompressed and joined, __entry as stored); Parquet's
zstd compression takes back much of it.

Reading an offloaded ledger needs pyarrow (the spark extra), as writing one does. The columns
and their record batches are pulsarctl/arrow_columns.py's, and the entries are scanned as
readers see them by pulsarctl/broker/scan.py, both below the Spark data source: the broker
side never imports pulsarctl.spark.
"""
from __future__ import annotations

import json
import os
from collections import OrderedDict

# The data source's columns (arrow_columns imports pyarrow only when called: the plain install
# has no pyarrow).
from pulsarctl.arrow_columns import arrow_schema as columns, record_batch
from pulsarctl.entries import F_PUBLISH_TIME
from pulsarctl.errors import (
    InvalidValue, OffloadedLedgerMissing, OffloadUnavailable, PulsarctlError, TopicNotFound,
)
from pulsarctl.names import TopicName, parse_topic
from pulsarctl.broker import partitions, topics
from store.ledger_row import LedgerRow, rows as ledger_rows

MANIFEST = "manifest.json"
EXTRA = ("__ledgerId", "__entryId", "__entry", "__visible")


def _pyarrow():
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise OffloadUnavailable("offloaded ledgers are Parquet files and pyarrow is not "
                                 "installed") from None
    import pyarrow as pa  # lazy: pyarrow is costly to import or optional
    import pyarrow.parquet as pq  # lazy: pyarrow is costly to import or optional
    return pa, pq


# -- reading back ------------------------------------------------------------------------------
# Consumers read an offloaded ledger entry by entry; the file is read whole once and kept (by
# path and modification time), a few ledgers at a time.
_CACHE: OrderedDict = OrderedDict()
_CACHE_LEDGERS = 4


def read_ledger(location: str, ledger_id: int, entries: int) -> list[bytes]:
    """The entries of an offloaded ledger, by entry id (store/ledger.py's offloaded_reader)."""
    try:
        st = os.stat(location)
    except OSError as exc:
        raise OffloadedLedgerMissing(f"ledger {ledger_id} was offloaded to {location}, which "
                                     f"cannot be read: {exc.strerror}") from None
    key = (location, st.st_mtime_ns, st.st_size)
    got = _CACHE.get(location)
    if got is not None and got[0] == key:
        _CACHE.move_to_end(location)
        return got[1]
    _pa, pq = _pyarrow()
    try:
        table = pq.read_table(location, columns=["__ledgerId", "__entryId", "__entry"])
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds for a bad file
        raise OffloadedLedgerMissing(f"ledger {ledger_id}: {location} is not a readable "
                                     f"offloaded ledger ({exc})") from None
    table = table.filter(table.column("__entry").is_valid())  # one row per entry has it
    ids = table.column("__entryId").to_pylist()
    lids = set(table.column("__ledgerId").to_pylist())
    if ids != list(range(entries)) or lids - {ledger_id}:
        raise OffloadedLedgerMissing(f"ledger {ledger_id}: {location} holds other entries "
                                     f"than the store recorded ({len(ids)}, not {entries})")
    data = table.column("__entry").to_pylist()
    _CACHE[location] = (key, data)
    while len(_CACHE) > _CACHE_LEDGERS:
        _CACHE.popitem(last=False)
    return data


# -- writing -----------------------------------------------------------------------------------
def topic_dir(root: str, t: TopicName) -> str:
    return os.path.join(root, t.tenant, t.namespace_portion, t.local_name)


def arrow_schema():
    pa, _pq = _pyarrow()
    return pa.schema(list(columns()) + [
        pa.field("__ledgerId", pa.int64()), pa.field("__entryId", pa.int64()),
        pa.field("__entry", pa.binary()), pa.field("__visible", pa.bool_())])


def ledger_table(ctx, info, t: TopicName, row: LedgerRow):
    """The Arrow table of one closed ledger (see the module's docstring)."""
    pa, _pq = _pyarrow()
    # pulsarctl.broker loads this module (broker/service.py): its modules are imported when
    # called, as below
    from pulsarctl.broker.scan import scan_messages

    lid, first, n = row.ledger_id, row.first_offset, row.entries
    rows, wrows, wrecs = scan_messages(ctx, info, first, first + n)
    msgs = record_batch(pa.schema(list(columns())), str(t), t.partition_index, wrows, wrecs)
    # A row per message (a batch gives several per entry) and one per entry that is no message
    # (a chunk before the last); the entry's bytes go on its first row only.
    at: dict = {}
    for i, r in enumerate(wrows):
        at.setdefault(r[0], []).append(i)
    take, eids, raws = [], [], []
    for r in rows:
        idx = at.get(r[0]) or [None]
        take += idx
        eids += [r[2]] * len(idx)
        raws += [bytes(r[3])] + [None] * (len(idx) - 1)
    cols = msgs.take(pa.array(take, pa.int64())) if take != list(range(len(wrows))) else msgs
    arrays = list(cols.columns) + [
        pa.array([lid] * len(take), pa.int64()),
        pa.array(eids, pa.int64()),
        pa.array(raws, pa.binary()),
        pa.array([i is not None for i in take], pa.bool_()),
    ]
    stamps = [r[F_PUBLISH_TIME] for r in wrecs]
    return pa.Table.from_arrays(arrays, schema=arrow_schema()), (
        min(stamps) if stamps else None, max(stamps) if stamps else None)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(table, path: str) -> None:
    """Write a Parquet file whole: to a temporary name, fsynced, renamed, directory fsynced."""
    _pa, pq = _pyarrow()
    # Private as the store is: the files hold its messages.
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    pq.write_table(table, tmp, compression="zstd")
    os.chmod(tmp, 0o600)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(os.path.dirname(path))


def write_manifest(directory: str, doc: dict) -> str:
    path = os.path.join(directory, MANIFEST)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w",
              encoding="utf-8") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(directory)
    return path


# -- choosing ledgers --------------------------------------------------------------------------
def candidates(ctx, info, size_threshold: int | None, older_than_ms: int | None) -> list:
    """The closed, not yet offloaded ledgers to offload, oldest first: with a size threshold,
    the oldest ones until at most that many bytes stay in the store (pulsar-admin topics
    offload -s); with an age, those whose entries were all published before now - age (a
    ledger ends when the next one is created)."""
    every = ledger_rows(info)
    closed = every[:-1]
    local = [r for r in closed if not r.offloaded]
    picked = []
    if size_threshold is not None:
        keep = sum(r.size for r in every if not r.offloaded)
        for r in local:
            if keep <= size_threshold:
                break
            picked.append(r)
            keep -= r.size
    if older_than_ms is not None:
        cutoff = ctx.now - older_than_ms
        # A ledger ends when the next one is created.
        ends = {r.ledger_id: every[i + 1].created_ms for i, r in enumerate(closed)}
        for r in local:
            if ends[r.ledger_id] <= cutoff and r not in picked:
                picked.append(r)
    picked.sort(key=lambda r: r.first_offset)
    return [r for r in picked if r.entries > 0]


def partitions_of(ctx, topic: TopicName) -> list[tuple]:
    """(partition, its LedgerInfo) for every existing partition of topic (or the topic)."""
    if not topic.persistent:
        raise InvalidValue(f"{topic} is non-persistent: it has no ledgers to offload",
                           hint="offload persistent topics")
    found = [(t, topics.lookup(ctx, t)) for t in partitions.expand(ctx, topic)]
    found = [(t, info) for t, info in found if info is not None]
    if not found:
        raise TopicNotFound(f"topic {topic} does not exist")
    return found


def plan(ctx, topic: TopicName, size_threshold: int | None, older_than_ms: int | None) -> list:
    """[(partition name, managed ledger id, ledger rows to offload)] (broker.offloader.plan)."""
    return [(str(t), info.ml_id, candidates(ctx, info, size_threshold, older_than_ms))
            for t, info in partitions_of(ctx, topic)]


def table_of(ctx, t: TopicName, ml_id: int, ledger_id: int):
    """(table, (first, last publish time)) of one ledger still in the store, or None when the
    topic was recreated or the ledger trimmed or offloaded meanwhile
    (broker.offloader.ledger_table)."""
    info = topics.lookup(ctx, t)
    if info is None or info.ml_id != ml_id:
        return None
    cur = next((r for r in ledger_rows(info)[:-1] if r.ledger_id == ledger_id), None)
    if cur is None or cur.offloaded:
        return None  # trimmed or offloaded meanwhile
    return ledger_table(ctx, info, t, cur)


def commit_files(ctx, written: list) -> list[dict]:
    """The ledgers' rows name their files and their entries leave LMDB, for each written
    (partition name, ml id, row, path, first, last publish time) still as it was
    (broker.offloader.commit)."""
    done = []
    for name, ml_id, row, path, lo, hi in written:
        info = topics.lookup(ctx, parse_topic(name))
        if info is None or info.ml_id != ml_id:
            continue
        try:
            if ctx.ledgers.offload(ctx.txn, info, row.ledger_id, row.entries, path):
                done.append({"topic": name, "ledgerId": row.ledger_id,
                             "entries": row.entries, "size": row.size, "file": path,
                             "firstPublishTime": lo, "lastPublishTime": hi})
        except Exception:  # noqa: BLE001 - trimmed meanwhile: the file is spare
            continue
    return done


def status_of(ctx, topic: TopicName) -> list[dict]:
    """Per partition: offloaded ledgers and what stays local (broker.offloader.status)."""
    out = []
    for t, info in partitions_of(ctx, topic):
        every = ledger_rows(info)
        off = [{"ledgerId": r.ledger_id, "entries": r.entries, "size": r.size,
                "file": r.location} for r in every if r.offloaded]
        local = [r for r in every if not r.offloaded]
        out.append({"topic": str(t), "offloadedLedgers": off,
                    "offloadedEntries": sum(o["entries"] for o in off),
                    "offloadedSize": sum(o["size"] for o in off),
                    "localLedgers": len(local), "localSize": sum(r.size for r in local)})
    return out


def manifest_doc(ctx, name: str, directory: str) -> dict | None:
    """The manifest of one topic partition's files in directory, from the store's rows
    (broker.offloader.manifest); None when the topic is gone."""
    t = parse_topic(name)
    info = topics.lookup(ctx, t)
    if info is None:
        return None
    rows = [r for r in ledger_rows(info) if r.offloaded
            and os.path.dirname(r.location) == directory]
    return {"topic": name, "partition": t.partition_index, "store": ctx.broker.path,
            "managedLedgerId": info.ml_id, "format": "parquet", "version": 1,
            "visibleColumn": "__visible",
            "ledgers": [{"ledgerId": r.ledger_id, "firstOffset": r.first_offset,
                         "entries": r.entries, "size": r.size,
                         "file": os.path.basename(r.location)} for r in rows]}


def offloaded_files(ctx, part_names: list[str]) -> dict:
    """{partition name: [(ledger id, first offset, entries, file)]} (broker.offloader.files)."""
    out = {}
    for name in part_names:
        info = topics.lookup(ctx, parse_topic(name))
        if info is not None:
            out[name] = [(r.ledger_id, r.first_offset, r.entries, r.location)
                         for r in ledger_rows(info) if r.offloaded]
    return out


# -- the commands: each transaction is one of broker.offloader's (broker/admin/offloader.py) --
def offload(broker, topic: str, to: str, size_threshold: int | None = None,
            older_than_ms: int | None = None) -> dict:
    """Offload a topic's (every partition's) chosen ledgers to Parquet under `to`. Returns
    what was done: {"topic", "directory", "ledgers": [...], "entries", "bytes", "files"}."""
    if size_threshold is None and older_than_ms is None:
        raise InvalidValue("say which ledgers to offload: --size-threshold or --older-than")
    if size_threshold is not None and size_threshold < 0:
        raise InvalidValue("--size-threshold cannot be negative")
    if older_than_ms is not None and older_than_ms < 0:
        raise InvalidValue("--older-than cannot be negative")
    if not str(to).strip():
        raise InvalidValue("--to is empty", hint="give --to the directory for the Parquet files")
    _pyarrow()
    root = os.path.abspath(to)
    if os.path.exists(root) and not os.path.isdir(root):
        raise InvalidValue(f"{to} is not a directory", hint="give --to a directory")
    t0 = parse_topic(topic)
    offloader = broker.offloader

    # 1. Write the files, one read transaction per ledger (no transaction spans the writing).
    chosen = offloader.plan(t0, size_threshold, older_than_ms)
    written = []
    for name, ml_id, rows in chosen:
        t = parse_topic(name)
        directory = topic_dir(root, t)
        for row in rows:
            got = offloader.ledger_table(t, ml_id, row.ledger_id)
            if got is None:
                continue
            table, (lo, hi) = got
            path = os.path.join(directory, f"ledger-{row.ledger_id}.parquet")
            try:
                write_file(table, path)
            except OSError as exc:
                raise PulsarctlError(f"cannot write {path}: {exc.strerror}",
                                     hint="check that --to is a writable directory with "
                                     "room") from None
            written.append((name, ml_id, row, path, lo, hi))

    # 2. One write transaction: the rows name their files, the entries leave LMDB.
    done = offloader.commit(t0, written) if written else []

    # 3. Manifests, from what the store now holds.
    for name, _ml_id, _rows in chosen:
        manifest(broker, name, root)
    return {"topic": str(t0), "directory": root, "ledgers": done,
            "entries": sum(d["entries"] for d in done), "bytes": sum(d["size"] for d in done)}


def status(broker, topic: str) -> dict:
    """Per partition: offloaded ledgers (id, entries, size, file) and what stays local."""
    t0 = parse_topic(topic)
    return {"topic": str(t0), "partitions": broker.offloader.status(t0)}


def manifest(broker, name: str, root: str) -> str | None:
    """Write the manifest of one topic partition's directory under root from the store."""
    directory = topic_dir(root, parse_topic(name))
    doc = broker.offloader.manifest(name, directory)
    if doc is None or not os.path.isdir(directory):
        return None
    return write_manifest(directory, doc)


def files_of(broker, part_names: list[str]) -> dict:
    """{partition name: [(ledger id, first offset, entries, file)]} of offloaded ledgers."""
    return broker.offloader.files(part_names)
