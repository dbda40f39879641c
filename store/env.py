"""The LMDB environment: the only module that imports lmdb.

One environment per store directory, named databases for each kind of record, an explicit map
size that grows when full, and an on-disk format version checked at open. Before LMDB maps a
store's file, store/check.py checks it with plain file I/O (a damaged file is StoreDamaged, never
a SIGBUS nor a new, empty store); files LMDB would extend through a map are allocated first (a
full disk is StoreDiskFull, never a SIGBUS).
"""
from __future__ import annotations

import errno
import os
import struct
from contextlib import contextmanager

import lmdb

from store import check, codec, keys
from store.ledger import LedgerInfo
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
                check.reserve_new(self.path)
            else:
                check.reserve_lock(self.path)
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
            check.note_healthy(self.path, found.identity, self._env.stat()["psize"],
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
                and check.read_identity(p) is not None:
            raise StoreDamaged(os.path.join(p, _DATA), f"it is missing, but {check.IDENTITY} "
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
                return self._commit(txn, fn, args, kwargs)
            except lmdb.MapFullError:
                self._grow()

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

    def _commit(self, txn, fn, args, kwargs):
        """fn(txn, ...), then commit txn; any error aborts it. A full map (MapFullError) goes up
        as it is, for write() to grow the map; any other LMDB error is the store's."""
        try:
            result = fn(txn, *args, **kwargs)
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
            f"the record {check.describe_key(dbname, bytes(key))} of its {dbname} database")
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
            isinstance(exc, lmdb.Error) and check.disk_full(path, getattr(exc, "errno", None),
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


# -- doctor --deep and --salvage ------------------------------------------------------------------
@contextmanager
def _pinned(path: str):
    """Hold a read transaction on the store while its file is read without LMDB, so that no
    commit reuses the pages being read; nothing is held when the store cannot be opened (a
    damaged store is read as it lies)."""
    try:
        env = Env(path, readonly=True, create=False)
    except StoreError:
        yield None, None
        return
    try:
        with env.read() as txn:
            yield env, txn
    finally:
        env.close()


def record_check(path: str) -> check.DeepReport:
    """Every page and every record of the store read back and decoded (store/check.py's
    read_all), holding a read transaction so that no commit reuses the pages being read: what
    plain `doctor` checks. A command fails on any record it reads that fails here (a large
    value's pages hold no header past their first, so only decoding finds garbage written over
    them); and the free list, which every write reads. `doctor --deep` adds LMDB's structure
    and the ledgers' continuity."""
    path = os.path.abspath(path)
    with _pinned(path):
        return check.read_all(path, DATABASES, free_list=True)


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


def deep_check(path: str) -> check.DeepReport:
    """Read every record of the store at path (store/check.py's read_all) and check LMDB's
    structure: what `doctor --deep` reports."""
    path = os.path.abspath(path)
    with _pinned(path) as (env, txn):
        rep = check.read_all(path, DATABASES)
        if rep.inspection.state not in ("absent", "new") and not rep.problems:
            rep.structure = verify_structure(path)
        # Through LMDB only a file the walk and the verifier found whole: it trusts its pages.
        if env is not None and not rep.problems and not rep.structure \
                and not any(d.bad for d in rep.dbs.values()):
            rep.problems.extend(_ledger_gaps(txn, env, _ledgers(txn, env)))
    return rep


# The id counters of the meta database and where the ids they hand out appear in keys (the first
# eight bytes of each key of those databases).
_COUNTERS = {
    b"next_ledger_id": ("owners", "entries"),
    b"next_ml_id": ("mledgers", "history"),
    b"next_cursor_id": ("acked", "pending", "replay", "redelivery", "delayed", "timers"),
}
_SALVAGE_BATCH = 5000
_SALVAGE_BYTES = 32 << 20


def salvage(src: str, dst: str) -> check.DeepReport:
    """Copy every record of the store at src that can still be read and decoded into a new
    store at dst (as sqlite's .recover does), in batches of write transactions; the report says
    what could not be saved. The id counters of the new store are raised past every id its
    records use, so that nothing new takes the id of something salvaged."""
    src, dst = os.path.abspath(src), os.path.abspath(dst)
    out = Env(dst, create=True)
    try:
        batch: list = []
        size = [0]
        top = {c: 0 for c in _COUNTERS}
        owners = {db: c for c, dbs in _COUNTERS.items() for db in dbs}

        def flush():
            if batch:
                out.write(lambda txn: [txn.put(k, v, db=out.db[name]) for name, k, v in batch])
                batch.clear()
                size[0] = 0

        def on_record(name, key, value):
            if name == "meta" and key == b"format":
                return                      # the new store has its own
            c = owners.get(name)
            if c is not None and len(key) >= 8:
                top[c] = max(top[c], int.from_bytes(key[:8], "big"))
            batch.append((name, key, value))
            size[0] += len(key) + len(value)
            if len(batch) >= _SALVAGE_BATCH or size[0] >= _SALVAGE_BYTES:
                flush()

        def on_bad(name, key, value):
            # A damaged block of entries loses only its entries that do not decode: the
            # others are saved as entries of their own.
            if name == "entries" and value and codec.is_block(value):
                for k, v in check.block_remains(key, value):
                    on_record(name, k, v)

        with _pinned(src):
            rep = check.read_all(src, DATABASES, on_record, on_bad)
        flush()

        rep.problems.extend(out.write(_reconcile, out))

        def raise_counters(txn):
            meta = out.db["meta"]
            for counter, highest in top.items():
                raw = txn.get(counter, db=meta)
                now = int.from_bytes(raw, "big") if raw is not None and len(raw) == 8 else 1
                if highest + 1 > now:
                    txn.put(counter, (highest + 1).to_bytes(8, "big"), db=meta)
        out.write(raise_counters)
    finally:
        out.close()
    return rep


def _ranges(ids: list[int]) -> str:
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    shown = ", ".join(out[:5])
    return shown + (f" and {len(out) - 5} more ranges" if len(out) > 5 else "")


def _reconcile(txn, out: Env) -> list[str]:
    """After a salvage, in the new store: what the copied records point at that was not saved.
    A managed ledger whose own record was lost cannot be read (nothing says where its entries
    are): its name and its entries are left out, so the name starts again empty. The owners
    index is rebuilt from the ledger records. Entries lost inside a saved ledger are named by
    ledger and entry id: reading them fails with LedgerError (skip past them)."""
    db, u64, unpack = out.db, keys.u64, keys.unpack_u64
    problems: list[str] = []
    mls = _ledgers(txn, out)
    for k, v in list(txn.cursor(db=db["names"])):
        ml = unpack(v)
        if ml not in mls:
            txn.delete(k, db=db["names"])
            problems.append(f"managed ledger {k.decode(errors='replace')!r} (id {ml}): its "
                            "record was lost, so its entries cannot be found: it is left out")
    owner = {row[0]: ml for ml, info in mls.items() for row in info.ledgers}
    orphans = 0
    for k, v in list(txn.cursor(db=db["owners"])):
        if unpack(v) not in mls:
            txn.delete(k, db=db["owners"])
            orphans += out.delete_prefix(txn, "entries", k)
    for lid, ml in owner.items():
        txn.put(u64(lid), u64(ml), db=db["owners"])
    # Entries of ledgers no saved record holds (their owner record was lost too).
    cur = txn.cursor(db=db["entries"])
    stray = []
    if cur.first():
        for k in cur.iternext(keys=True, values=False):
            lid = unpack(k[:8])
            if lid not in owner and (not stray or stray[-1] != lid):
                stray.append(lid)
    for lid in stray:
        orphans += out.delete_prefix(txn, "entries", u64(lid))
    if orphans:
        problems.append(f"{orphans} entries belonged to managed ledgers whose record was "
                        "lost: they are left out")
    return problems + _ledger_gaps(txn, out, mls)


def _ledgers(txn, env: Env) -> dict[int, LedgerInfo]:
    out = {}
    for k, v in txn.cursor(db=env.db["mledgers"]):
        out[keys.unpack_u64(k)] = LedgerInfo.from_record(keys.unpack_u64(k), codec.decode(v))
    return out


def _ledger_gaps(txn, env: Env, mls: dict[int, LedgerInfo]) -> list[str]:
    """Entries a managed ledger's record says its ledgers hold that are not there."""
    problems = []
    for info in mls.values():
        for row in info.ledgers:
            if len(row) > 5 and row[5]:
                continue                            # offloaded: its entries live elsewhere
            lid, n = row[0], row[2]
            prefix = keys.u64(lid)
            cur = txn.cursor(db=env.db["entries"])
            have = []
            if cur.set_range(prefix):
                for k, v in cur:
                    if not k.startswith(prefix):
                        break
                    last = keys.unpack_pair(k)[1]
                    try:  # a block holds the entries up to the id in its key
                        held = codec.block_count(v) if codec.is_block(v) else 1
                    except (IndexError, struct.error):
                        held = 1
                    have.extend(range(last - held + 1, last + 1))
            if len(have) < n:
                present = set(have)
                lost = [e for e in range(n) if e not in present]
                problems.append(f"managed ledger {info.name!r}: ledger {lid} lost {len(lost)} "
                                f"of its {n} entries ({_ranges(lost)}): reading them fails; "
                                "skip past them")
    return problems
