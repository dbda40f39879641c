"""The storage layer: an LMDB environment holding managed ledgers and durable cursors.

Nothing here knows topics, subscriptions or time: callers hand in names as opaque strings and
timestamps as integers. See ARCHITECTURE.md, "store/".
"""
from store.errors import (
    StoreError, StoreNotFound, StoreNotAStore, StoreReadOnly, StoreFormatError, StoreLocked,
    StoreDamaged, StoreDiskFull, LedgerError,
)
from store.position import Position
from store.env import Env, FORMAT_VERSION, MapFullError, lmdb_version
from store.ledger import ManagedLedgers, LedgerInfo
from store.cursor import Cursors, CursorState

__all__ = [
    "Env", "FORMAT_VERSION", "lmdb_version", "ManagedLedgers", "LedgerInfo", "Cursors", "CursorState", "Position",
    "StoreError", "StoreNotFound", "StoreNotAStore", "StoreReadOnly", "StoreFormatError",
    "StoreLocked", "StoreDamaged", "StoreDiskFull", "LedgerError", "MapFullError",
]
