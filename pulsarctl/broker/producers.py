"""Publishing: producer names, sequence ids, the maximum message size, chunking, appends."""
from __future__ import annotations

from store import codec
from pulsarctl.broker import (
    topics, backlog_quota, access, schemas, batches, policies, history, letter_links,
)
from pulsarctl.entries import F_PAYLOAD
from pulsarctl.errors import InvalidValue, MessageTooLarge, TopicTerminated
from pulsarctl.messages import BatchIds, MessageId, OutgoingMessage, SentBatch, build_entry
from pulsarctl.names import TopicName
from pulsarctl.compression import compress

_encode = codec.encode


def check_sizes(ctx, messages: list[OutgoingMessage], sizes=None) -> None:
    """maxMessageSize applies to what is stored: the compressed payload when compressing."""
    limit = ctx.setting("maxMessageSize")
    for i, m in enumerate(messages):
        n = len(m.payload) if sizes is None else sizes[i]
        if n > limit:
            raise MessageTooLarge(
                f"message {i + 1} is {n} bytes{' compressed' if sizes else ''}, over "
                f"maxMessageSize {limit}")


def new_producer_name(ctx) -> str:
    """Broker-generated names, as a standalone Pulsar gives them: standalone-0-N."""
    n = (ctx.get("counter", "producer") or 0)
    ctx.put(n + 1, "counter", "producer")
    return f"standalone-0-{n}"


