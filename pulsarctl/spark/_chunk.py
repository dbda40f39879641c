"""A chunk of stored entries joined in one Arrow buffer, and the index patterns the kernels
that read it gather with.

The columnar decoder (spark/_columnar.py) parses msgpack for every entry of a chunk at once, and
for that every entry must lie in one buffer with its bounds as Arrow offsets: _Chunk joins the
entries (or, from store/ledger.py's scan_pieces, whole blocks of them, copied once) and reads
bytes and big-endian numbers at many positions with one take() each. It is apart from the
field walk (spark/_field_walk.py) because it knows nothing of msgpack or of the entry's fields:
only bytes, positions and the repeating index arrays Arrow's kernels need.
"""
from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.compute as pc

from pulsarctl.arrow_columns import int64 as _s, pattern as _pattern
from pulsarctl.errors import Unsupported
from store import codec

_U32 = struct.Struct("<I")
_PAD = bytes(16)  # gathers of up to 8 bytes past a header never leave the buffer
# The Arrow type of the unsigned k-byte integer (eight bytes: read as int64).
_UINT_TYPES = {2: pa.uint16(), 4: pa.uint32(), 8: pa.int64()}


def _repeat_rows(n: int, k: int) -> pa.Array:
    """0,..,0, 1,..,1, ..: each row index k times."""
    return _pattern("rep", k, n * k, lambda size: pa.array(
        [i for i in range(size // k) for _ in range(k)], pa.int64()))


def _tile(n: int, k: int) -> pa.Array:
    """0,..,k-1 for each of n rows."""
    return _pattern("tile", k, n * k, lambda size: pa.array(list(range(k)) * (size // k),
                                                             pa.int64()))


def _even(n: int) -> pa.Array:
    return _pattern("even", 0, n, lambda size: pa.array(range(0, 2 * size, 2), pa.int64()))


def _interleave_index(n: int, m: int) -> pa.Array:
    """Where item (row r, column j) of m columns of n, stacked column after column, is taken
    from when they are laid out row after row: j * n + r."""
    return pc.add(_repeat_rows(n, m), pc.multiply(_tile(n, m), _s(n)))


class _Chunk:
    """A chunk's entries joined in one buffer (plus padding), with each entry's bounds."""

    heads = None      # from_pieces: per piece, the bytes each of its entries starts with
    run_ends = None   # .. and the count of entries up to the end of each piece

    def __init__(self, values: list | None):
        if values is None:
            return  # from_pieces fills it in
        self.n = n = len(values)
        joined = pa.array(values + [_PAD], pa.binary())  # joins in C, and gives the offsets
        if not isinstance(joined, pa.BinaryArray):  # past 2 GiB: int32 offsets cannot say
            raise Unsupported("a chunk too large for one buffer")
        offs = pa.Array.from_buffers(pa.int32(), n + 2, [None, joined.buffers()[1]]
                                     ).cast(pa.int64())
        self.buf = joined.buffers()[2]
        self.u8 = pa.Array.from_buffers(pa.uint8(), offs[n + 1].as_py(), [None, self.buf])
        self.starts = offs.slice(0, n)
        self.ends = offs.slice(1, n)

    @classmethod
    def from_pieces(cls, pieces: list) -> "_Chunk":
        """The chunk of the entries in store/ledger.py's scan_pieces pieces, taking blocks of
        entries whole: a block's bytes are copied once into the buffer and its header's end
        offsets become the entries' bounds by one shift per block, with no Python object per
        entry."""
        bodies, ends_raw, run_ends, shifts, heads = [], [], [], [], []
        total = count = 0
        for v, lo, hi in pieces:
            if codec.is_block(v):
                try:
                    base, a, b, ends_from, ends_to, shared = codec.block_span(v, lo, hi)
                except (codec.CorruptValue, struct.error):
                    raise Unsupported("a block of entries has a bad header") from None
                mv = memoryview(v)
                bodies.append(mv[base + a:base + b])
                ends_raw.append(mv[ends_from:ends_to])
                heads.append(mv[base:base + shared])  # what every entry of it starts with
                shifts.append(total - a)
                total += b - a
            else:
                bodies.append(v)
                ends_raw.append(_U32.pack(len(v)))
                heads.append(v)  # a single entry shares all of itself
                shifts.append(total)
                total += len(v)
            count += hi - lo
            run_ends.append(count)
        if total + len(_PAD) >= 1 << 31:
            raise Unsupported("a chunk too large for one buffer")
        bodies.append(_PAD)
        c = cls(None)
        c.n = count
        c.heads, c.run_ends = heads, run_ends
        c.buf = pa.py_buffer(b"".join(bodies))
        c.u8 = pa.Array.from_buffers(pa.uint8(), total + len(_PAD), [None, c.buf])
        ends = pa.Array.from_buffers(pa.uint32(), count, [None, pa.py_buffer(
            b"".join(ends_raw))]).cast(pa.int64())
        if len(pieces) == 1:
            ends = pc.add(ends, _s(shifts[0])) if shifts[0] else ends
        else:
            ends = pc.add(ends, _runs_decoded(run_ends, pa.array(shifts, pa.int64())))
        c.ends = ends
        c.starts = pa.concat_arrays([pa.array([0], pa.int64()), ends.slice(0, count - 1)])
        # Entries must lie in order in the buffer (the kernels cut pieces by these bounds).
        if pc.all(pc.less_equal(c.starts, c.ends)).as_py() is False:
            raise Unsupported("a block of entries has a bad header")
        return c

    def byte(self, pos) -> pa.Array:
        """The byte at each position, as uint8 (compared with _u8 scalars: a scalar of
        another type would cast the whole array first)."""
        return pc.take(self.u8, pos)

    def be(self, pos, k: int) -> pa.Array:
        """The k bytes (1, 2, 4 or 8) at each position as an unsigned big-endian number (eight
        bytes give the two's complement int64), as int64."""
        if k == 1:
            return self.byte(pos).cast(pa.int64())
        typ = _UINT_TYPES[k]
        # Gathered last byte first, so that the gathered buffer is the little-endian number.
        idx = pc.subtract(pc.take(pc.add(pos, _s(k - 1)), _repeat_rows(self.n, k)),
                          _tile(self.n, k))
        raw = pc.take(self.u8, idx)
        out = pa.Array.from_buffers(typ, self.n, [None, raw.buffers()[1]])
        return out if k == 8 else out.cast(pa.int64())



def _zeros(n: int) -> pa.Array:
    return _pattern("zeros", 0, n, lambda size: pa.Array.from_buffers(
        pa.int64(), size, [None, pa.py_buffer(bytes(8 * size))]))


def _bools(value: bool, n: int) -> pa.Array:
    """n times value (pa.repeat of a boolean takes six times as long)."""
    return _pattern("true" if value else "false", 0, n,
                    lambda size: pa.array([value] * size, pa.bool_()))


def _runs_decoded(run_ends: list, values: pa.Array) -> pa.Array:
    """values[i] repeated up to run_ends[i], as a plain array. Made from buffers: Arrow's
    RunEndEncodedArray.from_arrays tries to import pandas at every call (34 us here)."""
    ree = pa.RunEndEncodedArray.from_buffers(
        pa.run_end_encoded(pa.int32(), values.type), run_ends[-1], [None], 0,
        children=[pa.array(run_ends, pa.int32()), values])
    return pc.run_end_decode(ree)


def _pieces(buf, start, end) -> pa.Array:
    """buf[start:end] of each row as a binary array. The caller makes sure that the pieces
    lie in order inside buf (start <= end <= the next start; buf is under 2 GiB).
    start + (end << 32) as int64 is, in memory, the int32 pair (start, end): the offsets of a
    binary array of piece, gap, piece, .., piece (2n-1 elements) over buf, made without a
    gather; its even elements are the pieces."""
    n = len(start)
    pairs = pc.add(start, pc.shift_left(end, _s(32)))
    whole = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pairs.buffers()[1], buf])
    return pc.take(whole, _even(n))
