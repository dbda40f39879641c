"""The only place values are encoded: a version byte, then msgpack, optionally lz4-compressed.

The version byte lets a later format (batches, compressed payloads) live beside this one.
"""
import msgpack

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
    tag = data[0]
    if tag == PLAIN:
        return _unpackb(memoryview(data)[1:], raw=False, strict_map_key=False)
    if tag == LZ4:
        import lz4.frame

        return _unpackb(lz4.frame.decompress(bytes(data[1:])), raw=False, strict_map_key=False)
    raise ValueError(f"unknown value encoding {tag}")


def pack_raw(value) -> bytes:
    """msgpack without the version byte, for callers that frame values themselves."""
    return _pack(value)
