"""A store's files checked with plain file I/O, before LMDB maps them, and read record by record
without LMDB: what `doctor --deep` and `doctor --salvage` are built on.

LMDB maps data.mdb and trusts it. A file cut short makes it touch pages past the end of the file
(SIGBUS: the process dies with no message); an empty file is taken for a new store and
initialised over what it held. So before LMDB sees the file, `inspect()` reads LMDB's two meta
pages, checks the file is as long as the current one says, that the roots of the databases are
the pages they claim to be and that nothing but LMDB pages follows the last page; and a record
of the store's identity kept beside data.mdb (the file `identity`, written when the store is
made, or at the first healthy open of an older store) says the store existed, so an empty or
missing data.mdb next to it is damage, never a new store.

The layouts read here are LMDB 0.9's on a 64-bit little-endian host (the only build py-lmdb
ships for the platforms pulsarctl runs on); on another host the check is left out. Nothing here
knows topics or time: databases, keys and values are bytes.
"""
from __future__ import annotations

import errno
import os
import stat
import struct
import sys

from store import codec, keys
from store.errors import StoreDamaged, StoreDiskFull

DATA, LOCK, IDENTITY = "data.mdb", "lock.mdb", "identity"

# -- LMDB 0.9's on-disk layout (mdb.c: MDB_page, MDB_meta, MDB_db, MDB_node) ---------------------
MAGIC = 0xBEEFC0DE
DATA_VERSION = 1
PAGEHDR = 16                                   # mp_pgno u64, mp_pad u16, mp_flags u16, lower/upper
_HDR = struct.Struct("<QHHHH")
_PAGES = struct.Struct("<I")                   # mp_pages of an overflow page, at offset 12
_DB = struct.Struct("<IHHQQQQQ")               # md_pad (psize in FREE_DBI), flags, depth, ... root
_META = struct.Struct("<IIQQ48s48sQQ")         # magic, version, address, mapsize, dbs, last, txn
_NODE = struct.Struct("<HHHH")                 # lo, hi, flags, ksize
_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")
P_BRANCH, P_LEAF, P_OVERFLOW, P_META, P_LEAF2 = 0x01, 0x02, 0x04, 0x08, 0x20
F_BIGDATA, F_SUBDATA, F_DUPDATA = 0x01, 0x02, 0x04
P_INVALID = (1 << 64) - 1
_NATIVE = sys.byteorder == "little" and sys.maxsize > 2 ** 32
MAX_DEPTH = 32
MIN_PSIZE, MAX_PSIZE = 512, 0x8000

# LMDB's lock file for max_readers=254: the reader table after two cache lines of header
# (mdb.c: sizeof(MDB_txninfo) + (maxreaders - 1) * sizeof(MDB_reader)), rounded to whole pages.
LOCK_BYTES = 16384
# The room a new store needs on its disk before LMDB writes its first pages (the two meta pages
# and the first transaction).
NEW_DATA_BYTES = 64 * 1024
# After LMDB reports an I/O error on commit, a file system with less than this left is full:
# LMDB turns a short write (the disk filled during it) into EIO.
_FULL_BELOW = 1 << 20


# (Plain classes, not dataclasses: this module is imported by every command, and making a
# dataclass costs more start-up time than the whole check.)
class Db:
    """An MDB_db record: a B-tree's root page and LMDB's count of its records."""
    __slots__ = ("flags", "depth", "entries", "root")

    def __init__(self, raw: bytes):
        _pad, self.flags, self.depth, _b, _l, _o, self.entries, self.root = _DB.unpack(raw)


class Meta:
    """An MDB_meta record: the page size, the two core trees, the last page and transaction."""
    __slots__ = ("slot", "psize", "mapsize", "free", "main", "last_pg", "txnid")

    def __init__(self, slot, psize, mapsize, free, main, last_pg, txnid):
        self.slot, self.psize, self.mapsize = slot, psize, mapsize
        self.free, self.main, self.last_pg, self.txnid = free, main, last_pg, txnid


