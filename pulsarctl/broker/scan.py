"""Scanning a topic's stored entries as readers see its messages: what the bulk readers below
the CLI (tiered storage's offload, pulsarctl/offload.py, and the Spark data source,
pulsarctl/spark/_access.py) read, without building a Message per entry.

scan_messages reads a range of offsets and gives the entries as stored and their messages;
whole_messages turns decoded entries into messages (a batch into its messages, a compressed
payload decompressed, a chunked message joined at its last chunk). IdColumns stands for the
rows of a scan of plain entries, one message each, by their runs of entry ids.
"""
from __future__ import annotations

from store import codec
from pulsarctl import compression
from pulsarctl.broker import batches, chunks
from pulsarctl.entries import F_COMPRESSION, F_PAYLOAD, F_UNCOMPRESSED_SIZE


def scan_messages(ctx, info, start: int, end: int) -> tuple[list, list, list]:
    """The entries at offsets [start, end) of a topic partition (its LedgerInfo), in a read
    transaction's ctx: (entries, rows, records). entries are the scanned (offset, ledger id,
    entry id, raw); rows and records the messages a reader sees in them (whole_messages), as
    rows like entries' (a fifth field, the batch index, for a message of a batch) and decoded
    records (pulsarctl/messages.py's layout)."""
    entries = list(ctx.ledgers.scan(ctx.txn, info, start, end))
    recs = [codec.decode(r[3]) for r in entries]
    if recs and max(map(len, recs)) > F_COMPRESSION:  # compressed, chunked or batched
        rows, recs = whole_messages(ctx, info, entries, recs)
    else:
        rows = entries
    return entries, rows, recs


class IdColumns(list):
    """The runs (ledger id, first entry id, count) of scanned entries: what record_batch needs
    of rows to make message ids, without a tuple per entry."""


def whole_messages(ctx, info, rows: list, recs: list) -> tuple[list, list]:
    """Entries as a reader sees messages: a batch as its messages (rows get a fifth field, the
    batch index), a compressed payload decompressed, and a chunked
    message as one message with its whole payload at its last chunk (its id is the last
    chunk's, as the broker has it); its other chunks, and a message whose chunks cannot all be
    found (trimmed), give no row."""
    here = None
    out_rows, out_recs = [], []
    for row, r in zip(rows, recs):
        if batches.is_batch(r):
            # One row per message of the batch, its id with the batch index (row[4]).
            for i, m in batches.messages_of(r, f"{row[1]}:{row[2]}"):
                out_rows.append((row[0], row[1], row[2], row[3], i))
                out_recs.append(m)
            continue
        if len(r) > F_COMPRESSION:
            meta = chunks.meta(r)
            code, size = r[F_COMPRESSION], r[F_UNCOMPRESSED_SIZE]
            if meta is not None:
                if meta[1] != meta[2] - 1:
                    continue
                found = chunks.group(ctx, info, row[0], r)
                if len(found) < meta[2]:
                    continue
                if here is None:
                    here = {x[0]: y for x, y in zip(rows, recs)}
                pieces = []
                for _cid, o in sorted(found.items()):
                    rec = here.get(o)
                    if rec is None:
                        rec = codec.decode(ctx.ledgers.read(ctx.txn, info, o))
                    pieces.append(rec[F_PAYLOAD])
                r = list(r)
                r[F_PAYLOAD] = b"".join(pieces)
            else:
                r = list(r)
            if code:
                r[F_PAYLOAD] = compression.decompress(code, r[F_PAYLOAD], size,
                                                      f"{row[1]}:{row[2]}")
        out_rows.append(row)
        out_recs.append(r)
    return out_rows, out_recs
