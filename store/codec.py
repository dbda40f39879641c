"""The only place values are encoded: a version byte, then msgpack, optionally lz4-compressed.

The version byte lets a later format live beside this one: BLOCK is several entries stored
under one key (store/ledger.py), each of them a value of this module's other formats.
"""
import os
import struct

import msgpack

from store.errors import CorruptValue  # noqa: F401 - raised here, caught as codec.CorruptValue

PLAIN = 1
LZ4 = 2
BLOCK = 3
_U32 = struct.Struct("<I")

_pack = msgpack.Packer(use_bin_type=True).pack
_unpackb = msgpack.unpackb


def encode(value) -> bytes:
    return b"\x01" + _pack(value)


def encode_compressed(value) -> bytes:
    import lz4.frame  # only paid for by callers who compress

    return b"\x02" + lz4.frame.compress(_pack(value))


def decode(data):
    try:
        tag = data[0]
        if tag == PLAIN:
            return _unpackb(memoryview(data)[1:], raw=False, strict_map_key=False)
        if tag == LZ4:
            import lz4.frame  # lazy: lz4 is costly to import or optional

            return _unpackb(lz4.frame.decompress(bytes(data[1:])), raw=False,
                            strict_map_key=False)
    except Exception as exc:  # msgpack and lz4 each raise their own
        raise CorruptValue(f"a stored value does not decode ({type(exc).__name__}: {exc})") \
            from exc
    raise CorruptValue(f"a stored value has an unknown encoding {tag}")


def decode_many(values: list) -> list:
    """decode() of each value, faster for many: one unpacker over the values joined. The
    version byte 1 is msgpack's integer 1, so plain values decode as 1, v, 1, v, ...; anything
    else (another version) shows there and the values are decoded one by one instead."""
    n = len(values)
    if n < 16:
        return [decode(v) for v in values]
    u = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=0)
    u.feed(b"".join(values))
    try:
        out = list(u)
    except (ValueError, msgpack.UnpackException):
        out = None
    if out is None or len(out) != 2 * n or out[0::2].count(PLAIN) != n:
        return [decode(v) for v in values]
    return out[1::2]


def pack_raw(value) -> bytes:
    """msgpack without the version byte, for callers that frame values themselves."""
    return _pack(value)


# -- blocks: consecutive entries under one key ---------------------------------------------------
# BLOCK, the entry count n and the length of the prefix every entry of the block starts with
# (u32s, little-endian), each entry's end (n u32s, counted from the start of the body), then
# the body: the entries' bytes one after another. Little-endian, fixed width: a reader with
# Arrow takes the ends as an array without a Python object per entry. The shared prefix (the
# entries of one append usually share their encoding's first fields: publish time, producer)
# lets such a reader take those fields once per block instead of once per entry.
_HEAD = 9
MAX_PREFIX = 255


def _shared_prefix(values: list) -> int:
    a, b = values[0], values[-1]
    m = min(len(a), len(b), MAX_PREFIX)
    p = 0
    while p < m and a[p] == b[p]:
        p += 1
    head = a[:p]
    if not all(v.startswith(head) for v in values):
        head = os.path.commonprefix(values)[:MAX_PREFIX]
    return len(head)


def pack_block(values: list) -> bytes:
    n = len(values)
    ends, end = [], 0
    for v in values:
        end += len(v)
        ends.append(end)
    return (b"\x03" + struct.pack(f"<{n + 2}I", n, _shared_prefix(values), *ends)
            + b"".join(values))


def is_block(value) -> bool:
    return value[0] == BLOCK


def block_count(value) -> int:
    return _U32.unpack_from(value, 1)[0]


def block_prefix(value) -> int:
    """How many first bytes every entry of the block shares (its header says)."""
    return _U32.unpack_from(value, 5)[0]


def block_ends(value) -> tuple:
    """(n, base, ends): the entry count, where the body starts, each entry's end in the body."""
    n = _U32.unpack_from(value, 1)[0]
    base = _HEAD + 4 * n
    if n == 0 or base > len(value):
        raise CorruptValue("a block of entries has a bad header")
    ends = struct.unpack_from(f"<{n}I", value, _HEAD)
    if ends[-1] != len(value) - base:
        raise CorruptValue("a block of entries does not hold the bytes its header says")
    return n, base, ends


def block_span(value, lo: int, hi: int) -> tuple:
    """Where entries lo..hi-1 of a block lie, for a reader that takes its bytes whole without
    a Python object per entry: (base, a, b, ends_from, ends_to, shared). The body starts at
    base; the entries are the body's bytes a..b; their ends (u32 little-endian, counted from
    the body's start) are value[ends_from:ends_to]; the body's first `shared` bytes are the
    prefix every entry of the block starts with (within its first entry). CorruptValue when the
    header does not agree with the value's size."""
    n = _U32.unpack_from(value, 1)[0]
    base = _HEAD + 4 * n
    if not 0 <= lo < hi <= n or base > len(value) \
            or _U32.unpack_from(value, base - 4)[0] != len(value) - base:
        raise CorruptValue("a block of entries has a bad header")
    a = _U32.unpack_from(value, _HEAD + 4 * (lo - 1))[0] if lo else 0
    b = _U32.unpack_from(value, _HEAD + 4 * (hi - 1))[0]
    if a > b:
        raise CorruptValue("a block of entries has a bad header")
    shared = min(_U32.unpack_from(value, 5)[0], _U32.unpack_from(value, _HEAD)[0])
    return base, a, b, _HEAD + 4 * lo, _HEAD + 4 * hi, shared


def block_entries(value, lo: int = 0, hi: int | None = None) -> list:
    """The entries lo..hi-1 of a block, as bytes."""
    n, base, ends = block_ends(value)
    hi = n if hi is None else hi
    start = base + (ends[lo - 1] if lo else 0)
    out = []
    for e in ends[lo:hi]:
        e += base
        out.append(value[start:e])
        start = e
    return out