class Inspection:
    """What inspect() found. state: "absent" (no data.mdb), "new" (an empty data.mdb and
    nothing ever stored: LMDB may initialise it), "ok" or "damaged" (problems says how; the
    first one is the summary). warnings: what is wrong with the file but harmless to what it
    holds (bytes after the last page LMDB uses, which it never reads): doctor reports them,
    commands go on."""

    def __init__(self, path: str, state: str, identity: dict | None = None):
        self.path, self.state, self.identity = path, state, identity
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self.meta: Meta | None = None
        self.file_bytes = 0

    @property
    def data(self) -> str:
        return os.path.join(self.path, DATA)


def _parse_meta(buf: bytes, slot: int) -> tuple[Meta | None, str | None]:
    if len(buf) < PAGEHDR + _META.size:
        return None, f"meta page {slot} is missing (the file ends before it)"
    _pgno, _pad, flags, _lo, _up = _HDR.unpack_from(buf, 0)
    magic, version, _addr, mapsize, free, main, last_pg, txnid = _META.unpack_from(buf, PAGEHDR)
    if magic != MAGIC or not flags & P_META:
        return None, f"meta page {slot} is not an LMDB meta page (overwritten?)"
    if version != DATA_VERSION:
        return None, f"meta page {slot} has LMDB data version {version}, not {DATA_VERSION}"
    f = Db(free)
    psize = _DB.unpack(free)[0]
    if psize < MIN_PSIZE or psize > MAX_PSIZE or psize & (psize - 1):
        return None, f"meta page {slot} gives an impossible page size {psize}"
    return Meta(slot, psize, mapsize, f, Db(main), last_pg, txnid), None


def _read_metas(fd: int):
    """(meta 0, meta 1, problems): LMDB refuses the file unless both are valid meta pages."""
    problems = []
    m0, p = _parse_meta(os.pread(fd, PAGEHDR + _META.size, 0), 0)
    if p:
        problems.append(p)
    psize = m0.psize if m0 else os.sysconf("SC_PAGESIZE")
    m1, p = _parse_meta(os.pread(fd, PAGEHDR + _META.size, psize), 1)
    if p:
        problems.append(p)
    if m0 and m1 and m0.psize != m1.psize:
        problems.append(f"the meta pages disagree on the page size ({m0.psize}, {m1.psize})")
    return m0, m1, problems


def _current(m0: Meta | None, m1: Meta | None) -> Meta | None:
    """The meta LMDB would use: the one with the higher transaction id."""
    if m0 is None or m1 is None:
        return m0 or m1
    return m1 if m1.txnid > m0.txnid else m0


class PageFile:
    """Pages of data.mdb read with pread: a page past the end of the file is None, never a
    fault."""

    def __init__(self, fd: int, size: int, psize: int, path: str = DATA):
        self.fd, self.size, self.psize, self.path = fd, size, psize, path
        self.pages = size // psize

    def page(self, pgno: int) -> bytes | None:
        if pgno >= self.pages:
            return None
        return os.pread(self.fd, self.psize, pgno * self.psize)

    def extent(self, pgno: int, n: int) -> bytes | None:
        if pgno + n > self.pages:
            return None
        return os.pread(self.fd, n * self.psize, pgno * self.psize)


