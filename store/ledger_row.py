"""A managed ledger's ledger rows (store/ledger.py's LedgerInfo.ledgers and .trimmed), with
their fields named.

The managed ledger's record (database "mledgers", through store/codec.py) keeps its ledgers as
msgpack lists, positional so a topic's record stays small. Here are their fields, in stored order:

    index  field          on disk                                                 default
    0      ledger_id      int: the store-wide ledger id                           (always)
    1      first_offset   int: the managed-ledger offset of its entry 0           (always)
    2      entries        int: how many entries it holds                          (always)
    3      size           int: their bytes (as stored, before offloading)          (always)
    4      created_ms     int, epoch ms: when the ledger was created               (always)
    5      location       str: where its entries went when it was offloaded        None
                          (pulsarctl/offload.py's Parquet file); absent while
                          they are in LMDB

A trimmed ledger (LedgerInfo.trimmed, the last 16 deleted, kept so their positions still read)
is stored as its first three fields only: [ledger_id, first_offset, entries].

The rows in memory stay the mutable lists the record holds: an append adds to the last row's
entries and size in place (the hot path). LedgerRow names a row for the code that reads a few
(offloading, stats, the store check); the loops read lists by the index constants below, and
every reader asks location_of(row) whether a row is offloaded: the only place that knows a
row may end before its location.
"""
from __future__ import annotations

from typing import NamedTuple


class LedgerRow(NamedTuple):
    """One ledger of a managed ledger, every field named (see the module's table)."""
    ledger_id: int
    first_offset: int
    entries: int
    size: int
    created_ms: int
    location: str | None = None

    @classmethod
    def from_stored(cls, row) -> "LedgerRow":
        return cls(*row)

    def to_stored(self) -> list:
        """The list the managed ledger's record holds for this row, byte for byte."""
        return list(self) if self.location else list(self[:L_LOCATION])

    @property
    def offloaded(self) -> bool:
        return bool(self.location)


class TrimmedRow(NamedTuple):
    """A ledger trimmed away: what its positions need (see the module's table)."""
    ledger_id: int
    first_offset: int
    entries: int

    @classmethod
    def from_stored(cls, row) -> "TrimmedRow":
        return cls(*row[:3])

    def to_stored(self) -> list:
        return list(self)


(L_ID, L_FIRST, L_ENTRIES, L_SIZE, L_CREATED, L_LOCATION) = range(len(LedgerRow._fields))
assert LedgerRow._fields[L_LOCATION] == "location"  # the table and the tuple


def location_of(row) -> str | None:
    """Where a stored row's ledger was offloaded to, or None while its entries are in LMDB."""
    return row[L_LOCATION] or None if len(row) > L_LOCATION else None


def rows(info) -> list[LedgerRow]:
    """A managed ledger's ledgers (a LedgerInfo's), oldest first, named."""
    return [LedgerRow(*r) for r in info.ledgers]
