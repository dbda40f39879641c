"""Batch messages, as Pulsar stores them: one entry holding the messages a producer batched.

The entry (pulsarctl/entries.py's Entry) carries the batch's metadata: publish time, producer
name, the first sequence id (sequence_id), the first message's key and ordering key (Key_Shared
hashes the entry's key, as Pulsar's Commands.initBatchMessageMetadata copies them), the schema
version, num_messages (the number of messages in the batch) and highest_sequence_id. Its
payload is the serialized batch: the codec-encoded single-message metadata of each message
(payload, properties, key, ordering key, event time, sequence id; see build_entry), compressed
as a whole when the producer compresses (compression, and uncompressed_size the size of the
serialized batch), as Pulsar compresses a batch's payload. A batch of one is stored as a plain message, as Pulsar's
BatchMessageContainerImpl sends it. Delayed messages are never batched.

A message of a batch has the id ledger:entry:partition:batchIndex. The cursor counts entries
(a batch is one in the backlog); acking some indexes of a batch does not ack the entry: the
indexes acked so far are kept durably per subscription (table "batchack"), because a consumer
here spans processes (receive in one shell, ack in another), and the entry is acked when every
index is. A nack, an ack timeout or a redelivery gives back the whole entry. Dispatch then
hands out every index again and forgets the partial acks, as Pulsar's client starts a new
BatchMessageAcker per delivery — unless the store setting acknowledgmentAtBatchIndexLevelEnabled
is true: then acked indexes are never delivered again (the broker's ack set).

A `receive` that stops in the middle of a batch leaves the indexes it did not hand out queued
for its consumer (table "batchq"), so its next `receive` continues the batch, as the consumer's
receiver queue would in one process.
"""
from __future__ import annotations

from store import codec, keys
from pulsarctl.broker import history, topics
from pulsarctl.broker.subscription_state import state
from pulsarctl.broker.unpack import batch_columns, messages
from pulsarctl.entries import Entry, batch_size
from pulsarctl.errors import InvalidValue, MessageNotFound
from pulsarctl.compression import compress

INDEX_LEVEL = "acknowledgmentAtBatchIndexLevelEnabled"
DEFAULT, KEY_BASED = "Default", "KeyBased"
_decode = codec.decode


# -- the entry format -------------------------------------------------------------------------
def build_entry(publish_time: int, producer: str, msgs: list, seqs: list[int], code: int = 0
                ) -> list:
    """The stored entry of a batch of OutgoingMessages with their sequence ids (two or more
    messages: one is a plain entry). code: a pulsarctl.compression code for the whole batch.

    The serialized batch holds the single-message metadata column by column:
    [payloads, properties, keys, orderingKeys, eventTimes, sequenceIds[, nullValues[,
    keysB64]]], a column None when no message sets it (sequence ids: when they run on from the
    first by one), which keeps the bytes a small message costs near its payload; nullValues (a
    list of booleans, SingleMessageMetadata.null_value) is there only when a message has a null
    value or keysB64 follows; keysB64 (booleans, SingleMessageMetadata.partition_key_b64_encoded:
    the key is the base64 text of a binary key) only when a message's key is so."""
    n = len(msgs)
    props = [m.properties or None for m in msgs]
    keys_ = [m.key for m in msgs]
    okeys = [m.ordering_key for m in msgs]
    events = [m.event_time or 0 for m in msgs]
    first = seqs[0]
    columns = [
        [m.payload for m in msgs],
        props if any(props) else None,
        keys_ if keys_.count(None) != n else None,
        okeys if okeys.count(None) != n else None,
        events if any(events) else None,
        None if seqs[-1] - first == n - 1 and seqs == list(range(first, first + n)) else seqs,
    ]
    nulls = [bool(m.null_value) for m in msgs]
    b64 = [bool(m.key_b64) and m.key is not None for m in msgs]
    if any(b64):
        columns += [nulls if any(nulls) else None, b64]
    elif any(nulls):
        columns.append(nulls)
    body = codec.encode(columns)
    stored = body
    if code:
        stored = compress(code, body)
    m0 = msgs[0]
    # The entry's key is its first message's (Key_Shared hashes it), base64 or not as that one.
    return Entry(publish_time, producer, first, stored, key=m0.key, ordering_key=m0.ordering_key,
                 compression=code, uncompressed_size=len(body), schema_version=m0.schema_version,
                 num_messages=n, highest_sequence_id=max(seqs),
                 key_b64_encoded=True if b64[0] else None).to_stored()