class Walk:
    """Walks B-trees page by page, checking every page and node it reads; each problem is
    recorded with where it is and the walk goes on with the next node or page."""

    def __init__(self, pf: PageFile, last_pg: int, limit: int = 200):
        self.pf, self.last_pg, self.limit = pf, last_pg, limit
        self._problems: list[str] = []
        self._cut: dict[str, list[int]] = {}     # where -> pages past the end of the file
        self.lost_pages = 0
        self.seen: set[int] = set()

    def problem(self, where: str, text: str) -> None:
        if len(self._problems) < self.limit:
            self._problems.append(f"{where}: {text}")
        elif len(self._problems) == self.limit:
            self._problems.append("... (more problems left out)")

    def _past_end(self, where: str, pgno: int) -> None:
        self._cut.setdefault(where, []).append(pgno)

    @property
    def problems(self) -> list[str]:
        """What was found, pages past the end of the file summed up per database."""
        out = list(self._problems)
        for where, pages in self._cut.items():
            if len(pages) == 1:
                out.append(f"{where}: page {pages[0]} is past the end of the file (cut short)")
            else:
                out.append(f"{where}: {len(pages)} pages are past the end of the file (cut "
                           f"short), pages {min(pages)} to {max(pages)}")
        return out

    def _tree_page(self, where: str, pgno: int):
        if pgno > self.last_pg or pgno < 2:
            self.problem(where, f"page {pgno} is outside the store (last page {self.last_pg})")
            return None
        if pgno in self.seen:
            self.problem(where, f"page {pgno} is reached twice (a loop)")
            return None
        self.seen.add(pgno)
        buf = self.pf.page(pgno)
        if buf is None:
            self.lost_pages += 1
            self._past_end(where, pgno)
            return None
        p, _pad, flags, lower, upper = _HDR.unpack_from(buf, 0)
        if p != pgno:
            self.lost_pages += 1
            self.problem(where, f"page {pgno} holds something else (it says it is page {p}: "
                         "overwritten?)")
            return None
        if flags & (P_BRANCH | P_LEAF) == 0 or flags & (P_OVERFLOW | P_META | P_LEAF2):
            self.lost_pages += 1
            self.problem(where, f"page {pgno} is not a tree page (flags {flags:#x})")
            return None
        if not (PAGEHDR <= lower <= upper <= self.pf.psize) or (lower - PAGEHDR) % 2:
            self.lost_pages += 1
            self.problem(where, f"page {pgno} has a broken header (lower {lower}, upper {upper})")
            return None
        return buf, flags, (lower - PAGEHDR) // 2, upper

    def records(self, where: str, db: Db):
        """Yield (key, node flags, value) of every record of the tree in key order; value is
        None for a record whose value cannot be read (recorded as a problem)."""
        if db.root == P_INVALID:
            return
        last = None
        stack = [(db.root, 1)]
        psize = self.pf.psize
        while stack:
            pgno, depth = stack.pop()
            if depth > MAX_DEPTH:
                self.problem(where, f"page {pgno} is deeper than LMDB allows")
                continue
            got = self._tree_page(where, pgno)
            if got is None:
                continue
            buf, flags, n, upper = got
            children = []
            for i in range(n):
                off = _U16.unpack_from(buf, PAGEHDR + 2 * i)[0]
                if off < upper or off + _NODE.size > psize:
                    self.problem(where, f"page {pgno} node {i} lies outside its page")
                    continue
                lo, hi, nflags, ksize = _NODE.unpack_from(buf, off)
                kstart = off + _NODE.size
                if kstart + ksize > psize:
                    self.problem(where, f"page {pgno} node {i} has a key past its page")
                    continue
                key = bytes(buf[kstart:kstart + ksize])
                if flags & P_BRANCH:
                    children.append(lo | hi << 16 | nflags << 32)
                    continue
                if last is not None and key <= last:
                    self.problem(where, f"page {pgno} node {i}: key {key.hex()} is out of order")
                last = key
                yield key, nflags, self._value(where, pgno, i, buf, kstart + ksize, nflags,
                                               lo | hi << 16)
            # Depth first, children in key order (the stack pops the last pushed first).
            stack.extend((c, depth + 1) for c in reversed(children))

    def _value(self, where, pgno, i, buf, start, nflags, dsize):
        psize = self.pf.psize
        if nflags & F_DUPDATA:
            self.problem(where, f"page {pgno} node {i} holds duplicates (never written by "
                         "pulsarctl)")
            return None
        if not nflags & F_BIGDATA:
            if start + dsize > psize:
                self.problem(where, f"page {pgno} node {i} has a value past its page")
                return None
            return bytes(buf[start:start + dsize])
        if start + 8 > psize:
            self.problem(where, f"page {pgno} node {i} has a value past its page")
            return None
        ov = _U64.unpack_from(buf, start)[0]
        need = (PAGEHDR + dsize + psize - 1) // psize
        if ov > self.last_pg or ov < 2 or ov + need - 1 > self.last_pg:
            self.problem(where, f"page {pgno} node {i}: its value's pages {ov}.. are outside "
                         "the store")
            return None
        data = self.pf.extent(ov, need)
        if data is None:
            self.lost_pages += need
            self._past_end(where, ov)
            return None
        p, _pad, flags, _lo, _up = _HDR.unpack_from(data, 0)
        pages = _PAGES.unpack_from(data, 12)[0]
        if p != ov or not flags & P_OVERFLOW or pages < need:
            self.problem(where, f"the value at page {ov} ({dsize} bytes) was overwritten")
            return None
        return bytes(data[PAGEHDR:PAGEHDR + dsize])

    def free_pages(self, free: Db) -> set[int]:
        """Every page the free list holds (values: a count, then page numbers)."""
        out: set[int] = set()
        for _key, _nflags, value in self.records("free list", free):
            if value is None or len(value) < 8:
                continue
            n = _U64.unpack_from(value, 0)[0]
            n = min(n, len(value) // 8 - 1)
            out.update(struct.unpack_from(f"<{n}Q", value, 8))
        return out


# -- the identity record beside data.mdb ---------------------------------------------------------
# A few lines of `name value` (a text file a person can read; no parser to import at start-up):
#   pulsarctl store
#   id 3f1c...        random, made when the store is
#   pageSize 4096
#   lastPage 19       the highest page LMDB was seen using (a size the store has had)
#   txn 5             the transaction seen then
_IDENTITY_HEAD = "pulsarctl store"


def read_identity(path: str) -> dict | None:
    """The identity record, None when there is none. A record that is there but unreadable still
    says the store existed: it counts as one (with no fields)."""
    try:
        with open(os.path.join(path, IDENTITY), "rb") as f:
            raw = f.read(4096)
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    doc: dict = {}
    try:
        lines = raw.decode().splitlines()
    except UnicodeDecodeError:
        return doc
    if not lines or lines[0].strip() != _IDENTITY_HEAD:
        return doc
    for line in lines[1:]:
        name, _, value = line.strip().partition(" ")
        value = value.strip()
        doc[name] = int(value) if value.isdigit() else value
    return doc


def write_identity(path: str, doc: dict) -> None:
    """Replace the identity record (0600): a new file renamed over the old, so a crash or a full
    disk leaves the old one, never half of one."""
    final = os.path.join(path, IDENTITY)
    tmp = os.path.join(path, f".{IDENTITY}.{os.getpid()}")
    data = "".join([_IDENTITY_HEAD + "\n"] + [f"{k} {v}\n" for k, v in doc.items()]).encode()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, "short write")
        finally:
            os.close(fd)
        os.replace(tmp, final)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreDiskFull(final) from None
        raise


