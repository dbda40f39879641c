"""One stored entry as the messages it holds: batches split, chunks joined, payloads
decompressed (what Pulsar's ConsumerImpl does on receipt: uncompressPayloadIfNeeded,
receiveIndividualMessagesFromBatch, processMessageChunk).

Every reader of entries as messages comes here: dispatch (batches.Delivery, and
message_from_entry for a plain entry's one message), the DLQ tools (dlq.read_message(s)), the
admin views (first_message), and the bulk scans of tiered storage and Spark
(scan.whole_messages). spark/_batched.py reads batch entries straight into Arrow columns with
batch_columns, the same decoding this module does, without a record per message.

A chunked message is joined when the caller gives its pieces (chunks.pieces finds them: the
readers that see a chunked message as one); without them a chunk stays as stored, its piece
and chunk metadata, for a consumer to join (client/chunks.py), as Pulsar's broker delivers
chunks.
"""
from __future__ import annotations

from store import codec
from pulsarctl.entries import (
    F_CHUNK, F_COMPRESSION, F_PAYLOAD, F_PRODUCER_NAME, F_PUBLISH_TIME, F_SCHEMA_VERSION,
    F_SEQUENCE_ID, chunk_of, is_batch, payload,
)
from pulsarctl.messages import Message, MessageId, message_from_entry


def joined(rec: list, pieces: list) -> list:
    """A chunked message's entry made whole: the pieces (every chunk's stored piece, in chunk
    id order) joined into its payload, still compressed as stored, and no chunk metadata."""
    whole = list(rec[:F_CHUNK])
    whole[F_PAYLOAD] = b"".join(pieces)
    return whole


def batch_columns(rec: list, where: str = "") -> list:
    """The serialized batch of a batch entry, decompressed and decoded: its single-message
    metadata column by column, [payloads, properties, keys, orderingKeys, eventTimes,
    sequenceIds[, nullValues[, keysB64]]] (batches.build_entry; a column None when no message
    sets it, nullValues only in a batch that has a message with a null value or a base64 key,
    keysB64 only in one with a base64 key)."""
    return codec.decode(payload(rec, where))


def expand(rec: list, where: str = "") -> list[list]:
    """The messages of a batch entry, in batch-index order, each a record in the entry layout
    ([publishTime, producerName, sequenceId, payload, properties, key, orderingKey, eventTime,
    deliverAt, 0, size[, schemaVersion]]) with its own payload (uncompressed), properties, key,
    ordering key, event time and sequence id, and the entry's publish time, producer name and
    schema version. where names the entry in a decompression error. Read by index: a batch
    of 1000 makes 1000 records. A message with a null value has the record's fields up to
    null_value (true), one with a base64 key up to key_b64_encoded (true)."""
    pt, producer, first = rec[F_PUBLISH_TIME], rec[F_PRODUCER_NAME], rec[F_SEQUENCE_ID]
    sv = rec[F_SCHEMA_VERSION] if len(rec) > F_SCHEMA_VERSION else None
    columns = batch_columns(rec, where)
    payloads, props, keys_, okeys, events, seqs = columns[:6]
    nulls = columns[6] if len(columns) > 6 else None
    b64 = columns[7] if len(columns) > 7 else None
    out = []
    for i, data in enumerate(payloads):
        r = [pt, producer, seqs[i] if seqs else first + i, data,
             props[i] if props else None, keys_[i] if keys_ else None,
             okeys[i] if okeys else None, events[i] if events else 0, 0]
        if b64 and b64[i]:
            r += [0, len(data), sv, None, None, None, True if nulls and nulls[i] else None,
                  None, True]
        elif nulls and nulls[i]:
            r += [0, len(data), sv, None, None, None, True]
        elif sv is not None:
            r += [0, len(data), sv]
        out.append(r)
    return out


