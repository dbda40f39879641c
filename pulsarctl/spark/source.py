"""The PySpark data source: batch read, streaming read and batch write of topics in a store.

Registered by `pulsarctl.spark.register(spark)` under the format names `pulsarctl` and `pulsar`.
Needs pyspark >= 4.2 (the Python Data Source API with filter pushdown and streaming admission
control) and pyarrow; imported only when a Spark session asks for it.

Reading
    Partitions are planned from metadata only: every topic partition's offset range, bounds
    fixed at planning (a later message is not read), cut into at least `minPartitions` pieces
    (default: the cores of this machine). Each task reads its range chunk by chunk, one read
    transaction per chunk, and yields Arrow record batches. Filters on __publishTime and
    __topic are pushed down (spark.sql.python.filterPushdown.enabled=true; `session()` and
    `register()` set it): the time bounds become offset bounds by a binary search over publish
    times, the topic filters drop whole partitions. Where that setting cannot be made true,
    `register()` registers the source without pushdown (PlainBatchReader): Spark filters the
    rows read.

Writing
    Each task publishes as the producer `spark-<job>-<task partition>` with the sequence ids
    0, 1, 2, ... of its rows, and deduplication in force on the target topics (the writer turns
    the topic's deduplication policy on where it is off, unless the option deduplication is
    false). A task Spark runs again therefore skips the rows its failed attempt stored, and
    every row lands exactly once, provided the task sees the same rows in the same order again
    (a deterministic input, as for any idempotent producer).
"""
from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from datetime import datetime, timezone
from pyspark.sql.datasource import (
    DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamReader, InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType, IntegerType, LongType, MapType, StringType, StructField, StructType, TimestampType,
)

from pulsarctl.errors import InvalidValue
from pulsarctl.names import parse_topic
from pulsarctl.spark import _access as access

try:  # pyspark >= 4.2: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older pyspark: no maxEntriesPerTrigger
    ReadAllAvailable = ReadMaxRows = None

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

SCHEMA = StructType([
    StructField("value", BinaryType()),
    StructField("__key", StringType()),
    StructField("__topic", StringType()),
    StructField("__messageId", StringType()),
    StructField("__publishTime", TimestampType()),
    StructField("__eventTime", TimestampType()),
    StructField("__messageProperties", MapType(StringType(), StringType())),
    StructField("__producerName", StringType()),
    StructField("__sequenceId", LongType()),
    StructField("__redeliveryCount", IntegerType()),
])
COLUMNS = tuple(f.name for f in SCHEMA.fields)

CHUNK_ENTRIES = 10_000          # rows per Arrow batch handed to Spark, and per read of batches
# Plain entries are read and decoded this many batches' worth at a time, then handed over
# in batches of CHUNK_ENTRIES: a chunk's decode has a fixed cost (about 60 kernel calls and
# their Python, a third of a 10,000-entry chunk's time), while Spark itself, and the ceiling
# the benchmark holds the source to, run fastest on batches of 10,000.
PLAIN_CHUNKS_PER_READ = 3
CHUNK_BYTES = 32 * 1024 * 1024  # payload bytes per chunk, whatever the entry count
FIRST_CHUNK_BYTES = 2 * 1024 * 1024  # until a split's first chunk shows what entries hold


def _lower(options) -> dict:
    return {str(k).lower(): v for k, v in dict(options).items()}


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class Split(InputPartition):
    """One task's read: offsets [start, end) of one topic partition (name None: nothing)."""

    def __init__(self, name, partition, ml_id, start, end, fail=True):
        self.name = name
        self.partition = partition
        self.ml_id = ml_id
        self.start = start
        self.end = end
        self.fail = fail


