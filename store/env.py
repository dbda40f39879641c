"""The LMDB environment: the only module that imports lmdb.

One environment per store directory, named databases for each kind of record, an explicit map
size that grows when full, and an on-disk format version checked at open.
"""
from __future__ import annotations

import errno
import os
from contextlib import contextmanager

import lmdb

from store import codec
from store.errors import (
    StoreError, StoreFormatError, StoreNotAStore, StoreNotFound, StoreReadOnly,
)

FORMAT_VERSION = 1
DEFAULT_MAP_SIZE = 1 << 30
MAX_MAP_SIZE = 1 << 40

# Every named database of the store. Keys are built in store/keys.py.
DATABASES = (
    "meta",        # format version, id counters, store-wide settings
    "names",       # managed-ledger name -> id
    "mledgers",    # managed-ledger id -> ledger list and counters
    "owners",      # ledger id -> managed-ledger id (message ids are unique in a store)
    "entries",     # (ledger id, entry id) -> entry bytes
    "cursors",     # (managed-ledger id, cursor name) -> cursor state
    "acked",       # (cursor id, first offset) -> last offset: individually deleted ranges
    "tables",      # (table name, key...) -> value, for the layers above (see Env.table)
    "pending",     # (cursor id, offset) -> who holds a delivered, unacked entry
    "replay",      # (cursor id, offset) -> entries to deliver again
    "delayed",     # (cursor id, deliver-at ms, offset) -> b"": the delayed-delivery index
    "redelivery",  # (cursor id, offset) -> redelivery count, persisted (Pulsar keeps it in memory)
    "timers",      # (cursor id, due ms, offset) -> [kind, managed-ledger id, cursor name]
)

MapFullError = lmdb.MapFullError
_DATA = "data.mdb"

# LMDB allows one environment handle per file per process: share it between Env objects.
# path -> [lmdb.Environment, pid, refcount, readonly]
_OPEN: dict[str, list] = {}


