"""`topics cursor` of a remote subscription: the same picture (broker/cursor_view.py's View)
drawn from what a remote Pulsar says about a cursor in its internal stats: the ledgers and
their entry counts (so each entry has an offset), the mark-delete position, the individually
deleted ranges, the read position; and from its stats the subscription's type and backlog.

What the picture says remotely, entry by entry: acked (at or before the mark-delete position,
or in an individually deleted range), pending (after the mark-delete position and before the
read position, not acked: delivered to some consumer, which one and since when Pulsar's stats
do not say), or backlog (from the read position on). What cannot be known remotely is left
unknown, never guessed: the consumer of a pending entry and its delivery time, redelivery
(nacks, ack timeouts, their due times), delayed delivery, a batch's acked indexes."""
from __future__ import annotations

import re

from pulsarctl.clock import wall_ms
from pulsarctl.errors import InvalidValue, MessageNotFound, SubscriptionNotFound
from pulsarctl.messages import MessageId, parse_message_id
from pulsarctl.names import parse_topic

DEFAULT_WINDOW = 40
ACKED, PENDING, BACKLOG = "acked", "pending", "backlog"
_RANGE = re.compile(r"[\(\[](-?\d+):(-?\d+)\.\.(-?\d+):(-?\d+)[\]\)]")
UNKNOWN = "not known remotely"


class _Ledgers:
    """Entry offsets of a managed ledger as internal stats list it: the ledgers in order, each
    entry numbered from 0 across them (the first listed ledger's first entry is offset 0)."""

    def __init__(self, internal: dict):
        self.base: dict[int, int] = {}
        self.order: list[tuple[int, int]] = []
        last_l, _, last_e = (internal.get("lastConfirmedEntry") or "-1:-1").partition(":")
        last_l, last_e = int(last_l), int(last_e)
        n = 0
        for led in internal.get("ledgers") or []:
            lid, entries = int(led["ledgerId"]), int(led.get("entries") or 0)
            if lid == last_l:
                # the ledger being written says 0 entries until it is closed
                entries = max(entries, last_e + 1)
            self.base[lid] = n
            self.order.append((lid, entries))
            n += entries
        self.next = n

    def offset(self, lid: int, eid: int) -> int:
        """The offset of ledger:entry (entry -1: just before the ledger's first)."""
        if lid in self.base:
            return self.base[lid] + eid
        if self.order and lid > self.order[-1][0]:
            return self.next + eid  # a ledger not written yet: the read position past the end
        return -1

    def position(self, o: int) -> tuple[int, int]:
        for lid, entries in self.order:
            base = self.base[lid]
            if base <= o < base + entries:
                return lid, o - base
        if self.order:
            lid, entries = self.order[-1]
            return lid, o - self.base[lid]
        return -1, o


def _pos(text: str | None) -> tuple[int, int]:
    lid, _, eid = (text or "-1:-1").partition(":")
    return int(lid), int(eid)


def acked_ranges(text: str | None, ledgers: _Ledgers) -> list[tuple[int, int]]:
    """individuallyDeletedMessages "[(3:1..3:4], (3:6..3:7]]" as offset ranges (lo, hi]."""
    return [(ledgers.offset(int(a), int(b)), ledgers.offset(int(c), int(d)))
            for a, b, c, d in _RANGE.findall(text or "")]


def _view(remote, topic: str, sub: str, around, n: int):
    # lazy: the picture's records are the local ones
    from pulsarctl.broker.cursor_view import Row, View

    internal = remote.topics.internal_stats(topic) or {}
    cur = (internal.get("cursors") or {}).get(sub)
    if cur is None:
        raise SubscriptionNotFound(f"subscription '{sub}' not found on {topic}",
                                   hint=f"list them with `pulsarctl topics subscriptions {topic}`")
    stats = ((remote.topics.stats(topic) or {}).get("subscriptions") or {}).get(sub) or {}
    led = _Ledgers(internal)
    first, nxt = 0, led.next
    md = led.offset(*_pos(cur.get("markDeletePosition")))
    rp = led.offset(*_pos(cur.get("readPosition")))
    ranges = acked_ranges(cur.get("individuallyDeletedMessages"), led)
    part = parse_topic(topic).partition_index
    if around is not None:
        centre = led.offset(around.ledger_id, around.entry_id)
        if not first <= centre < nxt:
            raise MessageNotFound(f"message {around} not found on {topic}")
        start = centre - n // 2
    else:
        start = md + 1 - max(1, n // 8)
    start = max(first, min(start, nxt - n))
    stop = min(nxt, start + n)

    def mid(o: int) -> MessageId:
        lid, eid = led.position(o)
        return MessageId(lid, eid, part)

    def state(o: int) -> str:
        if o <= md or any(lo < o <= hi for lo, hi in ranges):
            return ACKED
        return PENDING if o < rp else BACKLOG

    rows: list = []
    prefix = min(start, md + 1) - first
    if prefix > 0:
        rows.append(Row(first, prefix, mid(first), mid(first + prefix - 1), ACKED))
    for o in range(start, stop):
        s = state(o)
        last = rows[-1] if rows else None
        if last is not None and last.state == s and last.offset + last.count == o and \
                (last.offset >= rp) == (o >= rp):
            rows[-1] = last._replace(count=last.count + 1, last_id=mid(o))
        else:
            rows.append(Row(o, 1, mid(o), mid(o), s,
                            reason=UNKNOWN if s == PENDING else None))
    return View(topic, sub, stats.get("type") or "?", wall_ms(), md, rp,
                cur.get("markDeletePosition") or "-1:-1", cur.get("readPosition") or "-1:-1",
                int(stats.get("msgBacklog") or 0), rows, max(0, start - max(first, md + 1)),
                max(0, nxt - max(stop, first)), start, stop, {"entries": 0, "timerKeys": 0})


def cursor_view(remote, topic, sub: str, around=None, n: int = DEFAULT_WINDOW):
    """The Views of a remote subscription (each partition of a partitioned topic; with around,
    the partition it names)."""
    # lazy: the picture's records are the local ones
    from pulsarctl.broker.cursor_view import Views

    if n < 1:
        raise InvalidValue(f"the window must hold at least one entry, not {n}",
                           hint="give -n 1 or more")
    if isinstance(around, str):
        around = parse_message_id(around)
    name = str(parse_topic(str(topic)))
    parts = remote.topics.partition_names(name)
    partitioned = parts != [name]
    if around is not None and partitioned:
        parts = [p for p in parts if parse_topic(p).partition_index == around.partition]
        if not parts:
            raise MessageNotFound(f"message {around} not found on {name}",
                                  hint="give a message id with its partition (ledger:entry:N)")
    return Views(name, sub, partitioned, [_view(remote, p, sub, around, n) for p in parts])
