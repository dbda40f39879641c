"""The picture of a cursor (`topics cursor TOPIC -s SUB`): a window of a subscription's ledger,
each entry in the state the subscription holds it in, read in one read transaction and never
written.

The states, and where each is kept:
- acked: at or below the mark-delete position, or in the individually deleted ranges
  (store/cursor.py, store/ranges.py); a batch entry with some indexes acked shows them
  ("batchack" table, batches.acked_indexes).
- pending: delivered and not acked (the "pending" database, records.Pending): to which
  consumer, since when, with which redelivery count; with an ack timeout its deadline (the
  ack-timeout timer, unacked.py).
- redeliver: to be delivered again. Why, and when:
    nacked        a nack's timer waits (nacks.py; the pending record is marked nacked): due then;
    ackTimeout    the ack-timeout timer is due and has not fired yet (timers fire lazily);
    consumerGone  the consumer it was delivered to is gone (its record is missing, its process
                  dead or its lease over) and nothing has disconnected it yet: due now;
    redelivered   in the replay set (redelivery_state.py) after a nack, an ack timeout or
                  redeliver-unacked fired (it has a redelivery count): goes out on the next fetch;
    returned      in the replay set with no redelivery count: given back by a consumer that
                  went away (Shared), goes out on the next fetch;
  (The replay set keeps only the count to deliver with, not why: "redelivered" and "returned"
  are read from that count and the message history, which also gives a redelivered message's
  cause, "nacked at 10:00:05, nack backoff 4s" or "ack timeout 30s", as "why".)
- delayed: in the delayed index (delayed.py) until its deliver-at time; or, on Shared and
  Key_Shared, past the read position with a deliver-at time still ahead (dispatch will hold it).
- backlog: everything else not acked (not read yet, or read again from a rewound cursor); on
  Key_Shared also a message never delivered that waits in the replay set (keyOrder: read for
  another consumer's key, or behind an older message of its key, until that key's consumer
  fetches; keyUncovered: no consumer's hash range covers its key), which is no redelivery.

Where pulsarctl is deliberately stronger than Pulsar, a row says so (beyond: the notes of
history.py, "beyondPulsar" in JSON): a redelivery count on Exclusive or Failover, a nack timer
the broker keeps, a consumer held by a lease.

Cost O(window), not O(topic): the acked entries before the window are counted, not read; the
window's entries are read with one ledger scan; pending, replay, redelivery and range records
are sought by key from the window's first offset. Timers are keyed by their due time, so a
nacked entry's timer is found by walking the subscription's timers from the earliest time it
can be due (its delivery plus the nack delay) until every nacked entry of the window is found.
View.reads counts what was read, for the tests that hold it to that.
"""
from __future__ import annotations

from typing import NamedTuple

from store import codec, keys
from pulsarctl.broker import batches, consumers, delayed, history, subscriptions as subs, unacked
from pulsarctl.broker.dispatch import key_shared
from pulsarctl.broker.nacks import NACK_PRECISION_BITS, delay_ms
from pulsarctl.broker.partitions import owner_topic
from pulsarctl.broker.records import Pending, Timer
from pulsarctl.broker.targets import subscribed
from pulsarctl.entries import F_DELIVER_AT, F_NUM_MESSAGES
from pulsarctl.errors import InvalidValue, MessageNotFound
from pulsarctl.message_events import ACK_TIMEOUT, CONSUMER_GONE, NACK, NACKED, REDELIVERED
from pulsarctl.messages import MessageId, iso_ms
from pulsarctl.names import topic_name

ACKED, PENDING, REDELIVER, DELAYED, BACKLOG = "acked", "pending", "redeliver", "delayed", "backlog"
STATES = (ACKED, PENDING, REDELIVER, DELAYED, BACKLOG)
# Why a message is to be redelivered, or what its due time is (see the module's docstring):
# nacked, ackTimeout, consumerGone and redelivered are the history's words (message_events.py),
# these are the picture's own.
RETURNED, KEY_ORDER, DELIVER_AT = "returned", "keyOrder", "deliverAt"
KEY_UNCOVERED = "keyUncovered"

DEFAULT_WINDOW = 40
_pair, _unpair, _triple, _untriple = keys.pair, keys.unpack_pair, keys.triple, keys.unpack_triple


