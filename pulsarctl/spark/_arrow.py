"""Arrow record batches from scanned entries, and rows to publish from Arrow record batches.

Imports pyarrow, never pyspark. The columns are StreamNative pulsar-spark's, plus
__producerName, __sequenceId and __redeliveryCount:

    value binary, __key string, __topic string, __messageId string, __publishTime timestamp,
    __eventTime timestamp, __messageProperties map<string,string>, __producerName string,
    __sequenceId bigint, __redeliveryCount int
"""
from __future__ import annotations

from itertools import accumulate, zip_longest

import pyarrow as pa
import pyarrow.compute as pc

COLUMNS = ("value", "__key", "__topic", "__messageId", "__publishTime", "__eventTime",
           "__messageProperties", "__producerName", "__sequenceId", "__redeliveryCount")
DDL = ("value binary, __key string, __topic string, __messageId string, __publishTime "
       "timestamp, __eventTime timestamp, __messageProperties map<string,string>, "
       "__producerName string, __sequenceId bigint, __redeliveryCount int")



def arrow_schema() -> pa.Schema:
    """The columns as Arrow types (as Spark hands them to a Python data source)."""
    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([
        pa.field("value", pa.binary()), pa.field("__key", pa.string()),
        pa.field("__topic", pa.string()), pa.field("__messageId", pa.string()),
        pa.field("__publishTime", ts), pa.field("__eventTime", ts),
        pa.field("__messageProperties", pa.map_(pa.string(), pa.string())),
        pa.field("__producerName", pa.string()), pa.field("__sequenceId", pa.int64()),
        pa.field("__redeliveryCount", pa.int32())])


# Where each column's value sits in a stored entry (pulsarctl/messages.py's layout).
_PUBLISH, _PRODUCER, _SEQ, _PAYLOAD, _PROPS, _KEY, _OKEY, _EVENT = range(8)
_MS = pa.timestamp("ms", tz="UTC")


def _binary(values, typ) -> pa.Array:
    """A binary array built from its buffers: much faster than pa.array for many values."""
    n = len(values)
    data = b"".join(values)
    if len(data) >= 2**31 - 1:
        return pa.array(values, typ)  # pragma: no cover - chunks stay far below 2 GiB
    offsets = pa.array(list(accumulate(map(len, values), initial=0)), pa.int32())
    return pa.Array.from_buffers(typ, n, [None, offsets.buffers()[1], pa.py_buffer(data)])


def _timestamps(ms, typ) -> pa.Array:
    """Epoch milliseconds as timestamps; 0 or None (an unset event time) is null."""
    arr = pa.array(ms, pa.int64())
    if arr.null_count < len(arr):
        arr = pc.if_else(pc.equal(arr, 0), pa.scalar(None, pa.int64()), arr)
    return arr.cast(_MS).cast(typ)


def _properties(values, typ) -> pa.Array:
    if not any(values):
        return pa.nulls(len(values), typ)
    try:
        return pa.array(values, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # Properties written by other tools may hold non-string values: show them as text.
        fixed = [None if v is None else {str(k): None if x is None else str(x)
                                         for k, x in v.items()} for v in values]
        return pa.array(fixed, typ)


def _message_ids(lids: list, eids: list, partition: int, bidx: list | None = None) -> pa.Array:
    """ledger:entry:partition, and :batchIndex for the messages of a batch."""
    if not lids:
        return pa.array([], pa.string())
    ledger = pa.array(lids, pa.int64()).cast(pa.string())
    entry = pa.array(eids, pa.int64()).cast(pa.string())
    ids = pc.binary_join_element_wise(ledger, entry, pa.scalar(str(partition)), ":")
    if bidx is not None:
        b = pa.array(bidx, pa.int64())
        with_index = pc.binary_join_element_wise(ids, b.cast(pa.string()), ":")
        ids = pc.if_else(pc.greater_equal(b, 0), with_index, ids)
    return ids


def record_batch(schema: pa.Schema, topic: str, partition: int, rows: list, recs: list,
                 lo_ms: int | None = None, hi_ms: int | None = None) -> pa.RecordBatch:
    """The columns schema asks for, in its order, from one chunk of one topic partition: rows
    are the scanned (offset, ledger id, entry id, raw) and recs the decoded entries. Entries
    published outside [lo_ms, hi_ms) are left out."""
    n = len(recs)
    cols = list(zip_longest(*recs)) if n else []
    cols += [(None,) * n] * (_EVENT + 1 - len(cols))
    publish = pa.array(cols[_PUBLISH], pa.int64())
    arrays = []
    for f in schema:
        name, typ = f.name, f.type
        if name == "value":
            a = _binary(cols[_PAYLOAD], typ)
        elif name == "__key":
            a = pa.array(cols[_KEY], typ)
        elif name == "__topic":
            a = pa.repeat(pa.scalar(topic, typ), n)
        elif name == "__messageId":
            bidx = None
            if isinstance(rows, tuple):  # _access.IdColumns: (ledger ids, entry ids)
                lids, eids = rows
            else:
                lids, eids = [r[1] for r in rows], [r[2] for r in rows]
                if any(len(r) > 4 for r in rows):  # messages of batches
                    bidx = [r[4] if len(r) > 4 else -1 for r in rows]
            a = _message_ids(lids, eids, partition, bidx).cast(typ)
        elif name == "__publishTime":
            a = publish.cast(_MS).cast(typ)
        elif name == "__eventTime":
            a = _timestamps(cols[_EVENT], typ)
        elif name == "__messageProperties":
            a = _properties(cols[_PROPS], typ)
        elif name == "__producerName":
            a = pa.array(cols[_PRODUCER], typ)
        elif name == "__sequenceId":
            a = pa.array(cols[_SEQ], typ)
        elif name == "__redeliveryCount":
            a = pa.nulls(n, typ)
        else:  # the reader refuses other columns before it gets here
            raise KeyError(name)
        arrays.append(a)
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    if lo_ms is not None or hi_ms is not None:
        keep = None
        if lo_ms is not None:
            keep = pc.greater_equal(publish, lo_ms)
        if hi_ms is not None:
            below = pc.less(publish, hi_ms)
            keep = below if keep is None else pc.and_(keep, below)
        batch = batch.filter(keep)
    return batch


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
