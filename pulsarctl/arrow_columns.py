"""The Spark data source's columns as Arrow: their schema, and record batches of them built from
scanned entries. Tiered storage (pulsarctl/offload.py) writes the same columns to its Parquet
files, and the data source (pulsarctl/spark) hands them to Spark, so both import them from here,
below both (the broker side never imports pulsarctl.spark).

pyarrow is imported inside the functions, never when this module loads: the plain install has
no pyarrow (it comes with the spark extra), and `import pulsarctl` must work without it.

The columns are StreamNative pulsar-spark's, plus __producerName, __sequenceId and
__redeliveryCount:

    value binary, __key string, __topic string, __messageId string, __publishTime timestamp,
    __eventTime timestamp, __messageProperties map<string,string>, __producerName string,
    __sequenceId bigint, __redeliveryCount int
"""
from __future__ import annotations

from functools import lru_cache
from itertools import zip_longest

# Where each column's value sits in a stored entry (pulsarctl/entries.py's layout).
from pulsarctl.entries import (
    F_EVENT_TIME as _EVENT, F_KEY as _KEY, F_PAYLOAD as _PAYLOAD, F_PRODUCER_NAME as _PRODUCER,
    F_PROPERTIES as _PROPS, F_PUBLISH_TIME as _PUBLISH, F_SEQUENCE_ID as _SEQ,
)

COLUMNS = ("value", "__key", "__topic", "__messageId", "__publishTime", "__eventTime",
           "__messageProperties", "__producerName", "__sequenceId", "__redeliveryCount")
DDL = ("value binary, __key string, __topic string, __messageId string, __publishTime "
       "timestamp, __eventTime timestamp, __messageProperties map<string,string>, "
       "__producerName string, __sequenceId bigint, __redeliveryCount int")


def arrow_schema():
    """The columns as Arrow types (as Spark hands them to a Python data source)."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([
        pa.field("value", pa.binary()), pa.field("__key", pa.string()),
        pa.field("__topic", pa.string()), pa.field("__messageId", pa.string()),
        pa.field("__publishTime", ts), pa.field("__eventTime", ts),
        pa.field("__messageProperties", pa.map_(pa.string(), pa.string())),
        pa.field("__producerName", pa.string()), pa.field("__sequenceId", pa.int64()),
        pa.field("__redeliveryCount", pa.int32())])


# -- decoded chunks and index patterns (spark/_columnar.py and spark/_batched.py make them) ------
class Columns:
    """The decoded fields of one chunk: ints as int64 arrays with nulls, strings and binaries
    as Arrow arrays, properties as a map array; what record_batch takes instead of records.
    ids: None (one message per entry: the ids come from the scanned runs), or each entry's
    (ledger id, entry id, messages in its batch; 0 for a plain entry)."""

    def __init__(self, n: int, arrays: dict, ids: tuple | None = None):
        self.n = n
        self.arrays = arrays
        self.ids = ids

    def __len__(self):
        return self.n


def int64(v: int):
    """An int64 scalar: a bare int passed to a kernel is converted on every call, and that
    conversion tries to import dateutil each time it is missing (slower than the kernel)."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    return pa.scalar(v, pa.int64())


_PATTERNS: dict = {}


def pattern(kind: str, k: int, length: int, make):
    """The first `length` items of an index pattern that only grows (made for at least 16,384
    items, remade bigger when asked for more), so chunks of any size share it."""
    have = _PATTERNS.get((kind, k))
    if have is None or len(have) < length:
        have = _PATTERNS[(kind, k)] = make(max(length, 16384 * max(k, 1)))
    return have.slice(0, length)


def arange(n: int):
    """0, 1, .., n-1."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    return pattern("arange", 0, n, lambda size: pa.array(range(size), pa.int64()))


# -- record batches ------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _ms():
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    return pa.timestamp("ms", tz="UTC")


def _ms_timestamps(ms, typ):
    """An int64 array of epoch milliseconds as typ, a timestamp type."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    if ms.null_count == len(ms):
        return pa.nulls(len(ms), typ)
    return ms.cast(_ms()).cast(typ)


def binary_array(values, typ):
    """A binary array of a list of bytes. pa.array is the fastest way here (pyarrow 26): it
    took a third of the time of joining the bytes and building offsets from their lengths."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    return pa.array(values, typ)


def _event_times(ms, typ):
    """An int64 array of event times in epoch milliseconds as timestamps; 0 or None (an
    unset event time) is null."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow
    import pyarrow.compute as pc  # lazy: pyarrow is costly to import or optional

    if ms.null_count < len(ms):
        ms = pc.if_else(pc.equal(ms, int64(0)), pa.scalar(None, pa.int64()), ms)
    return _ms_timestamps(ms, typ)