def publish(ctx, topic: TopicName, messages: list[OutgoingMessage], producer_name: str | None,
            partition: int = -1, internal: bool = False,
            compression: int = 0, schema: str | None = None,
            chunking: bool = False, batching=None,
            publisher: str | None = None) -> tuple[str, list[MessageId]]:
    """Append messages in this transaction. Returns (producer name, message ids); with
    deduplication on, a message whose sequence id this producer already stored is left out
    and gets the id -1:-1:-1, as Pulsar answers a duplicate. internal: a dead letter or retry
    move, which backlog quotas do not stop (the move would be stuck with the message).
    compression: a Pulsar CompressionType code (pulsarctl.compression) for the payloads;
    schema: the producer's schema type (schemas.py), recorded as a version in each message.
    chunking: a stored payload (compressed first, as Pulsar does) over maxMessageSize is split
    into chunks of at most maxMessageSize bytes, one entry each (see split); its id is the last
    chunk's. batching: a batches.Spec, to store the messages in batch entries (batches.py).
    publisher: the token of a recorded producer (access.py), whose messages are counted for its
    PublisherStats; None for a one-shot producer, admitted in this transaction."""
    packed = None
    if batching is not None and len(messages) > 1:
        check_sizes(ctx, messages, _stored_sizes(ctx, messages, compression))
    elif compression:
        packed = [(compression, compress(compression, m.payload)) for m in messages]
        if not chunking:
            check_sizes(ctx, messages, [len(p[1]) for p in packed])
    elif not chunking:
        check_sizes(ctx, messages)
    now = ctx.now
    info, producer_name, prod = _admit(ctx, topic, producer_name, internal,
                                       lambda info: _check_delays(ctx, info, messages, now),
                                       publisher)
    if schema and schema != "BYTES":
        schemas.validate(schema, [m.payload for m in messages])
        version = schemas.for_producer(ctx, topic, schema)
        for m in messages:
            m.schema_version = version
    last = ctx.get("producer", info.ml_id, producer_name)
    seq = -1 if last is None else last
    dedup = _dedup(ctx, info)
    if batching is not None and (len(messages) > 1 or batching.as_sent):
        return producer_name, _publish_batched(ctx, info, messages, producer_name, seq, dedup,
                                               partition, compression, batching, prod)
    entries = []
    dups = []
    add = entries.append
    limit = ctx.setting("maxMessageSize") if chunking else 0
    lasts = None  # the index in entries of each message's last entry, once a message is chunked
    # The message history (history.py): each entry's sequence id and delivery time; and the
    # dead letter or retry copies a client made, each linked to its original (letter_links.py).
    copies = None if internal or ctx.origin is not None else letter_links.copies(messages)
    hseqs = [] if copies is not None or history.wants_published(ctx) else None
    hdelays, horigins = [], ([] if copies is not None else None)
    nchunks = 0
    for i, m in enumerate(messages):
        s = m.sequence_id
        if s is None:
            s = seq = seq + 1
        elif m.chunks is not None and _not_last(m.chunks):
            # One chunk of a message a client sends chunk by chunk: every chunk has the
            # message's sequence id, which only the last one records or is judged by
            # (MessageDeduplication lets the other chunks through).
            pass
        elif s > seq:
            seq = s
        elif dedup:
            dups.append(i)
            continue
        pieces = m.chunks if m.chunks is not None else split(m, packed[i] if packed else None,
                                                            limit) if limit else None
        if pieces is None:
            add(_encode(build_entry(now, producer_name, s, m, packed[i] if packed else None)))
            if hseqs is not None:
                hseqs.append(s)
                hdelays.append(m.deliver_at)
                if horigins is not None:
                    horigins.append(copies[i])
            if lasts is not None:
                lasts.append(len(entries) - 1)
            continue
        if lasts is None:
            lasts = list(range(len(entries)))
        code, size, n, total, parts = pieces[:5]
        # The uuid a client gave its chunks, else the one Pulsar's producer would give.
        uuid = pieces[5] if len(pieces) > 5 and pieces[5] else f"{producer_name}-{s}"
        nchunks += len(parts)
        for cid, piece in parts:
            add(_encode(build_entry(now, producer_name, s, m, chunk=([uuid, cid, n, total], piece,
                                                                     code, size))))
            if hseqs is not None:
                hseqs.append(s)
                hdelays.append(m.deliver_at)
                if horigins is not None:   # the message's id is its last chunk's
                    horigins.append(copies[i] if cid == n - 1 else None)
        lasts.append(len(entries) - 1)
    if lasts is not None:
        from pulsarctl.broker import chunks  # lazy: one-shot produce never needs it

        chunks.mark(ctx, topic)
    ctx.put(seq, "producer", info.ml_id, producer_name)
    ids = []
    _follow_rollover(ctx)
    if entries:
        first = info.next_offset
        for lid, e0, n in ctx.ledgers.append(ctx.txn, info, entries, now):
            ids.extend([MessageId(lid, e, partition) for e in range(e0, e0 + n)])
        if hseqs is not None:
            history.published(ctx, info, first, len(entries), producer_name, hseqs, ctx.origin,
                              hdelays if any(hdelays) else None,
                              None if horigins is None else list(map(letter_links.origin_of,
                                                                     horigins)))
        if horigins is not None:
            letter_links.link(ctx, info, first, horigins, producer_name)
        if lasts is not None:
            ids = [ids[k] for k in lasts]
    for i in dups:
        ids.insert(i, DUPLICATE)
    if prod is not None:
        access.published(ctx, topic, prod, len(messages) - len(dups), sum(map(len, entries)),
                         nchunks)
    return producer_name, ids


DUPLICATE = MessageId(-1, -1, -1)


def refuse_terminated(ctx, topic: TopicName) -> None:
    """A terminated topic takes no producer (Pulsar's PersistentTopic.addProducer: "Topic was
    already terminated"), so a client learns it when it creates one, not at each send."""
    if topics.meta(ctx, topic).get("terminated"):
        raise TopicTerminated(f"topic {topic} is terminated; it accepts no more messages",
                              hint="produce to another topic")


def _admit(ctx, topic: TopicName, producer_name: str | None, internal: bool = False,
           check=None, publisher: str | None = None):
    """The topic (made where it may be), the producer's name (the broker's when none) and its
    record (access.py; None for a one-shot producer): refused if the topic is terminated, and
    unless internal (a dead letter or retry move) if check(info) refuses, the backlog quota
    holds or the access modes shut the producer out."""
    info = topics.ensure(ctx, topic)
    refuse_terminated(ctx, topic)
    if not internal:
        if check is not None:
            check(info)
        backlog_quota.check(ctx, info)
    if producer_name is None:
        producer_name = new_producer_name(ctx)
    prod = None
    if not internal:
        prod = access.check(ctx, topic, producer_name, publisher)
    return info, producer_name, prod


