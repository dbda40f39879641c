"""The LMDB environment: the only module that imports lmdb.

One environment per store directory, named databases for each kind of record, an explicit map
size that grows when full, and an on-disk format version checked at open. Before LMDB maps a
store's file, store/check.py checks it with plain file I/O (a damaged file is StoreDamaged, never
a SIGBUS nor a new, empty store); files LMDB would extend through a map are allocated first
(store/space.py: a full disk is StoreDiskFull, never a SIGBUS).
"""
from __future__ import annotations

import errno
import os
from contextlib import contextmanager

import lmdb

from store import check, codec, identity, records, space
from store.errors import (
    StoreDamaged, StoreDiskFull, StoreError, StoreFormatError, StoreNotAStore, StoreNotFound,
    StoreReadOnly,
)

# Format 2 adds blocks of entries (store/ledger.py); a format 1 store is a format 2 store with
# none, so it is read as it is and marked 2 when first opened for writing (a pulsarctl that
# reads only format 1 then says so instead of failing on a block).
FORMAT_VERSION = 2
READABLE_FORMATS = (1, 2)
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
    "pending",     # (cursor id, offset) -> [consumer, delivered at, redelivery count
                   #   (, nacked flag, a batch's message count)]: delivered, unacked entries
    "replay",      # (cursor id, offset) -> redelivery count: entries to deliver again
    "delayed",     # (cursor id, deliver-at ms, offset) -> b"": the delayed-delivery index
    "redelivery",  # (cursor id, offset) -> redelivery count, persisted (Pulsar keeps it in memory)
    "timers",      # (cursor id, due ms, offset) -> [kind, managed-ledger id, subscription,
                   #   consumer, delivered at]: nack and ack-timeout timers (broker/timers.py)
    "history",     # (managed-ledger id, offset, sequence) -> [event, at, subscription,
                   #   consumer, redelivery count, extra]: the message history
                   #   (broker/history.py); added after format 1 stores were made, so a
                   #   store opened read-only may lack it (OPTIONAL)
)
# Databases a store made by an older pulsarctl does not have: opening it writable creates
# them (format 1 still), read-only goes without them and their readers find nothing.
OPTIONAL = frozenset({"history"})

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
        # Checked before LMDB maps the file: a file cut short would be a SIGBUS, an emptied one
        # a new store.
        found = check.precheck(self.path)
        if found.state in ("absent", "new") and (readonly or not create):
            raise StoreNotFound(f"no store at {self.path}")
        if not handle_readonly:
            if found.state in ("absent", "new"):
                space.reserve_new(self.path)
            else:
                space.reserve_lock(self.path)
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
        if not handle_readonly:
            info = self._env.info()
            identity.note_healthy(self.path, found.identity, self._env.stat()["psize"],
                               info["last_pgno"], info["last_txnid"])
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
                        if name in OPTIONAL:
                            continue
                        raise StoreNotAStore(f"{self.path} is not a pulsarctl store") from None
            else:
                # Opening existing databases dirties nothing, so this commit does not fsync.
                with self._env.begin(write=True) as txn:
                    for name in DATABASES:
                        self.db[name] = self._env.open_db(name.encode(), txn=txn)
                    meta = self.db["meta"]
                    raw = txn.get(b"format", db=meta)
                    old = None if raw is None else codec.decode(raw)
                    if not self.readonly and (old is None or (
                            old in READABLE_FORMATS and old != FORMAT_VERSION)):
                        txn.put(b"format", codec.encode(FORMAT_VERSION), db=meta)
        except lmdb.Error as exc:
            raise _translate(exc, self.path) from exc
        self._check_format()

    def _prepare_dir(self, create: bool) -> None:
        p = self.path
        if os.path.exists(p) and not os.path.isdir(p):
            raise StoreNotAStore(f"{p} is a file, not a store directory")
        if os.path.isdir(p) and not os.path.exists(os.path.join(p, _DATA)) \
                and identity.read_identity(p) is not None:
            raise StoreDamaged(os.path.join(p, _DATA), f"it is missing, but {identity.IDENTITY} "
                               "says the store held data")
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
        if version not in READABLE_FORMATS:
            raise StoreFormatError(
                f"store at {self.path} has format {version}, this pulsarctl reads formats "
                f"{' and '.join(map(str, READABLE_FORMATS))}")

    # -- transactions --------------------------------------------------------------------------
    def _begin(self, write: bool, buffers: bool = False):
        if os.getpid() != self._pid:
            raise StoreError("an LMDB environment cannot be used across fork(); open the store again")
        try:
            return self._env.begin(write=write, buffers=buffers)
        except lmdb.MapResizedError:
            # Another process grew the map: adopt its size and go on.
            self._env.set_mapsize(0)
            return self._env.begin(write=write, buffers=buffers)

    @contextmanager
    def read(self, buffers: bool = False):
        """A read transaction. With buffers, the values it reads are memoryviews into the
        map, not copies: valid only until the transaction ends, for a reader that copies what
        it keeps (a bulk reader saves copying every value twice)."""
        txn = self._begin(False, buffers)
        try:
            yield txn
        except lmdb.Error as exc:
            raise _translate(exc, self.path) from exc
        except codec.CorruptValue as exc:
            raise self._undecodable(None, None, exc) from exc
        finally:
            txn.abort()

    def write(self, fn, *args, **kwargs):
        """Run fn(txn, ...) in one write transaction and commit it; all or nothing.

        The map is grown and fn run again from the start when it fills, so fn must not have
        side effects outside the transaction.
        """
        return self._write(fn, None, args, kwargs)

    def write_announced(self, fn, announce, *args, **kwargs):
        """write(), calling announce(result) after fn and before the commit, so that the
        caller acts on what fn chose while the commit goes to disk (serve sends the messages
        a fetch picked during the fetch's sync). A map that fills before announce is grown and
        fn run again, as in write(); once announce has run, fn is not run again (announce
        acted on that result): a failed commit raises, and nothing of fn's happened."""
        return self._write(fn, announce, args, kwargs)

    def _write(self, fn, announce, args, kwargs):
        if self.readonly:
            raise StoreReadOnly(f"store at {self.path} was opened read-only")
        announced: list = []
        while True:
            try:
                txn = self._begin(True)
            except lmdb.ReadonlyError:
                raise StoreReadOnly(f"store at {self.path} is read-only") from None
            except lmdb.Error as exc:
                raise _translate(exc, self.path) from exc
            try:
                return self._commit(txn, fn, args, kwargs, announce, announced)
            except lmdb.MapFullError:
                self._grow()
                if announced:
                    raise StoreError(f"store at {self.path} filled while committing; the "
                                     "change was not made (the map has grown)") from None

    def nested(self, parent, fn, *args, **kwargs):
        """Run fn(txn, ...) in a transaction nested in the write transaction parent (one of
        write()'s): its writes join parent's when fn returns, and are undone alone when fn
        raises, the parent going on without them. A full map (MapFullError) goes up to
        write(), which grows the map and runs everything again; any other LMDB error is the
        store's, a StoreError."""
        try:
            txn = self._env.begin(write=True, parent=parent)
        except lmdb.MapFullError:
            raise
        except lmdb.Error as exc:
            raise _translate(exc, self.path) from exc
        return self._commit(txn, fn, args, kwargs)

    def _commit(self, txn, fn, args, kwargs, announce=None, announced=None):
        """fn(txn, ...), then commit txn; any error aborts it. A full map (MapFullError) goes up
        as it is, for write() to grow the map; any other LMDB error is the store's.
        announce(result), if given, runs before the commit (write_announced)."""
        try:
            result = fn(txn, *args, **kwargs)
            if announce is not None:
                announced.append(True)
                announce(result)
            txn.commit()
            return result
        except lmdb.MapFullError:
            txn.abort()
            raise
        except lmdb.Error as exc:
            txn.abort()
            raise _translate(exc, self.path) from exc
        except codec.CorruptValue as exc:
            txn.abort()
            raise self._undecodable(None, None, exc) from exc
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
        if raw is None:
            return None
        try:
            return codec.decode(raw)
        except codec.CorruptValue as exc:
            raise self._undecodable(dbname, key, exc) from None

    def _undecodable(self, dbname: str | None, key: bytes | None,
                     exc: Exception) -> StoreDamaged:
        where = "a record" if dbname is None else (
            f"the record {records.describe_key(dbname, bytes(key))} of its {dbname} database")
        return StoreDamaged(os.path.join(self.path, _DATA), f"{where} cannot be decoded: {exc}")

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
            try:
                value = codec.decode(raw)
            except codec.CorruptValue as exc:
                raise self._undecodable(dbname, key, exc) from None
            yield key, value

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
    if isinstance(exc, lmdb.DiskError) or (
            isinstance(exc, lmdb.Error) and space.disk_full(path, getattr(exc, "errno", None),
                                                            str(exc))):
        return StoreDiskFull(os.path.join(path, _DATA))
    if isinstance(exc, lmdb.CorruptedError | lmdb.PageNotFoundError):
        return StoreDamaged(os.path.join(path, _DATA), f"LMDB reports {exc}")
    if isinstance(exc, lmdb.ReadonlyError):
        return StoreReadOnly(f"store at {path} is read-only")
    if isinstance(exc, lmdb.InvalidError):
        return StoreNotAStore(f"{path} is not a pulsarctl store (not an LMDB environment)")
    if isinstance(exc, lmdb.Error) and getattr(exc, "errno", None) in (errno.EACCES, errno.EROFS):
        return StoreReadOnly(f"store at {path} is read-only")
    if isinstance(exc, lmdb.Error) and "Permission denied" in str(exc):
        return StoreReadOnly(f"store at {path} is not accessible: permission denied")
    return StoreError(f"store at {path}: {exc}")


def verify_structure(path: str) -> list[str] | None:
    """py-lmdb's offline verifier (lmdb.verify, pure Python, never maps the file): every page
    reachable once, the free list and the live pages covering the file. None when this py-lmdb
    has no verifier."""
    try:
        from lmdb import verify as v  # lazy: one-shot produce never needs it
    except ImportError:
        return None
    try:
        return list(v.verify(os.path.join(path, _DATA), subdir=False))
    except v.VerifyError as exc:
        return [str(exc)]
    except OSError as exc:
        return [f"{exc.strerror}"]