def payload_batch(payloads: list, code: int = 0) -> tuple[bytes, int]:
    """The serialized batch of plain messages (a payload each and nothing else), as stored
    (compressed with code), and its size before compression."""
    body = codec.encode([payloads, None, None, None, None, None])
    return (compress(code, body) if code else body), len(body)


def build_payload_entry(publish_time: int, producer: str, n: int, first_seq: int,
                        batch: tuple[bytes, int], code: int = 0,
                        schema_version: int | None = None) -> list:
    """build_entry of n plain messages with the sequence ids first_seq onwards, from their
    serialized batch (payload_batch): the same list (tests/broker/test_batching.py compares
    them), without an OutgoingMessage per message (produce --stdin's bulk path, and a batch a
    wire client sent: producers.publish_as_sent)."""
    stored, size = batch
    return Entry(publish_time, producer, first_seq, stored, compression=code,
                 uncompressed_size=size, schema_version=schema_version, num_messages=n,
                 highest_sequence_id=first_seq + n - 1).to_stored()


def plain_ranges(sizes: list, max_messages: int, max_bytes: int, limit: int,
                 breaks=()) -> list[tuple[int, int]]:
    """The (start, stop) index ranges group gives plain messages of these payload sizes (no
    delivery time, no key-based batching); breaks: indexes that start a new batch (the
    publish delay ran out before them, OutgoingMessage.new_batch)."""
    max_n = max(1, max_messages)
    max_b = min(max_bytes, limit) if max_bytes > 0 else limit
    out: list = []
    bounds = [0, *sorted(b for b in breaks if 0 < b < len(sizes)), len(sizes)]
    for lo, hi in zip(bounds, bounds[1:]):
        if lo == hi:
            continue
        if max(sizes[lo:hi]) * max_n < max_b:   # the count alone closes every batch
            out.extend((i, min(i + max_n, hi)) for i in range(lo, hi, max_n))
            continue
        start, nbytes = lo, 0
        for i in range(lo, hi):
            n = sizes[i]
            if i > start and (nbytes + n > max_b or i - start >= max_n):
                out.append((start, i))
                start, nbytes = i, 0
            nbytes += n
            if i + 1 - start >= max_n or nbytes >= max_b:
                out.append((start, i + 1))
                start, nbytes = i + 1, 0
        if start < hi:
            out.append((start, hi))
    return out


# -- grouping a producer's messages into batches -------------------------------------------
class Spec:
    """What a producer batches by: at most max_messages messages and max_bytes bytes of
    payload (0: only maxMessageSize bounds it) per batch; key_based: one batch per key
    (ordering key, else partition key), so each entry's key is every message's key.
    as_sent: the messages are one batch a client sent (serve), kept a batch even of one
    message, as Pulsar's broker stores what the client sent (the C++ client sends a lone
    message of its batch container as a batch of one; pulsarctl's producers, as Java's, send
    it plain)."""
    __slots__ = ("max_messages", "max_bytes", "key_based", "as_sent")

    def __init__(self, max_messages: int = 1000, max_bytes: int = 128 * 1024,
                 key_based: bool = False, as_sent: bool = False):
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.key_based = key_based
        self.as_sent = as_sent

    def __repr__(self) -> str:
        return (f"Spec({self.max_messages}, {self.max_bytes}, "
                f"{KEY_BASED if self.key_based else DEFAULT})")


def _batch_key(m):
    # BatchMessageKeyBasedContainer.getKey: the ordering key when there is one, else the key.
    return ("o", m.ordering_key) if m.ordering_key is not None else ("k", m.key)


