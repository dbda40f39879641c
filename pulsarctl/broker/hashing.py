"""Pulsar's hash functions (JavaStringHash, Murmur3_32Hash), the primitives shared by the
choices built on them: the producer's partition routing (routing.py), the Key_Shared sticky key
slot (dispatch/selectors.py) and the Failover active consumer's hash ring (dispatch/failover.py).

Pure functions: no I/O, no clock, no printing."""
from __future__ import annotations

import mmh3

INT_MAX = 0x7FFFFFFF  # Integer.MAX_VALUE


# -- hash functions ----------------------------------------------------------------------------
def java_utf8(s: str | bytes) -> bytes:
    # Java's String.getBytes(UTF_8) writes '?' for a lone surrogate, as errors="replace" does.
    if isinstance(s, str):
        return s.encode("utf-8", "replace")
    return bytes(s)


def java_hash_code(s: str) -> int:
    """Java String.hashCode(): h = 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    for ch in s:
        c = ord(ch)
        if c > 0xFFFF:  # a supplementary character is two UTF-16 code units
            c -= 0x10000
            h = (31 * h + (0xD800 | (c >> 10))) & 0xFFFFFFFF
            c = 0xDC00 | (c & 0x3FF)
        h = (31 * h + c) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def java_string_hash(s: str) -> int:
    """JavaStringHash.makeHash: s.hashCode() & Integer.MAX_VALUE."""
    return java_hash_code(s) & INT_MAX


def murmur3_32_hash(s: str | bytes) -> int:
    """Murmur3_32Hash.makeHash: MurmurHash3 x86_32, seed 0, over UTF-8 bytes, & MAX_VALUE."""
    return mmh3.hash(java_utf8(s), 0, signed=False) & INT_MAX
