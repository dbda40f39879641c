"""Managed ledgers: one per topic partition, a chain of ledgers holding its entries.

Inside the store every entry also has an offset: its index in the managed ledger, counting from
0 across all its ledgers. Offsets make cursor arithmetic (backlog, ranges, skip) plain integer
arithmetic; positions (ledger id, entry id) are what users see. A ledger covers the offsets
[first, first + entries).

A closed ledger can be offloaded: its entries leave LMDB for a file elsewhere (the layer above
writes the file and names it by a location string), and its row keeps the location. Reads of
it go through `offloaded_reader`, so cursors, offsets and positions do not change.

Entries appended together are stored in blocks (codec.pack_block): up to BLOCK_ENTRIES
consecutive entries of one ledger, BLOCK_BYTES at most, under one key, (ledger id, the last
entry id of the block); an entry appended alone is stored under its own id, as every entry was
before blocks. A reader finds entry e by the first key at or after (ledger id, e), so both
kinds read alike. One key per block instead of one per entry is what a bulk reader pays for:
scanning a million entries costs about a hundred-odd thousand fewer LMDB steps and Python
objects (the Spark data source takes the blocks' bytes whole), and an append puts one key per
block.
"""
from __future__ import annotations

from bisect import bisect_right

from store import codec, keys
from store.errors import LedgerError
from store.ledger_row import L_ENTRIES, L_LOCATION, location_of
from store.position import Position

DEFAULT_ROLLOVER_ENTRIES = 50_000
# A block's limits. A point read copies its whole block out of LMDB, so blocks stay small
# enough for that to cost a few microseconds; big enough that a bulk reader's per-block work is
# nothing beside its per-entry work.
BLOCK_ENTRIES = 1024
BLOCK_BYTES = 128 * 1024

_encode = codec.encode
_pair = keys.pair
_unpack_pair = keys.unpack_pair
_BLOCK = codec.BLOCK


def _blocks(lid: int, e0: int, values: list):
    """(key, value) items storing values as entries e0, e0 + 1, .. of ledger lid, in blocks."""
    items = []
    i, n = 0, len(values)
    while i < n:
        j, size = i, 0
        while j < n and j - i < BLOCK_ENTRIES and (j == i or size + len(values[j]) <= BLOCK_BYTES):
            size += len(values[j])
            j += 1
        if j - i == 1:
            items.append((_pair(lid, e0 + i), values[i]))
        else:
            items.append((_pair(lid, e0 + j - 1), codec.pack_block(values[i:j])))
        i = j
    return items