def record(rec: list, where: str = "", pieces: list | None = None) -> list:
    """The one message of an entry that is not a batch, as readers see it: its payload
    decompressed (compression 0; the entry itself when there is nothing to decompress); a
    chunk joined with its pieces when given, else as stored (a piece, for message_from_entry
    to leave as one). where names the entry in a decompression error."""
    if pieces is not None:
        rec = joined(rec, pieces)
    elif len(rec) <= F_COMPRESSION or chunk_of(rec) is not None:
        return rec
    if rec[F_COMPRESSION]:
        rec = list(rec)
        rec[F_PAYLOAD] = payload(rec, where)
        rec[F_COMPRESSION] = 0
    return rec


def records(rec: list, where: str = "", pieces: list | None = None) -> list[tuple[int, list]]:
    """(batch index, record) of every message of a decoded entry, payloads as readers see them:
    a batch gives expand's records with indexes 0..n-1, any other entry its record (above)
    with index -1. The scans (scan.whole_messages) call expand and record themselves, making
    no list per entry: through records, a compressed topic's scan took a third longer."""
    if is_batch(rec):
        return list(enumerate(expand(rec, where)))
    return [(-1, record(rec, where, pieces))]


def messages(rec: list, ledger_id: int, entry_id: int, partition: int, topic: str,
             redelivery_count: int = 0, subscription: str | None = None,
             consumer: str | None = None, skip=None, pieces: list | None = None
             ) -> list[Message]:
    """The Messages of an entry (records, as Messages), ids with their batch index; skip:
    batch indexes to leave out (acked ones, or those a reader starts after); pieces: a
    chunked message's, to join (see records)."""
    # A decompression error names a batch by its entry, a message by its id (as before).
    # records' two halves called here, without its list of (index, record) pairs: a batch's
    # messages are what a batched topic's consume delivers, one by one.
    if not is_batch(rec):
        r = record(rec, f"{ledger_id}:{entry_id}:{partition}", pieces)
        return [message_from_entry(r, MessageId(ledger_id, entry_id, partition), topic,
                                   redelivery_count, subscription, consumer)]
    return _batch_messages(rec, ledger_id, entry_id, partition, topic, redelivery_count,
                           subscription, consumer, skip)


def _batch_messages(rec, ledger_id, entry_id, partition, topic, redelivery_count,
                    subscription, consumer, skip) -> list[Message]:
    """A batch's Messages straight from its columns: what expand and message_from_entry make
    (an expanded record is never compressed nor a chunk), without the record per message in
    between; a batched consumer's fetch builds 1000 of them per batch, and this way takes
    0.6 of the time (tests/broker/test_unpack.py compares the two)."""
    pt, producer, first = rec[F_PUBLISH_TIME], rec[F_PRODUCER_NAME], rec[F_SEQUENCE_ID]
    sv = rec[F_SCHEMA_VERSION] if len(rec) > F_SCHEMA_VERSION else None
    columns = batch_columns(rec, f"{ledger_id}:{entry_id}")
    payloads, props, keys_, okeys, events, seqs = columns[:6]
    nulls = columns[6] if len(columns) > 6 else None
    b64 = columns[7] if len(columns) > 7 else None
    out = []
    for i, data in enumerate(payloads):
        if skip and i in skip:
            continue
        m = Message(pt, producer, seqs[i] if seqs else first + i, data,
                    props[i] if props else None, keys_[i] if keys_ else None,
                    okeys[i] if okeys else None, events[i] if events else 0, 0,
                    MessageId(ledger_id, entry_id, partition, i), topic,
                    redelivery_count, subscription, consumer, sv)
        if nulls and nulls[i]:
            m.null_value_ = True
        if b64 and b64[i]:
            m.key_b64_ = True
        out.append(m)
    return out


def first_message(rec: list, ledger_id: int, entry_id: int, partition: int, topic: str):
    """The entry's first message: what pulsar-admin's get-message-by-id and examine-message
    show for a batch (they return the first message of the entry)."""
    if not is_batch(rec):
        return message_from_entry(rec, MessageId(ledger_id, entry_id, partition), topic)
    return messages(rec, ledger_id, entry_id, partition, topic)[0]