def plan_splits(ranges, min_splits: int, max_entries: int, fixed: int | None = None
                ) -> list[Split]:
    """Cut [(part, start, end, fail)] into at least min_splits pieces (when there are that many
    entries), each of at most max_entries, in proportion to each range's size. With fixed,
    every range is cut every `fixed` entries from its start instead, so the same start gives
    the same pieces however far the end has moved."""
    total = sum(e - s for _p, s, e, _f in ranges)
    if total <= 0:
        return [Split(None, -1, 0, 0, 0)]
    target = max(min_splits, -(-total // max_entries))
    per = max(1, -(-total // target))
    out = []
    for p, s, e, fail in ranges:
        if fixed:
            step = fixed
        else:
            k = max(1, -(-(e - s) // per))
            step = -(-(e - s) // k)
        for a in range(s, e, step):
            out.append(Split(p.name, p.partition, p.ml_id, a, min(e, a + step), fail))
    return out


def read_split(store: str, schema: StructType, split: Split, lo_ms=None, hi_ms=None,
               fail_on_loss: bool = True, chunk: int = CHUNK_ENTRIES):
    """Arrow record batches of one split, chunk by chunk."""
    if split.name is None or split.end <= split.start:
        return
    # lazy: pyspark is costly to import or optional
    from pyspark.sql.pandas.types import to_arrow_schema

    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.spark._arrow import fields_for, record_batch

    pa_schema = to_arrow_schema(schema, timezone="UTC")
    columnar = fields_for(pa_schema)
    b = access.broker(store)
    o = split.start
    # The first chunk is kept small until it shows what the entries hold: plain entries are
    # then read PLAIN_CHUNKS_PER_READ * `chunk` at a time (up to CHUNK_BYTES) and handed over
    # `chunk` rows a batch, entries holding batches about `chunk` messages at a time (a chunk
    # of a thousand batches of a thousand works on lists too big for the processor's caches:
    # it read a batched topic 1.4 times slower).
    entries, max_bytes = chunk, FIRST_CHUNK_BYTES
    while o < split.end:
        nxt, rows, recs = access.scan_chunk(b, split.name, split.ml_id, o, split.end, entries,
                                            max_bytes, fail_on_loss and split.fail, columnar)
        if nxt > o:
            if len(recs) > nxt - o:
                entries = max(1, chunk * (nxt - o) // len(recs))
            else:
                entries, max_bytes = chunk * PLAIN_CHUNKS_PER_READ, CHUNK_BYTES
        if recs:
            batch = record_batch(pa_schema, split.name, split.partition, rows, recs, lo_ms, hi_ms)
            del rows, recs
            if batch.num_rows > chunk:
                for at in range(0, batch.num_rows, chunk):
                    yield batch.slice(at, chunk)
            elif batch.num_rows:
                yield batch
        o = max(nxt, o + 1)


class _ReadOptions:
    """The read options, parsed and checked once on the driver."""

    def __init__(self, options, schema: StructType, streaming: bool):
        o = _lower(options)
        self.store = access.resolve_store(o.get("store"))
        self.kind, self.spec = access.topic_options(o)
        self.starting = access.parse_offsets(o.get("startingoffsets"), "startingOffsets")
        self.ending = access.parse_offsets(o.get("endingoffsets"), "endingOffsets")
        if streaming and self.ending is not None:
            raise InvalidValue("endingOffsets is for batch reads; a stream reads on",
                               hint="use spark.read for a bounded read")
        if self.ending == access.EARLIEST:
            raise InvalidValue("endingOffsets cannot be earliest", hint="use latest or a JSON "
                               "object of message ids")
        self.starting_ms = (access.parse_time_ms(o["startingtime"], "startingTime")
                            if o.get("startingtime") else None)
        self.ending_ms = (access.parse_time_ms(o["endingtime"], "endingTime")
                          if o.get("endingtime") else None)
        if streaming and self.ending_ms is not None:
            raise InvalidValue("endingTime is for batch reads; a stream reads on")
        self.fail_on_loss = access.flag(o, "failOnDataLoss", True)
        self.min_partitions = access.whole(o, "minPartitions", _cores())
        self.max_per_partition = access.whole(o, "maxEntriesPerPartition", 1_000_000)
        self.split_entries = access.whole(o, "splitEntries", None)
        self.max_per_trigger = access.whole(o, "maxEntriesPerTrigger", None)
        self.offloaded = (o.get("offloaded") or "include").lower()
        if self.offloaded not in ("include", "skip"):
            raise InvalidValue(f"offloaded must be include or skip, not {o.get('offloaded')!r}",
                               hint="skip leaves offloaded ledgers to Spark's Parquet reader "
                               "(pulsarctl.spark.read_topic does that)")
        self.subscription = o.get("subscription") or None
        if self.subscription and not streaming:
            raise InvalidValue("the option subscription is for streaming reads",
                               hint="a batch read never moves a cursor")
        if self.subscription:
            # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
            from pulsarctl.names import check_subscription

            check_subscription(self.subscription)
        unknown = [f.name for f in schema.fields if f.name not in COLUMNS]
        if unknown:
            raise InvalidValue(f"unknown column(s) {', '.join(unknown)} in the schema",
                               hint=f"the columns are {', '.join(COLUMNS)}")


# -- batch read --------------------------------------------------------------------------------
def _ms_of(value):
    """Exact epoch milliseconds (floor) and whether it was a whole millisecond, for a datetime
    (naive values are local time, as Spark hands them to Python) or a number of microseconds."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.astimezone()
        d = aware - datetime(1970, 1, 1, tzinfo=timezone.utc)
        us = (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
    elif isinstance(value, int) and not isinstance(value, bool):
        us = value
    else:
        return None
    return us // 1000, us % 1000 == 0


class BatchReader(DataSourceReader):
    def __init__(self, options, schema: StructType):
        self.o = _ReadOptions(options, schema, streaming=False)
        self.schema = schema
        self.lo_ms = self.o.starting_ms   # publish time >= lo_ms
        self.hi_ms = self.o.ending_ms     # publish time < hi_ms
        self.topic_filters: list[tuple] = []

    # Filters come in as an AND. A filter handled here exactly is not given back to Spark.
    def pushFilters(self, filters):
        return [f for f in filters if not self._push(f)]

    def _push(self, f) -> bool:
        kind = type(f).__name__
        attr = getattr(f, "attribute", None)
        if attr == ("__publishTime",) and kind in ("GreaterThan", "GreaterThanOrEqual",
                                                   "LessThan", "LessThanOrEqual", "EqualTo"):
            got = _ms_of(f.value)
            if got is None:
                return False
            ms, whole = got
            lo = hi = None
            if kind == "GreaterThan":
                lo = ms + 1
            elif kind == "GreaterThanOrEqual":
                lo = ms if whole else ms + 1
            elif kind == "LessThan":
                hi = ms if whole else ms + 1
            elif kind == "LessThanOrEqual":
                hi = ms + 1
            else:
                lo, hi = (ms, ms + 1) if whole else (1, 0)  # nothing matches a partial ms
            if lo is not None:
                self.lo_ms = lo if self.lo_ms is None else max(self.lo_ms, lo)
            if hi is not None:
                self.hi_ms = hi if self.hi_ms is None else min(self.hi_ms, hi)
            return True
        if attr == ("__topic",):
            if kind == "EqualTo" and isinstance(f.value, str):
                self.topic_filters.append(("in", (f.value,)))
                return True
            if kind == "In" and all(isinstance(v, str) for v in f.value):
                self.topic_filters.append(("in", tuple(f.value)))
                return True
            if kind in ("StringStartsWith", "StringEndsWith", "StringContains"):
                self.topic_filters.append((kind, f.value))
                return True
        return False

    def _topic_ok(self, name: str) -> bool:
        for kind, v in self.topic_filters:
            if kind == "in" and name not in v:
                return False
            if kind == "StringStartsWith" and not name.startswith(v):
                return False
            if kind == "StringEndsWith" and not name.endswith(v):
                return False
            if kind == "StringContains" and v not in name:
                return False
        return True

    def plan(self) -> list[tuple]:
        """[(part, start, end, fail)] with every bound resolved now."""
        o = self.o
        b = access.broker(o.store)
        parts = access.resolve_parts(b, o.kind, o.spec)
        for spec, what in ((o.starting, "startingOffsets"), (o.ending, "endingOffsets")):
            access.check_offset_keys(spec, parts, what)
        ranges = []
        if self.lo_ms is not None and self.hi_ms is not None and self.lo_ms >= self.hi_ms:
            return ranges
        for p in parts:
            if not self._topic_ok(p.name):
                continue
            s = access.bound(p, o.starting, access.EARLIEST, "startingOffsets")
            e = access.bound(p, o.ending, access.LATEST, "endingOffsets")
            if s < e and self.lo_ms is not None:
                s = access.first_at_or_after(b, p, s, e, self.lo_ms)
            if s < e and self.hi_ms is not None:
                e = access.first_at_or_after(b, p, s, e, self.hi_ms)
            if s < e and o.offloaded == "skip":
                ranges += [(p, a, z, True) for a, z in access.without_offloaded(p, s, e)]
            elif s < e:
                ranges.append((p, s, e, True))
        return ranges

    def partitions(self):
        return plan_splits(self.plan(), self.o.min_partitions, self.o.max_per_partition,
                           self.o.split_entries)

    def read(self, partition):
        return read_split(self.o.store, self.schema, partition, self.lo_ms, self.hi_ms,
                          self.o.fail_on_loss)


# -- streaming read ----------------------------------------------------------------------------
class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {partition name: {"ml": managed ledger id, "offset": next offset to read}},
    sorted by name. A topic partition that appears later (a partitioned topic grown, a new
    topic matching topicsPattern) is read from its earliest entry."""

    def __init__(self, options, schema: StructType):
        self.o = _ReadOptions(options, schema, streaming=True)
        self.schema = schema
        self.target = None     # Trigger.AvailableNow: {name: (ml, offset)} to stop at
        self.committed = {}    # name -> offset acknowledged through on the subscription
        self.initial = None    # what initialOffset() answered in this run

    def _parts(self, b):
        return access.resolve_parts(b, self.o.kind, self.o.spec, missing_ok=True)

    def initialOffset(self):
        o = self.o
        b = access.broker(o.store)
        parts = self._parts(b)
        access.check_offset_keys(o.starting, parts, "startingOffsets")
        out = {}
        for p in parts:
            if o.starting is None and o.starting_ms is not None:
                s = p.first
            else:
                s = access.bound(p, o.starting, access.LATEST, "startingOffsets")
            if o.starting_ms is not None:
                s = access.first_at_or_after(b, p, s, p.next, o.starting_ms)
            out[p.name] = {"ml": p.ml_id, "offset": s}
        self.initial = out
        return out

    def getDefaultReadLimit(self):
        if self.o.max_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.o.max_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self):
        b = access.broker(self.o.store)
        self.target = {p.name: (p.ml_id, p.next) for p in self._parts(b)}

    def _start_of(self, start: dict, p) -> tuple[int, bool]:
        """Where p's next read begins, and whether a gap there is data loss."""
        cur = (start or {}).get(p.name)
        if cur is None:
            return p.first, False  # a partition new to this query: from its earliest entry
        if cur.get("ml") != p.ml_id:
            if self.o.fail_on_loss:
                raise access.DataLoss(f"topic {p.name} was deleted and created again while "
                                      "the query read it")
            return p.first, False
        s = int(cur["offset"])
        if s < p.first and self.o.fail_on_loss:
            raise access.DataLoss(f"entries {s}..{p.first - 1} of {p.name} were trimmed "
                                  "before the query read them")
        return max(s, p.first), True

    def latestOffset(self, start=None, limit=None):
        if self.o.subscription and start and start != self.initial:
            # Spark plans the batch after `start` only once the batch ending there is in its
            # commit log; commit(end) for the last batch of a run comes only with the next
            # batch, which a Trigger.AvailableNow run never plans.
            self.commit(start)
        b = access.broker(self.o.store)
        parts = self._parts(b)
        start = start or {}
        out = {k: dict(v) for k, v in start.items()}
        lag = {}
        for p in parts:
            s, _ = self._start_of(start, p)
            e = p.next
            if self.target is not None:
                ml, t = self.target.get(p.name, (None, None))
                e = t if ml == p.ml_id else s
            e = max(e, s)
            if p.name not in start or start[p.name].get("ml") != p.ml_id:
                out[p.name] = {"ml": p.ml_id, "offset": s}
            lag[p.name] = (s, e)
        budget = None
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            budget = max(1, int(limit.max_rows))
        elif limit is None and self.o.max_per_trigger:
            budget = self.o.max_per_trigger
        total = sum(e - s for s, e in lag.values())
        if budget is not None and total > budget:
            give = {k: budget * (e - s) // total for k, (s, e) in lag.items()}
            left = budget - sum(give.values())
            for k, (s, e) in sorted(lag.items()):
                if left <= 0:
                    break
                extra = min(left, e - s - give[k])
                give[k] += extra
                left -= extra
            lag = {k: (s, s + give[k]) for k, (s, _e) in lag.items()}
        for k, (_s, e) in lag.items():
            out[k]["offset"] = e
        return {k: out[k] for k in sorted(out)}

    def partitions(self, start, end):
        ranges = []
        start = start or {}
        for name in sorted(end):
            e = end[name]
            s = start.get(name)
            if s is not None and s.get("ml") == e["ml"]:
                a, fail = int(s["offset"]), True
            else:
                a, fail = 0, False
            if int(e["offset"]) > a:
                part = access.Part(name, parse_topic(name).partition_index, e["ml"], 0, 0)
                ranges.append((part, a, int(e["offset"]), fail))
        if not ranges:
            return []
        return plan_splits(ranges, self.o.min_partitions, self.o.max_per_partition,
                           self.o.split_entries)

    def read(self, partition):
        return read_split(self.o.store, self.schema, partition, None, None,
                          self.o.fail_on_loss)

    def commit(self, end):
        """The batch ending at end is in the sink: acknowledge it on the subscription."""
        if not self.o.subscription:
            return
        todo = {name: (v["ml"], self.committed.get(name, 0), int(v["offset"]))
                for name, v in end.items()
                if int(v["offset"]) > self.committed.get(name, -1)}
        if todo:
            access.ack_through(access.broker(self.o.store, write=True), self.o.subscription,
                               todo)
            self.committed.update({name: r[2] for name, r in todo.items()})


# -- batch write -------------------------------------------------------------------------------
@dataclass
class WriteCommit(WriterCommitMessage):
    partition: int
    written: int
    duplicates: int


class Writer(DataSourceArrowWriter):
    def __init__(self, options, schema: StructType, overwrite: bool):
        o = _lower(options)
        if overwrite:
            raise InvalidValue("a topic only takes appends", hint='use .mode("append")')
        names = schema.fieldNames()
        if "value" not in names:
            raise InvalidValue("the DataFrame has no value column",
                               hint="write a binary or string column named value")
        self.store = access.resolve_store(o.get("store"))
        self.topic = str(parse_topic(o["topic"])) if o.get("topic") else None
        if self.topic is None and "__topic" not in names:
            raise InvalidValue("give the option topic, or a __topic column naming each row's "
                               "topic")
        self.dedup = access.flag(o, "deduplication", True)
        self.per_txn = access.whole(o, "maxEntriesPerTransaction", CHUNK_ENTRIES)
        self.scheme = o.get("hashingscheme") or "JavaStringHash"
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.broker.routing import HASHING_SCHEMES

        if self.scheme not in HASHING_SCHEMES:
            raise InvalidValue(f"unknown hashingScheme {self.scheme!r}",
                               hint=f"use one of {', '.join(HASHING_SCHEMES)}")
        self.job = o.get("producerprefix") or f"spark-{uuid.uuid4().hex[:12]}"
        if self.topic and self.dedup:
            access.ensure_dedup(access.broker(self.store, write=True), self.topic)

    def write(self, iterator):
        from pyspark import TaskContext  # lazy: pyspark is costly to import or optional

        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.broker.routing import PartitionRouter
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.messages import OutgoingMessage
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.spark._arrow import rows_for_publish

        tc = TaskContext.get()
        pid = tc.partitionId() if tc is not None else 0
        producer = f"{self.job}-{pid}"
        b = access.broker(self.store, write=True)
        routers: dict = {}
        ready = {self.topic} if self.topic else set()
        seq = written = dups = 0

        def route_for(topic):
            def route(n):
                r = routers.get((topic, n))
                if r is None:
                    # Keyless rows go round robin from a start fixed by the task, so a retry
                    # routes every row as the failed attempt did.
                    r = routers[(topic, n)] = PartitionRouter(n, scheme=self.scheme,
                                                              start=pid % n)
                return r.choose
            return route

        for batch in iterator:
            n = batch.num_rows
            if not n:
                continue
            payloads, keys, props, events, topics = rows_for_publish(batch)
            keys = keys or [None] * n
            props = props or [None] * n
            events = events or [0] * n
            msgs = [OutgoingMessage(p, pr, k, None, ev or 0, 0, s) for p, pr, k, ev, s in
                    zip(payloads, props, keys, events, range(seq, seq + n))]
            seq += n
            if self.topic:
                groups = {self.topic: msgs}
            else:
                groups = {}
                for t, m in zip(topics, msgs):
                    if not t:
                        raise InvalidValue(f"row with sequence id {m.sequence_id} has no "
                                           "__topic", hint="give every row a topic, or the "
                                           "option topic")
                    groups.setdefault(t, []).append(m)
            for t, ms in groups.items():
                if t not in ready:
                    t_full = str(parse_topic(t))
                    if self.dedup:
                        access.ensure_dedup(b, t_full)
                    ready.add(t)
                for i in range(0, len(ms), self.per_txn):
                    chunk = ms[i:i + self.per_txn]
                    _name, ids = b.publish(t, chunk, producer, route_for(t))
                    d = sum(1 for x in ids if x.ledger_id == -1)
                    dups += d
                    written += len(chunk) - d
        return WriteCommit(pid, written, dups)

    def commit(self, messages):
        # Every row is durable when its task ends; nothing is left to do.
        return None

    def abort(self, messages):
        # Rows of the tasks that finished stay in their topics, as a producer's sends would.
        return None


# -- the data source ---------------------------------------------------------------------------
class PulsarctlDataSource(DataSource):
    """spark.read / readStream / write .format("pulsarctl")."""

    @classmethod
    def name(cls):
        return "pulsarctl"

    def schema(self):
        return SCHEMA

    def reader(self, schema):
        return BatchReader(self.options, schema)

    def streamReader(self, schema):
        return StreamReader(self.options, schema)

    def writer(self, schema, overwrite):
        return Writer(self.options, schema, overwrite)


class PulsarDataSource(PulsarctlDataSource):
    """The same source under StreamNative's format name."""

    @classmethod
    def name(cls):
        return "pulsar"


# -- without filter pushdown -------------------------------------------------------------------
class PlainBatchReader(BatchReader):
    """A BatchReader that takes no filters, for a session where
    spark.sql.python.filterPushdown.enabled is false and cannot be set: pyspark refuses to plan
    a reader that implements pushFilters there (DATA_SOURCE_PUSHDOWN_DISABLED). Spark applies
    every filter to the rows read instead; only the startingTime/endingTime options bound
    the read."""
    pushFilters = DataSourceReader.pushFilters


class PulsarctlPlainSource(PulsarctlDataSource):
    """The source without filter pushdown (see PlainBatchReader)."""

    def reader(self, schema):
        return PlainBatchReader(self.options, schema)


class PulsarPlainSource(PulsarctlPlainSource):
    @classmethod
    def name(cls):
        return "pulsar"


def sources(pushdown: bool) -> tuple:
    """The data source classes to register, with or without filter pushdown."""
    if pushdown:
        return PulsarctlDataSource, PulsarDataSource
    return PulsarctlPlainSource, PulsarPlainSource