def group(msgs: list, spec: Spec, limit: int) -> list[list[int]]:
    """The entries a producer's messages go into, as lists of message indexes in entry order.
    A batch closes when the next message would not fit (haveEnoughSpace) or it is full
    (isBatchFull) or the publish delay ran out before the next message (its new_batch); a
    delayed message (or a chunked copy) goes alone and first sends what is batched, so order
    is kept. The key-based batcher closes one container for all keys and sends a batch per key,
    ordered by their first message (its lowest sequence id). limit is maxMessageSize, which no
    batch may pass."""
    max_n = max(1, spec.max_messages)
    max_b = min(spec.max_bytes, limit) if spec.max_bytes > 0 else limit
    sizes = [len(m.payload) for m in msgs]
    plain = not spec.key_based and not any(
        m.deliver_at or m.chunks is not None or m.new_batch for m in msgs)
    out: list[list[int]] = []
    if plain:  # the common case, without a look at each message
        return [list(range(a, z)) for a, z in plain_ranges(sizes, spec.max_messages,
                                                           spec.max_bytes, limit)]
    cont: list[int] = []
    nbytes = 0

    def close():
        if not cont:
            return
        if not spec.key_based:
            out.append(list(cont))
        else:
            by_key: dict = {}
            for i in cont:
                by_key.setdefault(_batch_key(msgs[i]), []).append(i)
            out.extend(sorted(by_key.values(), key=lambda g: g[0]))
        cont.clear()

    for i, m in enumerate(msgs):
        if m.deliver_at or m.chunks is not None:
            close()
            nbytes = 0
            out.append([i])
            continue
        n = sizes[i]
        if cont and (nbytes + n > max_b or len(cont) >= max_n or m.new_batch):
            close()
            nbytes = 0
        cont.append(i)
        nbytes += n
        if len(cont) >= max_n or nbytes >= max_b:
            close()
            nbytes = 0
    close()
    return out


# -- partial acknowledgement (per subscription, durable) ------------------------------------
def index_level(ctx) -> bool:
    return bool(ctx.setting(INDEX_LEVEL))


def acked_indexes(ctx, c, offset: int) -> set:
    if not state(c).batch_acks:
        return set()
    return set(ctx.get("batchack", c.id, offset) or ())


def _held_by(ctx, c, offset: int):
    raw = ctx.txn.get(keys.pair(c.id, offset), db=ctx.env.db["pending"])
    return None if raw is None else _decode(raw)[0]


def resolve(ctx, info, c, ids, cumulative: bool = False):
    """Turn message ids into what the cursor acknowledges. An id without a batch index (or of
    a plain entry) names its entry; a batch index is recorded in the subscription's partial
    acks and names the entry once every index of it is acked. A cumulative ack of a batch index
    acks everything before its entry and the indexes up to it.

    Returns (entry offsets to ack, ids that newly acked an index, entries those completed,
    consumers holding entries acked in part). An id that names no message raises
    MessageNotFound (the transaction then acks nothing)."""
    offsets: list[int] = []
    by_entry: dict[int, list[int]] = {}
    sizes: dict[int, int] = {}
    offset, first, nxt = info.offset, info.first_offset, info.next_offset
    for mid in ids:
        o = offset(mid.ledger_id, mid.entry_id)
        if o is not None and 0 <= o < first and mid.entry_id >= 0:
            continue  # trimmed: acked by every subscription already
        if o is None or mid.entry_id < 0 or not (first <= o < nxt):
            topics.offset_of(ctx, info, mid)  # raises MessageNotFound with the hint
        i = mid.batch_index
        if i < 0:
            offsets.append(o)
            continue
        n = sizes.get(o)
        if n is None:
            n = sizes[o] = batch_size(_decode(ctx.ledgers.read(ctx.txn, info, o)))
        if i >= n:
            where = f"{mid.ledger_id}:{mid.entry_id}:{mid.partition}"
            raise MessageNotFound(
                f"message {mid} not found on {info.name}",
                hint=(f"{where} is not a batch: its id has no batch index" if n == 1 and i
                      else f"the batch {where} holds indexes 0 to {n - 1}"))
        if n == 1:
            offsets.append(o)  # index 0 of a plain entry: the entry
            continue
        if cumulative:
            by_entry.setdefault(o, []).extend(range(i + 1))
        else:
            by_entry.setdefault(o, []).append(i)
    newly, completed, holders = 0, 0, set()
    for o, idx in by_entry.items():
        if ctx.cursors.is_acked(ctx.txn, c, o):
            if cumulative:
                offsets.append(o)  # acked already; what lies before it may not be
            continue
        have = acked_indexes(ctx, c, o)
        new = set(idx) - have
        newly += len(new)
        have |= new
        if len(have) >= sizes[o]:
            offsets.append(o)
            completed += 1
            ctx.delete("batchack", c.id, o)
            continue
        if new:
            ctx.put(sorted(have), "batchack", c.id, o)
            state(c).batch_acks = True
            # An ack of some indexes is an event of theirs (explain shows it on those only).
            history.record(ctx, info, o, history.ACKED, c.name, batchIndexes=sorted(new))
            holder = _held_by(ctx, c, o)
            if holder is not None:
                holders.add(holder)
        if cumulative and o - 1 > c.mark_delete:
            offsets.append(o - 1)  # everything before the entry
    return offsets, newly, completed, holders


