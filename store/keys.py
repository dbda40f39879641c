"""Every byte layout of the store, in one place.

Integers are big-endian and fixed width so that LMDB's byte order is numeric order, which is
what makes prefix scans and set_range() work as range queries.
"""
import struct

_U64 = struct.Struct(">Q")
_U64_2 = struct.Struct(">QQ")
_U64_3 = struct.Struct(">QQQ")

u64 = _U64.pack
pair = _U64_2.pack
unpack_pair = _U64_2.unpack
triple = _U64_3.pack
unpack_triple = _U64_3.unpack


def unpack_u64(b) -> int:
    return _U64.unpack(b)[0]


def u64_prefix_end(prefix: int) -> bytes:
    """The first key after every key that starts with u64(prefix)."""
    return _U64.pack(prefix + 1)


# Tuple keys for the small, non-hot tables (tenants, topics, subscriptions, consumers).
# Strings are UTF-8 with 0x00 escaped as 0x00 0xFF and terminated by 0x00, so a tuple sorts
# component by component and a shorter tuple is a prefix of the longer ones that extend it.
_INT, _STR = b"\x01", b"\x02"
_OFFSET = 1 << 63


def tup(*parts) -> bytes:
    out = bytearray()
    for p in parts:
        if isinstance(p, int):
            out += _INT + _U64.pack(p + _OFFSET)
        else:
            if isinstance(p, str):
                p = p.encode()
            out += _STR + p.replace(b"\x00", b"\x00\xff") + b"\x00"
    return bytes(out)


def untup(b: bytes) -> tuple:
    parts, i, n = [], 0, len(b)
    while i < n:
        tag = b[i:i + 1]
        i += 1
        if tag == _INT:
            parts.append(_U64.unpack(b[i:i + 8])[0] - _OFFSET)
            i += 8
        elif tag == _STR:
            buf = bytearray()
            while True:
                c = b[i]
                if c == 0:
                    if i + 1 < n and b[i + 1] == 0xFF:
                        buf.append(0)
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(c)
                i += 1
            parts.append(buf.decode())
        else:
            raise ValueError(f"bad tuple key byte {tag!r}")
    return tuple(parts)
