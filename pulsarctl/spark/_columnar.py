"""Stored entries read into Arrow columns by Arrow's own kernels.

Decoding a chunk of entries with msgpack makes a Python object per field of every entry (ten
per message), and turning those into Arrow columns walks them all again: that was most of a
split's read time. Here the chunk's raw entries are joined into one buffer and msgpack is
parsed for all entries at once, one field at a time: a field's header bytes are gathered with
take(), its size and value found by table lookups and integer kernels, and each string or
binary column is cut from the joined buffer by offsets. No Python object is made per entry.

Only what plain entries hold is read here (store/codec.py's version 1; at most 9 fields, i.e.
no compression, chunk or batch metadata; str/bin/int/nil where pulsarctl/messages.py puts
them; string properties). decode() returns None for any other chunk, and the caller decodes it
in Python as before, so what this reads and what the Python path reads are the same rows.
"""
from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.compute as pc

from pulsarctl.arrow_columns import Columns, int64 as _s, map_run as _map_run
from pulsarctl.errors import Unsupported
from pulsarctl.spark._chunk import _bools, _Chunk, _interleave_index, _pieces
from pulsarctl.spark._field_walk import (
    _KIND, _PLAIN, ANY_HEAD, BIN_HEAD, MAX_FIELDS, STR_HEAD, _Same, _Walk,
)
from store import codec


def _cut(buf, start, end, valid, typ) -> pa.Array:
    """The bytes [start, end) of buf for each row as a binary or string array (null where
    valid is false)."""
    if len(start) == 0:
        return pa.array([], typ)
    out = _pieces(buf, start, end)
    if valid is not None and pc.all(valid).as_py() is False:
        out = pc.if_else(valid, out, pa.scalar(None, pa.binary()))
    if typ != pa.binary():
        try:
            out = out.cast(typ)
        except pa.ArrowInvalid as e:  # not UTF-8: the Python path decides what to do
            raise Unsupported(str(e)) from None
    return out


def _stack(parts: list, n: int, keep) -> pa.Array:
    """Arrays of n (one per item index), laid out entry after entry, keeping the items keep
    marks (None: all)."""
    m = len(parts)
    out = parts[0] if m == 1 else pc.take(pa.concat_arrays(parts), _interleave_index(n, m))
    return out if keep is None else out.filter(keep)


def _properties(c: _Chunk, count, valid, keys, vals, typ) -> pa.Array:
    n = c.n
    m = len(keys)
    if m == 0:
        # No entry has a property (messages.py stores none as nil): null, as the Python path.
        return pa.nulls(n, typ)
    offsets = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(count)]
                               ).cast(pa.int32())
    keep = pc.greater(count, _s(0)) if m == 1 else pc.take(
        pa.concat_arrays([pc.greater(count, _s(j)) for j in range(m)]), _interleave_index(n, m))
    ks, ke = (_stack([k[i] for k in keys], n, keep) for i in (0, 1))
    vs, ve = (_stack([v[i] for v in vals], n, keep) for i in (0, 1))
    vv = None
    if any(v[2] is not None for v in vals):
        vv = _stack([_bools(True, n) if v[2] is None else v[2] for v in vals],
                    n, keep)
    k_arr = _cut(c.buf, ks, ke, None, pa.string())
    v_arr = _cut(c.buf, vs, ve, vv, pa.string())
    if valid is not None and pc.all(valid).as_py() is False:
        # A nil map is a null row: it holds no items, so its offsets repeat.
        return pa.MapArray.from_arrays(offsets, k_arr, v_arr, type=typ, mask=pc.invert(valid))
    return pa.MapArray.from_arrays(offsets, k_arr, v_arr, type=typ)


def _first(pieces: list) -> bytes:
    """The first two bytes of the first entry of pieces."""
    v, lo, _hi = pieces[0]
    if not codec.is_block(v):
        return v[:2]
    base, a, _b, _f, _t, _s = codec.block_span(v, lo, lo + 1)
    return v[base + a:base + a + 2]


def decode_pieces(pieces: list, need: frozenset, types: dict) -> Columns | None:
    """decode() of the entries of store/ledger.py's scan_pieces pieces, taking blocks whole
    (for pieces that are mostly single entries, decode(values) joins them faster); None as
    decode() says."""
    if not pieces:
        return None
    try:
        v0 = _first(pieces)
        if len(v0) < 2 or v0[0] != _PLAIN or not 0x90 <= v0[1] <= 0x90 + MAX_FIELDS:
            return None  # the first entry rules the chunk out (a batch, say): join nothing
        return _decode(_Chunk.from_pieces(pieces), need, types)
    except (Unsupported, codec.CorruptValue, pa.ArrowException, IndexError, OverflowError,
            struct.error):
        return None


def decode(values: list, need: frozenset, types: dict) -> Columns | None:
    """The fields need (indexes above) of every entry as Arrow arrays, or None when an entry
    is outside what this reads. types gives the Arrow type of the string and binary fields
    (PRODUCER, PAYLOAD, KEY, PROPS)."""
    if not values:
        return None
    v0 = values[0]
    if len(v0) < 2 or v0[0] != _PLAIN or not 0x90 <= v0[1] <= 0x90 + MAX_FIELDS:
        return None  # the first entry rules the chunk out (a batch, say): join nothing
    try:
        return _decode(_Chunk(values), need, types)
    except (Unsupported, pa.ArrowException, IndexError, OverflowError):
        return None


def _decode(c: _Chunk, need: frozenset, types: dict) -> Columns:
    """The fields need of every entry of chunk c (the work of decode())."""
    w = _Walk(c)
    out = {}
    last = max(need) if need else -1
    for f in range(last + 1):
        kind = _KIND[f]
        if f in w.known:
            if f in need:
                out[f] = w.known[f]
            continue
        present = w.presence(f)
        if kind == "int":
            got = w.int(f, present)
        elif kind == "map":
            got = w.properties(f, present)
        else:
            table = STR_HEAD if kind == "str" else BIN_HEAD if kind == "bin" else ANY_HEAD
            got = w.bytes(f, table, present)
        if f in need:
            out[f] = got
    w.check_within()
    arrays = {}
    for f, v in out.items():
        kind = _KIND[f]
        if kind == "int":
            arrays[f] = v
        elif f in w.known:
            arrays[f] = v if v.type == types[f] else v.cast(types[f])
        elif isinstance(v, _Same):
            arrays[f] = _map_run(dict(v.items), c.n, types[f])
        elif kind == "map":
            arrays[f] = _properties(c, *v, types[f])
        else:
            arrays[f] = _cut(c.buf, *v, types[f])
    return Columns(c.n, arrays)
