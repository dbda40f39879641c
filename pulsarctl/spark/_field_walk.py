"""An entry's msgpack fields read for every entry of a chunk at once, one field at a time.

_Walk keeps every entry's position at its current field and moves it field by field: a field's
header byte is gathered for all entries with one take(), its size and value found by lookups in
the header tables below and by integer kernels, so no Python object is made per entry. The fields
every entry of a block shares in its first bytes (publish time and producer) are parsed once per
block in Python (_leading), and a map every entry holds alike once per chunk (_Same). It is apart
from the chunk (spark/_chunk.py), which only holds the bytes, and from spark/_columnar.py, which
turns what the walk finds into the Arrow columns of a read.
"""
from __future__ import annotations

import struct
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

from pulsarctl.arrow_columns import constant as _constant, int64 as _s
from pulsarctl.entries import (
    F_COMPRESSION, F_EVENT_TIME as EVENT, F_KEY as KEY, F_ORDERING_KEY as OKEY,
    F_PAYLOAD as PAYLOAD, F_PRODUCER_NAME as PRODUCER, F_PROPERTIES as PROPS,
    F_PUBLISH_TIME as PUBLISH, F_SEQUENCE_ID as SEQ,
)
from pulsarctl.errors import Unsupported
from pulsarctl.spark._chunk import _bools, _Chunk, _pieces, _runs_decoded, _zeros

# The fields of a stored entry (pulsarctl/entries.py) this reads, by index: PUBLISH .. EVENT.
_KIND = {PUBLISH: "int", PRODUCER: "str", SEQ: "int", PAYLOAD: "bin", PROPS: "map",
         KEY: "str", OKEY: "any", EVENT: "int"}
MAX_FIELDS = F_COMPRESSION  # compression metadata and on: the Python path reads those
_PLAIN = 1      # store/codec.py's version byte for an uncompressed msgpack value


@lru_cache(maxsize=None)
def _u8(v: int) -> pa.Scalar:
    return pa.scalar(v, pa.uint8())


def _table(fn) -> pa.Array:
    return pa.array([fn(h) for h in range(256)], pa.int64())


def _int_size(h):
    if h <= 0x7F or h >= 0xE0 or h == 0xC0:
        return 1
    return {0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9, 0xD0: 2, 0xD1: 3, 0xD2: 5, 0xD3: 9}.get(h, 0)


# msgpack headers as tables indexed by the header byte. Integers: total size (0: not an
# integer), how far to shift the 8 bytes after the header right, the mask of what is left,
# and the value of a fixint.
INT_SIZE = _table(_int_size)
INT_SHIFT = _table(lambda h: 64 - 8 * (_int_size(h) - 1) if _int_size(h) > 1 else 0)
INT_FIX = _table(lambda h: h if h <= 0x7F else h - 256 if h >= 0xE0 else 0)
# The mask for the headers of wider integers (all bits for the signed ones: the shift keeps
# their sign), 0 for the one-byte ones, whose value is INT_FIX.
INT_MASK = _table(lambda h: 0 if _int_size(h) <= 1 else
                  (1 << 8 * (_int_size(h) - 1)) - 1 if h in (0xCC, 0xCD, 0xCE) else -1)
# 1 for the headers the two-byte read takes (fixints, uint8, uint16), 0 for any other.
INT_TWO = _table(lambda h: 1 if h <= 0x7F or h >= 0xE0 or h in (0xCC, 0xCD) else 0)
# The weights of the two bytes after a header of the two-byte read.
INT_B1 = _table(lambda h: {0xCC: 1, 0xCD: 256}.get(h, 0))
INT_B2 = _table(lambda h: 1 if h == 0xCD else 0)
# Strings and binaries: header size (0: not one), bytes of the length after the first header
# byte, and a fixstr's length.
_STR = {0xD9: 1, 0xDA: 2, 0xDB: 4}
_BIN = {0xC4: 1, 0xC5: 2, 0xC6: 4}
STR_HEAD = _table(lambda h: 1 if 0xA0 <= h <= 0xBF or h == 0xC0 else 1 + _STR.get(h, -1))
BIN_HEAD = _table(lambda h: 1 if h == 0xC0 else 1 + _BIN.get(h, -1))
ANY_HEAD = _table(lambda h: 1 if 0xA0 <= h <= 0xBF or h == 0xC0
                  else 1 + _STR.get(h, _BIN.get(h, -1)))