class Row(NamedTuple):
    """One entry of the window, or a run of entries in the same state (count > 1): what the
    first of them is held as (the others may differ in since and due)."""
    offset: int                     # the first entry's offset
    count: int
    first_id: MessageId
    last_id: MessageId
    state: str
    consumer: str | None = None     # pending: who holds it; redeliver: who held it
    redelivery_count: int | None = None
    due: int | None = None          # ms: when it is redelivered, delivered, or times out
    reason: str | None = None
    since: int | None = None        # pending: when it was delivered (ms)
    batch_size: int | None = None   # a batch entry: its message count
    batch_acked: tuple = ()         # and the indexes acked so far
    why: str | None = None          # redeliver: the history's reason ("nacked at 10:00:05...")
    beyond: tuple = ()              # where this is pulsarctl's, not Pulsar's (history's notes)

    def to_json(self) -> dict:
        doc = {"messageId": str(self.first_id), "state": self.state, "count": self.count,
               "consumerName": self.consumer, "redeliveryCount": self.redelivery_count,
               "due": iso_ms(self.due)}
        if self.count > 1:
            doc["lastMessageId"] = str(self.last_id)
        if self.reason is not None:
            doc["reason"] = self.reason
        if self.since is not None:
            doc["since"] = iso_ms(self.since)
        if self.batch_size:
            doc["batch"] = {"size": self.batch_size, "acked": list(self.batch_acked)}
        if self.why is not None:
            doc["why"] = self.why
        if self.beyond:
            doc["beyondPulsar"] = "; ".join(self.beyond)
        return doc


class View(NamedTuple):
    """A subscription's cursor over one topic (or partition), around a window of entries."""
    topic: str
    subscription: str
    type: str
    now: int
    mark_delete: int                # offsets
    read_position: int
    mark_delete_position: str       # as pulsar-admin says them (ledger:entry)
    read_position_text: str
    backlog: int
    rows: list                      # [Row], oldest first
    not_drawn_before: int           # entries between the acked prefix and the window
    not_drawn_after: int            # entries after the window
    start: int                      # the window: offsets [start, stop)
    stop: int
    reads: dict                     # what drawing it read: {"entries": n, "timerKeys": n}

    def to_json(self) -> dict:
        return {"topic": self.topic, "subscription": self.subscription, "type": self.type,
                "markDeletePosition": self.mark_delete_position,
                "readPosition": self.read_position_text, "msgBacklog": self.backlog,
                "entries": [r.to_json() for r in self.rows],
                "notDrawnBefore": self.not_drawn_before, "notDrawnAfter": self.not_drawn_after}


class Views(NamedTuple):
    """The picture of a subscription: one View, or one per partition of a partitioned topic."""
    topic: str
    subscription: str
    partitioned: bool
    views: list

    def to_json(self) -> dict:
        """One topic: the View's document. A partitioned topic: {"topic", "subscription",
        "partitions": [the View document of each partition, in partition order]}."""
        if not self.partitioned:
            return self.views[0].to_json()
        return {"topic": self.topic, "subscription": self.subscription,
                "partitions": [v.to_json() for v in self.views]}


def views(ctx, topic, subscription: str, around: MessageId | None = None,
          n: int = DEFAULT_WINDOW) -> Views:
    """The picture of the subscription on topic (each partition of a partitioned topic; with
    around, the partition that message is on). TopicNotFound, SubscriptionNotFound, or
    MessageNotFound for an around that names no message of the topic."""
    if n < 1:
        raise InvalidValue(f"the window must hold at least one entry, not {n}",
                           hint="give -n 1 or more")
    t = topic_name(topic)
    parts = subscribed(ctx, t, subscription)
    partitioned = len(parts) > 1 or (parts[0][0] != t)
    if around is not None and partitioned:
        owner = owner_topic(ctx, around.ledger_id)
        parts = [x for x in parts if str(x[0]) == owner]
        if not parts:
            raise MessageNotFound(f"message {around} not found on {t}",
                                  hint="give a message id of one of its partitions")
    return Views(str(t), subscription, partitioned,
                 [view(ctx, p, info, c, around, n) for p, info, c in parts])


