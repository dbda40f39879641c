"""Bulk reads of topic partitions for the Spark connector (pulsarctl/spark/_access.py): a
partition's offsets and ledgers as a plan sees them, the first entry at a publish time, and raw
entry chunks, each in one read transaction (so none stays open while Spark works on a batch).
The connector needs raw records, not a Message per entry (read_entries builds those, which
costs more than the rest of the read).

Each method that names topics is routed (nonpersistent.py): a non-persistent topic is read from
the Broker that holds it.

A partition comes back as a tuple in the field order of the connector's Part: (name,
partition, managed ledger id, first offset, next offset, [[ledger id, first offset, entries]],
[(ledger id, first offset, entries, file)] of offloaded ledgers)."""
from __future__ import annotations

import gc

from store import codec
from store.ledger import values_of
from store.ledger_row import rows as ledger_rows
from pulsarctl.broker import dlq as dead, partitions, tenants, topics
from pulsarctl.broker.admin.base import Noun
from pulsarctl.broker.nonpersistent import routed
from pulsarctl.broker.scan import IdColumns, whole_messages
from pulsarctl.entries import F_COMPRESSION
from pulsarctl.errors import DataLoss, TopicNotFound
from pulsarctl.names import TopicName, parse_topic


def _part(ctx, t: TopicName) -> tuple | None:
    info = topics.lookup(ctx, t)
    if info is None:
        return None
    return (str(t), t.partition_index, info.ml_id, info.first_offset, info.next_offset,
            [list(r[:3]) for r in info.ledgers],
            [(r.ledger_id, r.first_offset, r.entries, r.location)
             for r in ledger_rows(info) if r.offloaded])


def _named(ctx, names, missing_ok: bool) -> list[tuple]:
    found: dict[str, tuple] = {}
    for t in names:
        got = [p for p in (_part(ctx, n) for n in partitions.expand(ctx, t)) if p is not None]
        if not got and not missing_ok:
            raise TopicNotFound(f"topic {t} does not exist")
        for p in got:
            found[p[0]] = p
    return [found[k] for k in sorted(found)]


def _matching(ctx, pattern) -> list[tuple]:
    found: dict[str, tuple] = {}
    for tenant in tenants.list_tenants(ctx):
        for ns in tenants.list_namespaces(ctx, tenant):
            for name in topics.list_topics(ctx, ns):
                t = parse_topic(name)
                if pattern.fullmatch(name) or (t.is_partition and
                                               pattern.fullmatch(str(t.partitioned_topic_name))):
                    p = _part(ctx, t)
                    if p is not None:
                        found[p[0]] = p
    return [found[k] for k in sorted(found)]


def _publish_time(ctx, info, offset: int) -> int:
    return codec.decode(ctx.ledgers.read(ctx.txn, info, offset))[0]


def _first_at_or_after(ctx, t: TopicName, ml_id: int, lo: int, hi: int, ms: int) -> int:
    info = topics.lookup(ctx, t)
    if info is None or info.ml_id != ml_id:
        return hi
    a, z = max(lo, info.first_offset), min(hi, info.next_offset)
    while a < z:
        mid = (a + z) // 2
        if _publish_time(ctx, info, mid) < ms:
            a = mid + 1
        else:
            z = mid
    return a