LEN_BYTES = _table(lambda h: _STR.get(h, _BIN.get(h, 0)))
FIX_LEN = _table(lambda h: h & 0x1F if 0xA0 <= h <= 0xBF else 0)
MAP_HEAD = _table(lambda h: 1 if 0x80 <= h <= 0x8F or h == 0xC0 else
                  {0xDE: 3, 0xDF: 5}.get(h, 0))
MAP_FIX = _table(lambda h: h & 0x0F if 0x80 <= h <= 0x8F else 0)
NIL = 0xC0


def _min_max(a) -> tuple:
    mm = pc.min_max(a)
    return mm["min"].as_py(), mm["max"].as_py()


def _when(present, new, old):
    """new where present (None: everywhere), old elsewhere."""
    return new if present is None else pc.if_else(present, new, old)


def _and(present, mask):
    return mask if present is None else pc.and_(present, mask)


class _Walk:
    """Every entry's position at its current field, moved field by field: each field's
    header is read by table lookups for all entries at once. The fields every entry of a
    block starts with alike (publish time and producer) are read once per block instead."""

    def __init__(self, chunk: _Chunk):
        self.c = chunk
        self.known: dict = {}  # field -> its values, read from the pieces' shared prefixes
        if chunk.heads is not None and self._from_heads(chunk):
            return
        if _min_max(chunk.byte(chunk.starts)) != (_PLAIN, _PLAIN):
            raise Unsupported("an entry is not plain msgpack")
        head = chunk.byte(pc.add(chunk.starts, _s(1)))
        lo, hi = _min_max(head)
        if lo < 0x90 or hi > 0x90 + MAX_FIELDS:
            raise Unsupported("an entry has metadata beyond its event time")
        self.fewest, self.most = lo - 0x90, hi - 0x90
        self.fields = pc.subtract(head.cast(pa.int64()), _s(0x90)) if lo != hi else None
        self.pos = pc.add(chunk.starts, _s(2))

    def _from_heads(self, chunk: _Chunk) -> bool:
        """Take the fields every piece's entries share in their first bytes (publish time and
        producer, for entries appended together) once per piece, and start the walk after
        them; False (nothing done) when some piece shares too little to say."""
        seen: dict = {}  # pieces of one publish share their heads: parse each kind once
        parsed = []
        for h in chunk.heads:
            key = bytes(h)
            got = seen.get(key)
            if got is None:
                got = seen[key] = _leading(key)
            parsed.append(got)
        k = min(p[1] for p in parsed)
        if k == 0:
            return False
        counts = [p[0] for p in parsed]
        lo, hi = min(counts), max(counts)
        if lo > MAX_FIELDS or hi > MAX_FIELDS:
            raise Unsupported("an entry has metadata beyond its event time")
        self.fewest, self.most = lo, hi
        self.fields = None if lo == hi else _per_piece(chunk.run_ends, counts, pa.int64())
        for f in range(k):
            kind = _KIND[f]
            typ = pa.int64() if kind == "int" else pa.string() if kind == "str" else pa.binary()
            self.known[f] = _per_piece(chunk.run_ends, [p[2][f] for p in parsed], typ)
        self.pos = pc.add(chunk.starts, _per_piece(chunk.run_ends, [p[3][k - 1] for p in parsed],
                                                   pa.int64(), scalar=True))
        return True

    def presence(self, f: int):
        """None: every entry has field f; False: none has; else a mask of those that do."""
        if f < self.fewest:
            return None
        if f >= self.most:
            return False
        return pc.greater(self.fields, _s(f))

    def _check(self, size, present, f):
        ok = pc.greater(size, _s(0))
        if present is not None:
            ok = pc.or_(pc.invert(present), ok)
        if pc.all(ok).as_py() is False:
            raise Unsupported(f"field {f} has an unexpected type")

    def int(self, f: int, present):
        n = self.c.n
        if present is False:
            return pa.nulls(n, pa.int64())
        h = self.c.byte(self.pos)
        size = pc.take(INT_SIZE, h)
        if present is None and pc.min(pc.take(INT_TWO, h)).as_py() == 1:
            # Widths mixed among fixints, uint8 and uint16 (a producer's first 65,536
            # sequence ids): the two bytes after each header, gathered one by one, and
            # their weights by header: a third of the time of the eight-byte read.
            after = pc.add(self.pos, _s(1))
            b1, b2 = self.c.byte(after), self.c.byte(pc.add(after, _s(1)))
            value = pc.add(pc.add(pc.multiply(b1, pc.take(INT_B1, h)),
                                  pc.multiply(b2, pc.take(INT_B2, h))), pc.take(INT_FIX, h))
            self.pos = pc.add(self.pos, size)
            return value
        self._check(size, present, f)
        valid = _and(present, pc.not_equal(h, _u8(NIL)))
        value = pc.take(INT_FIX, h)
        wide = pc.and_(valid, pc.greater(size, _s(1)))
        if pc.any(wide).as_py():
            v8 = self.c.be(pc.add(self.pos, _s(1)), 8)
            big = pc.and_(wide, pc.and_(pc.equal(h, _u8(0xCF)), pc.less(v8, _s(0))))
            if pc.any(big).as_py():
                raise Unsupported("an unsigned 64-bit value beyond int64")
            shifted = pc.bit_wise_and(pc.shift_right(v8, pc.take(INT_SHIFT, h)),
                                      pc.take(INT_MASK, h))
            value = pc.if_else(wide, shifted, value)
        self.pos = _when(present, pc.add(self.pos, size), self.pos)
        return pc.if_else(valid, value, pa.scalar(None, pa.int64()))

    def bytes(self, f: int, table: pa.Array, present):
        """(start, end, valid) of a str/bin field in the buffer; valid None: all are."""
        if present is False:
            return self.pos, self.pos, _bools(False, self.c.n)
        h = self.c.byte(self.pos)
        head = pc.take(table, h)
        self._check(head, present, f)
        width = pc.take(LEN_BYTES, h)
        length = pc.take(FIX_LEN, h)
        after = pc.add(self.pos, _s(1))
        for k in (1, 2, 4):
            has = _and(present, pc.equal(width, _s(k)))
            if pc.any(has).as_py():
                length = pc.if_else(has, self.c.be(after, k), length)
        start = _when(present, pc.add(self.pos, head), self.pos)
        end = _when(present, pc.add(start, length), self.pos)
        valid = _and(present, pc.not_equal(h, _u8(NIL)))
        self.pos = end
        return start, end, valid

    def properties(self, f: int, present):
        """(count, valid, keys, values): count per entry (0 when no entry has the field),
        valid None when none is nil, keys and values (start, end, valid) per item index j,
        for the entries with more than j items; or a _Same when every entry holds the same
        map."""
        if present is False:
            return 0, None, [], []
        h = self.c.byte(self.pos)
        if present is None:
            lo, hi = _min_max(h)
            if lo == hi and 0x80 < lo <= 0x8F:
                same = self._same_map()
                if same is not None:
                    return same
        head = pc.take(MAP_HEAD, h)
        self._check(head, present, f)
        count = pc.take(MAP_FIX, h)
        after = pc.add(self.pos, _s(1))
        for code, k in ((0xDE, 2), (0xDF, 4)):
            has = _and(present, pc.equal(h, _u8(code)))
            if pc.any(has).as_py():
                count = pc.if_else(has, self.c.be(after, k), count)
        if present is not None:
            count = pc.if_else(present, count, _s(0))
        valid = _and(present, pc.not_equal(h, _u8(NIL)))
        self.pos = _when(present, pc.add(self.pos, head), self.pos)
        m = pc.max(count).as_py() or 0
        keys, vals = [], []
        for j in range(m):
            active = pc.greater(count, _s(j))
            k = self.bytes(f, STR_HEAD, active)
            if pc.all(pc.or_(pc.invert(active), k[2])).as_py() is False:
                raise Unsupported("a property key is nil")
            keys.append(k)
            vals.append(self.bytes(f, STR_HEAD, active))
        return count, valid, keys, vals

    def _same_map(self):
        """A _Same of the map at every entry's position when all entries hold the same bytes
        there (the usual case: a producer that sets the same properties on every message),
        read from the first entry and checked by cutting every entry's bytes and comparing
        them at once: three kernels instead of a walk of each item. None otherwise."""
        c, n = self.c, self.c.n
        mv = memoryview(c.buf).cast("B")  # Arrow's buffers export signed bytes
        first, last = self.pos[0].as_py(), self.pos[n - 1].as_py()
        items, size = _map_items(mv, first) if first >= 0 else (None, 0)
        if items is None or mv[last:last + size] != mv[first:first + size]:
            return None
        end = pc.add(self.pos, _s(size))
        if last + size > len(c.u8) or (n > 1 and pc.all(pc.less_equal(
                end.slice(0, n - 1), self.pos.slice(1))).as_py() is False):
            return None  # not one map per entry, in order: the walk will say what it is
        cut = _pieces(c.buf, self.pos, end).buffers()[2]
        if not cut.equals(pa.py_buffer(bytes(mv[first:first + size]) * n)):
            return None
        self.pos = end
        return _Same(items)

    def check_within(self):
        if pc.all(pc.less_equal(self.pos, self.c.ends)).as_py() is False:
            raise Unsupported("an entry is shorter than its fields")


