"""Every record of a store read from its file without LMDB, each page, node and value checked on
the way: what `doctor --deep` and `doctor --salvage` are built on (store/salvage.py).

The shapes of the records of each database (their keys' lengths, how their values are encoded),
what is wrong with a record that does not fit them, and a report of what was read and what was
lost. Apart from the pre-open check (store/check.py), which every command runs and which reads
only the roots of the trees: this reads all of them, only when asked. Nothing here knows topics
or time: databases, keys and values are bytes.
"""
from __future__ import annotations

import os
import struct

from store import codec, keys
from store.check import Inspection, inspect, not_a_file
from store.pages import DATA, DB, F_SUBDATA, Db, Meta, PageFile, Walk, current_meta, read_metas

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
    kind = not_a_file(fd)
    if kind:
        os.close(fd)
        rep.problems.append(f"{data} is {kind}, not LMDB's data file: nothing can be read")
        return rep
    try:
        size = os.fstat(fd).st_size
        m0, m1, _problems = read_metas(fd)
        cur = current_meta(m0, m1)
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
        if not nflags & F_SUBDATA or len(value) != DB.size or name not in known:
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
