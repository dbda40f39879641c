"""The frames of Pulsar's binary protocol, read and written in one place.

A simple command is [totalSize u32][commandSize u32][BaseCommand]; a command with a payload
(SEND, MESSAGE) continues with [magic 0x0e01 u16][CRC32C u32][metadataSize u32]
[MessageMetadata][payload], the checksum over everything after it. totalSize counts every byte
after itself. A batch's payload is its messages, each [size u32][SingleMessageMetadata][payload].
All integers are big-endian."""
from __future__ import annotations

import struct

import google_crc32c
from google.protobuf.message import DecodeError

from pulsarctl.errors import ChecksumMismatch, ProtocolError
from pulsarctl.serve import pulsar_api_pb2 as api

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
# What a frame may carry beyond maxMessageSize: the command and the metadata (Pulsar allows
# maxMessageSize + 10 KiB, Commands.MESSAGE_SIZE_FRAME_PADDING).
PADDING = 10 * 1024


def crc32c(data: bytes) -> int:
    return google_crc32c.value(data)


# -- writing ---------------------------------------------------------------------------------
def command(cmd: api.BaseCommand) -> bytes:
    body = cmd.SerializeToString()
    return _U32.pack(len(body) + 4) + _U32.pack(len(body)) + body


def payload_command(cmd: api.BaseCommand, metadata: api.MessageMetadata, payload: bytes) -> bytes:
    body = cmd.SerializeToString()
    meta = metadata.SerializeToString()
    checked = _U32.pack(len(meta)) + meta + payload
    tail = _U16.pack(MAGIC_CRC32C) + _U32.pack(crc32c(checked)) + checked
    return _U32.pack(4 + len(body) + len(tail)) + _U32.pack(len(body)) + body + tail


def batch_payload(messages) -> bytes:
    """messages: (SingleMessageMetadata, payload) pairs, as one batch's payload."""
    parts = []
    for smm, payload in messages:
        smm.payload_size = len(payload)
        raw = smm.SerializeToString()
        parts += [_U32.pack(len(raw)), raw, payload]
    return b"".join(parts)


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:   # sequence ids and payload sizes of a batch mostly take two bytes
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes((i,)) for i in range(0x80)]


def _text(tag: bytes, data: bytes) -> bytes:
    return tag + _varint(len(data)) + data


def batch_message(payload: bytes, sequence_id: int | None = None, event_time: int = 0,
                  properties: dict | None = None, key: str | None = None,
                  ordering_key: bytes | None = None, null_value: bool = False,
                  key_b64: bool = False) -> bytes:
    """One message of a batch's payload: [size u32][SingleMessageMetadata][payload]. The
    metadata is written here field by field, in field-number order, byte for byte what
    SingleMessageMetadata.SerializeToString writes (tests/serve/test_frames.py): building a
    protobuf object per message was a third of a batched consumer's delivery time."""
    if not properties and key is None and not event_time and ordering_key is None \
            and not null_value:   # (no key: no key_b64 either)
        # The common case, in one expression.
        meta = b"\x18" + _varint(len(payload)) + (
            b"" if sequence_id is None else b"\x40" + _varint(sequence_id))
        return _U32.pack(len(meta)) + meta + payload
    parts = []
    if properties:
        for k, v in properties.items():
            kv = _text(b"\x0a", k.encode()) + _text(b"\x12", v.encode())
            parts.append(b"\x0a" + _varint(len(kv)) + kv)        # 1: properties
    if key is not None:
        parts.append(_text(b"\x12", key.encode()))               # 2: partition_key
    parts.append(b"\x18" + _varint(len(payload)))                # 3: payload_size
    if event_time:
        parts.append(b"\x28" + _varint(event_time))              # 5: event_time
    if key_b64 and key is not None:
        parts.append(b"\x30\x01")                               # 6: partition_key_b64_encoded
    if ordering_key is not None:
        parts.append(_text(b"\x3a", ordering_key))               # 7: ordering_key
    if sequence_id is not None:
        parts.append(b"\x40" + _varint(sequence_id))             # 8: sequence_id
    if null_value:
        parts.append(b"\x48\x01")                               # 9: null_value
    meta = b"".join(parts)
    return _U32.pack(len(meta)) + meta + payload


