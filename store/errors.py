"""Store-level failures. The broker turns these into pulsarctl errors with exit codes."""


class StoreError(Exception):
    """Anything wrong with the store itself (files, permissions, format)."""


class StoreNotFound(StoreError):
    pass


class StoreNotAStore(StoreError):
    pass


class StoreReadOnly(StoreError):
    pass


class StoreFormatError(StoreError):
    pass


class StoreLocked(StoreError):
    pass


class LedgerError(StoreError):
    """An entry is not where its ledger says it is: never expected, never silently ignored."""
