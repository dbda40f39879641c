"""The benchmark's ceiling: a Python data source that does no work.

Each task hands Spark the Arrow record batches of one part file of a Parquet directory, read
and converted to the data source's schema once per Python worker, before the timed runs. What
a read of it costs is what Spark's Python data source path itself costs (the worker's Arrow
stream, the JVM's conversion of every batch to rows): no Python data source can read faster in
the same session. Only spark/bench.py uses it.
"""
from __future__ import annotations

import os

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from pulsarctl.spark._arrow import arrow_schema
from pulsarctl.spark.splits import CHUNK_ENTRIES, SCHEMA

NAME = "pulsarctl-bench-ceiling"
_BATCHES: dict = {}  # part file -> its record batches, kept by the (reused) Python worker


class _Part(InputPartition):
    def __init__(self, path: str):
        self.path = path


def parts(directory: str) -> list[str]:
    return sorted(os.path.join(directory, f) for f in os.listdir(directory)
                  if f.endswith(".parquet") and not f.startswith(("_", ".")))


class _Reader(DataSourceReader):
    def __init__(self, directory: str):
        self.directory = directory

    def partitions(self):
        return [_Part(p) for p in parts(self.directory)]

    def read(self, partition):
        batches = _BATCHES.get(partition.path)
        if batches is None:
            import pyarrow.parquet as pq  # lazy: pyarrow is costly to import or optional

            table = pq.read_table(partition.path).cast(arrow_schema())
            batches = _BATCHES[partition.path] = table.combine_chunks().to_batches(
                max_chunksize=CHUNK_ENTRIES)
        yield from batches


class CeilingDataSource(DataSource):
    @classmethod
    def name(cls):
        return NAME

    def schema(self):
        return SCHEMA

    def reader(self, schema):
        return _Reader(self.options["path"])