def forget(ctx, c, offsets) -> None:
    """Entries acked whole (or gone): their partial acks mean nothing any more."""
    s = state(c)
    if not s.batch_acks and not s.batch_queued:
        return
    for o in offsets:
        ctx.delete("batchack", c.id, o)
        ctx.delete("batchq", c.id, o)


def forget_through(ctx, c, upto: int | None = None) -> None:
    """Drop the partial acks and queued indexes of entries at or below upto (mark-delete
    moved past them), or all of them (upto None: a reset, an unsubscribe)."""
    s = state(c)
    if not s.batch_acks and not s.batch_queued:
        return
    for table in ("batchack", "batchq"):
        for k, _v in list(ctx.scan(table, c.id)):
            if upto is None or k[2] <= upto:
                ctx.delete(*k)
    if upto is None:
        s.batch_acks = s.batch_queued = False


class Delivery:
    """Per dispatch call: what a fresh delivery of a batch entry leaves out. With
    acknowledgmentAtBatchIndexLevelEnabled the indexes already acked (Pulsar's ack set);
    without it, nothing: the partial acks are forgotten, as the client's acker of the earlier
    delivery is."""
    __slots__ = ("ctx", "c", "level", "any")

    def __init__(self, ctx, c):
        self.ctx = ctx
        self.c = c
        self.level = index_level(ctx)
        self.any = state(c).batch_acks

    def skip(self, offset: int):
        if not self.any:
            return None
        if self.level:
            return acked_indexes(self.ctx, self.c, offset) or None
        self.ctx.delete("batchack", self.c.id, offset)
        return None

    def messages(self, offset: int, rec: list, ledger_id: int, entry_id: int, partition: int,
                 topic: str, redelivery_count: int, subscription: str, consumer: str) -> list:
        return messages(rec, ledger_id, entry_id, partition, topic, redelivery_count,
                        subscription, consumer, self.skip(offset))

    def whole(self, offset: int, rec: list, id, redelivery_count: int, topic: str | None = None,
              subscription: str | None = None, consumer: str | None = None) -> Batch:
        b = Batch(id, rec, batch_columns(rec, f"{id.ledger_id}:{id.entry_id}"),
                  self.skip(offset), redelivery_count)
        b.topic, b.subscription, b.consumer = topic, subscription, consumer
        return b


class Batch:
    """A batch entry as a fetch with whole_batches hands it out: unopened, its single-message
    metadata still in columns (unpack.batch_columns), for serve to forward as one batch
    MESSAGE. A Message per index, built and then taken apart again into the same bytes, was
    most of what delivering a batch through serve cost (0.9 of about 1.6 us a message).
    count: the messages delivered (size less those in skip, which the consumer does not get).
    A CLI consume prints and acks one the same way (client.Consumer.whole_batches)."""
    __slots__ = ("id", "rec", "columns", "skip", "size", "count", "redelivery_count", "topic",
                 "subscription", "consumer")
    chunk_ = None   # as a Message's: a batch is never a chunk

    def __init__(self, id, rec: list, columns: list, skip, redelivery_count: int):
        self.id = id                  # the entry's MessageId (batch index -1)
        self.rec = rec                # the stored entry (entries.py), for its metadata
        self.columns = columns
        self.skip = skip              # batch indexes left out, or None
        self.size = len(columns[0])
        self.count = self.size - (len(skip) if skip else 0)
        self.redelivery_count = redelivery_count
        self.topic = self.subscription = self.consumer = None

    def __repr__(self) -> str:
        return f"Batch({self.id}, {self.count} of {self.size})"

    def messages(self) -> list:
        """Its delivered messages, a Message each (as a fetch without whole_batches gives)."""
        i = self.id
        return messages(self.rec, i.ledger_id, i.entry_id, i.partition, self.topic,
                        self.redelivery_count, self.subscription, self.consumer, self.skip)

    def payload_bytes(self) -> int:
        """The payload bytes of the messages delivered (what a Message each would count)."""
        payloads = self.columns[0]
        total = sum(map(len, payloads))
        if self.skip:
            total -= sum(len(payloads[i]) for i in self.skip if i < self.size)
        return total


