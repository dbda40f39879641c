"""The stored entry: what a producer writes per ledger entry, with its fields named.

store/codec.py packs an entry as a msgpack list (positional, so a message costs few bytes).
Here are its fields, in stored order; a field left off the end of a shorter list (what earlier
writes, and writes with nothing to say there, leave) reads as its default:

    index  field                 on disk                                           default
    0      publish_time          int, epoch ms the broker stamped                  (always)
    1      producer_name         str                                               (always)
    2      sequence_id           int; a batch's: its first message's              (always)
    3      payload               bin: the stored payload, compressed when          (always)
                                 compression is set; a chunk's piece of it; a
                                 batch's serialized batch (broker/batches.py)
    4      properties            map str -> str, or nil when there are none        None
    5      key                   str (the partition key) or nil                    None
    6      ordering_key          bin or nil                                        None
    7      event_time            int, epoch ms; 0 unset                            0
    8      deliver_at            int, epoch ms (a delayed message); 0 unset        0
    9      compression           int, pulsarctl.compression's code; 0 none         0
    10     uncompressed_size     int: the payload's size before compression (a     None
                                 chunk: the whole message's; a batch: the
                                 serialized batch's)
    11     schema_version        int or nil                                        None
    12     chunk                 [uuid, chunk id, num chunks, total chunk message  None
                                 size] on each entry of a chunked message, or nil
    13     num_messages          int: numMessagesInBatch (two or more) of a batch  None
    14     highest_sequence_id   int: a batch's highest sequence id                None
    15     null_value            true: the message has no value (Pulsar's           None
                                 null_value; its payload is empty), or nil
    16     encryption            map: an end-to-end encrypted message as its        None
                                 client sent it (payload: the ciphertext; "keys":
                                 [[name, encrypted data key, {metadata}]], "algo",
                                 "param", "compression" and "uncompressedSize" of
                                 what was encrypted, "numMessages" when it is a
                                 batch the broker cannot open), or nil
    17     key_b64_encoded       true: the key (field 5) is the base64 text of a       None
                                 binary key, as the client sent it (Pulsar's
                                 partition_key_b64_encoded: a Java keyBytes(), a
                                 KeyValue schema's SEPARATED key), or nil

What the writers leave off (pulsarctl/messages.py's build_entry, broker/batches.py's
build_entry): a plain entry stops after its last field of 4..8 that is set (neither nil nor 0)
unless it has compression or a schema version; then it goes on to uncompressed_size (and
schema_version when there is one). A chunk's entry has fields 0..12, a batch's 0..14, a
message with a null value 0..15, an encrypted message 0..16, a message whose key is base64
0..17 (stores written before null values, encryption or base64 keys never have fields 15, 16
or 17, and an entry without a base64 key still has none).
Entry.to_stored gives exactly that list back.

Entry is for code that reads a few entries (the DLQ tools, a chunked message's copy). The hot
loops (dispatch, `perf consume`, the Spark reads) read the decoded list by the index constants
below, named after the fields (rec[F_KEY]): a NamedTuple per entry costs them more than 3%.
"""
from __future__ import annotations

from typing import NamedTuple

# At load, not in payload(): an import statement run per entry cost a compressed topic's Spark
# read 12% (compression.py itself loads its codecs only when one is used).
from pulsarctl.compression import decompress as _decompress


