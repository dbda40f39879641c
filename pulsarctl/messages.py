"""MessageId, message metadata and Message, shaped like pulsar-client's.

An entry in the store is a list built here (and, for batches, in broker/batches.py) and packed
by store/codec.py; pulsarctl/entries.py names its fields (Entry) and documents the layout:
[publishTime, producerName, sequenceId, payload, properties, key, orderingKey, eventTime,
deliverAt, compression code, uncompressed size, schema version, chunk, numMessagesInBatch,
highestSequenceId, nullValue, encryption, keyB64Encoded]; trailing fields that are unset are
left off. nullValue (true)
marks a message sent with no value (Pulsar's null_value, not the same as an empty payload). chunk is Pulsar's chunk
metadata, [uuid, chunk id, num chunks, total chunk message size], on each entry of a message
split into chunks (the entry's payload is that piece of the stored, possibly compressed,
payload; the size is the whole message's, uncompressed). A batch entry (numMessagesInBatch set,
two or more) holds several messages: its sequence id is the first message's, its key and
ordering key the first message's, and its payload the serialized batch (every message's
payload, properties, key, ordering key, event time and sequence id), compressed as a whole;
broker/batches.py builds it; broker/unpack.py turns any entry into its messages.
"""
from __future__ import annotations


from pulsarctl.entries import (
    Chunk, F_CHUNK, F_COMPRESSION, F_KEY_B64, F_NULL_VALUE, F_PAYLOAD, F_SCHEMA_VERSION,
    F_UNCOMPRESSED_SIZE, encryption_of, is_key_b64, is_null_value, payload as _payload,
)
from pulsarctl.errors import InvalidMessageId


class MessageId:
    """ledgerId:entryId:partitionIndex[:batchIndex], ordered as the C++ client orders them
    (ledger, entry, batch index; the partition is ignored)."""
    __slots__ = ("ledger_id", "entry_id", "partition", "batch_index")

    def __init__(self, ledger_id: int, entry_id: int, partition: int = -1, batch_index: int = -1):
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.partition = partition
        self.batch_index = batch_index

    def __str__(self) -> str:
        s = f"{self.ledger_id}:{self.entry_id}:{self.partition}"
        return s if self.batch_index == -1 else f"{s}:{self.batch_index}"

    def __repr__(self) -> str:
        return f"MessageId({self})"

    def _key(self):
        return (self.ledger_id, self.entry_id, self.partition, self.batch_index)

    def __eq__(self, other):
        return isinstance(other, MessageId) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def _cmp_key(self):
        return (self.ledger_id, self.entry_id, self.batch_index)

    def __lt__(self, other):
        return self._cmp_key() < other._cmp_key()

    def __le__(self, other):
        return self._cmp_key() <= other._cmp_key()

    def __gt__(self, other):
        return self._cmp_key() > other._cmp_key()

    def __ge__(self, other):
        return self._cmp_key() >= other._cmp_key()

    def serialize(self) -> bytes:
        return str(self).encode()

    @classmethod
    def deserialize(cls, data: bytes) -> "MessageId":
        return parse_message_id(data.decode() if isinstance(data, bytes) else data)


INT64_MAX = 2**63 - 1
MessageId.earliest = MessageId(-1, -1, -1)
MessageId.latest = MessageId(INT64_MAX, INT64_MAX, -1)

_ID_RE = None
_ID_PATTERN = (r"^\s*\(?\s*(-?\d+)\s*[:,]\s*(-?\d+)(?:\s*[:,]\s*(-?\d+))?"
               r"(?:\s*[:,]\s*(-?\d+))?\s*\)?\s*$")


def parse_message_id(text: str) -> MessageId:
    """ledgerId:entryId[:partition[:batchIndex]]; also the Python client's (l,e,p,b) form."""
    if text in ("earliest", "latest"):
        return MessageId.earliest if text == "earliest" else MessageId.latest
    global _ID_RE
    if _ID_RE is None:
        import re  # lazy: one-shot produce never needs it

        _ID_RE = re.compile(_ID_PATTERN)
    m = _ID_RE.match(text or "") if isinstance(text, str) else None
    if not m:
        shown = text if len(text or "") <= 60 else text[:57] + "..."
        raise InvalidMessageId(f"malformed message id {shown!r}")
    ledger, entry, part, batch = m.groups()
    values = [int(ledger), int(entry), int(part) if part else -1, int(batch) if batch else -1]
    if not all(-1 <= v <= INT64_MAX for v in values):
        raise InvalidMessageId(f"message id {text!r} is out of range")
    return MessageId(*values)