def chunk_entries(info, offset: int, max_entries: int, max_bytes: int) -> int:
    """How many entries from offset make a chunk: max_entries, fewer when the ledger there
    holds large entries (so a chunk stays near max_bytes of payload)."""
    for row in info.ledgers:
        first, n, size = row[1], row[2], row[3]
        if first <= offset < first + n:
            avg = size / n if n else 0
            if avg > 0:
                return max(1, min(max_entries, int(max_bytes // avg)))
            break
    return max_entries


def _chunk(ctx, t: TopicName, ml_id: int, start: int, end: int, max_entries: int,
           max_bytes: int, fail_on_loss: bool, decoder):
    name = str(t)
    info = topics.lookup(ctx, t)
    if info is None or info.ml_id != ml_id:
        if fail_on_loss:
            raise DataLoss(f"topic {name} was deleted while it was being read")
        return end, [], []
    s = start
    if s < info.first_offset:
        if fail_on_loss:
            raise DataLoss(f"entries {start}..{min(end, info.first_offset) - 1} of {name} "
                           "are gone")
        s = info.first_offset
    stop = min(end, s + chunk_entries(info, s, max_entries, max_bytes), info.next_offset)
    if stop <= s:
        # Offsets never go down on a managed ledger: a topic shorter than planned is a
        # recreated one (caught above), so there is nothing left to read.
        return end, [], []
    runs, pieces = ctx.ledgers.scan_pieces(ctx.txn, info, s, stop)
    # The transaction hands out views into the map: what is kept past it is copied.
    values = None
    if decoder is not None:
        if 2 * len(pieces) < stop - s:  # mostly blocks: read from their bytes whole
            cols = decoder.pieces(pieces)
        else:
            values = [bytes(v) for v in values_of(pieces)]
            cols = decoder.values(values)
        if cols is not None:
            return stop, IdColumns(runs), cols
    if values is None:
        values = [bytes(v) for v in values_of(pieces)]
    enabled = gc.isenabled()
    gc.disable()  # a chunk allocates many small lists; the collector only slows it down
    try:
        recs = codec.decode_many(values)
    finally:
        if enabled:
            gc.enable()
    if recs and max(map(len, recs)) > F_COMPRESSION:  # compressed, chunked or batched
        if decoder is not None:
            cols = decoder.batched(runs, recs)
            if cols is not None:
                return stop, IdColumns(runs), cols
        rows, o = [], s
        for lid, e0, k in runs:
            for e in range(e0, e0 + k):
                rows.append((o, lid, e, values[o - s]))
                o += 1
        rows, recs = whole_messages(ctx, info, rows, recs)
        return stop, rows, recs
    return stop, IdColumns(runs), recs


def _current(ctx, names_ml: dict) -> dict:
    out = {}
    for name, ml in names_ml.items():
        info = topics.lookup(ctx, parse_topic(name))
        if info is not None and info.ml_id == ml:
            out[name] = (info.first_offset, info.next_offset)
    return out


def _dlq_waiting(ctx, t: TopicName):
    info, c = dead.open_dlq(ctx, t)
    runs: list[list[int]] = []
    for o in dead.unhandled(ctx, info, c):
        if runs and runs[-1][1] == o:
            runs[-1][1] = o + 1
        else:
            runs.append([o, o + 1])
    part = (str(t), t.partition_index, info.ml_id, info.first_offset, info.next_offset,
            [list(r[:3]) for r in info.ledgers], [])
    return part, [tuple(r) for r in runs]


class Scans(Noun):
    __slots__ = ()

    @routed
    def parts(self, names, missing_ok: bool = False) -> list[tuple]:
        """The partitions the topics names stand for (a partitioned topic: its partitions),
        sorted by name; TopicNotFound for one that has none unless missing_ok."""
        return self._broker._read(_named, [parse_topic(str(n)) for n in names], missing_ok)

    def parts_matching(self, pattern) -> list[tuple]:
        """Every topic partition of the store whose name (or partitioned topic's name) the
        compiled pattern matches in full, sorted by name."""
        return self._broker._read(_matching, pattern)

    @routed
    def first_at_or_after(self, name, ml_id: int, lo: int, hi: int, ms: int) -> int:
        """The first offset in [lo, hi) whose publish time is >= ms (hi if none, or if the
        topic is no longer managed ledger ml_id). Publish times do not go down along a topic,
        so a binary search reads a few entries."""
        return self._broker._read(_first_at_or_after, parse_topic(str(name)), ml_id, lo, hi,
                                  ms)

    @routed
    def chunk(self, name, ml_id: int, start: int, end: int, max_entries: int, max_bytes: int,
              fail_on_loss: bool, decoder=None):
        """One chunk of the offsets [start, end) in one read transaction with no copy of the
        map (Broker._read_in_place): up to max_entries entries, fewer when they are large
        (chunk_entries). Returns (next offset, rows, records): rows are (offset, ledger id,
        entry id, raw) (an IdColumns when every entry is a plain message) and records the
        decoded entries with payloads as readers see them (scan.whole_messages); a gone topic
        or trimmed entries are DataLoss with fail_on_loss, else skipped.
        decoder: columns straight from the entries, an object with pieces(pieces),
        values(values) and batched(runs, records), each the columns or None when it cannot;
        pieces and values are valid only during the call."""
        return self._broker._read_in_place(_chunk, parse_topic(str(name)), ml_id, start, end,
                                           max_entries, max_bytes, fail_on_loss, decoder)

    @routed
    def current(self, names_ml: dict) -> dict:
        """{name: (first, next offset)} now, for the topics whose managed ledger is still the
        one given ({name: ml id})."""
        return self._broker._read(_current, dict(names_ml))

    @routed
    def dlq_waiting(self, dlq) -> tuple[tuple, list[tuple[int, int]]]:
        """A dead letter topic's partition and the runs [start, end) of offsets its
        pulsarctl-dlq subscription has not acknowledged, as the `dlq` commands count them."""
        return self._broker._read(_dlq_waiting, parse_topic(str(dlq)))
