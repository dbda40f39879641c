"""Chunks of batch entries read into Arrow columns.

A batch entry's payload holds its messages' metadata column by column (payloads, properties,
keys, ordering keys, event times, sequence ids: pulsarctl/broker/batches.py), the same
decoding as broker/unpack.py's batch_columns, columnar: unpack.records makes a record per
message (unpack.expand), which would then be transposed back into columns, and that made a
batched topic read nearly three times slower than a plain one.

Even a list per column was most of what was left: msgpack made a dict per message for the
properties (with two new strings each), though a producer's messages nearly always carry the
same map, or none. So a batch's columns are read with one msgpack unpacker, and each column
but the payloads is first looked at as bytes: a column that is one value n times is that
value's bytes n times over (msgpack's skip measures the first value; msgpack is prefix-free,
so n copies of exactly one value's bytes are n times that value), and becomes a run (value,
n) that Arrow repeats, without a Python object per message. Other columns are decoded as
lists, and a column the schema does not ask for is skipped, never decoded. Next batches of a
chunk share their runs (the same map stored alike), their sequence ids (a range while they
run on by one) and their message ids' kernels (arrow_columns.entry_ids). In-process, 1M
messages of 100 B in batches of 1000 with a key and a property each: 0.38 s to 0.14 s.

Plain entries among them (a batch of one is stored plain) are read here too, compressed ones
decompressed. A chunk holding a chunked message's entry is left to the Python path (decode()
returns None), which joins the chunks.
"""
from __future__ import annotations

import msgpack
import pyarrow as pa
import pyarrow.compute as pc

from pulsarctl.arrow_columns import (
    Columns, arange as _arange, binary_array as _binary, int64 as _s, properties_runs,
    values_runs,
)
from pulsarctl.broker.unpack import batch_columns
from pulsarctl.entries import (
    F_COMPRESSION, F_EVENT_TIME as EVENT, F_KEY as KEY, F_NUM_MESSAGES, F_PAYLOAD as PAYLOAD,
    F_PRODUCER_NAME as PRODUCER, F_PROPERTIES as PROPS, F_PUBLISH_TIME as PUBLISH,
    F_SEQUENCE_ID as SEQ, chunk_of, payload as stored_payload,
)

_unpackb = msgpack.unpackb
_Unpacker = msgpack.Unpacker
_PLAIN = 1          # store/codec.py's version byte of a plain msgpack value
_NIL = 0xC0         # msgpack's nil: a column no message of the batch sets
_NIL_BYTES = bytes([_NIL])
RUN_MIN = 16        # a run shorter than this is added to the column's list (Arrow calls cost)


def decode(runs, recs: list, need: frozenset, types: dict) -> Columns | None:
    """The fields need of every message of the entries recs (decoded records, in the order of
    runs: (ledger id, first entry id, count)), with the message ids' parts; None when an entry
    is a chunk."""
    return _decode(runs, recs, need, types)


class _Column:
    """One column of a chunk as it is read: values in a list, and runs (value, n) of a value
    n times kept apart when long (parts: lists and runs, in order). last: the stored bytes of
    the value of the last part when it is a run."""
    __slots__ = ("parts", "flat", "last")

    def __init__(self):
        self.parts = []
        self.flat = []
        self.last = None

    def extend(self, values: list):
        self.flat += values

    def run(self, value, n: int, unit: bytes):
        if n < RUN_MIN:
            self.flat += [value] * n
            return
        if self.flat:
            self.parts.append(self.flat)
            self.flat = []
        elif unit == self.last:
            # The next batch of the same map (the usual case): one run for both. Equal as
            # stored, not as Python values: {"a": 1} == {"a": True}, and a map's key order.
            self.parts[-1] = (value, self.parts[-1][1] + n)
            return
        self.parts.append((value, n))
        self.last = unit

    def done(self) -> list:
        if self.flat:
            self.parts.append(self.flat)
            self.flat = []
        return self.parts