_ISO_LAST = [None, None]  # the last (ms, text): a batch's messages share their publish time


def iso_ms(ms: int | None) -> str | None:
    """ISO 8601 UTC with milliseconds, as message records print times."""
    if not ms:
        return None
    last = _ISO_LAST
    if last[0] == ms:
        return last[1]
    from datetime import datetime, timezone  # lazy: one-shot produce never needs it

    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    last[0], last[1] = ms, text
    return text


class OutgoingMessage:
    """What a producer sends. Payload is bytes; the broker stamps publish time and ids."""
    __slots__ = ("payload", "properties", "key", "ordering_key", "event_time", "deliver_at",
                 "sequence_id", "schema_version", "chunks", "new_batch", "null_value",
                 "encryption", "key_b64")

    def __init__(self, payload: bytes, properties: dict | None = None, key: str | None = None,
                 ordering_key: bytes | None = None, event_time: int = 0, deliver_at: int = 0,
                 sequence_id: int | None = None, schema_version: int | None = None):
        self.schema_version = schema_version
        self.payload = payload
        self.properties = properties
        self.key = key
        self.ordering_key = ordering_key
        self.event_time = event_time
        self.deliver_at = deliver_at
        self.sequence_id = sequence_id
        # A copy of a chunked message (dead letter, retry moves): its stored pieces, as
        # (compression code, uncompressed size, num chunks, total size, [(chunk id, piece)]).
        self.chunks = None
        # The producer's batching publish delay ran out before this message came: it starts a
        # new batch (batches.group).
        self.new_batch = False
        # Sent with no value (Pulsar's null_value; the payload is then b""), e.g. a tombstone.
        self.null_value = False
        # End-to-end encrypted by its client: pulsarctl/entries.py's field 16 (payload: the
        # ciphertext, kept as sent).
        self.encryption = None
        # The key is the base64 text of a binary key (Pulsar's partition_key_b64_encoded, as a
        # Java client's keyBytes() sends it): entries.py's field 17, kept for the consumers.
        self.key_b64 = False

    def size(self) -> int:
        return len(self.payload)


class SentBatch:
    """A batch of plain messages as a client sent it over the wire (serve): their payloads, the
    first one's sequence id (the others follow by one), their delivery time and schema
    version. Published as one batch entry without an OutgoingMessage per message
    (producers.publish_as_sent); outgoing() gives them for anything else."""
    __slots__ = ("payloads", "first_sequence_id", "deliver_at", "schema_version")

    def __init__(self, payloads: list, first_sequence_id: int, deliver_at: int = 0,
                 schema_version: int | None = None):
        self.payloads = payloads
        self.first_sequence_id = first_sequence_id
        self.deliver_at = deliver_at
        self.schema_version = schema_version

    def __len__(self) -> int:
        return len(self.payloads)

    def outgoing(self) -> list[OutgoingMessage]:
        d, sv = self.deliver_at, self.schema_version
        return [OutgoingMessage(data, None, None, None, 0, d, seq, sv)
                for seq, data in enumerate(self.payloads, self.first_sequence_id)]


class BatchIds:
    """The message ids of one batch entry's n messages, made when asked for: what a publish of
    a SentBatch returns instead of a MessageId per message (serve reads the first)."""
    __slots__ = ("ledger_id", "entry_id", "partition", "n")

    def __init__(self, ledger_id: int, entry_id: int, partition: int, n: int):
        self.ledger_id, self.entry_id, self.partition, self.n = ledger_id, entry_id, partition, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return MessageId(self.ledger_id, self.entry_id, self.partition, i)

    def __iter__(self):
        return (MessageId(self.ledger_id, self.entry_id, self.partition, i) for i in range(self.n))

    def __eq__(self, other):
        return list(self) == list(other)

    def __repr__(self) -> str:
        return f"BatchIds({self.ledger_id}:{self.entry_id}:{self.partition}, {self.n})"


def copied(m: "Message", out: OutgoingMessage) -> OutgoingMessage:
    """out, a copy of m made by a move (dead letter, retry, replay), with what it carries
    beyond its payload, properties and keys: a null value, a client's encryption."""
    out.null_value = m.null_value_
    out.encryption = m.encryption_
    out.key_b64 = m.key_b64_
    return out