class _Same:
    """A map field that every entry of the chunk holds alike: its items as (key, value)."""

    def __init__(self, items: list):
        self.items = items


def _map_items(mv, at: int) -> tuple:
    """(items, size) of the msgpack map of string keys and values at mv[at:], parsed in
    Python (one entry's, to compare the others with); (None, 0) for anything else (nil
    values, other types, a key given twice: the walk reads those as the Python path does)."""
    try:
        h = mv[at]
        if not 0x80 <= h <= 0x8F:
            return None, 0
        pos, items = at + 1, []
        for _ in range(2 * (h & 0x0F)):
            h = mv[pos]
            if 0xA0 <= h <= 0xBF:
                size, pos = h & 0x1F, pos + 1
            elif h in (0xD9, 0xDA, 0xDB):
                fmt = _LEAD_LEN[h]
                size = struct.unpack_from(fmt, mv, pos + 1)[0]
                pos += 1 + struct.calcsize(fmt)
            else:
                return None, 0
            if pos + size > len(mv):
                return None, 0
            items.append(str(mv[pos:pos + size], "utf-8"))
            pos += size
    except (IndexError, struct.error, UnicodeDecodeError):
        return None, 0
    keys = items[0::2]
    if len(set(keys)) != len(keys):
        return None, 0
    return list(zip(keys, items[1::2])), pos - at