def properties_array(values, typ):
    """Message properties (dicts or None) as a map array."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    if not any(values):
        return pa.nulls(len(values), typ)
    try:
        return pa.array(values, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # Properties written by other tools may hold non-string values: show them as text.
        fixed = [None if v is None else {str(k): None if x is None else str(x)
                                         for k, x in v.items()} for v in values]
        return pa.array(fixed, typ)


def properties_runs(parts: list, typ):
    """properties_array of a column given in parts, in order: lists of values (dicts or None)
    and runs (value, n), n messages with the same map (spark/_batched.py finds them). A run
    is built by Arrow from the map's keys and values, not a dict per message; any part that
    needs properties_array's text fallback makes the whole column go through it, as one list
    would."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    if not any(p[0] if type(p) is tuple else any(p) for p in parts):
        return pa.nulls(sum(p[1] if type(p) is tuple else len(p) for p in parts), typ)
    try:
        out = [map_run(p[0], p[1], typ) if type(p) is tuple else pa.array(p, typ)
               for p in parts]
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return properties_array([v for p in parts for v in (
            [p[0]] * p[1] if type(p) is tuple else p)], typ)
    return out[0] if len(out) == 1 else pa.concat_arrays(out)


def map_run(value, n: int, typ):
    """n times the map value (a dict, or None: nulls), from its keys and values repeated."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow
    import pyarrow.compute as pc  # lazy: pyarrow is costly to import or optional

    if value is None:
        return pa.nulls(n, typ)
    one = pa.array([value], typ)  # raises as pa.array of the whole column would
    k = len(value)
    keys, items = one.keys, one.items
    if k == 1:
        keys = constant(keys[0].as_py(), keys.type, n)
        items = constant(items[0].as_py(), items.type, n)
    elif k > 1:
        cycle = pattern("cycle", k, n * k, lambda size: pa.array(
            [i % k for i in range(size)], pa.int64()))
        keys, items = pc.take(keys, cycle), pc.take(items, cycle)
    return pa.MapArray.from_arrays(strides(k, n + 1), keys, items, type=typ)


def values_runs(parts: list, typ):
    """An array of a column given in parts, in order: lists of values and runs (value, n)."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    out = [pa.repeat(pa.scalar(p[0], typ), p[1]) if type(p) is tuple else pa.array(p, typ)
           for p in parts]
    if not out:
        return pa.array([], typ)
    return out[0] if len(out) == 1 else pa.concat_arrays(out)


def _message_ids(lids: list, eids: list, partition: int, bidx: list | None = None):
    """ledger:entry:partition, and :batchIndex for the messages of a batch."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow
    import pyarrow.compute as pc  # lazy: pyarrow is costly to import or optional

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


# The stored entry field each column is read from (the others are made without one).
_FIELD_OF = {"value": _PAYLOAD, "__key": _KEY, "__publishTime": _PUBLISH,
             "__eventTime": _EVENT, "__messageProperties": _PROPS,
             "__producerName": _PRODUCER, "__sequenceId": _SEQ}


def fields_for(schema) -> tuple:
    """What spark/_columnar.decode needs to read a chunk for these columns: the entry fields
    (the publish time always: time bounds filter on it) and the Arrow types of the string,
    binary and map ones."""
    need = {_PUBLISH}
    types = {}
    for f in schema:
        i = _FIELD_OF.get(f.name)
        if i is not None:
            need.add(i)
            if i in (_PAYLOAD, _KEY, _PROPS, _PRODUCER):
                types[i] = f.type
    return frozenset(need), types


class _Decoded:
    """Columns by entry field from records (a list per entry, as codec decodes them)."""

    def __init__(self, recs: list):
        n = len(recs)
        cols = list(zip_longest(*recs)) if n else []
        self.cols = cols + [(None,) * n] * (_EVENT + 1 - len(cols))

    def publish(self):
        import pyarrow as pa  # here, not at load: the plain install has no pyarrow

        return pa.array(self.cols[_PUBLISH], pa.int64())

    def get(self, field: int, typ):
        import pyarrow as pa  # here, not at load: the plain install has no pyarrow

        values = self.cols[field]
        if field == _PAYLOAD:
            return binary_array(values, typ)
        if field == _EVENT:
            return _event_times(pa.array(values, pa.int64()), typ)
        if field == _PROPS:
            return properties_array(values, typ)
        return pa.array(values, typ)


class _FromColumns:
    """The same from spark/_columnar.py's arrays."""

    def __init__(self, cols):
        self.arrays = cols.arrays

    def publish(self):
        return self.arrays[_PUBLISH]

    def get(self, field: int, typ):
        a = self.arrays[field]
        if field == _EVENT:
            return _event_times(a, typ)
        return a if a.type == typ else a.cast(typ)


_LOW = 10_000  # _run_ids writes an entry id as its digits above these four, then four digits;
# _batch_ids takes the digits of batch indexes below it from a table