def build_entry(publish_time: int, producer: str, seq: int, m: OutgoingMessage,
                compressed: tuple | None = None, chunk: tuple | None = None) -> list:
    """The stored entry (pulsarctl/entries.py's layout; built as a list here, not as an Entry:
    `perf produce -db` builds one per message); compressed = (code, compressed payload) stores
    that payload and appends the code and the uncompressed size; then the schema version, if
    any. chunk = (metadata, piece, compression code, uncompressed size): one chunk's entry,
    fields 0..12. A message with a null value: fields 0..15. A base64 key (m.key_b64 with a
    key): those fields, then up to 17."""
    b64 = [None] * (F_KEY_B64 - F_CHUNK) + [True] if m.key_b64 and m.key is not None else None
    if chunk is not None:
        meta, piece, code, size = chunk
        rec = [publish_time, producer, seq, piece, m.properties or None, m.key, m.ordering_key,
               m.event_time or 0, m.deliver_at or 0, code, size, m.schema_version, meta]
        return rec + b64[1:] if b64 else rec
    sv = m.schema_version
    if m.encryption:   # the ciphertext as sent: nothing to compress, nothing to open
        rec = [publish_time, producer, seq, m.payload, m.properties or None, m.key,
               m.ordering_key, m.event_time or 0, m.deliver_at or 0, 0, len(m.payload), sv,
               None, None, None, True if m.null_value else None, m.encryption]
        return rec + [True] if b64 else rec
    if m.null_value or b64:
        code, stored = compressed if compressed else (0, m.payload)
        rec = [publish_time, producer, seq, stored, m.properties or None, m.key, m.ordering_key,
               m.event_time or 0, m.deliver_at or 0, code, len(m.payload), sv]
        if not b64:
            return rec + [None, None, None, True]
        b64[F_NULL_VALUE - F_CHUNK] = True if m.null_value else None
        return rec + b64
    rec = [publish_time, producer, seq, m.payload]
    if m.properties or m.key is not None or m.ordering_key is not None or m.event_time \
            or m.deliver_at or compressed or sv is not None:
        rec += [m.properties or None, m.key, m.ordering_key, m.event_time or 0, m.deliver_at or 0]
        if compressed or sv is not None:
            if compressed:
                rec[F_PAYLOAD] = compressed[1]
                rec += [compressed[0], len(m.payload)]
            else:
                rec += [0, len(m.payload)]
            if sv is not None:
                rec.append(sv)
        else:
            while len(rec) > 4 and rec[-1] in (None, 0):
                rec.pop()
    return rec