def _per_piece(run_ends: list, values: list, typ, scalar: bool = False):
    """Each piece's value repeated for its entries (run_ends: the entry count up to the end
    of each piece); with scalar, one value shared by all pieces comes back as a scalar."""
    if len(values) == 1 or values.count(values[0]) == len(values):
        if scalar:
            return pa.scalar(values[0], typ)
        if typ == pa.int64():  # adding to zeros is a third of pa.repeat's time
            return pc.add(_zeros(run_ends[-1]), _s(values[0]))
        return _constant(values[0], typ, run_ends[-1])  # a producer's name, kept
    return _runs_decoded(run_ends, pa.array(values, typ))


_LEAD_INT = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h",
             0xD2: ">i", 0xD3: ">q"}
_LEAD_LEN = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}


def _leading(head) -> tuple:
    """(field count, k, values, ends) of the first k fields that lie whole in head, the
    first bytes of a plain entry (the fields _KIND calls int, str or bin only; k 0 when
    head says nothing: too short, or not a plain entry)."""
    if len(head) < 2 or head[0] != _PLAIN or not 0x90 <= head[1] <= 0x9F:
        return 0, 0, [], []
    count = head[1] - 0x90
    at, values, ends = 2, [], []
    for f in range(min(count, MAX_FIELDS)):
        kind = _KIND[f]
        if at >= len(head) or kind not in ("int", "str", "bin"):
            break
        h = head[at]
        if h == NIL:
            value, at = None, at + 1
        elif kind == "int":
            if h <= 0x7F or h >= 0xE0:
                value, at = (h if h <= 0x7F else h - 256), at + 1
            elif h in _LEAD_INT:
                fmt = _LEAD_INT[h]
                size = struct.calcsize(fmt)
                if at + 1 + size > len(head):
                    break
                value = struct.unpack_from(fmt, head, at + 1)[0]
                if value >= 1 << 63:
                    raise Unsupported("an unsigned 64-bit value beyond int64")
                at += 1 + size
            else:
                raise Unsupported(f"field {f} has an unexpected type")
        else:
            if kind == "str" and 0xA0 <= h <= 0xBF:
                n, at = h & 0x1F, at + 1
            elif h in _LEAD_LEN and (h >= 0xD9) == (kind == "str"):
                fmt = _LEAD_LEN[h]
                size = struct.calcsize(fmt)
                if at + 1 + size > len(head):
                    break
                n, at = struct.unpack_from(fmt, head, at + 1)[0], at + 1 + size
            else:
                raise Unsupported(f"field {f} has an unexpected type")
            if at + n > len(head):
                break
            raw = bytes(head[at:at + n])
            at += n
            if kind == "str":
                try:
                    value = raw.decode()
                except UnicodeDecodeError:
                    raise Unsupported("a string that is not UTF-8") from None
            else:
                value = raw
        values.append(value)
        ends.append(at)
    return count, len(values), values, ends