def _decode(runs, recs, need, types):
    pay = []
    props, keys = _Column(), _Column()
    pub, prod, seq, events = [], [], [], []  # per entry: Arrow arrays, or (value, count)
    ids = []  # per entry: (ledger id, entry id, messages; 0 for a plain entry)
    want = {f: f in need for f in (PRODUCER, SEQ, PAYLOAD, PROPS, KEY, EVENT)}
    columns = (want[PAYLOAD], want[PROPS], want[KEY], False, want[EVENT], want[SEQ])
    i = 0
    for lid, e0, k in runs:
        for e in range(e0, e0 + k):
            r = recs[i]
            i += 1
            # Read by index (pulsarctl/entries.py's constants): this runs once per entry.
            if len(r) > F_NUM_MESSAGES and r[F_NUM_MESSAGES]:  # a batch
                n, p, pr, ks, _okeys, ev, sq = _batch(r, f"{lid}:{e}", columns)
                ids.append((lid, e, n))
                pub.append((r[PUBLISH], n))
                if want[PAYLOAD]:
                    pay += p
                if want[PRODUCER]:
                    prod.append((r[PRODUCER], n))
                if want[SEQ]:
                    if sq is None:  # first, first + 1, ..: one range with the last's
                        first = r[SEQ]
                        last = seq[-1] if seq else None
                        if type(last) is _Range and last.stop == first:
                            last.stop += n
                        else:
                            seq.append(_Range(first, first + n))
                    else:
                        seq.append(sq[:2] if type(sq) is tuple else pa.array(sq, pa.int64()))
                if want[PROPS]:
                    _add(props, pr, n)
                if want[KEY]:
                    _add(keys, ks, n)
                if want[EVENT]:
                    if ev is None:
                        events.append((0, n))
                    else:
                        events.append(ev[:2] if type(ev) is tuple else pa.array(ev, pa.int64()))
                continue
            payload = r[PAYLOAD]
            if len(r) > F_COMPRESSION:
                if chunk_of(r) is not None:
                    return None
                payload = stored_payload(r, f"{lid}:{e}")
            ids.append((lid, e, 0))
            pub.append((r[PUBLISH], 1))
            if want[PAYLOAD]:
                pay.append(payload)
            if want[PRODUCER]:
                prod.append((r[PRODUCER], 1))
            if want[SEQ]:
                seq.append((r[SEQ], 1))
            if want[PROPS]:
                props.flat.append(r[PROPS] if len(r) > PROPS else None)
            if want[KEY]:
                keys.flat.append(r[KEY] if len(r) > KEY else None)
            if want[EVENT]:
                events.append((r[EVENT] if len(r) > EVENT else 0, 1))
    arrays = {PUBLISH: _runs(pub, pa.int64())}
    if want[PAYLOAD]:
        arrays[PAYLOAD] = _binary(pay, types[PAYLOAD])
    if want[PRODUCER]:
        arrays[PRODUCER] = _runs(prod, types[PRODUCER])
    if want[SEQ]:
        arrays[SEQ] = _runs(seq, pa.int64())
    if want[PROPS]:
        arrays[PROPS] = properties_runs(props.done(), types[PROPS])
    if want[KEY]:
        arrays[KEY] = values_runs(keys.done(), types[KEY])
    if want[EVENT]:
        arrays[EVENT] = _runs(events, pa.int64())
    return Columns(len(arrays[PUBLISH]), arrays, ids=ids)


def _add(col: _Column, got, n: int):
    """A batch's column into the chunk's: None (no message sets it: n Nones), a run (value,
    n, its stored bytes) or a list."""
    if got is None:
        col.run(None, n, _NIL_BYTES)
    elif type(got) is tuple:
        col.run(*got)
    else:
        col.extend(got)


def _batch(rec: list, where: str, wanted: tuple) -> tuple:
    """A batch entry's message count and its columns [payloads, properties, keys, ordering
    keys, event times, sequence ids], each None where no message sets it or wanted says it is
    not read, else a list or a run (value, n, its stored bytes: _column), payloads always a
    list. A serialized batch the unpacker cannot read goes to batch_columns, which raises."""
    body = stored_payload(rec, where)
    try:
        got = _read_body(body, wanted) if body[0] == _PLAIN else None
    except Exception:  # msgpack raises its own: batch_columns below says what is wrong
        got = None
    if got is None:
        cols = batch_columns(rec, where)
        # An empty column is one no message sets, as the unpacker's path reads it.
        return (len(cols[0]),) + tuple(c or None if w else None
                                       for c, w in zip(cols[:6], wanted))
    return got


