"""Payload compression as a Pulsar producer's compressionType: LZ4 (block format, the
uncompressed size kept beside it, as Pulsar's metadata does), ZLIB (deflate with the zlib
header), ZSTD and SNAPPY (raw snappy blocks). Codes are Pulsar's CompressionType values, which
the stored entry records, so consumers, readers, peek and dead-letter moves decompress
transparently. zstd and snappy come from cramjam (one maintained wheel with both)."""
from __future__ import annotations

from pulsarctl.errors import DecompressionError, InvalidValue

NONE, LZ4, ZLIB, ZSTD, SNAPPY = 0, 1, 2, 3, 4
CODES = {"none": NONE, "lz4": LZ4, "zlib": ZLIB, "zstd": ZSTD, "snappy": SNAPPY}
NAMES = {v: k.upper() for k, v in CODES.items()}


def code_of(name) -> int:
    if isinstance(name, int) and name in NAMES:
        return name
    value = getattr(name, "value", None)  # pulsar-client's CompressionType enum
    if isinstance(value, int) and value in NAMES:
        return value
    code = CODES.get(str(getattr(name, "name", name)).lower())
    if code is None:
        raise InvalidValue(f"unknown compression {name!r}", hint="use none, lz4, zlib, zstd or snappy")
    return code


def compress(code: int, data: bytes) -> bytes:
    if code == LZ4:
        import lz4.block  # lazy: lz4 is costly to import or optional

        return lz4.block.compress(data, store_size=False)
    if code == ZLIB:
        import zlib  # lazy: one-shot produce never needs it

        return zlib.compress(data)
    if code == ZSTD:
        import cramjam  # lazy: cramjam is costly to import or optional

        return bytes(cramjam.zstd.compress(data))
    if code == SNAPPY:
        import cramjam  # lazy: cramjam is costly to import or optional

        return bytes(cramjam.snappy.compress_raw(data))
    return data


def decompress(code: int, data: bytes, size: int, where: str = "") -> bytes:
    try:
        if code == LZ4:
            import lz4.block  # lazy: lz4 is costly to import or optional

            out = lz4.block.decompress(data, uncompressed_size=size)
        elif code == ZLIB:
            import zlib  # lazy: one-shot produce never needs it

            out = zlib.decompress(data)
        elif code == ZSTD:
            import cramjam  # lazy: cramjam is costly to import or optional

            out = bytes(cramjam.zstd.decompress(data))
        elif code == SNAPPY:
            import cramjam  # lazy: cramjam is costly to import or optional

            out = bytes(cramjam.snappy.decompress_raw(data))
        else:
            raise ValueError(f"unknown compression code {code}")
    except Exception as exc:  # every codec has its own error types
        raise DecompressionError(f"cannot decompress message {where} ({NAMES.get(code, code)}): "
                                 f"{exc}") from None
    if len(out) != size:
        raise DecompressionError(f"message {where} decompressed to {len(out)} bytes, not the "
                                 f"{size} it was written with")
    return out