def publish_payloads(ctx, topic: TopicName, payloads: list, producer_name: str | None,
                     partition: int = -1, compression: int = 0, batching=None, breaks=(),
                     publisher: str | None = None):
    """publish for plain messages given as their payloads (no key, properties, times,
    schema or chunking): what `produce --stdin` sends, in batch entries by batching (a
    batches.Spec; breaks: indexes that start a new batch), without an OutgoingMessage, a
    MessageId or a look at each message. Returns (producer name, [(ledger id, entry id,
    partition, messages in the entry)]), or None for what publish itself must do (any other
    case, a payload or a batch entry over maxMessageSize): then nothing was written."""
    if batching is None or batching.key_based or not payloads:
        return None
    limit = ctx.setting("maxMessageSize")
    sizes = list(map(len, payloads))
    if compression:
        # As publish checks them: a payload over the limit is judged compressed.
        if any(n > limit and len(compress(compression, payloads[i])) > limit
               for i, n in enumerate(sizes)):
            return None
    elif max(sizes) > limit:
        return None   # publish says which message is too large
    ranges = batches.plain_ranges(sizes, batching.max_messages, batching.max_bytes, limit, breaks)
    # The batches first: one over maxMessageSize goes back to publish (which halves it) before
    # anything is written.
    batched = {}
    for a, z in ranges:
        if z - a > 1:
            batch = batched[a] = batches.payload_batch(payloads[a:z], compression)
            if len(batch[0]) > limit:
                return None
    info, producer_name, prod = _admit(ctx, topic, producer_name, publisher=publisher)
    last = ctx.get("producer", info.ml_id, producer_name)
    seq = (-1 if last is None else last) + 1
    now = ctx.now
    entries, counts, firsts = [], [], []
    for a, z in ranges:
        if z - a == 1:
            m = OutgoingMessage(payloads[a])
            packed = (compression, compress(compression, m.payload)) if compression else None
            rec = build_entry(now, producer_name, seq + a, m, packed)
        else:
            rec = batches.build_payload_entry(now, producer_name, z - a, seq + a, batched[a],
                                              compression)
        entries.append(_encode(rec))
        counts.append(z - a)
        firsts.append(seq + a)
    ctx.put(seq + len(payloads) - 1, "producer", info.ml_id, producer_name)
    _follow_rollover(ctx)
    first = info.next_offset
    runs = []
    k = 0
    for lid, e0, n in ctx.ledgers.append(ctx.txn, info, entries, now):
        for e in range(e0, e0 + n):
            runs.append((lid, e, partition, counts[k]))
            k += 1
    extra = len(payloads) - len(entries)
    _count_batched(ctx, info, extra)
    if history.wants_published(ctx):
        history.published(ctx, info, first, len(entries), producer_name, firsts, ctx.origin)
    if prod is not None:
        access.published(ctx, topic, prod, len(payloads), sum(map(len, entries)))
    return producer_name, runs