def note_healthy(path: str, ident: dict | None, psize: int, last_pg: int, txnid: int) -> None:
    """After a store opened healthy (writable): write its identity record when it has none (a
    store made before there was one, or just made), and raise the recorded size as it grows
    (by a quarter at a time: one small write now and then, not one per command)."""
    if ident and ident.get("id") and ident.get("pageSize") == psize \
            and last_pg <= ident.get("lastPage", 0) * 5 // 4 + 16:
        return
    old = ident or {}
    doc = {"id": old.get("id") or os.urandom(16).hex(), "pageSize": psize,
           "lastPage": max(last_pg, old.get("lastPage") or 0), "txn": txnid}
    try:
        write_identity(path, doc)
    except (OSError, StoreDiskFull):
        pass  # tried again at the next open; the store itself is fine


# -- the check before LMDB maps the file ---------------------------------------------------------
def _zeros(buf: bytes) -> bool:
    return not buf.strip(b"\0")


def _being_made(path: str) -> bool:
    """Is another process making this store right now? LMDB holds a write lock on the first
    byte of lock.mdb while it sets the environment up (mdb_env_excl_lock) and a read lock
    after; LMDB opening the store then waits for it."""
    import fcntl  # only here: the one rare state that needs it

    try:
        fd = os.open(os.path.join(path, LOCK), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 0)
    except OSError:
        return True
    finally:
        os.close(fd)                 # (closing it releases the probe's lock)
    return False


def _foreign(path: str) -> list[str]:
    try:
        return sorted(set(os.listdir(path)) - {DATA, LOCK})
    except OSError:
        return []


