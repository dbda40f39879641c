"""LMDB's pages as they lie in data.mdb, read with pread and never mapped: the layout of LMDB
0.9's meta pages, B-tree pages, nodes and overflow pages, and a walk over a tree that checks
each page and node it reads and records what is wrong instead of faulting.

This is the vocabulary the pre-open check (store/check.py) and the record-by-record read
(store/records.py) share, kept apart from both because it is only about LMDB's format, not
about what pulsarctl decides from it. The layouts are those of a 64-bit little-endian host (the
only build py-lmdb ships for the platforms pulsarctl runs on; NATIVE says whether this is one).
Nothing here knows topics or time, and nothing here imports lmdb: pages, keys and values are
bytes.
"""
from __future__ import annotations

import os
import struct
import sys

# The two files LMDB keeps in a store's directory.
DATA, LOCK = "data.mdb", "lock.mdb"

# -- LMDB 0.9's on-disk layout (mdb.c: MDB_page, MDB_meta, MDB_db, MDB_node) ---------------------
MAGIC = 0xBEEFC0DE
DATA_VERSION = 1
PAGEHDR = 16                                   # mp_pgno u64, mp_pad u16, mp_flags u16, lower/upper
HDR = struct.Struct("<QHHHH")
OV_PAGES = struct.Struct("<I")                 # mp_pages of an overflow page, at offset 12
DB = struct.Struct("<IHHQQQQQ")                # md_pad (psize in FREE_DBI), flags, depth, ... root
_META = struct.Struct("<IIQQ48s48sQQ")         # magic, version, address, mapsize, dbs, last, txn
_NODE = struct.Struct("<HHHH")                 # lo, hi, flags, ksize
_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")
P_BRANCH, P_LEAF, P_OVERFLOW, P_META, P_LEAF2 = 0x01, 0x02, 0x04, 0x08, 0x20
F_BIGDATA, F_SUBDATA, F_DUPDATA = 0x01, 0x02, 0x04
P_INVALID = (1 << 64) - 1
NATIVE = sys.byteorder == "little" and sys.maxsize > 2 ** 32
MAX_DEPTH = 32
MIN_PSIZE, MAX_PSIZE = 512, 0x8000


# (Plain classes, not dataclasses: this module is imported by every command, and making a
# dataclass costs more start-up time than the whole check.)
class Db:
    """An MDB_db record: a B-tree's root page and LMDB's count of its records."""
    __slots__ = ("flags", "depth", "entries", "root")

    def __init__(self, raw: bytes):
        _pad, self.flags, self.depth, _b, _l, _o, self.entries, self.root = DB.unpack(raw)


class Meta:
    """An MDB_meta record: the page size, the two core trees, the last page and transaction."""
    __slots__ = ("slot", "psize", "mapsize", "free", "main", "last_pg", "txnid")

    def __init__(self, slot, psize, mapsize, free, main, last_pg, txnid):
        self.slot, self.psize, self.mapsize = slot, psize, mapsize
        self.free, self.main, self.last_pg, self.txnid = free, main, last_pg, txnid


def _parse_meta(buf: bytes, slot: int) -> tuple[Meta | None, str | None]:
    if len(buf) < PAGEHDR + _META.size:
        return None, f"meta page {slot} is missing (the file ends before it)"
    _pgno, _pad, flags, _lo, _up = HDR.unpack_from(buf, 0)
    magic, version, _addr, mapsize, free, main, last_pg, txnid = _META.unpack_from(buf, PAGEHDR)
    if magic != MAGIC or not flags & P_META:
        return None, f"meta page {slot} is not an LMDB meta page (overwritten?)"
    if version != DATA_VERSION:
        return None, f"meta page {slot} has LMDB data version {version}, not {DATA_VERSION}"
    f = Db(free)
    psize = DB.unpack(free)[0]
    if psize < MIN_PSIZE or psize > MAX_PSIZE or psize & (psize - 1):
        return None, f"meta page {slot} gives an impossible page size {psize}"
    return Meta(slot, psize, mapsize, f, Db(main), last_pg, txnid), None


def read_metas(fd: int):
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


def current_meta(m0: Meta | None, m1: Meta | None) -> Meta | None:
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

    def tree_page(self, where: str, pgno: int):
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
        p, _pad, flags, lower, upper = HDR.unpack_from(buf, 0)
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
            got = self.tree_page(where, pgno)
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
        p, _pad, flags, _lo, _up = HDR.unpack_from(data, 0)
        pages = OV_PAGES.unpack_from(data, 12)[0]
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