class Message:
    """A received message, with pulsar-client's accessors. The first nine parameters are in
    the order of the stored entry, so a message is built from an entry in one call."""
    __slots__ = ("publish_time", "producer_name", "sequence_id", "payload", "properties_", "key",
                 "ordering_key_", "event_time", "deliver_at", "id", "topic", "redelivery_count_",
                 "subscription", "consumer_name", "schema_version_", "chunk_", "chunk_ids_",
                 "null_value_", "encryption_", "key_b64_")

    def __init__(self, publish_time, producer_name, sequence_id, payload, properties_=None,
                 key=None, ordering_key_=None, event_time=0, deliver_at=0, id=None, topic=None,
                 redelivery_count_=0, subscription=None, consumer_name=None,
                 schema_version_=None):
        self.schema_version_ = schema_version_
        # A chunk as stored: (metadata, compression code, uncompressed size); clients join
        # the chunks of a message (client/chunks.py), which then has chunk_ids_, every chunk's id.
        self.chunk_ = None
        self.chunk_ids_ = None
        self.null_value_ = False  # sent with no value (its payload is b"")
        self.encryption_ = None   # end-to-end encrypted: entries.py's field 16
        self.key_b64_ = False     # key is the base64 text of a binary key: field 17
        self.publish_time = publish_time
        self.producer_name = producer_name
        self.sequence_id = sequence_id
        self.payload = payload
        self.properties_ = properties_
        self.key = key
        self.ordering_key_ = ordering_key_
        self.event_time = event_time
        self.deliver_at = deliver_at
        self.id = id
        self.topic = topic
        self.redelivery_count_ = redelivery_count_
        self.subscription = subscription
        self.consumer_name = consumer_name

    def __repr__(self) -> str:
        return f"Message({self.id}, {self.topic}, {self.payload[:40]!r})"

    # pulsar-client's accessor names
    def data(self) -> bytes:
        return self.payload

    def value(self):
        return self.payload

    def has_null_value(self) -> bool:
        """The message was sent with no value (not an empty one): a tombstone."""
        return self.null_value_

    def properties(self) -> dict:
        return dict(self.properties_ or {})

    def partition_key(self) -> str | None:
        return self.key

    def ordering_key(self) -> bytes | None:
        return self.ordering_key_

    def publish_timestamp(self) -> int:
        return self.publish_time

    def event_timestamp(self) -> int:
        return self.event_time

    def message_id(self) -> MessageId:
        return self.id

    def topic_name(self) -> str:
        return self.topic

    def redelivery_count(self) -> int:
        return self.redelivery_count_

    def schema_version(self) -> int | None:
        """The version of the topic's schema the producer wrote with (None: no schema)."""
        return self.schema_version_

    def record(self) -> dict:
        """The message record of CLI.md (-o ndjson / json)."""
        try:
            payload, enc = self.payload.decode("utf-8"), None
        except UnicodeDecodeError:
            import base64  # lazy: one-shot produce never needs it

            payload, enc = base64.b64encode(self.payload).decode(), "base64"
        okey = self.ordering_key_
        if isinstance(okey, bytes):
            try:
                okey = okey.decode()
            except UnicodeDecodeError:
                import base64  # lazy: one-shot produce never needs it

                okey = base64.b64encode(okey).decode()
        if self.null_value_:  # no value, as Pulsar's tools show it
            payload, enc = None, None
        r = {"messageId": str(self.id), "topic": self.topic, "payload": payload}
        if enc:
            r["encoding"] = enc
        r.update({
            "key": self.key, "orderingKey": okey, "properties": dict(self.properties_ or {}),
            "publishTime": iso_ms(self.publish_time), "eventTime": iso_ms(self.event_time),
            "producerName": self.producer_name, "sequenceId": self.sequence_id,
            "redeliveryCount": self.redelivery_count_,
        })
        if self.key_b64_:  # the key is the base64 text of a binary key, as Pulsar keeps it
            r["keyEncoding"] = "base64"
        if self.deliver_at:
            r["deliverAt"] = iso_ms(self.deliver_at)
        if self.schema_version_ is not None:
            r["schemaVersion"] = self.schema_version_
        if self.chunk_ids_:
            r["numChunks"] = len(self.chunk_ids_)
        elif self.chunk_ is not None:
            meta = Chunk(*self.chunk_[0])
            r["chunk"] = {"uuid": meta.uuid, "chunkId": meta.chunk_id,
                          "numChunks": meta.num_chunks, "totalChunkMsgSize": meta.total_size}
        if self.subscription is not None:
            r["subscription"] = self.subscription
            r["consumerName"] = self.consumer_name
        return r


def message_from_entry(rec: list, mid: MessageId, topic: str, redelivery_count: int = 0,
                       subscription: str | None = None, consumer: str | None = None) -> Message:
    """The Message of one message's record (a plain entry as stored, or one of a batch's as
    broker/unpack.py makes them), its payload decompressed; a chunk's stays its stored piece
    (m.chunk_), for the client to join. Read by index (pulsarctl/entries.py's F_ constants):
    dispatch calls this once per entry."""
    if len(rec) > F_COMPRESSION:  # [..., compression, uncompressed size[, schema v[, chunk]]]
        code, size = rec[F_COMPRESSION], rec[F_UNCOMPRESSED_SIZE]
        sv = rec[F_SCHEMA_VERSION] if len(rec) > F_SCHEMA_VERSION else None
        chunk = rec[F_CHUNK] if len(rec) > F_CHUNK else None
        stored, rec = rec, list(rec[:F_COMPRESSION])
        if chunk:  # a piece: decompressed once the chunks are joined
            m = Message(*rec, id=mid, topic=topic, redelivery_count_=redelivery_count,
                        subscription=subscription, consumer_name=consumer, schema_version_=sv)
            m.chunk_ = (chunk, code, size)
            m.key_b64_ = is_key_b64(stored)
            return m
        if code:
            rec[F_PAYLOAD] = _payload(stored, str(mid))
        m = Message(*rec, id=mid, topic=topic, redelivery_count_=redelivery_count,
                    subscription=subscription, consumer_name=consumer, schema_version_=sv)
        if is_null_value(stored):
            m.null_value_ = True
        m.encryption_ = encryption_of(stored)
        m.key_b64_ = is_key_b64(stored)
        return m
    return Message(*rec, id=mid, topic=topic, redelivery_count_=redelivery_count,
                   subscription=subscription, consumer_name=consumer)