def _not_a_file(fd: int) -> str | None:
    """What data.mdb is when it is not a regular file (a directory opens read-only and fails
    only when read; a device or a pipe is no store either), else None."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return None
    return "a directory" if stat.S_ISDIR(mode) else "not a regular file"


def inspect(path: str, *, identity: dict | None = None) -> Inspection:
    """Check data.mdb in the store directory path without mapping it (see the module's text).
    Never raises for what it finds in the files."""
    ident = read_identity(path) if identity is None else identity
    data = os.path.join(path, DATA)
    res = Inspection(path, "ok", ident)
    if not _NATIVE:
        return res  # LMDB's layout here is not the one this module reads: nothing to check
    try:
        fd = os.open(data, os.O_RDONLY)
    except FileNotFoundError:
        if ident is not None:
            res.state = "damaged"
            res.problems.append(f"it is missing, but {IDENTITY} says the store held data")
        else:
            res.state = "absent"
        return res
    except OSError as exc:
        res.state = "damaged"
        res.problems.append(f"it cannot be read: {exc.strerror}")
        return res
    kind = _not_a_file(fd)
    if kind:
        os.close(fd)
        res.state = "damaged"
        res.problems.append(f"it is {kind}, not LMDB's data file")
        return res
    try:
        for _attempt in range(8):
            res.problems, res.warnings = [], []
            before = _inspect_once(fd, res)
            if res.state != "damaged" or before is None:
                break
            # A commit in another process may have reused what the meta we read pointed at:
            # what was read is only trusted when the meta did not move meanwhile.
            m0, m1, _p = _read_metas(fd)
            now = _current(m0, m1)
            if now is not None and now.txnid == before:
                break
            res.state = "ok"
    finally:
        os.close(fd)
    if res.problems:
        res.state = "damaged"
    return res


def _inspect_once(fd: int, res: Inspection) -> int | None:
    """One pass of inspect(): fills res; returns the current meta's txn id (or None)."""
    ident = res.identity
    # The meta pages first, then the size: a commit writes its pages before its meta, so a
    # meta read before the size never claims pages the file does not have yet.
    m0, m1, problems = _read_metas(fd)
    size = os.fstat(fd).st_size
    res.file_bytes = size
    if size == 0:
        # LMDB initialises an empty file as a new environment: right only if nothing was ever
        # stored here.
        if ident is not None:
            res.state = "damaged"
            had = ident.get("lastPage")
            res.problems.append(f"it is empty (0 bytes), but {IDENTITY} says the store held data"
                                + (f" (at least {(had + 1) * ident.get('pageSize', 4096)} "
                                   "bytes)" if isinstance(had, int) else ""))
        elif _foreign(res.path):
            res.state = "damaged"
            res.problems.append("it is empty (0 bytes), but the store directory has been used "
                                f"(it holds {', '.join(_foreign(res.path)[:3])})")
        else:
            res.state = "new"
        return None
    if m0 is not None and m1 is None and m0.txnid == 0 and ident is None \
            and size < 2 * m0.psize:
        if _being_made(res.path):
            res.state = "new"      # LMDB in another process is writing its first pages
            return None
        res.state = "damaged"
        res.problems.append("its creation was interrupted (a full disk?) before anything was "
                            "stored in it: remove it and run the command again")
        return None
    cur = _current(m0, m1)
    if problems:
        res.state = "damaged"
        res.problems.extend(problems)
        res.meta = cur
        if cur is None:
            return None
    res.meta = cur
    psize = cur.psize
    need = (cur.last_pg + 1) * psize
    pf = PageFile(fd, size, psize, res.data)
    walk = Walk(pf, cur.last_pg, limit=20)
    if size < need:
        # Pages past the end are harmless only if every one is free (LMDB can commit pages it
        # allocated and freed again in one transaction without writing them).
        free = walk.free_pages(cur.free)
        missing = [p for p in range(size // psize, cur.last_pg + 1) if p not in free]
        walk.seen.clear()
        if missing or size % psize:
            res.state = "damaged"
            res.problems.append(
                f"it is {size} bytes, but LMDB's meta page says it holds {cur.last_pg + 1} pages "
                f"of {psize} bytes ({need} bytes): it was cut short")
            return cur.txnid
    # The roots: the main database (which names the others) and each named database's root.
    names = []
    for key, nflags, value in walk.records("main database", cur.main):
        if value is not None and nflags & F_SUBDATA and len(value) == _DB.size:
            names.append((key, Db(value)))
    for key, db in names:
        where = f"database {key.decode(errors='replace')}"
        if key == b"meta":
            # Every command reads it (the format, the clock): all of it, a few records.
            for _record in walk.records(where, db):
                pass
        elif db.root != P_INVALID:
            walk._tree_page(where, db.root)
    if walk.problems:
        res.state = "damaged"
        res.problems.extend(walk.problems)
        return cur.txnid
    tail = _tail_problem(pf, cur.last_pg)
    if tail:
        res.warnings.append(tail)
    return cur.txnid


def _tail_problem(pf: PageFile, last_pg: int) -> str | None:
    """Past the last page LMDB uses, a file holds pages of commits that failed (a full disk, a
    crash: LMDB pages that know their own number, the values they point at) or holes (zeros).
    Anything else there was not written by LMDB. Not always told apart (a later commit can
    overwrite the head of a failed commit's large value, leaving its middle): a warning, not
    damage."""
    psize, size = pf.psize, pf.size
    p, end = last_pg + 1, size // psize
    bad = False
    while p <= end and not bad:
        if p == end and size % psize == 0:
            break
        hdr = os.pread(pf.fd, PAGEHDR, p * psize)
        if _zeros(hdr):
            p += 1
            continue
        if len(hdr) < PAGEHDR:
            bad = True
            break
        pgno, _pad, flags, _lo, _up = _HDR.unpack(hdr)
        if pgno != p or not flags or flags & ~(P_BRANCH | P_LEAF | P_OVERFLOW | P_LEAF2):
            bad = True
            break
        p += max(1, _PAGES.unpack_from(hdr, 12)[0]) if flags & P_OVERFLOW else 1
    if not bad:
        return None
    keep = (last_pg + 1) * psize
    return (f"the {size - keep} bytes after its last page (page {last_pg}, {psize} bytes a "
            f"page) are not what LMDB writes (garbage at the end of the file?); LMDB never reads "
            f"past its last page, so nothing is lost: `truncate -s {keep} {pf.path}` removes "
            "them")


def precheck(path: str) -> Inspection:
    """inspect(), raising StoreDamaged (naming data.mdb and the first problem) when damaged."""
    res = inspect(path)
    if res.state == "damaged":
        raise StoreDamaged(res.data, res.problems[0])
    return res


# -- reserving space before LMDB needs it ---------------------------------------------------------
def _reserve(p: str, nbytes: int) -> None:
    """Allocate the first nbytes of file p (0600) now, so that touching them through a map
    never meets a full disk (a sparse file there is a SIGBUS). Its contents are left as they
    are."""
    try:
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreDiskFull(p) from None
        return  # not ours to write (read-only, permissions): LMDB says so when it opens it
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise StoreDiskFull(p) from None
        # Anything else (a file system without fallocate): LMDB makes the file as it always did.
    finally:
        os.close(fd)


def reserve_lock(path: str) -> None:
    """LMDB makes lock.mdb with ftruncate and writes it through a map: on a full disk that is a
    SIGBUS. Allocating it first turns that into StoreDiskFull."""
    _reserve(os.path.join(path, LOCK), LOCK_BYTES)


def reserve_new(path: str) -> None:
    """For a store about to be made: lock.mdb allocated, and room on the disk for LMDB's first
    pages (its two meta pages, written as one, must not meet a full disk half-way: a file with
    one meta page is one LMDB refuses)."""
    reserve_lock(path)
    try:
        st = os.statvfs(path)
    except OSError:
        return
    free = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    if free * st.f_frsize < NEW_DATA_BYTES:
        raise StoreDiskFull(os.path.join(path, DATA))


def disk_full(path: str, code: int | None, message: str) -> bool:
    """Does an error LMDB reported for a write to the store at path mean the disk is full?"""
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return True
    if "No space left" in message or "quota" in message.lower():
        return True
    if code == errno.EIO or "Input/output error" in message:
        try:
            st = os.statvfs(path)
        except OSError:
            return False
        free = st.f_bfree if os.geteuid() == 0 else st.f_bavail
        return free * st.f_frsize < _FULL_BELOW
    return False


# -- reading every record: doctor --deep and --salvage --------------------------------------------
# What each database holds (store/keys.py builds the keys): the key's length (None: any) and how
# its values are encoded.
SHAPES = {
    "meta": (None, "codec|u64"),
    "names": (None, "u64"),
    "mledgers": (8, "codec"),
    "owners": (8, "u64"),
    "entries": (16, "entry"),
    "cursors": (None, "codec"),
    "acked": (16, "u64"),
    "tables": ("tuple", "codec"),
    "pending": (16, "codec"),
    "replay": (16, "codec"),
    "delayed": (24, "empty"),
    "redelivery": (16, "codec"),
    "timers": (24, "codec"),
    "history": (24, "codec"),
}
# Databases an older store may lack (store/env.py OPTIONAL): not missing when absent.
OPTIONAL = frozenset({"history"})


def record_problem(db: str, key: bytes, value: bytes) -> str | None:
    """Why this record of db cannot be what the store wrote, or None."""
    klen, kind = SHAPES.get(db, (None, "any"))
    if klen == "tuple":
        try:
            keys.untup(key)
        except (ValueError, IndexError, struct.error, UnicodeDecodeError):
            return "its key is not a tuple key"
    elif klen is not None and len(key) != klen:
        return f"its key has {len(key)} bytes, not {klen}"
    if kind == "u64" and len(value) != 8:
        return f"its value has {len(value)} bytes, not 8"
    if kind == "empty" and value:
        return f"its value has {len(value)} bytes, not 0"
    if kind in ("codec", "codec|u64", "entry"):
        if kind == "codec|u64" and len(value) == 8 and value[:1] not in (b"\x01", b"\x02"):
            return None
        if not value:
            return "its value is empty"
        try:
            if kind == "entry" and codec.is_block(value):  # several entries: each must decode
                inner = _block_decoded(key, value)
                if inner[0][0] < 0:
                    return "its block holds more entries than its key leaves room for"
                for i, _v, exc in inner:
                    if exc is not None:
                        return (f"entry {i} of its block cannot be decoded "
                                f"({type(exc).__name__}: {exc})")
                shared = codec.block_prefix(value)
                head = inner[0][1][:shared]
                for i, v, _exc in inner:
                    if len(v) < shared or v[:shared] != head:
                        return (f"entry {i} of its block does not start with the {shared} "
                                "bytes its block's header says its entries share")
            else:
                codec.decode(value)
        except Exception as exc:  # msgpack, lz4 and the codec each raise their own
            return f"its value cannot be decoded ({type(exc).__name__}: {exc})"
    return None


class DbReport:
    def __init__(self, name: str, expected: int = 0):
        self.name = name
        self.expected = expected        # LMDB's own count of the records
        self.read = 0                   # records read whole
        self.bad: list = []             # (key, why) of records read that do not decode

    @property
    def lost(self) -> int:
        return max(0, self.expected - self.read) + len(self.bad)


class DeepReport:
    def __init__(self, path: str, inspection: Inspection):
        self.path, self.inspection = path, inspection
        self.dbs: dict[str, DbReport] = {}
        self.problems: list[str] = []       # pages, nodes, references that could not be read
        self.unknown: list[str] = []        # names in the main database we do not know
        self.structure: list | None = None  # py-lmdb's verifier's findings (None: not run)

    @property
    def ok(self) -> bool:
        return (self.inspection.state == "ok" and not self.problems and not self.structure
                and not any(d.bad or d.lost for d in self.dbs.values()))

    @property
    def records(self) -> int:
        return sum(d.read for d in self.dbs.values())

    @property
    def lost(self) -> int:
        return sum(d.lost for d in self.dbs.values())


def _block_decoded(key: bytes, value: bytes) -> list[tuple]:
    """(entry id, bytes, the exception decoding it raised or None) for each entry of a block,
    its ids counted back from the one in its key."""
    last = keys.unpack_pair(key)[1]
    inner = codec.block_entries(value)
    out = []
    for i, v in enumerate(inner, last - len(inner) + 1):
        try:
            codec.decode(v)
            out.append((i, v, None))
        except Exception as exc:  # msgpack, lz4 and the codec each raise their own
            out.append((i, v, exc))
    return out


def block_remains(key: bytes, value: bytes) -> list[tuple[bytes, bytes]]:
    """The entries of a damaged block of entries that still decode, each as a record of its
    own ((ledger id, entry id) -> entry): what a salvage keeps of it. Nothing when its header
    cannot be read."""
    try:
        lid = keys.unpack_pair(key)[0]
        inner = _block_decoded(key, value)
    except Exception:  # struct, the codec and slicing each raise their own
        return []
    return [(keys.pair(lid, i), v) for i, v, exc in inner if exc is None and i >= 0]


def read_all(path: str, known: tuple, on_record=None, on_bad=None,
             free_list: bool = False) -> DeepReport:
    """Read every record of every database of the store at path from its file, without LMDB,
    checking each page, node and value on the way (on_bad(db, key, value) gets each record that
    does not decode); on_record(db, key, value) gets each record
    that is whole and decodes. Whatever cannot be read is counted and described in the
    report, and the walk goes on past it. free_list: the free list's pages are checked too
    (every write reads it: a page of it overwritten fails the next write, LMDB's
    MDB_CORRUPTED, though every record reads back whole). Run it on a store nobody writes, or
    while holding a read transaction (Env.read): the pages of that snapshot are then never
    reused under it."""
    ins = inspect(path)
    rep = DeepReport(path, ins)
    if ins.state in ("absent", "new"):
        return rep
    data = os.path.join(path, DATA)
    try:
        fd = os.open(data, os.O_RDONLY)
    except OSError as exc:
        rep.problems.append(f"{data} cannot be read: {exc.strerror}")
        return rep
    kind = _not_a_file(fd)
    if kind:
        os.close(fd)
        rep.problems.append(f"{data} is {kind}, not LMDB's data file: nothing can be read")
        return rep
    try:
        size = os.fstat(fd).st_size
        m0, m1, _problems = _read_metas(fd)
        cur = _current(m0, m1)
        if cur is None:
            rep.problems.append("neither meta page can be read: nothing can be found in the file")
            return rep
        pf = PageFile(fd, size, cur.psize)
        walk = Walk(pf, cur.last_pg)
        subs = _named(walk, cur, known, rep.unknown)
        other = m1 if cur is m0 else m0
        if len(subs) < len(known) and other is not None and other.psize == cur.psize:
            # The databases the last commit's main database no longer shows (its pages are
            # lost) are read as the commit before it left them: LMDB keeps that snapshot's
            # pages until the next commit, so it is whole, one transaction older.
            old = _named(Walk(pf, other.last_pg), other, known, [])
            for name, db in old.items():
                if name not in subs:
                    subs[name] = db
                    rep.problems.append(f"database {name}: the last commit's record of it is "
                                        f"lost; read as transaction {other.txnid} left it (the "
                                        f"one before the last, {cur.txnid})")
        for name, db in sorted(subs.items()):
            d = rep.dbs[name] = DbReport(name, expected=db.entries)
            for key, _nflags, value in walk.records(f"database {name}", db):
                if value is None:
                    continue
                why = record_problem(name, key, value)
                if why:
                    d.bad.append((key, why))
                    if on_bad is not None:
                        on_bad(name, key, value)
                    d.read += 1
                    continue
                d.read += 1
                if on_record is not None:
                    on_record(name, key, value)
        for name in known:
            if name not in rep.dbs and name not in OPTIONAL:
                rep.problems.append(f"database {name} is missing from the main database")
        if free_list:
            walk.free_pages(cur.free)
        rep.problems.extend(walk.problems)
    finally:
        os.close(fd)
    return rep


def _named(walk: Walk, meta: Meta, known: tuple, unknown: list) -> dict[str, Db]:
    """The named databases a meta's main database records."""
    subs = {}
    for key, nflags, value in walk.records("main database", meta.main):
        name = key.decode(errors="replace")
        if value is None:
            continue
        if not nflags & F_SUBDATA or len(value) != _DB.size or name not in known:
            unknown.append(name)
            continue
        subs[name] = Db(value)
    return subs


def describe_key(db: str, key: bytes) -> str:
    """A record's key for a report: numbers where the layout has them, else hex."""
    try:
        if db in ("entries", "acked", "pending", "replay", "redelivery") and len(key) == 16:
            a, b = keys.unpack_pair(key)
            return f"({a}, {b})"
        if db in ("delayed", "timers", "history") and len(key) == 24:
            return str(keys.unpack_triple(key))
        if db in ("owners", "mledgers") and len(key) == 8:
            return str(keys.unpack_u64(key))
        if db == "tables":
            return repr(keys.untup(key))
        if key.isascii() and key.decode().isprintable():
            return key.decode()
    except Exception:
        pass
    return key.hex()


