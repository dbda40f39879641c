"""Chunked messages in the store: finding every chunk of one message, so that acking or nacking
the message's id (its last chunk's, as Pulsar's chunked message id compares), dead-lettering
it or retrying it acts on all its chunks together.

A producer writes a message's chunks in one transaction, so they are adjacent and the search
below reads exactly the chunks; chunks interleaved with other entries (Pulsar's producers send
chunk by chunk) are found too, by uuid, within WINDOW entries. Topics that never had a chunk
are never searched: publish marks a topic when it writes one (topicmeta "chunked")."""
from __future__ import annotations

from store import codec
from pulsarctl.entries import F_PAYLOAD, Entry, chunk_of
from pulsarctl.names import TopicName
from pulsarctl.broker import topics

WINDOW = 1000  # entries searched beyond a message's own chunks, each way


def mark(ctx, topic: TopicName) -> None:
    meta = topics.meta(ctx, topic)
    if not meta.get("chunked"):
        meta["chunked"] = True
        ctx.put(meta, "topicmeta", str(topic))


def has_chunks(ctx, info) -> bool:
    return bool((ctx.get("topicmeta", info.name) or {}).get("chunked"))




def _read(ctx, info, o) -> list:
    return codec.decode(ctx.ledgers.read(ctx.txn, info, o))


def group(ctx, info, o: int, rec: list | None = None) -> dict:
    """{chunk id: offset} of the chunked message that has a chunk at offset o ({} when the
    entry is not a chunk); chunks that cannot be found (trimmed, lost) are missing."""
    rec = _read(ctx, info, o) if rec is None else rec
    m = chunk_of(rec)
    if m is None:
        return {}
    uuid, cid, n = m.uuid, m.chunk_id, m.num_chunks
    found = {cid: o}
    lo = max(info.first_offset, o - cid - WINDOW)
    p = o - 1
    while p >= lo and any(k not in found for k in range(cid)):
        mm = chunk_of(_read(ctx, info, p))
        if mm and mm.uuid == uuid and mm.chunk_id < cid and mm.chunk_id not in found:
            found[mm.chunk_id] = p
        p -= 1
    hi = min(info.next_offset, o + (n - cid) + WINDOW)
    p = o + 1
    while p < hi and any(k not in found for k in range(cid + 1, n)):
        mm = chunk_of(_read(ctx, info, p))
        if mm and mm.uuid == uuid and mm.chunk_id > cid and mm.chunk_id not in found:
            found[mm.chunk_id] = p
        p += 1
    return found


def pieces(ctx, info, o: int, rec: list, near: dict | None = None) -> list | None:
    """The stored pieces, in chunk id order, of the chunked message whose last chunk is the
    entry rec at offset o: what broker/unpack.py joins into the message. None at its other
    chunks (a reader sees the message at its last, as the broker gives its id) or when a chunk
    cannot be found (trimmed). near: {offset: decoded entry} of entries already read."""
    m = chunk_of(rec)
    if m is None or not m.is_last:
        return None
    found = group(ctx, info, o, rec)
    if len(found) < m.num_chunks:
        return None
    out = []
    for _cid, p in sorted(found.items()):
        r = rec if p == o else near.get(p) if near else None
        out.append((_read(ctx, info, p) if r is None else r)[F_PAYLOAD])
    return out


def earlier(ctx, info, offsets: list[int]) -> list[int]:
    """The other chunks of every chunked message whose last chunk is among offsets (what acking
    or nacking a chunked message's id also covers), not already in offsets."""
    if not has_chunks(ctx, info):
        return []
    given = set(offsets)
    out = []
    for o in offsets:
        rec = _read(ctx, info, o)
        m = chunk_of(rec)
        if m is None or not m.is_last:
            continue
        out.extend(p for p in group(ctx, info, o, rec).values() if p not in given)
        given.update(out)
    return sorted(out)


def copy_of(ctx, info, o: int, rec: list):
    """For a move (dead letter, retry) of the message at o: (offsets to ack, offset of its last
    chunk, the OutgoingMessage.chunks of the copy); None when the entry is not a chunk. The
    pieces are copied as stored (still compressed), keeping chunk ids and sizes."""
    m = chunk_of(rec)
    if m is None:
        return None
    e = Entry.from_stored(rec)
    found = group(ctx, info, o, rec)
    parts = [(cid, _read(ctx, info, p)[F_PAYLOAD] if p != o else e.payload)
             for cid, p in sorted(found.items())]
    offsets = sorted(found.values())
    return offsets, max(offsets), (e.compression, e.uncompressed_size, m.num_chunks,
                                   m.total_size, parts)