class Env:
    def __init__(self, path: str, *, readonly: bool = False, create: bool = True,
                 map_size: int | None = None):
        self.path = os.path.abspath(path)
        self.readonly = readonly
        self._prepare_dir(create and not readonly)
        size = map_size or DEFAULT_MAP_SIZE
        self._closed = False
        shared = _OPEN.get(self.path)
        if shared is not None and shared[1] == os.getpid() and (readonly or not shared[3]):
            shared[2] += 1
            self._env = shared[0]
            self._pid = shared[1]
            self.db = shared[4]
            return
        # The process-wide handle is writable whenever the directory is, so that a writable
        # Env can follow a read-only one; read-only is then enforced by this object.
        handle_readonly = readonly and not os.access(self.path, os.W_OK)
        try:
            self._env = lmdb.open(
                self.path, map_size=size, max_dbs=len(DATABASES) + 4, subdir=True, mode=0o600,
                readonly=handle_readonly, create=not readonly, max_readers=254, meminit=False,
                lock=not handle_readonly,
            )
        except lmdb.ReadonlyError as exc:
            raise StoreReadOnly(f"store at {self.path} is read-only") from exc
        except lmdb.Error as exc:
            raise _translate(exc, self.path) from exc
        self._pid = os.getpid()
        self.db = {}
        try:
            self._open_databases(handle_readonly)
        except BaseException:
            # A store we refuse must not keep its handle: the next open would fail.
            self._env.close()
            raise
        _OPEN[self.path] = [self._env, self._pid, 1, handle_readonly, self.db]
        for f in (_DATA, "lock.mdb"):
            p = os.path.join(self.path, f)
            if not handle_readonly and os.path.exists(p):
                try:
                    os.chmod(p, 0o600)
                except OSError:
                    pass

    def _open_databases(self, readonly: bool) -> None:
        try:
            if readonly:
                # A handle opened in a read transaction does not outlive it in py-lmdb, so a
                # read-only environment opens its databases without a transaction argument.
                for name in DATABASES:
                    try:
                        self.db[name] = self._env.open_db(name.encode(), create=False)
                    except lmdb.NotFoundError:
                        raise StoreNotAStore(f"{self.path} is not a pulsarctl store") from None
            else:
                # Opening existing databases dirties nothing, so this commit does not fsync.
                with self._env.begin(write=True) as txn:
                    for name in DATABASES:
                        self.db[name] = self._env.open_db(name.encode(), txn=txn)
                    meta = self.db["meta"]
                    if txn.get(b"format", db=meta) is None and not self.readonly:
                        txn.put(b"format", codec.encode(FORMAT_VERSION), db=meta)
        except lmdb.Error as exc:
            raise _translate(exc, self.path) from exc
        self._check_format()

    def _prepare_dir(self, create: bool) -> None:
        p = self.path
        if os.path.exists(p) and not os.path.isdir(p):
            raise StoreNotAStore(f"{p} is a file, not a store directory")
        if not os.path.exists(p):
            if not create:
                raise StoreNotFound(f"no store at {p}")
            try:
                os.makedirs(p, mode=0o700, exist_ok=True)
                os.chmod(p, 0o700)
            except PermissionError:
                raise StoreReadOnly(f"cannot create a store at {p}: permission denied") from None
            except OSError as exc:
                raise StoreError(f"cannot create a store at {p}: {exc.strerror}") from None
            return
        names = set(os.listdir(p))
        if _DATA not in names and names - {"lock.mdb"}:
            raise StoreNotAStore(f"{p} is not a pulsarctl store (it has other files in it)")
        if _DATA not in names and not create:
            raise StoreNotFound(f"no store at {p}")
        if create and not os.access(p, os.W_OK):
            raise StoreReadOnly(f"store at {p} is read-only")

    def _check_format(self) -> None:
        with self._env.begin() as txn:
            raw = txn.get(b"format", db=self.db["meta"])
        version = codec.decode(raw) if raw is not None else None
        if version != FORMAT_VERSION:
            raise StoreFormatError(
                f"store at {self.path} has format {version}, this pulsarctl reads format "
                f"{FORMAT_VERSION}")

    # -- transactions --------------------------------------------------------------------------
    def _begin(self, write: bool):
        if os.getpid() != self._pid:
            raise StoreError("an LMDB environment cannot be used across fork(); open the store again")
        try:
            return self._env.begin(write=write)
        except lmdb.MapResizedError:
            # Another process grew the map: adopt its size and go on.
            self._env.set_mapsize(0)
            return self._env.begin(write=write)

    @contextmanager
    def read(self):
        txn = self._begin(False)
        try:
            yield txn
        except lmdb.Error as exc:
            raise _translate(exc, self.path) from exc
        finally:
            txn.abort()

    def write(self, fn, *args, **kwargs):
        """Run fn(txn, ...) in one write transaction and commit it; all or nothing.

        The map is grown and fn run again from the start when it fills, so fn must not have
        side effects outside the transaction.
        """
        if self.readonly:
            raise StoreReadOnly(f"store at {self.path} was opened read-only")
        while True:
            try:
                txn = self._begin(True)
            except lmdb.ReadonlyError:
                raise StoreReadOnly(f"store at {self.path} is read-only") from None
            except lmdb.Error as exc:
                raise _translate(exc, self.path) from exc
            try:
                result = fn(txn, *args, **kwargs)
                txn.commit()
                return result
            except lmdb.MapFullError:
                txn.abort()
                self._grow()
            except lmdb.Error as exc:
                txn.abort()
                raise _translate(exc, self.path) from exc
            except BaseException:
                txn.abort()
                raise

    def _grow(self) -> None:
        size = self._env.info()["map_size"]
        if size >= MAX_MAP_SIZE:
            raise StoreError(f"store at {self.path} is full at {size} bytes")
        self._env.set_mapsize(min(size * 2, MAX_MAP_SIZE))

    @property
    def map_size(self) -> int:
        return self._env.info()["map_size"]

    def stat(self) -> dict:
        """Map and file size, and usedBytes: the pages the databases hold now. The file never
        shrinks; pages freed by deletes (trimmed ledgers) are reused by later writes, so
        usedBytes is what the data costs."""
        info = self._env.info()
        main = self._env.stat()
        psize = main["psize"]
        pages = main["branch_pages"] + main["leaf_pages"] + main["overflow_pages"]
        with self._env.begin() as txn:
            for db in self.db.values():
                st = txn.stat(db)
                pages += st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"]
        try:
            file_bytes = os.path.getsize(os.path.join(self.path, "data.mdb"))
        except OSError:
            file_bytes = 0
        return {"mapSize": info["map_size"], "lastPage": info["last_pgno"], "pageSize": psize,
                "readers": info["num_readers"], "usedBytes": pages * psize,
                "fileBytes": file_bytes}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        shared = _OPEN.get(self.path)
        if shared is not None and shared[0] is self._env:
            shared[2] -= 1
            if shared[2] > 0:
                return
            del _OPEN[self.path]
        self._env.close()

    # -- small helpers over named databases ---------------------------------------------------
    def get(self, txn, dbname: str, key: bytes):
        raw = txn.get(key, db=self.db[dbname])
        return None if raw is None else codec.decode(raw)

    def put(self, txn, dbname: str, key: bytes, value) -> None:
        txn.put(key, codec.encode(value), db=self.db[dbname])

    def delete(self, txn, dbname: str, key: bytes) -> bool:
        return txn.delete(key, db=self.db[dbname])

    def scan(self, txn, dbname: str, prefix: bytes = b"", start: bytes | None = None):
        """Yield (key, decoded value) for every key that starts with prefix, in key order."""
        cur = txn.cursor(db=self.db[dbname])
        if not cur.set_range(start if start is not None else prefix):
            return
        for key, raw in cur:
            if not key.startswith(prefix):
                break
            yield key, codec.decode(raw)

    def delete_prefix(self, txn, dbname: str, prefix: bytes) -> int:
        cur = txn.cursor(db=self.db[dbname])
        n = 0
        if not cur.set_range(prefix):
            return 0
        while cur.key().startswith(prefix):
            n += 1
            if not cur.delete():
                break
        return n

    def cursor(self, txn, dbname: str):
        return txn.cursor(db=self.db[dbname])


def lmdb_version() -> str:
    return lmdb.__version__


def _translate(exc: Exception, path: str) -> StoreError:
    if isinstance(exc, lmdb.ReadonlyError):
        return StoreReadOnly(f"store at {path} is read-only")
    if isinstance(exc, lmdb.InvalidError):
        return StoreNotAStore(f"{path} is not a pulsarctl store (not an LMDB environment)")
    if isinstance(exc, lmdb.Error) and getattr(exc, "errno", None) in (errno.EACCES, errno.EROFS):
        return StoreReadOnly(f"store at {path} is read-only")
    if isinstance(exc, lmdb.Error) and "Permission denied" in str(exc):
        return StoreReadOnly(f"store at {path} is not accessible: permission denied")
    return StoreError(f"store at {path}: {exc}")
