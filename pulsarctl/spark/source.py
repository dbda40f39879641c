"""The PySpark data source: batch read, streaming read and batch write of topics in a store.

Registered by `pulsarctl.spark.register(spark)` under the format names `pulsarctl` and `pulsar`.
Needs pyspark >= 4.2 (the Python Data Source API with filter pushdown and streaming admission
control) and pyarrow; imported only when a Spark session asks for it. This module holds what
Spark calls (the data source classes) and the batch reader; a read's splits are planned and
read in spark/splits.py, the streaming reader is spark/stream.py, the writer spark/writer.py.

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

from datetime import datetime, timezone
from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from pulsarctl.spark import _access as access
from pulsarctl.spark.splits import SCHEMA, _ReadOptions, plan_splits, read_split
from pulsarctl.spark.stream import StreamReader
from pulsarctl.spark.writer import Writer


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
