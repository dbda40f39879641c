"""Durable cursors: Pulsar's ManagedCursor over offsets.

State: mark-delete offset (everything at or below it is acknowledged), the individually
deleted ranges above it (store/ranges.py), the read position (next offset to read for new
deliveries) and acked_above, the number of offsets acknowledged above mark-delete, which makes
backlog O(1): backlog = last offset - mark-delete - acked_above.
"""
from __future__ import annotations

from store import codec, keys
from store.ranges import RangeSet


class CursorState:
    __slots__ = ("ml_id", "name", "id", "mark_delete", "read_position", "acked_above", "props")

    def __init__(self, ml_id: int, name: str, id: int, mark_delete: int, read_position: int,
                 acked_above: int = 0, props: dict | None = None):
        self.ml_id = ml_id
        self.name = name
        self.id = id
        self.mark_delete = mark_delete        # offset; -1 means nothing acknowledged
        self.read_position = read_position    # next offset to read for a first delivery
        self.acked_above = acked_above
        self.props = props if props is not None else {}

    def __repr__(self) -> str:
        return (f"CursorState({self.name!r}, md={self.mark_delete}, rp={self.read_position}, "
                f"acked_above={self.acked_above})")

    def to_record(self):
        return [self.id, self.mark_delete, self.read_position, self.acked_above, self.props]

    def backlog(self, next_offset: int) -> int:
        return max(0, next_offset - 1 - self.mark_delete - self.acked_above)


class Cursors:
    def __init__(self, env):
        self.env = env
        self._db = env.db["cursors"]
        self.ranges = RangeSet(env)

    @staticmethod
    def _key(ml_id: int, name: str) -> bytes:
        return keys.u64(ml_id) + name.encode()

    def get(self, txn, ml_id: int, name: str) -> CursorState | None:
        raw = txn.get(self._key(ml_id, name), db=self._db)
        if raw is None:
            return None
        r = codec.decode(raw)
        return CursorState(ml_id, name, *r)

    def list(self, txn, ml_id: int) -> list[CursorState]:
        prefix = keys.u64(ml_id)
        out = []
        cur = txn.cursor(db=self._db)
        if cur.set_range(prefix):
            for k, v in cur:
                if not k.startswith(prefix):
                    break
                out.append(CursorState(ml_id, k[8:].decode(), *codec.decode(v)))
        return out

    def create(self, txn, ml_id: int, name: str, mark_delete: int) -> CursorState:
        meta = self.env.db["meta"]
        raw = txn.get(b"next_cursor_id", db=meta)
        cid = 1 if raw is None else keys.unpack_u64(raw)
        txn.put(b"next_cursor_id", keys.u64(cid + 1), db=meta)
        c = CursorState(ml_id, name, cid, mark_delete, mark_delete + 1)
        self.save(txn, c)
        return c

    def save(self, txn, c: CursorState) -> None:
        txn.put(self._key(c.ml_id, c.name), codec.encode(c.to_record()), db=self._db)

    def delete(self, txn, c: CursorState) -> None:
        self.ranges.clear(txn, c.id)
        txn.delete(self._key(c.ml_id, c.name), db=self._db)

    # -- acknowledgement ----------------------------------------------------------------------
    def ack(self, txn, c: CursorState, offsets) -> int:
        """Individually acknowledge offsets (any order, duplicates allowed). Returns how many
        were newly acknowledged. The caller saves the cursor."""
        newly = 0
        md = c.mark_delete
        for a, b in _intervals(sorted(set(o for o in offsets if o > md))):
            n = self.ranges.add(txn, c.id, a, b)
            c.acked_above += n
            newly += n
        self._absorb(txn, c)
        return newly

    def _absorb(self, txn, c: CursorState) -> None:
        """Fold ranges that reach mark-delete + 1 (or below) into mark-delete."""
        while True:
            r = self.ranges.first(txn, c.id)
            if r is None or r[0] > c.mark_delete + 1:
                break
            s, e = r
            self.ranges.pop_first(txn, c.id)
            # Every offset in a stored range lies above mark-delete and is in acked_above.
            c.acked_above -= e - s + 1
            c.mark_delete = max(c.mark_delete, e)
        # As ManagedCursor does: the read position never stays at or behind mark-delete.
        if c.read_position <= c.mark_delete:
            c.read_position = c.mark_delete + 1

    def ack_cumulative(self, txn, c: CursorState, offset: int) -> int:
        """Acknowledge everything at or below offset. Returns how many were newly acked."""
        if offset <= c.mark_delete:
            return 0
        dropped, _tail = self.ranges.remove_through(txn, c.id, offset)
        newly = offset - c.mark_delete - dropped
        c.acked_above -= dropped
        c.mark_delete = offset
        self._absorb(txn, c)
        if c.read_position <= c.mark_delete:
            c.read_position = c.mark_delete + 1
        return newly

    def is_acked(self, txn, c: CursorState, offset: int) -> bool:
        return offset <= c.mark_delete or self.ranges.contains(txn, c.id, offset)

    def unacked(self, txn, c: CursorState, start: int, stop: int):
        return self.ranges.unacked(txn, c.id, max(start, c.mark_delete + 1), stop)

    def seek(self, txn, c: CursorState, mark_delete: int) -> None:
        """Move the cursor: everything at or below mark_delete is acked, nothing above it."""
        self.ranges.clear(txn, c.id)
        c.mark_delete = mark_delete
        c.acked_above = 0
        c.read_position = mark_delete + 1

    def skip(self, txn, c: CursorState, n: int, next_offset: int) -> int:
        """Acknowledge the next n unacknowledged entries (pulsar-admin skip). Returns how many."""
        todo = list(_take(self.unacked(txn, c, c.mark_delete + 1, next_offset), n))
        self.ack(txn, c, todo)
        if c.read_position <= c.mark_delete:
            c.read_position = c.mark_delete + 1
        return len(todo)

    def individually_deleted(self, txn, c: CursorState):
        return list(self.ranges.iter(txn, c.id))


def _intervals(sorted_offsets):
    it = iter(sorted_offsets)
    try:
        a = b = next(it)
    except StopIteration:
        return
    for o in it:
        if o == b + 1:
            b = o
        else:
            yield a, b
            a = b = o
    yield a, b


def _take(it, n):
    for i, x in enumerate(it):
        if i >= n:
            return
        yield x