def message_count(items) -> int:
    """How many messages a fetch's list holds: a Batch counts its messages."""
    return sum(x.count if type(x) is Batch else 1 for x in items)


# -- a receive that stops in the middle of a batch --------------------------------------------
def queue(ctx, info, c, consumer: str, ids) -> int:
    """Keep the batch indexes a leaving `receive` fetched but did not hand out for consumer's
    next fetch; only where the entry is still pending for it. Returns how many were kept."""
    by_entry: dict[int, list[int]] = {}
    for mid in ids:
        o = info.offset(mid.ledger_id, mid.entry_id)
        if o is None or mid.batch_index < 0:
            continue
        by_entry.setdefault(o, []).append(mid.batch_index)
    kept = 0
    for o, idx in by_entry.items():
        raw = ctx.txn.get(keys.pair(c.id, o), db=ctx.env.db["pending"])
        if raw is None:
            continue
        prec = _decode(raw)
        if prec[0] != consumer:
            continue
        ctx.put([consumer, prec[1], sorted(set(idx))], "batchq", c.id, o)
        kept += len(set(idx))
    if kept:
        state(c).batch_queued = True
    return kept


def take_queued(ctx, info, c, consumer: str, max_n: int, topic: str, partition: int) -> list:
    """The messages queued for consumer (see queue) whose entry it still holds from the same
    delivery, up to max_n (whole entries); the rows of entries redelivered or acked since are
    dropped."""
    if not state(c).batch_queued:
        return []
    out: list = []
    pdb = ctx.env.db["pending"]
    left = 0
    for k, (name, delivered_at, idx) in list(ctx.scan("batchq", c.id)):
        o = k[2]
        raw = ctx.txn.get(keys.pair(c.id, o), db=pdb)
        prec = _decode(raw) if raw is not None else None
        if prec is None or prec[1] != delivered_at or prec[0] != name \
                or ctx.cursors.is_acked(ctx.txn, c, o) or not info.contains(o):
            ctx.delete(*k)
            continue
        if name != consumer:
            left += 1
            continue
        if len(out) >= max_n:
            left += 1
            continue
        ctx.delete(*k)
        pos = info.position(o)
        rec = _decode(ctx.ledgers.read(ctx.txn, info, o))
        want = set(idx) - acked_indexes(ctx, c, o)
        rc = prec[2] if len(prec) > 2 else 0
        out.extend(messages(rec, pos.ledger_id, pos.entry_id, partition, topic, rc, c.name,
                            consumer, skip=set(range(batch_size(rec))) - want))
    if not left:
        state(c).batch_queued = False
    return out


# -- checking a producer's batching settings --------------------------------------------------
MAX_MESSAGES = 1_000_000
MAX_BYTES = (1 << 31) - 1
MAX_DELAY_MS = 3_600_000


def check(max_messages: int, max_bytes: int, delay_ms: int, batching_type: str = DEFAULT,
          names=("batching_max_messages", "batching_max_allowed_size_in_bytes",
                 "batching_max_publish_delay_ms", "batching_type")) -> str:
    """Validate a producer's batching settings (pulsar-client's check, that a batch holds more
    than one message, and bounds against mistakes); returns the batching type's name, Default
    or KeyBased. names: what to call the four settings in an error."""
    def whole(v):
        return isinstance(v, int) and not isinstance(v, bool)

    if not whole(max_messages) or not 1 < max_messages <= MAX_MESSAGES:
        raise InvalidValue(f"{names[0]} needs to be greater than 1 and at most "
                           f"{MAX_MESSAGES:,}, not {max_messages!r}",
                           hint="e.g. 1000 (the default)")
    if not whole(max_bytes) or not 0 <= max_bytes <= MAX_BYTES:
        raise InvalidValue(f"{names[1]} must be 0 (only maxMessageSize bounds a batch) to "
                           f"{MAX_BYTES:,} bytes, not {max_bytes!r}",
                           hint="e.g. 128K (the default)")
    if not whole(delay_ms) or not 0 <= delay_ms <= MAX_DELAY_MS:
        raise InvalidValue(f"{names[2]} must be 0 to 1h, not {delay_ms!r} ms",
                           hint="e.g. 10ms")
    name = str(getattr(batching_type, "name", batching_type))
    for t in (DEFAULT, KEY_BASED):
        if name.replace("-", "").replace("_", "").lower() == t.lower():
            return t
    raise InvalidValue(f"unknown {names[3]} {batching_type!r}", hint="use default or key-based")
