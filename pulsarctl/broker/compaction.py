"""Topic compaction (PIP-14; Pulsar's TwoPhaseCompactor and CompactedTopic): keep the latest
message of each key, as a copy beside the topic, for readers and consumers that ask to read
compacted.

- A message with a key obscures every earlier message with the same key; a message with an
  empty payload is a tombstone: it removes its key (it is not kept either). Messages without a
  key are kept as they are ("passed through").
- The compacted copy covers the topic up to its compaction horizon, the last message when
  compaction ran; what came after is read from the topic itself. Running compaction again
  starts from the previous copy and the messages after its horizon.
- The copy is ours, not the topic's: retention and TTL trimming the topic's ledgers leave it
  alone, as Pulsar's compacted ledger outlives the ledgers it was made from. Deleting the topic
  deletes it (cascade.delete_topic).
- A batch entry keeps the messages of it that survive: the others are left out by batch index,
  so every message keeps its own message id, as Pulsar's compacted reads give.
- A chunked message is kept whole (its chunks are never compacted away): a limit of this
  version, documented in the README.

Records, in the "tables" database:
  ("compaction", ml_id) -> {"status", "horizon" (offset), "kept" (messages), "entries", "at"}
  ("compacted", ml_id, seq) -> [offset, ledger_id, entry_id, entry record, skip]
where skip is the list of batch indexes left out, or None."""
from __future__ import annotations

from store import codec
from pulsarctl.broker import subscriptions, topics, unpack
from pulsarctl.entries import F_CHUNK, F_KEY, F_PAYLOAD, is_batch
from pulsarctl.names import TopicName

SUCCESS, NOT_RUN = "SUCCESS", "NOT_RUN"


def status(ctx, info) -> dict:
    """What `topics compaction-status` shows (Pulsar's LongRunningProcessStatus: status and
    lastError), with the horizon and counts of the copy."""
    doc = ctx.get("compaction", info.ml_id)
    if doc is None:
        return {"status": NOT_RUN, "lastError": ""}
    out = {"status": doc["status"], "lastError": ""}
    if doc.get("horizon") is not None:
        p = info.mark_position(doc["horizon"])
        out["compactionHorizon"] = f"{p.ledger_id}:{p.entry_id}"
    out["compactedMessages"] = doc.get("kept", 0)
    out["compactedEntries"] = doc.get("entries", 0)
    return out


def horizon(ctx, info) -> int | None:
    """The offset of the last message the compacted copy covers, or None (never compacted)."""
    doc = ctx.get("compaction", info.ml_id)
    return None if doc is None else doc.get("horizon")


def entries(ctx, info, from_offset: int = -1):
    """The compacted copy in topic order: (offset, ledger_id, entry_id, record, skip) for
    every kept entry at or after from_offset."""
    for _k, row in ctx.scan("compacted", info.ml_id):
        if row[0] >= from_offset:
            yield row


def _chunked(rec: list) -> bool:
    return len(rec) > F_CHUNK and bool(rec[F_CHUNK])


def _messages_of(rec: list):
    """(batch index, key, tombstone) of each message of an entry (index -1: not a batch); a
    payload is looked at as readers see it (decompressed). A chunk stands for no key."""
    if _chunked(rec):
        return [(-1, None, False)]
    return [(i, r[F_KEY] if len(r) > F_KEY else None, not r[F_PAYLOAD])
            for i, r in unpack.records(rec)]


def compact(ctx, t: TopicName) -> dict:
    """Compact the topic now, in this transaction. Returns the status document."""
    info = topics.require(ctx, t)
    doc = ctx.get("compaction", info.ml_id) or {}
    old_horizon = doc.get("horizon")
    # The candidates, in topic order: the previous copy, then what came after its horizon.
    candidates = [list(row) for row in entries(ctx, info)]
    start = info.first_offset if old_horizon is None else max(old_horizon + 1,
                                                                info.first_offset)
    for o, lid, eid, raw in ctx.ledgers.scan(ctx.txn, info, start, info.next_offset):
        candidates.append([o, lid, eid, codec.decode(raw), None])
    # Phase one: the last message of every key, and the keys a tombstone removed.
    latest: dict = {}
    for n, (_o, _lid, _eid, rec, skip) in enumerate(candidates):
        for i, key, tombstone in _messages_of(rec):
            if key is None or (skip and i in skip):
                continue
            latest[key] = None if tombstone else (n, i)
    # Phase two: keep what survives, entry by entry.
    for k, _ in list(ctx.scan("compacted", info.ml_id)):
        ctx.delete(*k)
    seq = kept = 0
    for n, (o, lid, eid, rec, skip) in enumerate(candidates):
        msgs = _messages_of(rec)
        if _chunked(rec):
            survivors = [i for i, _k, _t in msgs]
        else:
            survivors = [i for i, key, _t in msgs
                         if not (skip and i in skip)
                         and (key is None or latest.get(key) == (n, i))]
        if not survivors:
            continue
        left_out = sorted({i for i, _k, _t in msgs} - set(survivors)) if is_batch(rec) else []
        ctx.put([o, lid, eid, rec, left_out or None], "compacted", info.ml_id, seq)
        seq += 1
        kept += len(survivors)
    out = {"status": SUCCESS, "horizon": info.last_offset if info.entries > 0 else old_horizon,
           "kept": kept, "entries": seq, "at": ctx.now}
    ctx.put(out, "compaction", info.ml_id)
    return status(ctx, info)


def drop(ctx, info) -> None:
    """Forget the topic's compacted copy (the topic is being deleted)."""
    for k, _ in list(ctx.scan("compacted", info.ml_id)):
        ctx.delete(*k)
    ctx.delete("compaction", info.ml_id)


def read(ctx, info, t: TopicName, start: int, limit: int, skip_in=None, skip=None):
    """A compacted reader's read from offset start: the compacted copy up to the horizon, then
    the topic. Returns (messages, next offset)."""
    h = horizon(ctx, info)
    out, nxt = [], start
    if h is not None and start <= h:
        for o, lid, eid, rec, left_out in entries(ctx, info, start):
            if len(out) >= limit:
                return out, o
            leave = set(left_out or ())
            if o == skip_in and skip:
                leave |= skip
            out.extend(unpack.messages(rec, lid, eid, t.partition_index, str(t),
                                       skip=leave or None))
            nxt = o + 1
        nxt = max(nxt, h + 1)
    if len(out) < limit:
        for o, lid, eid, raw in ctx.ledgers.scan(ctx.txn, info, max(nxt, info.first_offset),
                                                 max(nxt, info.first_offset) + limit - len(out)):
            out.extend(unpack.messages(codec.decode(raw), lid, eid, t.partition_index,
                                       str(t), skip=skip if o == skip_in else None))
            nxt = o + 1
    return out, nxt


def skip_obscured(ctx, info, c) -> int:
    """A subscription that reads compacted (its policy's readCompacted) never receives what
    compaction left out below the horizon: those entries are acknowledged when dispatch reaches
    them, so its backlog counts only what it will get. Returns how many were acknowledged.
    (A batch that lost some of its messages is delivered whole to a durable subscription; a
    reader gets only the survivors.)"""
    h = horizon(ctx, info)
    lo = max(c.mark_delete + 1, info.first_offset)
    if h is None or lo > h:
        return 0
    kept = {row[0] for row in entries(ctx, info, lo) if row[0] <= h}
    gone = [o for o in ctx.cursors.unacked(ctx.txn, c, lo, h + 1) if o not in kept]
    if not gone:
        return 0
    return subscriptions.ack(ctx, info, c, gone)[0]
