"""A durable set of closed offset ranges: Pulsar's individuallyDeletedMessages.

Each range is one record, (cursor id, first) -> last, so adding, merging and finding the next
gap cost O(log n) however many holes a subscription has.
"""
from __future__ import annotations

from store import keys

_pair = keys.pair
_unpair = keys.unpack_pair
_u64 = keys.u64
_unu64 = keys.unpack_u64


class RangeSet:
    def __init__(self, env):
        self._db = env.db["acked"]

    def _cursor(self, txn):
        return txn.cursor(db=self._db)

    def add(self, txn, cid: int, a: int, b: int) -> int:
        """Add [a, b]; merge with overlapping and adjacent ranges. Returns offsets newly added."""
        if b < a:
            return 0
        cur = self._cursor(txn)
        new_a, new_b = a, b
        added = b - a + 1
        # The range that starts at or before a, if it touches [a, b].
        found = cur.set_range(_pair(cid, a))
        if found and _unpair(cur.key())[0] == cid and _unpair(cur.key())[1] == a:
            pass
        else:
            if found:
                found = cur.prev()
            else:
                found = cur.last()
            if found:
                c, s = _unpair(cur.key())
                if c == cid:
                    e = _unu64(cur.value())
                    if e >= a - 1:
                        added -= max(0, min(e, b) - a + 1)
                        new_a = s
                        new_b = max(new_b, e)
                        cur.delete()
            cur.set_range(_pair(cid, a))
        # Every range starting inside [a, new_b + 1] merges in.
        while True:
            k = cur.key()
            if not k:
                break
            c, s = _unpair(k)
            if c != cid or s > new_b + 1:
                break
            e = _unu64(cur.value())
            added -= max(0, min(e, b) - max(s, a) + 1)
            new_b = max(new_b, e)
            if not cur.delete():
                break
        txn.put(_pair(cid, new_a), _u64(new_b), db=self._db)
        return added

    def first(self, txn, cid: int):
        cur = self._cursor(txn)
        if cur.set_range(_pair(cid, 0)):
            c, s = _unpair(cur.key())
            if c == cid:
                return s, _unu64(cur.value())
        return None

    def pop_first(self, txn, cid: int) -> None:
        r = self.first(txn, cid)
        if r is not None:
            txn.delete(_pair(cid, r[0]), db=self._db)

    def remove_through(self, txn, cid: int, x: int) -> tuple[int, int | None]:
        """Drop everything at or below x. Returns (offsets dropped, last of a range that
        continues past x, or None)."""
        cur = self._cursor(txn)
        dropped, tail = 0, None
        if not cur.set_range(_pair(cid, 0)):
            return 0, None
        while True:
            k = cur.key()
            if not k:
                break
            c, s = _unpair(k)
            if c != cid or s > x:
                break
            e = _unu64(cur.value())
            if e > x:
                dropped += x - s + 1
                tail = e
            else:
                dropped += e - s + 1
            if not cur.delete():
                break
        if tail is not None:
            txn.put(_pair(cid, x + 1), _u64(tail), db=self._db)
        return dropped, tail

    def covering(self, txn, cid: int, offset: int):
        """The range containing offset, else the first range after it, else None."""
        cur = self._cursor(txn)
        after = None
        if cur.set_range(_pair(cid, offset)):
            c, s = _unpair(cur.key())
            if c == cid:
                e = _unu64(cur.value())
                if s == offset:
                    return s, e
                after = (s, e)
            has_prev = cur.prev()
        else:
            has_prev = cur.last()
        if has_prev:
            c, s = _unpair(cur.key())
            if c == cid:
                e = _unu64(cur.value())
                if e >= offset:
                    return s, e
        return after

    def contains(self, txn, cid: int, offset: int) -> bool:
        r = self.covering(txn, cid, offset)
        return r is not None and r[0] <= offset <= r[1]

    def iter(self, txn, cid: int, start: int = 0):
        cur = self._cursor(txn)
        if not cur.set_range(_pair(cid, start)):
            return
        for k, v in cur:
            c, s = _unpair(k)
            if c != cid:
                break
            yield s, _unu64(v)

    def clear(self, txn, cid: int) -> None:
        cur = self._cursor(txn)
        if not cur.set_range(_pair(cid, 0)):
            return
        while cur.key() and _unpair(cur.key())[0] == cid:
            if not cur.delete():
                break

    def unacked(self, txn, cid: int, start: int, stop: int):
        """Yield every offset in [start, stop) that is not in the set, in order, skipping whole
        ranges at a time so the cost does not grow with the number of acked offsets."""
        o = start
        while o < stop:
            r = self.covering(txn, cid, o)
            if r is None:
                yield from range(o, stop)
                return
            s, e = r
            if s <= o:
                o = e + 1
                continue
            yield from range(o, min(s, stop))
            o = e + 1
