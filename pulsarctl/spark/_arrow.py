"""Arrow record batches from scanned entries, and rows to publish from Arrow record batches.

Imports pyarrow, never pyspark. The columns, their schema and the record batches built from
scanned entries are pulsarctl/arrow_columns.py's (tiered storage writes the same columns, and
the broker side never imports pulsarctl.spark); they are named here too, for the data source.
"""
from __future__ import annotations

import pyarrow as pa

from pulsarctl.arrow_columns import (  # noqa: F401 - the data source's names for them
    arrow_schema, entry_ids as _entry_ids, fields_for, record_batch,
)


# -- writing -----------------------------------------------------------------------------------
def rows_for_publish(batch: pa.RecordBatch):
    """(payloads, keys, properties, event times ms, topics) as Python lists from a batch with a
    value column and optionally __key, __messageProperties, __eventTime and __topic. A string
    value is stored as its UTF-8 bytes. Missing columns give None."""
    names = batch.schema.names
    n = batch.num_rows

    def col(name):
        return batch.column(names.index(name)) if name in names else None

    v = col("value")
    if pa.types.is_string(v.type) or pa.types.is_large_string(v.type):
        v = v.cast(pa.binary())
    payloads = v.to_pylist()
    if v.null_count:
        payloads = [b"" if x is None else x for x in payloads]
    k = col("__key")
    if k is not None and not pa.types.is_string(k.type):
        k = k.cast(pa.string())
    keys = k.to_pylist() if k is not None else None
    p = col("__messageProperties")
    props = None
    if p is not None and p.null_count < n:
        props = [None if x is None else dict(x) for x in p.to_pylist()]
    e = col("__eventTime")
    events = None
    if e is not None and e.null_count < n:
        if pa.types.is_timestamp(e.type):
            e = e.cast(pa.timestamp("ms", tz=e.type.tz), safe=False).cast(pa.int64())
        events = e.to_pylist()
    t = col("__topic")
    topics = t.to_pylist() if t is not None else None
    return payloads, keys, props, events, topics