@lru_cache(maxsize=None)
def _low_digits():
    """The digits of 0..9,999 as bytes, as printed ("42"), with each one's start in their
    concatenation (an int64 array of 10,001)."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    digits = [b"%d" % i for i in range(_LOW)]
    text = pa.array(digits, pa.binary())
    starts = pa.Array.from_buffers(pa.int32(), _LOW + 1, [None, text.buffers()[1]])
    return digits, starts.cast(pa.int64())


def _run_ids(runs, partition: int):
    """ledger:entry:partition for runs (ledger id, first entry id, count) of entries. Entry
    ids are consecutive, so they fall in segments of one width: within each ten thousand
    only the last four digits change, and below ten thousand the ids of 1, 2, 3 and 4
    digits. A segment's ids are a template repeated ("L:" + high digits + "0000" + ":P")
    with its last digits written in by column, one slice assignment each, and their
    offsets are a cached multiple of its width: a fifth of the time of a bytes join per
    segment, which took half as long as casting the ids to text and joining the pieces with
    kernels."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow
    import pyarrow.compute as pc  # lazy: pyarrow is costly to import or optional

    suffix = b":%d" % partition
    segments, total, size = [], 0, 0  # (head, first id's last digits, count, digits, width)
    for lid, e0, k in runs:
        e, end = e0, e0 + k
        prefix = b"%d:" % lid
        while e < end:
            high, low = divmod(e, _LOW)
            if high:
                head, digits, stop = prefix + b"%d" % high, 4, _LOW
            else:  # unpadded: as many digits as the number has
                digits = len(b"%d" % low)
                head, stop = prefix, 10 ** digits
            n = min(end - e, stop - low)
            width = len(head) + digits + len(suffix)
            segments.append((head, low, n, digits, width))
            total += n
            size += n * width
            e += n
    if not segments:
        return pa.array([], pa.string())
    columns = _digit_columns()
    out = bytearray(size)
    at = 0
    for head, low, n, digits, width in segments:
        out[at:at + n * width] = (head + b"0" * digits + suffix) * n
        for j in range(digits):
            first = at + len(head) + j
            out[first:at + n * width:width] = columns[4 - digits + j][low:low + n]
        at += n * width
    if len({seg[4] for seg in segments}) == 1:
        offsets = strides(segments[0][4], total + 1)
    else:
        parts, at = [], 0
        for _head, _low, n, _digits, width in segments:
            parts.append(pc.add(strides(width, n), int64(at)).cast(pa.int32()) if at else
                         strides(width, n))
            at += width * n
        offsets = pa.concat_arrays(parts + [pa.array([at], pa.int32())])
    return pa.Array.from_buffers(pa.string(), total, [None, offsets.buffers()[1],
                                                      pa.py_buffer(out)])


@lru_cache(maxsize=None)
def _digit_columns() -> tuple:
    """For j = 0..3, the j-th of the four digits of 0..9,999 ("0042"), as bytes."""
    return tuple(bytes((b"%04d" % i)[j] for i in range(_LOW)) for j in range(4))