class LedgerInfo:
    __slots__ = ("ml_id", "name", "ledgers", "next_offset", "first_offset", "entries_added",
                 "bytes_added", "total_size", "trimmed", "created_ms", "_idx")

    def __init__(self, ml_id: int, name: str, ledgers=None, next_offset: int = 0,
                 first_offset: int = 0, entries_added: int = 0, bytes_added: int = 0,
                 total_size: int = 0, trimmed=None, created_ms: int = 0):
        self.ml_id = ml_id
        self.name = name
        # Rows [ledger_id, first_offset, entries, size, created_ms(, offload location)]
        # (store/ledger_row.py names them); the last one takes appends.
        self.ledgers = ledgers if ledgers is not None else []
        self.next_offset = next_offset      # offset the next entry will get
        self.first_offset = first_offset    # lowest offset not trimmed
        self.entries_added = entries_added
        self.bytes_added = bytes_added
        self.total_size = total_size        # bytes held in ledgers that are not trimmed
        self.trimmed = trimmed if trimmed is not None else []  # deleted ledgers: [id, first, n]
        self.created_ms = created_ms
        self._idx = None

    def to_record(self):
        return [self.name, self.ledgers, self.next_offset, self.first_offset, self.entries_added,
                self.bytes_added, self.total_size, self.trimmed, self.created_ms]

    @classmethod
    def from_record(cls, ml_id, r):
        return cls(ml_id, *r)

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1

    @property
    def entries(self) -> int:
        return self.next_offset - self.first_offset

    def _index(self):
        # Rows and their first offsets, computed once per LedgerInfo (it is rebuilt per
        # transaction, so appends in this one are seen: _append_row resets it).
        idx = self._idx
        if idx is None:
            rows = self.trimmed + self.ledgers
            idx = self._idx = (rows, [r[1] for r in rows], {r[0]: r for r in rows})
        return idx

    def _find(self, offset: int):
        """The ledger row covering offset (also trimmed ones), or None."""
        rows, firsts, _ = self._index()
        i = bisect_right(firsts, offset) - 1
        if i < 0:
            return None
        row = rows[i]
        if offset < row[1] + max(row[2], 1) or row is rows[-1]:
            return row
        return None

    def position(self, offset: int) -> Position:
        """The position of an offset; offset first-1 of a ledger is (ledger, -1), as Pulsar says."""
        if not self.ledgers and not self.trimmed:
            return Position(-1, -1)
        row = self._find(offset)
        if row is None:
            first = (self.trimmed + self.ledgers)[0]
            return Position(first[0], offset - first[1])
        return Position(row[0], offset - row[1])

    def mark_position(self, offset: int) -> Position:
        """Position of a mark-delete offset: -1 of the following ledger when at a boundary."""
        row = self._find(offset + 1)
        if row is not None and row[1] == offset + 1:
            return Position(row[0], -1)
        return self.position(offset)

    def offset(self, ledger_id: int, entry_id: int) -> int | None:
        row = self._index()[2].get(ledger_id)
        if row is not None and -1 <= entry_id < row[2]:
            return row[1] + entry_id
        return None

    def contains(self, offset: int) -> bool:
        return self.first_offset <= offset < self.next_offset