def view(ctx, p, info, c, around: MessageId | None, n: int) -> View:
    first, nxt, md, rp = info.first_offset, info.next_offset, c.mark_delete, c.read_position
    if around is not None:
        centre = subs.offset_of(ctx, info, around)
        start = centre - n // 2
    else:
        # Some acked context before the mark-delete position, then what follows it.
        start = md + 1 - max(1, n // 8)
    start = max(first, min(start, nxt - n))
    stop = min(nxt, start + n)
    part = p.partition_index
    pos = info.position

    def mid(o: int) -> MessageId:
        q = pos(o)
        return MessageId(q.ledger_id, q.entry_id, part)

    rows: list[Row] = []
    acked_prefix = min(start, md + 1) - first
    if acked_prefix > 0:
        rows.append(Row(first, acked_prefix, mid(first), mid(first + acked_prefix - 1), ACKED))
    before = max(0, start - max(first, md + 1))
    reads = {"entries": 0, "timerKeys": 0}
    if start < stop:
        window = _window(ctx, info, c, start, stop, mid, reads)
        if rows and window and window[0].state == ACKED:
            # The acked context at the window's start continues the acked prefix: one run.
            rows[0] = rows[0]._replace(count=rows[0].count + window[0].count,
                                       last_id=window[0].last_id)
            window = window[1:]
        rows.extend(window)
    typ = subs.shown_type(c)
    return View(str(p), c.name, typ, ctx.now, md, rp, str(info.mark_position(md)),
                str(pos(rp)), c.backlog(nxt), rows, before, max(0, nxt - max(stop, first)),
                start, stop, reads)


# -- the window ------------------------------------------------------------------------------
def _window(ctx, info, c, start: int, stop: int, mid, reads: dict) -> list[Row]:
    txn, cid, now, md, rp = ctx.txn, c.id, ctx.now, c.mark_delete, c.read_position
    typ = subs.type_of(c)
    s = subs.state(c)
    policy = s.policy
    acked = _acked_ranges(ctx, c, start, stop)
    pending = {o: Pending.from_stored(v) for o, v in _keyed(ctx, "pending", cid, start, stop)}
    replay = dict(_keyed(ctx, "replay", cid, start, stop))
    counts = dict(_keyed(ctx, "redelivery", cid, start, stop))
    recs = consumers.records(ctx, c)
    live = {r.name for r in recs if consumers.alive(ctx, r)}
    leased = {r.name for r in recs if not r.pid}   # held by a lease alone: pulsarctl's
    single = typ in subs.SINGLE_ACTIVE
    keys_of = key_shared.selector_of(c) if typ == subs.KEY_SHARED else None
    nack_due = _nack_timers(ctx, c, policy, {o: r for o, r in pending.items() if r.nacked},
                            reads)
    ddb = ctx.env.db["delayed"]
    tdb = ctx.env.db["timers"]
    hold_past = delayed.cutoff(ctx, info.name) if typ not in subs.SINGLE_ACTIVE else None
    batch_acks = s.batch_acks

    out: list[Row] = []
    for o, _lid, _eid, raw in ctx.ledgers.scan(txn, info, start, stop):
        reads["entries"] += 1
        rec = codec.decode(raw)
        size = rec[F_NUM_MESSAGES] if len(rec) > F_NUM_MESSAGES and rec[F_NUM_MESSAGES] else None
        deliver_at = rec[F_DELIVER_AT] if len(rec) > F_DELIVER_AT else 0
        idx = tuple(sorted(batches.acked_indexes(ctx, c, o))) if size and batch_acks else ()
        rc = counts.get(o, 0)
        prec = pending.get(o)
        told = None
        if o <= md or _in(acked, o):
            row = (ACKED,)
        elif prec is not None:
            row = _pending_state(ctx, c, o, prec, policy, live, nack_due, tdb)
        elif o in replay and not replay[o] and typ == subs.KEY_SHARED \
                and history.last(ctx, info.ml_id, o, history.DELIVERED, c.name) is None:
            # Never delivered: it waits for its key's consumer, it is not coming back.
            uncovered = keys_of is not None and keys_of[0].select(
                key_shared.slot(keys_of[1], rec)) is None
            row = (BACKLOG, None, None, None, KEY_UNCOVERED if uncovered else KEY_ORDER)
        elif o in replay:
            again = replay[o]
            row = (REDELIVER, None, again, now, REDELIVERED if again else RETURNED)
            # The replay set keeps no reason; the message history does (history.py).
            told = history.why_redelivered(ctx, info.ml_id, o, c.name) if again else None
        elif deliver_at and txn.get(_triple(cid, deliver_at, o), db=ddb) is not None:
            row = (DELAYED, None, rc, deliver_at, DELIVER_AT)
        elif (deliver_at and hold_past is not None and o >= rp and deliver_at > hold_past):
            row = (DELAYED, None, rc, deliver_at, DELIVER_AT)
        else:
            row = (BACKLOG,)
        state, consumer, count, due, reason, since = (*row, None, None, None, None, None)[:6]
        if state != ACKED and state != BACKLOG and count is None:
            count = rc
        beyond = ()
        if state in (PENDING, REDELIVER):
            beyond = tuple(n for n, on in (
                (history.COUNT_NOTE, single and bool(count)),
                (history.NACK_NOTE, reason == NACKED),
                (history.LEASE_NOTE, consumer in leased and (state == PENDING
                                                              or reason == CONSUMER_GONE))) if on)
        this = Row(o, 1, mid(o), mid(o), state, consumer, count, due, reason, since, size, idx,
                   told, beyond)
        prev = out[-1] if out else None
        if prev is not None and _folds(prev, this, rp):
            out[-1] = prev._replace(count=prev.count + 1, last_id=this.last_id)
        else:
            out.append(this)
    return out


def _pending_state(ctx, c, o: int, prec: Pending, policy: dict, live: set, nack_due: dict,
                   tdb) -> tuple:
    """(state, consumer, redelivery count, due, reason, since) of a delivered message."""
    now, who, rc, at = ctx.now, prec.consumer, prec.redelivery_count, prec.delivered_at
    if prec.nacked:
        return REDELIVER, who, rc, nack_due.get(o), NACKED, at
    if who not in live:
        return REDELIVER, who, rc, now, CONSUMER_GONE, at
    deadline = unacked.due(policy, at, rc) if at is not None else None
    if deadline is not None:
        raw = ctx.txn.get(_triple(c.id, max(0, deadline), o), db=tdb)
        timer = Timer.from_stored(codec.decode(raw)) if raw is not None else None
        if timer is not None and timer.kind == ACK_TIMEOUT and unacked.applies(timer, prec):
            if deadline <= now:
                return REDELIVER, who, rc, deadline, ACK_TIMEOUT, at
            return PENDING, who, rc, deadline, ACK_TIMEOUT, at
    return PENDING, who, rc, None, None, at


def _folds(prev: Row, this: Row, rp: int) -> bool:
    """Whether this entry continues prev's run: the same state for the same consumer, count and
    reason, on the same side of the read position, neither one a batch with acked indexes."""
    return (prev.state == this.state and prev.consumer == this.consumer
            and prev.redelivery_count == this.redelivery_count and prev.reason == this.reason
            and (prev.offset >= rp) == (this.offset >= rp)
            and not prev.batch_acked and not this.batch_acked
            and prev.batch_size == this.batch_size and prev.beyond == this.beyond
            and prev.offset + prev.count == this.offset)


def _keyed(ctx, dbname: str, cid: int, start: int, stop: int):
    """(offset, decoded value) of a database keyed (cursor id, offset), for offsets in
    [start, stop): sought, not scanned."""
    cur = ctx.env.cursor(ctx.txn, dbname)
    if not cur.set_range(_pair(cid, start)):
        return
    for k, v in cur:
        c, o = _unpair(k)
        if c != cid or o >= stop:
            break
        yield o, codec.decode(v)


def _acked_ranges(ctx, c, start: int, stop: int) -> list[tuple[int, int]]:
    """The individually deleted ranges that meet [start, stop)."""
    ranges = ctx.cursors.ranges
    first = ranges.covering(ctx.txn, c.id, start)
    if first is None:
        return []
    out = []
    for s, e in ranges.iter(ctx.txn, c.id, first[0]):
        if s >= stop:
            break
        out.append((s, e))
    return out


def _in(ranges: list, o: int) -> bool:
    return any(s <= o <= e for s, e in ranges)


def _nack_timers(ctx, c, policy: dict, nacked: dict, reads: dict) -> dict:
    """offset -> when its nack timer is due, for the nacked messages given ({offset: Pending}).
    Timers lie in due order: the walk starts at the earliest any of them can be due (delivered,
    then nacked at once: delivery + nack delay, in the tracker's 256 ms buckets) and stops when
    each is found; what a changed nack delay hides is looked for from the start."""
    if not nacked:
        return {}
    mask = ~((1 << NACK_PRECISION_BITS) - 1)
    earliest = min(((r.delivered_at or 0) + delay_ms(policy, r.redelivery_count)) & mask
                   for r in nacked.values())
    found: dict = {}
    for lo, hi in ((max(0, earliest), None), (0, earliest)):
        _walk_timers(ctx, c.id, lo, hi, nacked, found, reads)
        if len(found) == len(nacked):
            break
    return found


def _walk_timers(ctx, cid: int, lo: int, hi: int | None, nacked: dict, found: dict,
                 reads: dict) -> None:
    cur = ctx.txn.cursor(db=ctx.env.db["timers"])
    if not cur.set_range(_triple(cid, lo, 0)):
        return
    prefix = keys.u64(cid)
    while len(found) < len(nacked):
        k = cur.key()
        if not k or not k.startswith(prefix):
            return
        reads["timerKeys"] += 1
        _c, due, o = _untriple(k)
        if hi is not None and due >= hi:
            return
        rec = nacked.get(o)
        if rec is not None and o not in found:
            timer = Timer.from_stored(codec.decode(cur.value()))
            if timer.kind == NACK and timer.same_delivery(rec):
                found[o] = due
        if not cur.next():
            return