def publish_as_sent(ctx, topic: TopicName, batch: SentBatch, producer_name: str,
                    partition: int = -1, compression: int = 0, publisher: str | None = None):
    """publish of a batch of plain messages a wire client sent (a SentBatch, batching
    Spec.as_sent): the one batch entry _publish_batched stores for it (build_payload_entry
    makes build_entry's record), without an OutgoingMessage or a MessageId per message, which
    were most of what a batched SEND cost serve. Returns (producer name, BatchIds), or None for
    what publish must do itself (a delivery time, a message or the batch over maxMessageSize,
    a duplicate under deduplication): then nothing was written."""
    payloads = batch.payloads
    n = len(payloads)
    limit = ctx.setting("maxMessageSize")
    if batch.deliver_at or not n or max(map(len, payloads)) > limit:
        return None
    first = batch.first_sequence_id
    known = topics.lookup(ctx, topic)
    if known is not None and _dedup(ctx, known):
        last = ctx.get("producer", known.ml_id, producer_name)
        if last is not None and first <= last:
            return None   # publish answers the duplicate
    packed = batches.payload_batch(payloads, compression)
    if len(packed[0]) > limit:
        return None       # publish halves the batch until each part fits
    now = ctx.now
    info, producer_name, prod = _admit(ctx, topic, producer_name, publisher=publisher)
    last = ctx.get("producer", info.ml_id, producer_name)
    ctx.put(max(first + n - 1, -1 if last is None else last), "producer", info.ml_id,
            producer_name)
    _follow_rollover(ctx)
    entry = _encode(batches.build_payload_entry(now, producer_name, n, first, packed,
                                                compression, batch.schema_version))
    offset = info.next_offset
    ((lid, eid, _),) = ctx.ledgers.append(ctx.txn, info, [entry], now)
    if history.wants_published(ctx):
        history.published(ctx, info, offset, 1, producer_name, [first], ctx.origin)
    _count_batched(ctx, info, n - 1)
    if prod is not None:
        access.published(ctx, info.name, prod, n, len(entry))
    return producer_name, BatchIds(lid, eid, partition, n)


def _follow_rollover(ctx) -> None:
    """A long-running process (serve, the daemon, a producer) follows a rollover setting
    changed since it opened the store."""
    rollover = ctx.get("setting", "managedLedgerMaxEntriesPerLedger")
    if rollover is not None:
        ctx.ledgers.rollover_entries = rollover


def _count_batched(ctx, info, extra: int) -> None:
    """extra: the messages past the first of each batch entry just appended. msgInCounter
    counts messages; the ledger counts entries."""
    if extra:
        ctx.put((ctx.get("msgInExtra", info.ml_id) or 0) + extra, "msgInExtra", info.ml_id)


def _not_last(chunks) -> bool:
    """OutgoingMessage.chunks holds chunks of a message but not its last one (one chunk sent
    alone over the binary protocol)."""
    n, parts = chunks[2], chunks[4]
    return all(cid != n - 1 for cid, _piece in parts)


def last_sequence_id(ctx, topic: TopicName, producer_name: str) -> int:
    """The sequence id a producer named producer_name goes on from (PRODUCER_SUCCESS's
    last_sequence_id, Pulsar's getLastPublishedSequenceId): the highest one stored for that
    name on the topic while deduplication is in force there; -1 otherwise."""
    info = topics.lookup(ctx, topic)
    if info is None or not _dedup(ctx, info):
        return -1
    last = ctx.get("producer", info.ml_id, producer_name)
    return -1 if last is None else last


def _stored_sizes(ctx, messages, compression: int):
    """What maxMessageSize is checked against: each payload as it would be stored alone (only a
    payload over the limit is compressed to see: the batches compress their own payloads)."""
    if not compression:
        return None

    limit = ctx.setting("maxMessageSize")
    return [len(m.payload) if len(m.payload) <= limit else len(compress(compression, m.payload))
            for m in messages]


