"""A read of a store's topics planned and cut into splits, and one split read as Arrow batches.

The batch reader (spark/source.py) and the streaming reader (spark/stream.py) share all of it:
the columns of a read (SCHEMA), its options parsed and checked once on the driver
(_ReadOptions), the offset ranges cut into Spark's input partitions (plan_splits) and a split's
rows read chunk by chunk, one read transaction per chunk (read_split). It is apart so that both
readers import it and neither imports the other, and so that the data source module keeps only
what Spark calls.
"""
from __future__ import annotations

import os

from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import (
    BinaryType, IntegerType, LongType, MapType, StringType, StructField, StructType, TimestampType,
)

from pulsarctl.errors import InvalidValue
from pulsarctl.spark import _access as access

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