class Entry(NamedTuple):
    """One stored entry, every field named (see the module's table)."""
    publish_time: int
    producer_name: str
    sequence_id: int
    payload: bytes
    properties: dict | None = None
    key: str | None = None
    ordering_key: bytes | None = None
    event_time: int = 0
    deliver_at: int = 0
    compression: int = 0
    uncompressed_size: int | None = None
    schema_version: int | None = None
    chunk: list | None = None
    num_messages: int | None = None
    highest_sequence_id: int | None = None
    null_value: bool | None = None
    encryption: dict | None = None
    key_b64_encoded: bool | None = None

    @classmethod
    def from_stored(cls, rec) -> "Entry":
        """The entry of a decoded list, shorter ones (earlier writes) included."""
        return cls(*rec)

    def to_stored(self) -> list:
        """The list the writers store for this entry (module docstring), byte for byte."""
        rec = list(self)
        n = len(rec)
        while n > F_UNCOMPRESSED_SIZE and rec[n - 1] is None:
            n -= 1
        if n > F_UNCOMPRESSED_SIZE:
            return rec[:n]
        n = F_COMPRESSION
        while n > F_PROPERTIES and rec[n - 1] in (None, 0):
            n -= 1
        return rec[:n]

    @property
    def is_batch(self) -> bool:
        return bool(self.num_messages)

    @property
    def size(self) -> int:
        """How many messages the entry holds."""
        return self.num_messages or 1


(F_PUBLISH_TIME, F_PRODUCER_NAME, F_SEQUENCE_ID, F_PAYLOAD, F_PROPERTIES, F_KEY,
 F_ORDERING_KEY, F_EVENT_TIME, F_DELIVER_AT, F_COMPRESSION, F_UNCOMPRESSED_SIZE,
 F_SCHEMA_VERSION, F_CHUNK, F_NUM_MESSAGES, F_HIGHEST_SEQUENCE_ID, F_NULL_VALUE,
 F_ENCRYPTION, F_KEY_B64) = range(len(Entry._fields))
assert Entry._fields[F_KEY_B64] == "key_b64_encoded"  # the table and the tuple


def encryption_of(rec: list) -> dict | None:
    """An encrypted message's encryption (field 16), or None."""
    return rec[F_ENCRYPTION] if len(rec) > F_ENCRYPTION else None


def is_key_b64(rec: list) -> bool:
    """The entry's key is the base64 text of a binary key (Pulsar's partition_key_b64_encoded);
    a batch's: its first message's."""
    return len(rec) > F_KEY_B64 and bool(rec[F_KEY_B64])


def is_null_value(rec: list) -> bool:
    """A message with a null value (Pulsar's null_value: no value, not an empty one)."""
    return len(rec) > F_NULL_VALUE and bool(rec[F_NULL_VALUE])


# -- reads of a decoded list, for the hot loops -------------------------------------------------
def is_batch(rec: list) -> bool:
    """A batch entry (numMessagesInBatch set)."""
    return len(rec) > F_NUM_MESSAGES and bool(rec[F_NUM_MESSAGES])


def batch_size(rec: list) -> int:
    """How many messages the entry holds."""
    return rec[F_NUM_MESSAGES] if len(rec) > F_NUM_MESSAGES and rec[F_NUM_MESSAGES] else 1


class Chunk(NamedTuple):
    """Pulsar's chunk metadata, stored in the chunk field of each entry of a chunked message as
    the list [uuid, chunk id, num chunks, total size]."""
    uuid: str        # the message's: "<producer name>-<sequence id>"
    chunk_id: int    # 0 .. num_chunks - 1
    num_chunks: int
    total_size: int  # totalChunkMsgSize: the whole stored (possibly compressed) payload's

    @property
    def is_last(self) -> bool:
        return self.chunk_id == self.num_chunks - 1


def chunk_of(rec: list) -> Chunk | None:
    """The chunk metadata of a chunk's entry, else None (made only for a chunk)."""
    c = rec[F_CHUNK] if len(rec) > F_CHUNK else None
    return Chunk(*c) if c else None


def payload(rec: list, where: str = "") -> bytes:
    """The entry's payload decompressed (as stored when compression is unset; a batch's: its
    serialized batch): the one place a stored payload is decompressed. A chunk's piece is not
    decompressible alone: broker/unpack.py joins the pieces first. where names the entry in a
    decompression error."""
    if len(rec) > F_COMPRESSION and rec[F_COMPRESSION]:
        return _decompress(rec[F_COMPRESSION], rec[F_PAYLOAD], rec[F_UNCOMPRESSED_SIZE], where)
    return rec[F_PAYLOAD]
