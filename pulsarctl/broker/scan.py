"""Scanning a topic's stored entries as readers see its messages: what the bulk readers below
the CLI (tiered storage's offload, pulsarctl/offload.py, and the Spark data source,
pulsarctl/spark/_access.py) read, without building a Message per entry.

scan_messages reads a range of offsets and gives the entries as stored and their messages;
whole_messages turns decoded entries into messages (a batch into its messages, a compressed
payload decompressed, a chunked message joined at its last chunk) with broker/unpack.py, as
every reader of messages does. IdColumns stands for the rows of a scan of plain entries, one
message each, by their runs of entry ids.
"""
from __future__ import annotations

from store import codec
from pulsarctl.broker import chunks, unpack
from pulsarctl.entries import F_CHUNK, F_COMPRESSION, F_NUM_MESSAGES


def scan_messages(ctx, info, start: int, end: int) -> tuple[list, list, list]:
    """The entries at offsets [start, end) of a topic partition (its LedgerInfo), in a read
    transaction's ctx: (entries, rows, records). entries are the scanned (offset, ledger id,
    entry id, raw); rows and records the messages a reader sees in them (whole_messages), as
    rows like entries' (a fifth field, the batch index, for a message of a batch) and decoded
    records (pulsarctl/entries.py's layout)."""
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
    """Entries as a reader sees messages (broker/unpack.py's records): a batch as its messages
    (rows get a fifth field, the batch index), a compressed payload decompressed, and a chunked
    message as one message with its whole payload at its last chunk (its id is the last
    chunk's, as the broker has it); its other chunks, and a message whose chunks cannot all be
    found (trimmed), give no row."""
    near = None
    out_rows, out_recs = [], []
    record, expand = unpack.record, unpack.expand  # unpack.records, without a list per entry
    for row, r in zip(rows, recs):
        n = len(r)
        if n <= F_COMPRESSION:  # plain, uncompressed: the message as stored
            out_rows.append(row)
            out_recs.append(r)
            continue
        if n > F_NUM_MESSAGES and r[F_NUM_MESSAGES]:  # a batch (entries.is_batch, inlined)
            # One row per message of the batch, its id with the batch index (row[4]).
            for i, m in enumerate(expand(r, f"{row[1]}:{row[2]}")):
                out_rows.append((row[0], row[1], row[2], row[3], i))
                out_recs.append(m)
            continue
        joined = None
        if n > F_CHUNK and r[F_CHUNK]:  # a chunk: the message at its last, joined
            if near is None:
                near = {x[0]: y for x, y in zip(rows, recs)}
            joined = chunks.pieces(ctx, info, row[0], r, near)
            if joined is None:
                continue
        out_rows.append(row)
        out_recs.append(record(r, f"{row[1]}:{row[2]}", joined))
    return out_rows, out_recs
