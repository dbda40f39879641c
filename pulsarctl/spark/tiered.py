"""Reading a topic whose older ledgers are offloaded (pulsarctl/offload.py): the
offloaded ledgers through Spark's own Parquet reader, so a cluster reads them where they lie
(any path its executors can reach), and only the recent tail from the store through the data
source.

    from pulsarctl import spark as ps
    df = ps.read_topic(spark, "/path/to/store", topic="orders", startingTime="2026-01-01")

The bounds are fixed once, on the driver, exactly as a batch read of the data source fixes them;
both halves read inside them, so the union is the same rows as
spark.read.format("pulsarctl")...load() (which reads offloaded ledgers too, in its Python
workers, with pyarrow).
"""
from __future__ import annotations

import json


def read_topic(spark, store: str | None = None, **options):
    """A DataFrame of the topics the options name (the data source's read options: topic,
    topics or topicsPattern, startingOffsets, endingOffsets, startingTime, endingTime, ...)."""
    from pyspark.sql import functions as F  # lazy: pyspark is costly to import or optional

    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.spark import _access as access
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.spark.source import BatchReader
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.spark.splits import COLUMNS, SCHEMA

    opts = {k: v if isinstance(v, str) else json.dumps(v) if isinstance(v, dict) else str(v)
            for k, v in options.items() if v is not None}
    if store is not None:
        opts["store"] = store
    opts.pop("offloaded", None)
    reader = BatchReader(opts, SCHEMA)
    ranges = reader.plan()
    if not ranges:
        return spark.createDataFrame([], SCHEMA)
    starts, ends, conds, files = {}, {}, [], set()
    for p, s, e, _fail in ranges:
        starts[p.name] = access.boundary_id(p, s)
        ends[p.name] = access.boundary_id(p, e)
        for lid, first, n, path in p.offloaded:
            a, z = max(first, s), min(first + n, e)
            if a < z:
                conds.append((F.col("__ledgerId") == lid) & (F.col("__entryId") >= a - first)
                             & (F.col("__entryId") < z - first))
                files.add(path)
    local_opts = {k: v for k, v in opts.items()
                  if k.lower() not in ("topic", "topics", "topicspattern", "startingoffsets",
                                       "endingoffsets")}
    local_opts.update(topics=",".join(starts), startingOffsets=json.dumps(starts),
                      endingOffsets=json.dumps(ends), offloaded="skip",
                      store=reader.o.store)
    r = spark.read.format("pulsarctl")
    for k, v in local_opts.items():
        r = r.option(k, v)
    df = r.load()
    if not conds:
        return df
    cond = conds[0]
    for c in conds[1:]:
        cond = cond | c
    off = spark.read.parquet(*sorted(files)).where(F.col("__visible") & cond)
    if reader.lo_ms is not None:
        off = off.where(F.col("__publishTime") >= F.timestamp_millis(F.lit(reader.lo_ms)))
    if reader.hi_ms is not None:
        off = off.where(F.col("__publishTime") < F.timestamp_millis(F.lit(reader.hi_ms)))
    return off.select(*COLUMNS).unionByName(df)
