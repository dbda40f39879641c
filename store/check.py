"""A store's files checked with plain file I/O, before LMDB maps them.

LMDB maps data.mdb and trusts it. A file cut short makes it touch pages past the end of the file
(SIGBUS: the process dies with no message); an empty file is taken for a new store and
initialised over what it held. So before LMDB sees the file, `inspect()` reads LMDB's two meta
pages, checks the file is as long as the current one says, that the roots of the databases are
the pages they claim to be and that nothing but LMDB pages follows the last page; and a record
of the store's identity kept beside data.mdb (store/identity.py) says the store existed, so an
empty or missing data.mdb next to it is damage, never a new store.

LMDB's page layout and the walk over its trees are in store/pages.py; reading every record
(`doctor --deep`, `doctor --salvage`) is store/records.py; room on the disk taken before LMDB
needs it is store/space.py. The layouts read are LMDB 0.9's on a 64-bit little-endian host; on
another host the check is left out. Nothing here knows topics or time: databases, keys and
values are bytes.
"""
from __future__ import annotations

import os
import stat

from store.errors import StoreDamaged
from store.identity import IDENTITY, read_identity
from store.pages import (
    DATA, DB, F_SUBDATA, HDR, LOCK, NATIVE, OV_PAGES, P_BRANCH, P_INVALID, P_LEAF, P_LEAF2,
    P_OVERFLOW, PAGEHDR, Db, Meta, PageFile, Walk, current_meta, read_metas,
)


# (A plain class, not a dataclass: this module is imported by every command, and making a
# dataclass costs more start-up time than the whole check.)
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


def not_a_file(fd: int) -> str | None:
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
    if not NATIVE:
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
    kind = not_a_file(fd)
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
            m0, m1, _p = read_metas(fd)
            now = current_meta(m0, m1)
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
    m0, m1, problems = read_metas(fd)
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
    cur = current_meta(m0, m1)
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
        if value is not None and nflags & F_SUBDATA and len(value) == DB.size:
            names.append((key, Db(value)))
    for key, db in names:
        where = f"database {key.decode(errors='replace')}"
        if key == b"meta":
            # Every command reads it (the format, the clock): all of it, a few records.
            for _record in walk.records(where, db):
                pass
        elif db.root != P_INVALID:
            walk.tree_page(where, db.root)
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
        pgno, _pad, flags, _lo, _up = HDR.unpack(hdr)
        if pgno != p or not flags or flags & ~(P_BRANCH | P_LEAF | P_OVERFLOW | P_LEAF2):
            bad = True
            break
        p += max(1, OV_PAGES.unpack_from(hdr, 12)[0]) if flags & P_OVERFLOW else 1
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