def columns_payload(columns: list, size: int, first_sequence_id: int, skip=None) -> bytes:
    """A stored batch's serialized single-message metadata (broker/batches.py's columns:
    [payloads, properties, keys, orderingKeys, eventTimes, sequenceIds[, nullValues[,
    keysB64]]]) as the
    payload of a batch MESSAGE of its first size messages, straight from the columns; skip:
    indexes not delivered now, sent empty (the ack set leaves them out). The same bytes
    batch_message writes message by message (tests/serve/test_frames.py)."""
    payloads, props, keys_, okeys, events, seqs = columns[:6]
    nulls = columns[6] if len(columns) > 6 else None
    b64 = columns[7] if len(columns) > 7 else None
    parts: list = []
    add = parts.append
    if not (props or keys_ or okeys or events or nulls or skip or seqs) \
            and first_sequence_id >= 0:
        # What a producer's batch of plain messages holds: per message its size and
        # sequence id only, the bytes before the id shared by every payload of a size.
        pack, varint, heads = _U32.pack, _varint, {}
        seq = first_sequence_id
        for p in payloads[:size]:
            n = len(p)
            head = heads.get(n)
            if head is None:
                head = heads[n] = b"\x18" + varint(n) + b"\x40"
            tail = varint(seq)
            add(pack(len(head) + len(tail)))
            add(head)
            add(tail)
            add(p)
            seq += 1
        return b"".join(parts)
    for i in range(size):
        if skip and i in skip:
            add(batch_message(b""))
            continue
        seq = seqs[i] if seqs else first_sequence_id + i
        okey = okeys[i] if okeys else None
        add(batch_message(payloads[i] or b"", seq if seq is not None and seq >= 0 else None,
                          events[i] if events else 0, props[i] if props else None,
                          keys_[i] if keys_ else None,
                          okey.encode() if isinstance(okey, str) else okey,
                          bool(nulls and nulls[i]), bool(b64 and b64[i])))
    return b"".join(parts)


# -- reading ---------------------------------------------------------------------------------
def frame_size(head: bytes, limit: int) -> int:
    """The totalSize of a frame from its first 4 bytes; ProtocolError past limit or under 4."""
    (total,) = _U32.unpack(head)
    if total < 4 or total > limit:
        raise ProtocolError(f"frame of {total} bytes (the most is {limit})")
    return total


def parse(frame: bytes):
    """A frame's bytes after totalSize -> (BaseCommand, MessageMetadata or None, payload).
    ProtocolError when it does not parse, ChecksumMismatch (one) when its checksum is wrong. A
    payload without the CRC32C magic number is read unchecked, as Pulsar's
    Commands.hasChecksum/skipChecksumIfPresent do."""
    if len(frame) < 4:
        raise ProtocolError("frame shorter than its command size")
    (size,) = _U32.unpack_from(frame, 0)
    if size > len(frame) - 4:
        raise ProtocolError(f"command of {size} bytes in a frame of {len(frame)}")
    cmd = api.BaseCommand()
    try:
        cmd.ParseFromString(frame[4:4 + size])
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ProtocolError(f"command does not parse: {exc}") from None
    if not cmd.HasField("type"):
        # An enum value this protocol version does not define is kept as an unknown field.
        raise ProtocolError("command of a type pulsarctl serve does not know (or of none)")
    if not cmd.IsInitialized():
        raise ProtocolError(f"command without its required fields: "
                            f"{', '.join(cmd.FindInitializationErrors())}")
    rest = frame[4 + size:]
    if not rest:
        return cmd, None, b""
    pos = 0
    if len(rest) >= 2 and _U16.unpack_from(rest, 0)[0] == MAGIC_BROKER_ENTRY_METADATA:
        if len(rest) < 6:
            raise ProtocolError("truncated broker entry metadata")
        pos = 6 + _U32.unpack_from(rest, 2)[0]
        if pos > len(rest):
            raise ProtocolError("broker entry metadata longer than its frame")
    if len(rest) - pos >= 2 and _U16.unpack_from(rest, pos)[0] == MAGIC_CRC32C:
        if len(rest) - pos < 10:
            raise ProtocolError("payload shorter than its checksum and metadata size")
        (checksum,) = _U32.unpack_from(rest, pos + 2)
        checked = rest[pos + 6:]
        if crc32c(checked) != checksum:
            raise ChecksumMismatch(cmd)
    else:
        checked = rest[pos:]
        if len(checked) < 4:
            raise ProtocolError("payload shorter than its metadata size")
    (msize,) = _U32.unpack_from(checked, 0)
    if msize > len(checked) - 4:
        raise ProtocolError(f"metadata of {msize} bytes in a payload of {len(checked)}")
    meta = api.MessageMetadata()
    try:
        meta.ParseFromString(checked[4:4 + msize])
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ProtocolError(f"metadata does not parse: {exc}") from None
    if not meta.IsInitialized():
        raise ProtocolError("message metadata without its required fields")
    return cmd, meta, checked[4 + msize:]


class PlainBatch(list):
    """plain_batch's payloads; canonical: every message carried its sequence id, so the batch's
    bytes are exactly what columns_payload writes for them (the entry cache keeps them)."""
    __slots__ = ("canonical",)


def plain_batch(payload: bytes, count: int, first_sequence_id: int) -> PlainBatch | None:
    """The payloads of a batch whose messages carry nothing but their size and sequence id
    (none, or first_sequence_id + their index): what a producer sends of plain messages, read
    without a SingleMessageMetadata object each (a third of split_batch's time). None for any
    other batch, well formed or not: split_batch reads it, or says what is wrong."""
    got = _uniform_batch(payload, count, first_sequence_id)
    return got if got is not None else _plain_each(payload, count, first_sequence_id)


