"""Position(ledger_id, entry_id): where an entry lives, as in BookKeeper / ManagedLedger."""
from typing import NamedTuple


class Position(NamedTuple):
    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"