class ManagedLedgers:
    """Create, append to, read, trim and delete managed ledgers."""

    def __init__(self, env, rollover_entries: int = DEFAULT_ROLLOVER_ENTRIES,
                 offloaded_reader=None):
        self.env = env
        self.rollover_entries = rollover_entries
        self._entries = env.db["entries"]
        # The block read last, for the reads of its neighbours in the same transaction:
        # (txn, ledger id, first entry id, last entry id, value, body start, entry ends).
        self._block = None
        # (location, ledger id, entries) -> the ledger's entry bytes, indexed by entry id.
        self.offloaded_reader = offloaded_reader

    # -- naming -------------------------------------------------------------------------------
    def lookup(self, txn, name: str) -> int | None:
        raw = txn.get(name.encode(), db=self.env.db["names"])
        return None if raw is None else keys.unpack_u64(raw)

    def open(self, txn, name: str, now_ms: int) -> LedgerInfo:
        """Return the managed ledger called name, creating it (empty) if it is missing."""
        ml_id = self.lookup(txn, name)
        if ml_id is not None:
            return self.info(txn, ml_id)
        ml_id = self._next_id(txn, b"next_ml_id")
        txn.put(name.encode(), keys.u64(ml_id), db=self.env.db["names"])
        info = LedgerInfo(ml_id, name, created_ms=now_ms)
        # As a managed ledger does on open: a ledger exists before the first entry, so an
        # empty topic still has positions like (ledger, -1).
        self._new_ledger(txn, info, now_ms)
        self._save(txn, info)
        return info

    def info(self, txn, ml_id: int) -> LedgerInfo:
        raw = txn.get(keys.u64(ml_id), db=self.env.db["mledgers"])
        if raw is None:
            raise KeyError(ml_id)
        return LedgerInfo.from_record(ml_id, codec.decode(raw))

    def names(self, txn, prefix: str = ""):
        cur = txn.cursor(db=self.env.db["names"])
        p = prefix.encode()
        if not cur.set_range(p):
            return
        for k, v in cur:
            if not k.startswith(p):
                break
            yield k.decode(), keys.unpack_u64(v)

    def owner(self, txn, ledger_id: int) -> int | None:
        raw = txn.get(keys.u64(ledger_id), db=self.env.db["owners"])
        return None if raw is None else keys.unpack_u64(raw)

    def _next_id(self, txn, counter: bytes) -> int:
        meta = self.env.db["meta"]
        raw = txn.get(counter, db=meta)
        n = 1 if raw is None else keys.unpack_u64(raw)
        txn.put(counter, keys.u64(n + 1), db=meta)
        return n

    def _save(self, txn, info: LedgerInfo) -> None:
        txn.put(keys.u64(info.ml_id), _encode(info.to_record()), db=self.env.db["mledgers"])

    # -- writing ------------------------------------------------------------------------------
    def _new_ledger(self, txn, info: LedgerInfo, now_ms: int) -> list:
        lid = self._next_id(txn, b"next_ledger_id")
        txn.put(keys.u64(lid), keys.u64(info.ml_id), db=self.env.db["owners"])
        row = [lid, info.next_offset, 0, 0, now_ms]
        info.ledgers.append(row)
        info._idx = None
        return row

    def append(self, txn, info: LedgerInfo, values: list[bytes], now_ms: int) -> list[tuple]:
        """Append encoded entries in this transaction. Returns where they went as runs of
        (ledger id, first entry id, count), in order (more than one run after a rollover)."""
        out: list[tuple] = []
        cur = txn.cursor(db=self._entries)
        i, n = 0, len(values)
        while i < n:
            row = info.ledgers[-1] if info.ledgers else None
            if row is None or row[2] >= self.rollover_entries:
                row = self._new_ledger(txn, info, now_ms)
            lid, room = row[0], self.rollover_entries - row[2]
            chunk = values[i:i + room]
            e0 = row[2]
            size = sum(map(len, chunk))
            first_key = _pair(lid, e0)
            # MDB_APPEND is only valid past the database's last key; another topic's newer
            # ledger may already hold higher keys, and then LMDB would refuse the entries.
            at_end = not cur.last() or cur.key() < first_key
            items = _blocks(lid, e0, chunk)
            _consumed, added = cur.putmulti(items, append=at_end, overwrite=False)
            if added != len(items):
                raise LedgerError(f"ledger {lid}: stored {added} of {len(items)} keys of "
                                  f"{len(chunk)} entries")
            out.append((lid, e0, len(chunk)))
            k = len(chunk)
            row[2] += k
            row[3] += size
            info.next_offset += k
            info.entries_added += k
            info.bytes_added += size
            info.total_size += size
            i += k
        self._save(txn, info)
        return out

    # -- reading ------------------------------------------------------------------------------
    def read(self, txn, info: LedgerInfo, offset: int):
        """The raw bytes of the entry at offset, or None when it is trimmed or not written."""
        if not info.contains(offset):
            return None
        row = info._find(offset)
        if row is None:
            return None
        if location_of(row):
            return self._offloaded(row)[offset - row[1]]
        return self.read_position(txn, row[0], offset - row[1])

    def read_position(self, txn, ledger_id: int, entry_id: int):
        """The raw bytes of entry entry_id of ledger ledger_id, or None."""
        cached = self._block
        if cached is not None and cached[0] is txn and cached[1] == ledger_id \
                and cached[2] <= entry_id <= cached[3]:
            return _entry_of(cached, entry_id)
        cur = txn.cursor(db=self._entries)
        if not cur.set_range(_pair(ledger_id, entry_id)):
            return None
        lid, last = _unpack_pair(cur.key())
        if lid != ledger_id:
            return None
        v = cur.value()
        if v[0] != _BLOCK:
            return v if last == entry_id else None
        first = last - codec.block_count(v) + 1
        if entry_id < first:
            return None
        # Readers of one entry often read its neighbours next (a dispatch, a peek): keep the
        # block, its header read, for the rest of this transaction.
        _n, base, ends = codec.block_ends(v)
        self._block = block = (txn, ledger_id, first, last, v, base, ends)
        return _entry_of(block, entry_id)

    def _stored(self, txn, lid: int, e0: int, k: int):
        """Yield (first entry id, value, lo, hi) for the stored values holding entries
        e0..e0+k-1 of ledger lid, in order: entries lo..hi-1 of value (a block) are the
        entries first+lo .. first+hi-1; a value that is not a block holds one entry (lo 0, hi
        1). LedgerError when one is missing."""
        cur = txn.cursor(db=self._entries)
        want, stop = e0, e0 + k
        if not cur.set_range(_pair(lid, e0)):
            raise LedgerError(f"entry {lid}:{e0} is missing")
        for key, v in cur:
            klid, last = _unpack_pair(key)
            n = codec.block_count(v) if v[0] == _BLOCK else 1
            first = last - n + 1
            if klid != lid or first > want or (first != want and want != e0) or last < want:
                raise LedgerError(f"entry {lid}:{want} is missing")
            hi = min(n, stop - first)
            yield first, v, want - first, hi
            want = first + hi
            if want >= stop:
                return
        raise LedgerError(f"entry {lid}:{want} is missing")

    def scan(self, txn, info: LedgerInfo, start: int, end: int | None = None):
        """Yield (offset, ledger id, entry id, raw bytes) for offsets in [start, end)."""
        stop = info.next_offset if end is None else min(end, info.next_offset)
        start = max(start, info.first_offset)
        if start >= stop:
            return
        rows = info.ledgers
        firsts = [r[1] for r in rows]
        i = max(bisect_right(firsts, start) - 1, 0)
        offset = start
        while offset < stop and i < len(rows):
            lid, first, n = rows[i][0], rows[i][1], rows[i][2]
            if offset >= first + n:
                i += 1
                continue
            last = min(stop, first + n)
            if location_of(rows[i]):
                entries = self._offloaded(rows[i])
                while offset < last:
                    yield offset, lid, offset - first, entries[offset - first]
                    offset += 1
                i += 1
                continue
            for f, v, lo, hi in self._stored(txn, lid, offset - first, last - offset):
                if v[0] != _BLOCK:
                    yield offset, lid, f, v
                    offset += 1
                    continue
                for e, raw in enumerate(codec.block_entries(v, lo, hi), f + lo):
                    yield offset, lid, e, raw
                    offset += 1
            i += 1

    def _offloaded(self, row):
        location = location_of(row)
        if self.offloaded_reader is None:
            raise LedgerError(f"ledger {row[0]} is offloaded to {location} and this store "
                              "handle cannot read offloaded ledgers")
        entries = self.offloaded_reader(location, row[0], row[L_ENTRIES])
        if len(entries) != row[L_ENTRIES]:
            raise LedgerError(f"ledger {row[0]}: {location} holds {len(entries)} entries, "
                              f"not {row[L_ENTRIES]}")
        return entries

    # -- offloading ---------------------------------------------------------------------------
    def offload(self, txn, info: LedgerInfo, ledger_id: int, entries: int, location: str) -> bool:
        """Record that a closed ledger's entries now live at location and delete them here.
        False when it was already offloaded; LedgerError when it is not a closed ledger of this
        managed ledger or holds another number of entries than the file."""
        for row in info.ledgers[:-1]:
            if row[0] != ledger_id:
                continue
            if row[2] != entries:
                raise LedgerError(f"ledger {ledger_id} holds {row[2]} entries, not {entries}")
            if location_of(row):
                return False
            self._delete_entries(txn, ledger_id, row[2])
            del row[L_LOCATION:]
            row.append(location)
            info._idx = None
            self._save(txn, info)
            return True
        raise LedgerError(f"ledger {ledger_id} is not a closed ledger of {info.name}")

    @staticmethod
    def offloaded(info: LedgerInfo) -> list:
        """The rows of the offloaded ledgers, oldest first."""
        return [r for r in info.ledgers if location_of(r)]

    def scan_values(self, txn, info: LedgerInfo, start: int, end: int):
        """The raw bytes of the entries at offsets [start, end) (clipped to what exists), as
        (runs, values): runs are (ledger id, first entry id, count) in order, values one list.
        What scan() gives without a tuple per entry, for bulk readers."""
        runs, pieces = self.scan_pieces(txn, info, start, end)
        return runs, values_of(pieces)

    def scan_pieces(self, txn, info: LedgerInfo, start: int, end: int):
        """The entries at offsets [start, end) (clipped to what exists) as they are stored:
        (runs, pieces), runs as scan_values', pieces (value, lo, hi) in order: the entries
        lo..hi-1 of a block, or a value holding one entry (lo 0, hi 1; an offloaded entry too).
        For readers that take blocks whole (values_of() makes scan_values' list of them)."""
        stop = min(end, info.next_offset)
        start = max(start, info.first_offset)
        runs, pieces = [], []
        if start >= stop:
            return runs, pieces
        rows = info.ledgers
        i = max(bisect_right([r[1] for r in rows], start) - 1, 0)
        offset = start
        while offset < stop and i < len(rows):
            row = rows[i]
            lid, first, n = row[0], row[1], row[2]
            i += 1
            if offset >= first + n:
                continue
            k = min(stop, first + n) - offset
            e0 = offset - first
            if location_of(row):
                pieces += [(v, 0, 1) for v in self._offloaded(row)[e0:e0 + k]]
            else:
                pieces += [(v, lo, hi) for _f, v, lo, hi in self._stored(txn, lid, e0, k)]
            runs.append((lid, e0, k))
            offset += k
        return runs, pieces

    # -- trimming and deleting ----------------------------------------------------------------
    def trim(self, txn, info: LedgerInfo, below_offset: int) -> list[int]:
        """Delete every closed ledger whose entries all lie below below_offset."""
        removed = []
        while len(info.ledgers) > 1:
            lid, first, n, size = info.ledgers[0][:4]
            if first + n > below_offset:
                break
            self._delete_entries(txn, lid, n)
            info.ledgers.pop(0)
            info._idx = None
            info.trimmed.append([lid, first, n])
            info.trimmed = info.trimmed[-16:]
            info.first_offset = first + n
            info.total_size -= size
            removed.append(lid)
        if removed:
            self._save(txn, info)
        return removed

    def _delete_entries(self, txn, lid: int, n: int) -> None:
        self._block = None
        cur = txn.cursor(db=self._entries)
        if not cur.set_range(_pair(lid, 0)):
            return
        end = keys.u64_prefix_end(lid)
        while cur.key() and cur.key() < end:
            if not cur.delete():
                break

    def delete(self, txn, info: LedgerInfo) -> None:
        for row in info.ledgers:
            if not location_of(row):
                self._delete_entries(txn, row[0], row[2])
        for row in info.ledgers + info.trimmed:
            txn.delete(keys.u64(row[0]), db=self.env.db["owners"])
        txn.delete(keys.u64(info.ml_id), db=self.env.db["mledgers"])
        txn.delete(info.name.encode(), db=self.env.db["names"])


def _entry_of(block: tuple, entry_id: int):
    """Entry entry_id of a kept block (ManagedLedgers._block)."""
    i = entry_id - block[2]
    base, ends = block[5], block[6]
    return block[4][base + (ends[i - 1] if i else 0):base + ends[i]]


def values_of(pieces: list) -> list:
    """Each entry's bytes, from scan_pieces' pieces."""
    out = []
    for v, lo, hi in pieces:
        if v[0] == _BLOCK:
            out += codec.block_entries(v, lo, hi)
        else:
            out.append(v)
    return out
