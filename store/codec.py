"""The only place values are encoded: a version byte, then msgpack, optionally lz4-compressed.

The version byte lets a later format (batches, compressed payloads) live beside this one.
"""
import msgpack

from store.errors import CorruptValue  # noqa: F401 - raised here, caught as codec.CorruptValue

PLAIN = 1
LZ4 = 2

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