def strides(width: int, length: int):
    """0, width, 2 * width, .. (length items) as int32: the offsets of strings of one width."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow
    import pyarrow.compute as pc  # lazy: pyarrow is costly to import or optional

    return pattern("strides", width, length, lambda size: pc.multiply(
        arange(size), int64(width)).cast(pa.int32()))


_CONSTANTS: dict = {}  # (value, type) -> the array constant() last made of it


def constant(value, typ, n: int):
    """value n times, as an array of typ. A few are kept (a split's chunks are all of one
    topic; a producer's properties repeat) and sliced."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    key = (value, typ)
    arr = _CONSTANTS.get(key)
    if arr is None or len(arr) < n:
        if len(_CONSTANTS) >= 16:
            _CONSTANTS.clear()  # a read of many topics: keep memory bounded
        arr = _CONSTANTS[key] = pa.repeat(pa.scalar(value, typ), max(n, 32_768))
    return arr.slice(0, n)


def entry_ids(ids, partition: int):
    """Message ids of entries given as (ledger id, entry id, messages): ledger:entry:partition
    for a plain entry (0 messages), ledger:entry:partition:i for each message i of a batch.
    Next batches of the same size are joined in one kernel (_batch_ids)."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow

    parts, plain, batches = [], [], []
    for lid, e, n in ids:
        if n == 0:
            if batches:
                parts.append(_batch_ids(batches, partition))
                batches = []
            if plain and plain[-1][0] == lid and plain[-1][1] + plain[-1][2] == e:
                plain[-1] = (lid, plain[-1][1], plain[-1][2] + 1)
            else:
                plain.append((lid, e, 1))
            continue
        if plain:
            parts.append(_run_ids(plain, partition))
            plain = []
        if batches and batches[-1][2] != n:
            parts.append(_batch_ids(batches, partition))
            batches = []
        batches.append((lid, e, n))
    if plain:
        parts.append(_run_ids(plain, partition))
    if batches:
        parts.append(_batch_ids(batches, partition))
    if not parts:
        return pa.array([], pa.string())
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _batch_ids(batches: list, partition: int):
    """ledger:entry:partition:i of the messages of batches (ledger id, entry id, n) of one size
    n. Batch j's ids are its prefix P then the digits of 0..n-1, so all of them back to back
    are P + P.join(digits), one bytes join a batch (the digits from a table); and
    message m of batch j starts at (the bytes before batch j) + (where m's digits start among
    the digits) + m * len(P), one kernel pass for the whole chunk."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow
    import pyarrow.compute as pc  # lazy: pyarrow is costly to import or optional

    n, k = batches[0][2], len(batches)
    if n > _LOW:  # batches beyond the table (Pulsar's limit is 1000 messages by default)
        indexes = arange(n).cast(pa.string())
        parts = [pc.binary_join_element_wise(pa.scalar(f"{lid}:{e}:{partition}:", pa.string()),
                                             indexes, pa.scalar("", pa.string()))
                 for lid, e, _n in batches]
        return parts[0] if k == 1 else pa.concat_arrays(parts)
    digits, starts = _low_digits()
    prefixes = [b"%d:%d:%d:" % (lid, e, partition) for lid, e, _n in batches]
    values = b"".join(p + p.join(digits[:n]) for p in prefixes)
    within = starts.slice(0, n + 1)  # where each index's digits start, and their end
    # For message m of batch j: before[j] + within[m] + m * plen[j], laid out by taking
    # per-batch values at j = i // n and per-message ones at m = i % n.
    before, plen, at = [], [], 0
    for p in prefixes:
        before.append(at)
        plen.append(len(p))
        at += len(p) * n + within[n].as_py()
    rows = arange(k * n)
    j = pc.divide(rows, int64(n))  # integers: a whole division
    m = pc.subtract(rows, pc.multiply(j, int64(n)))
    offsets = pc.add(pc.add(pc.take(pa.array(before, pa.int64()), j), pc.take(within, m)),
                     pc.multiply(m, pc.take(pa.array(plen, pa.int64()), j)))
    offsets = pa.concat_arrays([offsets, pa.array([at], pa.int64())])
    return pa.Array.from_buffers(pa.string(), k * n, [
        None, offsets.cast(pa.int32()).buffers()[1], pa.py_buffer(values)])


def record_batch(schema, topic: str, partition: int, rows, recs,
                 lo_ms: int | None = None, hi_ms: int | None = None):
    """The columns schema asks for, in its order, from one chunk of one topic partition: rows
    are the scanned (offset, ledger id, entry id, raw) or a broker/scan.py IdColumns, and recs
    the decoded entries or a Columns. Entries published outside [lo_ms, hi_ms) are left out."""
    import pyarrow as pa  # here, not at load: the plain install has no pyarrow
    import pyarrow.compute as pc  # lazy: pyarrow is costly to import or optional

    from pulsarctl.broker.scan import IdColumns  # lazy: one-shot produce never needs it

    n = len(recs)
    src = _FromColumns(recs) if isinstance(recs, Columns) else _Decoded(recs)
    publish = src.publish()
    arrays = []
    for f in schema:
        name, typ = f.name, f.type
        if name in _FIELD_OF and name != "__publishTime":
            a = src.get(_FIELD_OF[name], typ)
        elif name == "__topic":
            a = constant(topic, typ, n)
        elif name == "__messageId":
            if isinstance(recs, Columns) and recs.ids is not None:
                a = entry_ids(recs.ids, partition).cast(typ)
            elif isinstance(rows, IdColumns):
                a = _run_ids(rows, partition).cast(typ)
            else:
                bidx = None
                lids, eids = [r[1] for r in rows], [r[2] for r in rows]
                if any(len(r) > 4 for r in rows):  # messages of batches
                    bidx = [r[4] if len(r) > 4 else -1 for r in rows]
                a = _message_ids(lids, eids, partition, bidx).cast(typ)
        elif name == "__publishTime":
            a = _ms_timestamps(publish, typ)
        elif name == "__redeliveryCount":
            a = pa.nulls(n, typ)
        else:  # the reader refuses other columns before it gets here
            raise KeyError(name)
        arrays.append(a)
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    if lo_ms is not None or hi_ms is not None:
        keep = None
        if lo_ms is not None:
            keep = pc.greater_equal(publish, pa.scalar(lo_ms, pa.int64()))
        if hi_ms is not None:
            below = pc.less(publish, pa.scalar(hi_ms, pa.int64()))
            keep = below if keep is None else pc.and_(keep, below)
        batch = batch.filter(keep)
    return batch
