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


class StoreDamaged(StoreError):
    """A store file is not what LMDB wrote (cut short, emptied, overwritten, garbage after its
    end, a record that does not decode): refused before LMDB maps the file, never taken for a
    new store."""

    def __init__(self, file: str, problem: str):
        super().__init__(f"{file} is damaged: {problem}")
        self.file = file
        self.problem = problem


class StoreDiskFull(StoreError):
    """The file system holding the store is full: the write was refused, nothing half-written."""

    def __init__(self, file: str):
        super().__init__(f"disk full writing {file}")
        self.file = file


class CorruptValue(ValueError):
    """A stored value that does not decode (store.codec): what the store's file holds is
    damaged."""