def _uniform_batch(payload: bytes, count: int, first: int) -> PlainBatch | None:
    """plain_batch of a batch whose messages all have one size and carry their sequence ids,
    all of one varint length (a producer's batch of equal-sized records): the messages then
    lie at a fixed stride, and each header byte is checked for all of them at once with a
    strided slice, instead of message by message. None where that does not hold:
    _plain_each reads it then (or says None), and it reads the same from anything this
    reads (tests/serve/test_frames.py)."""
    if count < 2 or first < 0:
        return None
    try:
        (size,) = _U32.unpack_from(payload, 0)
        if payload[4] != 0x18:                                  # 3: payload_size
            return None
        b = payload[5]
        if b < 0x80:
            n, at = b, 6
        else:
            b2 = payload[6]
            if b2 >= 0x80:
                return None
            n, at = (b & 0x7F) | (b2 << 7), 7
    except (IndexError, struct.error):
        return None
    seq_len = 3 + size - at      # what is left of the metadata: 0x40 and the id's varint
    if seq_len < 1 or len(_varint(first)) != seq_len \
            or len(_varint(first + count - 1)) != seq_len:
        return None
    stride = 4 + size + n
    if stride * count != len(payload) or payload[at] != 0x40:   # 8: sequence_id
        return None
    for j in range(at + 1):      # the size, the payload size and the tags: shared by all
        if payload[j::stride] != payload[j:j + 1] * count:
            return None
    for k in range(seq_len):     # the sequence ids, one varint byte at a time
        if payload[at + 1 + k::stride] != _id_column(first, count, k, k < seq_len - 1):
            return None
    out = PlainBatch([payload[i:i + n] for i in range(4 + size, len(payload) - n + 1, stride)])
    out.canonical = True
    return out


_LOW7 = bytes(range(128))
_LOW7_MORE = bytes(i | 0x80 for i in range(128))


def _id_column(first: int, count: int, k: int, more: bool) -> bytes:
    """Byte k of the varints of first .. first + count - 1 (all of one length; more: a byte
    that another follows, its 0x80 set): byte 0 cycles through the low 7 bits, byte k > 0
    holds one value for 128**k ids in a row."""
    if k == 0:
        start = first & 0x7F
        return ((_LOW7_MORE if more else _LOW7) * ((start + count) // 128 + 1))[
            start:start + count]
    hi = 0x80 if more else 0
    shift = 7 * k
    out = []
    s, end = first, first + count
    while s < end:
        block = s >> shift
        stop = min(end, (block + 1) << shift)
        out.append(bytes(((block & 0x7F) | hi,)) * (stop - s))
        s = stop
    return b"".join(out)


def _plain_each(payload: bytes, count: int, first_sequence_id: int) -> PlainBatch | None:
    """plain_batch, message by message."""
    out = PlainBatch()
    bare = 0
    add = out.append
    unpack = _U32.unpack_from
    varint = _varint
    end = len(payload)
    pos = 0
    seq = first_sequence_id
    try:
        for _ in range(count):
            (size,) = unpack(payload, pos)
            at = pos + 4
            pos = at + size
            if size < 2 or payload[at] != 0x18:            # 3: payload_size, first
                return None
            b = payload[at + 1]
            if b < 0x80:
                n, at = b, at + 2
            else:
                b2 = payload[at + 2]
                if b2 >= 0x80:
                    return None
                n, at = (b & 0x7F) | (b2 << 7), at + 3
            if at == pos:
                bare += 1
            elif at > pos or payload[at] != 0x40 or payload[at + 1:pos] != varint(seq):
                return None                                  # (8: sequence_id)
            if pos + n > end:
                return None
            add(payload[pos:pos + n])
            pos += n
            seq += 1
    except (IndexError, struct.error):
        return None
    if pos != end:
        return None
    out.canonical = not bare
    return out


def split_batch(payload: bytes, count: int) -> list:
    """A batch's (uncompressed) payload -> [(SingleMessageMetadata, payload)]."""
    out = []
    pos = 0
    for _ in range(count):
        if pos + 4 > len(payload):
            raise ProtocolError("batch shorter than its message count")
        (size,) = _U32.unpack_from(payload, pos)
        pos += 4
        smm = api.SingleMessageMetadata()
        try:
            smm.ParseFromString(payload[pos:pos + size])
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise ProtocolError(f"batch message metadata does not parse: {exc}") from None
        if not smm.IsInitialized():
            raise ProtocolError("batch message metadata without its payload size")
        pos += size
        end = pos + smm.payload_size
        if smm.payload_size < 0 or end > len(payload):
            raise ProtocolError("batch message longer than its batch")
        out.append((smm, payload[pos:end]))
        pos = end
    return out