def _read_body(body, wanted: tuple) -> tuple | None:
    """_batch's answer from a serialized batch (after its version byte), read with an
    unpacker: payloads decoded or skipped, each other wanted column read by _column."""
    view = memoryview(body)[1:]
    u = _unpacker(view)
    if u.read_array_header() < 6:
        return None
    base = 0  # where in view the unpacker's tell() counts from
    if wanted[0]:
        p = u.unpack()
        n = len(p)
        out = [n, p]
    else:
        n = _array_len(view, u.tell())
        u.skip()
        out = [n, None]
    for w in wanted[1:]:
        a = base + u.tell()
        if not w or view[a] == _NIL:
            u.skip()
            out.append(None)
            continue
        col, u, base = _column(u, base, view, a, n)
        out.append(col)
    return tuple(out)


def _unpacker(data):
    """An unpacker over data (it copies them: a memoryview may be given)."""
    u = _Unpacker(raw=False, strict_map_key=False, max_buffer_size=0)
    u.feed(data)
    return u


def _array_len(view, a: int) -> int:
    """The length of the msgpack array whose header starts at view[a]."""
    h = view[a]
    if 0x90 <= h <= 0x9F:
        return h & 0x0F
    if h == 0xDC:
        return int.from_bytes(view[a + 1:a + 3], "big")
    if h == 0xDD:
        return int.from_bytes(view[a + 1:a + 5], "big")
    raise ValueError(f"not a msgpack array (0x{h:02x})")


def _column(u, base: int, view, a: int, n: int) -> tuple:
    """The column of n values at view[a], u an unpacker standing there whose tell() counts
    from base; returns (the column, an unpacker standing after it, its base). A column that
    is one value n times is (value, n): it is that value's bytes n times over, and only that
    (skip measures the first value; msgpack is prefix-free), so no Python object is made per
    message. Else the list of its values."""
    if _array_len(view, a) != n:
        raise ValueError("a column's length is not the batch's")
    u.read_array_header()
    if n > 1:
        start = base + u.tell()
        u.skip()
        step = base + u.tell() - start
        end = start + n * step
        unit = bytes(view[start:start + step])
        if bytes(view[start + step:start + 2 * step]) == unit and \
                bytes(view[start:end]) == unit * n:
            value = _unpackb(unit, raw=False, strict_map_key=False)
            return (value, n, unit), _unpacker(view[end:]), end
    u = _unpacker(view[a:])
    return u.unpack(), u, a


class _Range:
    """Sequence ids start, start + 1, .., stop - 1 (batches whose ids run on by one)."""
    __slots__ = ("start", "stop")

    def __init__(self, start: int, stop: int):
        self.start = start
        self.stop = stop


def _runs(parts: list, typ) -> pa.Array:
    """One array from parts that are arrays, _Ranges or (value, count): count times the value
    (runs of single values become one array, and next runs of one value one run)."""
    out, ones = [], []
    run = None
    for x in parts:
        if type(x) is tuple:
            if run is not None:
                if run[0] == x[0]:
                    run = (run[0], run[1] + x[1])
                    continue
                out.append(pa.repeat(pa.scalar(run[0], typ), run[1]))
                run = None
            if x[1] == 1:
                ones.append(x[0])
                continue
        if ones:
            out.append(pa.array(ones, typ))
            ones = []
        if run is not None:
            out.append(pa.repeat(pa.scalar(run[0], typ), run[1]))
            run = None
        if type(x) is tuple:
            run = x
        elif type(x) is _Range:
            out.append(pc.add(_arange(x.stop - x.start), _s(x.start)))
        else:
            out.append(x)
    if ones:
        out.append(pa.array(ones, typ))
    if run is not None:
        out.append(pa.repeat(pa.scalar(run[0], typ), run[1]))
    return out[0] if len(out) == 1 else pa.concat_arrays(out)