def _publish_batched(ctx, info, messages, producer_name, last, dedup, partition, compression,
                     spec, prod=None) -> list[MessageId]:
    """publish's batching half: sequence ids as the producer gives them (the next one after the
    highest so far, unless set), then batches (batches.group); with deduplication a batch is
    judged by its first sequence id and records its highest (MessageDeduplication)."""
    now = ctx.now
    if all(m.sequence_id is None for m in messages):
        seqs = list(range(last + 1, last + 1 + len(messages)))
        rising = True
    else:
        seqs = []
        run = last
        for m in messages:
            s = m.sequence_id
            if s is None:
                s = run + 1
            run = max(run, s)
            seqs.append(s)
        rising = False
    limit = ctx.setting("maxMessageSize")
    groups = batches.group(messages, spec, limit)
    entries, placed = [], []  # placed: per entry, the message indexes it holds
    dups: list[int] = []
    pushed = last
    for g in groups:
        first = seqs[g[0]]
        highest = seqs[g[-1]] if rising else max(map(seqs.__getitem__, g))
        if dedup and first <= pushed:
            dups.extend(g)
            continue
        pushed = max(pushed, highest)
        for part in _fitting(now, producer_name, messages, seqs, g, compression, limit,
                             spec.as_sent):
            entries.append(part[0])
            placed.append(part[1])
    ctx.put(max(pushed, last), "producer", info.ml_id, producer_name)
    _follow_rollover(ctx)
    ids: list = [DUPLICATE] * len(messages)
    if entries:
        positions = []
        first = info.next_offset
        for lid, e0, n in ctx.ledgers.append(ctx.txn, info, entries, now):
            positions.extend((lid, e) for e in range(e0, e0 + n))
        if history.wants_published(ctx):
            history.published(ctx, info, first, len(entries), producer_name,
                              [seqs[g[0]] for g in placed], ctx.origin)
        extra = 0
        for (lid, e), g in zip(positions, placed):
            if len(g) == 1 and not spec.as_sent:
                ids[g[0]] = MessageId(lid, e, partition)
                continue
            extra += len(g) - 1
            j = 0
            for i in g:
                ids[i] = MessageId(lid, e, partition, j)
                j += 1
        _count_batched(ctx, info, extra)
    if prod is not None:
        access.published(ctx, info.name, prod, sum(map(len, placed)), sum(map(len, entries)))
    return ids


def _fitting(now, producer_name, messages, seqs, g, compression, limit, as_sent=False):
    """(entry, message indexes) for group g: one batch entry, or (when the serialized batch,
    compressed, is over maxMessageSize) the group halved until each part fits; one message
    alone is a plain entry, as Pulsar's Java client sends a batch of one, unless as_sent (a
    client sent it as a batch: Spec.as_sent)."""
    if len(g) == 1 and not as_sent:
        m = messages[g[0]]
        packed = None
        if compression:
            packed = (compression, compress(compression, m.payload))
        return [(_encode(build_entry(now, producer_name, seqs[g[0]], m, packed)), g)]
    rec = batches.build_entry(now, producer_name, [messages[i] for i in g],
                              [seqs[i] for i in g], compression)
    if len(rec[F_PAYLOAD]) > limit:
        half = len(g) // 2
        return (_fitting(now, producer_name, messages, seqs, g[:half], compression, limit)
                + _fitting(now, producer_name, messages, seqs, g[half:], compression, limit))
    return [(_encode(rec), g)]


def split(m: OutgoingMessage, packed: tuple | None, limit: int):
    """The chunks of a message whose stored payload is over limit, in the form of
    OutgoingMessage.chunks; None if it fits in one entry."""
    stored = packed[1] if packed else m.payload
    if len(stored) <= limit:
        return None
    view = memoryview(stored)
    parts = [(k, view[j:j + limit]) for k, j in enumerate(range(0, len(stored), limit))]
    return (packed[0] if packed else 0, len(m.payload), len(parts), len(stored), parts)


def _dedup(ctx, info) -> bool:
    return bool(policies.effective(ctx, info.name, policies.DEDUP))


def _check_delays(ctx, info, messages, now: int) -> None:
    if not any(m.deliver_at for m in messages):
        return

    longest = policies.effective(ctx, info.name, policies.DELAYED).get("maxDeliveryDelayInMillis")
    if not longest:
        return
    for m in messages:
        if m.deliver_at and m.deliver_at - now > longest:
            raise InvalidValue(f"a delivery delay of {m.deliver_at - now} ms exceeds the maximum "
                               f"of {longest} ms set for {info.name}",
                               hint="deliver sooner, or change `set-delayed-delivery --maxDelay`")
