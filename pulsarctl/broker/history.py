"""The message history behind `explain` and `--explain`: a durable log of what happened to each
entry, written in the same transaction as the change it records.

Pulsar keeps no such log (its brokers answer "why was this redelivered?" with a count at best);
here every state change is a transaction in one store, so each can leave a line. An event is
one record of the "history" database keyed (managed-ledger id, offset, sequence) (store/keys.py
triple), so a message's life is one prefix scan and forgetting a trimmed ledger's history is a
range delete. The sequence is the store's history counter (taken once per transaction, in meta)
shifted left 24 bits, plus the event's index in the transaction: events sort in the order they
happened even when the simulated clock stands still.

The value (through the codec) is an Event (history_event.py: kind, at, subscription, consumer,
redelivery count, extra, stored as a list): extra is a small dict of what that event needs
(producer and sequence id, the delay, where a dead letter went...). A batch entry is one
entry: its events are the entry's, with the batch indexes where they matter.

Kept for messageHistoryRetention (or the topic's retention time, whichever is longer) after
the entries themselves are trimmed (trim); `messageHistoryEnabled false` stops the recording.

Besides what happened, two kinds of event say why nothing did (held, refused: see "why nothing
happened" below), and an event that shows pulsarctl doing more than Pulsar (a count on
Exclusive, a nack timer the broker keeps, a lease) carries a note saying so (BEYOND). A dead
letter or retry copy a client made is linked to its original by letter_links.py; explain.py
reads a message's life back.

--explain: with watch() on (the CLI's global flag), each write transaction's events are also
kept in memory and handed to the caller after it commits (Broker._write calls committed())."""
from __future__ import annotations

import bisect

from store import codec, keys
from pulsarctl import timetext
from pulsarctl.broker.history_event import Event
from pulsarctl.broker.subscription_state import SINGLE_ACTIVE, single_active, type_of  # noqa: F401
# The kinds of event, by the one vocabulary's names (history.ACKED... for the writers).
from pulsarctl.message_events import (  # noqa: F401
    ACK_TIMEOUT, ACKED, CLEARED, CONSUMER_GONE, DEAD_LETTERED, DELAYED, DELIVERED, EVENTS, EXPIRED,
    HELD, NACKED, PUBLISHED, REDELIVERED, REFUSED, RETRIED, SKIPPED,
)
from pulsarctl.entries import F_DELIVER_AT, F_PRODUCER_NAME, F_PUBLISH_TIME, F_SEQUENCE_ID
from pulsarctl.units import parse_duration_ms

# Where pulsarctl is deliberately stronger than Pulsar, the event says so in its extra under
# BEYOND (explain's JSON field; its text adds "(pulsarctl: ...)"), so a learner never takes
# pulsarctl's behaviour for Pulsar's.
BEYOND = "beyondPulsar"
COUNT_NOTE = "Pulsar keeps no count on Exclusive and Failover subscriptions"
DLQ_NOTE = "Pulsar dead-letters only on Shared and Key_Shared subscriptions"
NACK_NOTE = "the broker keeps this nack timer; Pulsar's lives in the client"
LEASE_NOTE = "a consumer held by a lease; Pulsar's lives by its connection"
_SINGLE_ACTIVE = SINGLE_ACTIVE

_DB = "history"
_SEQ = b"history_seq"  # meta: the next transaction's sequence base
_SHIFT = 24
_triple, _untriple, _u64 = keys.triple, keys.unpack_triple, keys.u64

_encode, _decode = codec.encode, codec.decode

# --explain: the events of committed write transactions of this process, when watched.
_WATCH: list | None = None


def watch() -> None:
    """Keep the events every write transaction of this process records from now on."""
    global _WATCH
    _WATCH = []


def watched() -> list:
    """The events kept since watch(), as explain_line takes them; [] when not watching."""
    return list(_WATCH or ())


def committed(events: list | None) -> None:
    """Broker._write, after its transaction committed: its events are now true."""
    if _WATCH is not None and events:
        _WATCH.extend(events)


# -- recording ------------------------------------------------------------------------------------
def on(ctx) -> bool:
    """Whether this transaction records history (the store setting, read once per transaction;
    the non-persistent store keeps none: its messages do not outlive the process tree)."""
    v = ctx.history
    if v is None:
        v = ctx.history = bool(ctx.write and _DB in ctx.env.db and not ctx.broker.non_persistent
                               and ctx.setting("messageHistoryEnabled"))
    return v


def _next_seq(ctx) -> int:
    n = ctx.hseq
    if n is None:
        meta = ctx.env.db["meta"]
        raw = ctx.txn.get(_SEQ, db=meta)
        base = 1 if raw is None else keys.unpack_u64(raw)
        ctx.txn.put(_SEQ, _u64(base + 1), db=meta)
        n = base << _SHIFT
    ctx.hseq = n + 1
    return n


def record(ctx, info, offset: int, event: str, sub: str | None = None,
           consumer: str | None = None, rc: int | None = None, **extra) -> None:
    """Record one event of the entry at offset of info's managed ledger, now."""
    if not on(ctx):
        return
    value = Event(event, ctx.now, sub, consumer, rc, extra or None)
    ctx.txn.put(_triple(info.ml_id, offset, _next_seq(ctx)), _encode(value.to_stored()),
                db=ctx.env.db[_DB])
    if _WATCH is not None:
        _keep(ctx, info, offset, value)


def record_many(ctx, info, offsets, event: str, sub: str | None = None,
                consumer: str | None = None, rc: int | None = None, **extra) -> None:
    """The same event for many entries: span records (see _put_spans), the value encoded
    once per span."""
    if not offsets or not on(ctx):
        return
    value = Event(event, ctx.now, sub, consumer, rc, extra or None)
    _put_spans(ctx, info, offsets, value)
    if _WATCH is not None:
        for o in offsets:
            _keep(ctx, info, o, value)


# Span events: an event that one call records for many entries near each other (a fetch's
# deliveries, an ack of many ids, a consumer leaving) is one record per span of at most
# MAX_SPAN offsets, keyed (managed-ledger id with bit 62 set, lowest offset, sequence), its
# value the event's with the offsets appended ([first, last] when they run on by one). A put
# per entry and per event cost an unbatched consume 15%; a span costs one. explain finds the
# spans over an entry in the keys from its offset less MAX_SPAN up to it: a bounded scan.
_SPANS = 1 << 62
MAX_SPAN = 1024


def _put_spans(ctx, info, offsets, value: Event) -> None:
    ml = info.ml_id | _SPANS
    lo, hi = min(offsets), max(offsets)
    if hi - lo < MAX_SPAN:   # a fetch's or an ack's: one span (every step here runs in C)
        rows = [(lo, offsets, hi)]
    else:
        ordered = sorted(offsets)
        rows, start = [], 0
        while start < len(ordered):
            stop = bisect.bisect_left(ordered, ordered[start] + MAX_SPAN, start)
            rows.append((ordered[start], ordered[start:stop], ordered[stop - 1]))
            start = stop
    base = _next_seq(ctx)
    ctx.hseq = base + len(rows) + 1
    out = []
    stored = value.to_stored()
    for i, (low, chunk, high) in enumerate(rows):
        # [first, last] when the offsets are every one between (in any order).
        runs_on = high - low == len(chunk) - 1 and len(set(chunk)) == len(chunk)
        out.append((_triple(ml, low, base + i),
                    _encode(stored + [[low, high] if runs_on else list(chunk)])))
    ctx.txn.cursor(db=ctx.env.db[_DB]).putmulti(out)


def _in_span(offsets: list, offset: int) -> bool:
    if len(offsets) == 2 and offsets[1] - offsets[0] > 1:
        return offsets[0] <= offset <= offsets[1]
    return offset in offsets or (len(offsets) == 2 and offsets[0] <= offset <= offsets[1])


def _spans_over(ctx, ml_id: int, offset: int) -> list[tuple]:
    """(sequence, Event) of the span events over offset."""
    out = []
    ml = ml_id | _SPANS
    end = _triple(ml, offset + 1, 0)
    for k, v in ctx.env.scan(ctx.txn, _DB, _u64(ml),
                             _triple(ml, max(0, offset - MAX_SPAN + 1), 0)):
        if k >= end:
            break
        e = Event.from_stored(v)
        if e.span is not None and _in_span(e.span, offset):
            out.append((_untriple(k)[2], e.without_span()))
    return out


# Range events: what moves a cursor over many entries at once (skip, clear-backlog, TTL expiry,
# a cumulative ack) is one record for the range, not one per entry (clear-backlog stays O(1), as
# Pulsar's is), keyed (managed-ledger id with the top bit set, last offset, sequence) so the
# ranges of a topic are one prefix and they trim by their last offset like the entries' events.
_RANGES = 1 << 63


def record_range(ctx, info, first: int, last: int, event: str, sub: str, **extra) -> None:
    """Record one event for every entry from offset first to last (inclusive), now."""
    if last < first or not on(ctx):
        return
    value = Event(event, ctx.now, sub, None, None, {"fromOffset": first, "toOffset": last,
                                                    **extra})
    ctx.txn.put(_triple(info.ml_id | _RANGES, last, _next_seq(ctx)), _encode(value.to_stored()),
                db=ctx.env.db[_DB])
    if _WATCH is not None:
        if ctx.events is None:
            ctx.events = []
        lo, hi = info.position(first), info.position(last)
        what = f"{lo.ledger_id}:{lo.entry_id}" if first == last else \
            f"{lo.ledger_id}:{lo.entry_id}..{hi.ledger_id}:{hi.entry_id}"
        ctx.events.append((info.name, what, value))


def _ranges_over(ctx, ml_id: int, offset: int) -> list[tuple]:
    """(sequence, Event) of the range events whose range holds offset."""
    out = []
    for k, v in ctx.env.scan(ctx.txn, _DB, _u64(ml_id | _RANGES), _triple(ml_id | _RANGES,
                                                                            offset, 0)):
        e = Event.from_stored(v)
        if e.detail.get("fromOffset", offset + 1) <= offset:
            out.append((_untriple(k)[2], e))
    return out


def published(ctx, info, first_offset: int, n: int, producer: str, seqs, origin=None,
              deliver_at=None, origins=None) -> None:
    """published (and delayed) events for n entries just appended from first_offset. A plain
    publish stores none: the entry itself holds them (publish time, producer, sequence id,
    delivery time), explain reads them there (entry_events), and keep_published stores them
    before the entry is trimmed; a put per entry would cost an unbatched produce 40%. A dead
    letter or retry copy stores its published event, which names the original: origin, the
    (topic, message id) a broker move's copies came from; origins, per entry, that of a copy a
    client made (letter_links.py) or None. --explain sees them all. seqs: each entry's sequence
    id; deliver_at: each entry's delivery time (0: none)."""
    if not on(ctx) or (origin is None and origins is None and _WATCH is None):
        return
    db, ml, put, now = ctx.env.db[_DB], info.ml_id, ctx.txn.put, ctx.now
    base = _next_seq(ctx)
    ctx.hseq = base + 2 * n + 1
    for i in range(n):
        came = origin if origins is None else origins[i]
        extra = {"producer": producer, "sequenceId": seqs[i]}
        if came is not None:
            extra.update(fromTopic=came[0], fromMessageId=came[1])
        value = Event(PUBLISHED, now, None, None, None, extra)
        if came is not None:
            put(_triple(ml, first_offset + i, base + 2 * i), _encode(value.to_stored()), db=db)
        if _WATCH is not None:
            _keep(ctx, info, first_offset + i, value)
        if deliver_at and deliver_at[i]:
            value = Event(DELAYED, now, None, None, None, {"until": deliver_at[i]})
            if came is not None:
                put(_triple(ml, first_offset + i, base + 2 * i + 1), _encode(value.to_stored()),
                    db=db)
            if _WATCH is not None:
                _keep(ctx, info, first_offset + i, value)


def wants_published(ctx) -> bool:
    """Whether published() would do anything: a copy's publish, or --explain watching."""
    return (ctx.origin is not None or _WATCH is not None) and on(ctx)


def entry_events(ctx, info, offset: int) -> list[Event]:
    """The published (and delayed) events of a stored entry, read from the entry: a plain
    publish stores none (see published). [] when the entry is gone."""
    if not info.contains(offset):
        return []
    try:
        rec = _decode(ctx.ledgers.read(ctx.txn, info, offset))
    except Exception:  # offloaded or unreadable: the stored events are all there is
        return []
    out = [Event(PUBLISHED, rec[F_PUBLISH_TIME], None, None, None,
                 {"producer": rec[F_PRODUCER_NAME], "sequenceId": rec[F_SEQUENCE_ID]})]
    if len(rec) > F_DELIVER_AT and rec[F_DELIVER_AT]:
        out.append(Event(DELAYED, rec[F_PUBLISH_TIME], None, None, None,
                         {"until": rec[F_DELIVER_AT]}))
    return out


def keep_published(ctx, info, below: int) -> None:
    """Before the entries under offset below are trimmed: the published (and delayed) events
    of each that has a history are stored from the entry, with sequence 0 (so they sort
    first), as explain can no longer read them there. Entries nothing happened to keep none."""
    if not on(ctx) or below <= info.first_offset:
        return
    db, ml = ctx.env.db[_DB], info.ml_id
    cur = ctx.txn.cursor(db=db)
    if not cur.set_range(_triple(ml, info.first_offset, 0)):
        return
    end = _triple(ml, below, 0)
    todo, seen = [], None
    for k, raw in cur:
        if k >= end:
            break
        _ml, o, _seq = _untriple(k)
        if o != seen:
            seen = o
            if Event.from_stored(_decode(raw)).kind != PUBLISHED:
                todo.append(o)
    # Entries whose only events are in spans (delivered and acked, say) have a history too.
    spanned: set = set()
    for _k, v in ctx.env.scan(ctx.txn, _DB, _u64(ml | _SPANS),
                              _triple(ml | _SPANS, max(0, info.first_offset - MAX_SPAN + 1), 0)):
        offs = Event.from_stored(v).span or []
        if len(offs) == 2 and offs[1] - offs[0] > 1:
            offs = range(offs[0], offs[1] + 1)
        lowest = min(offs) if offs else below
        if lowest >= below:
            break
        spanned.update(o for o in offs if info.first_offset <= o < below)
    has_own = set(todo) | {o for o in spanned if _own_first(ctx, ml, o) == PUBLISHED}
    todo = sorted(set(todo) | (spanned - has_own))
    put = ctx.txn.put
    for o in todo:
        for i, value in enumerate(entry_events(ctx, info, o)):
            put(_triple(ml, o, i), _encode(value.to_stored()), db=db)


def _own_first(ctx, ml: int, o: int):
    """The kind of the first stored event of the entry's own (None: it has none)."""
    cur = ctx.txn.cursor(db=ctx.env.db[_DB])
    if cur.set_range(keys.pair(ml, o)) and cur.key().startswith(keys.pair(ml, o)):
        return Event.from_stored(_decode(cur.value())).kind
    return None


def with_entry(ctx, info, offset: int, values: list) -> list:
    """values, led by the entry's own published events when none is stored (and the history
    is on: off, explain shows what was recorded, nothing)."""
    if values and values[0].kind == PUBLISHED or not ctx.setting("messageHistoryEnabled"):
        return values
    return entry_events(ctx, info, offset) + values


def _keep(ctx, info, offset: int, value: Event) -> None:
    if ctx.events is None:
        ctx.events = []
    pos = info.position(offset)
    ctx.events.append((info.name, f"{pos.ledger_id}:{pos.entry_id}", value))


# -- reading ------------------------------------------------------------------------------------
def events_of(ctx, ml_id: int, offset: int) -> list[Event]:
    """The stored events of one entry, oldest first: its own and the range
    events over it (a range event of a subscription that had acked the entry before is not
    the entry's: it had nothing left to pass)."""
    if _DB not in ctx.env.db:
        return []
    prefix = keys.pair(ml_id, offset)
    own = [(_untriple(k)[2], Event.from_stored(v))
           for k, v in ctx.env.scan(ctx.txn, _DB, prefix)]
    spans = _spans_over(ctx, ml_id, offset)
    if spans:
        own = sorted(own + spans, key=lambda sv: sv[0])
    ranges = _ranges_over(ctx, ml_id, offset)
    if not ranges:
        return [v for _seq, v in own]
    done: dict = {}   # subscription -> sequence of its first ack of the entry
    for seq, e in own:
        if e.kind == ACKED and e.subscription not in done:
            done[e.subscription] = seq
    both = own + [(seq, e) for seq, e in ranges
                  if not (e.subscription in done and done[e.subscription] < seq)]
    both.sort(key=lambda sv: sv[0])
    return [v for _seq, v in both]


def last(ctx, ml_id: int, offset: int, event: str, sub: str | None = None):
    """The newest stored event of that kind of one entry (of subscription sub), or None."""
    for e in reversed(events_of(ctx, ml_id, offset)):
        if e.kind == event and (sub is None or e.subscription == sub):
            return e
    return None


def why_redelivered(ctx, ml_id: int, offset: int, sub: str) -> str | None:
    """The reason of the newest redelivery of the entry on subscription sub ("nacked at
    10:00:05, nack backoff 4s", "ack timeout 30s", "consumer c1 gone"), from its own events
    only (a redelivery is always one): what the cursor picture shows of a message waiting in
    the replay set. None when the history has none."""
    if _DB not in ctx.env.db:
        return None
    found = None
    for _k, v in ctx.env.scan(ctx.txn, _DB, keys.pair(ml_id, offset)):
        e = Event.from_stored(v)
        if e.kind == REDELIVERED and e.subscription == sub and e.extra:
            found = e.reason
    return found


def as_doc(value: Event, sub_filter: str | None = None) -> dict | None:
    """One event as explain's JSON object (None when it is another subscription's)."""
    event, at, sub, consumer, rc, extra, _span = Event.from_stored(value)
    if sub_filter is not None and sub is not None and sub != sub_filter:
        return None
    doc = {"at": at, "event": event, "subscription": sub, "consumerName": consumer,
           "redeliveryCount": rc, "reason": (extra or {}).get("reason")}
    for k, v in (extra or {}).items():
        if k != "reason":
            doc[k] = v
    return doc


# -- forgetting -----------------------------------------------------------------------------------
DEFAULT_RETENTION = "7d"


def retention_ms(ctx, topic_minutes: int | None) -> int | None:
    """How long a trimmed entry's history is kept: messageHistoryRetention or the topic's
    retention time, whichever is longer; None: for ever (a retention of -1)."""
    own = parse_duration_ms(str(ctx.setting("messageHistoryRetention")), "messageHistoryRetention")
    if topic_minutes is not None and topic_minutes < 0:
        return None
    return max(own, (topic_minutes or 0) * 60_000)


def trim(ctx, info, keep_ms: int | None) -> int:
    """Forget the history of entries trimmed from the ledgers (offsets below first_offset)
    once it is older than keep_ms: a range delete from the lowest offset up, stopping at the
    first entry published within keep_ms (offsets are in publish order). Returns how many
    events went."""
    if keep_ms is None or _DB not in ctx.env.db:
        return 0
    cutoff = ctx.now - keep_ms
    return _trim(ctx, info.ml_id, info.first_offset, cutoff) + \
        _trim(ctx, info.ml_id | _RANGES, info.first_offset, cutoff) + \
        _trim(ctx, info.ml_id | _SPANS, info.first_offset - MAX_SPAN, cutoff)


def _trim(ctx, ml: int, first_offset: int, cutoff: int) -> int:
    cur = ctx.txn.cursor(db=ctx.env.db[_DB])
    if not cur.set_range(_u64(ml)):
        return 0
    end, n = keys.u64_prefix_end(ml), 0
    offset, young = None, False
    while True:
        k = cur.key()
        if not k or k >= end:
            break
        _ml, o, _seq = _untriple(k)
        if o >= first_offset:
            break
        if o != offset:
            offset = o
            # its first event: when it was published
            young = Event.from_stored(_decode(cur.value())).at > cutoff
            if young:
                break
        if not cur.delete():
            break
        n += 1
    return n


def forget(ctx, ml_id: int) -> None:
    """A deleted topic partition's history goes with it."""
    if _DB in ctx.env.db:
        ctx.env.delete_prefix(ctx.txn, _DB, _u64(ml_id))
        ctx.env.delete_prefix(ctx.txn, _DB, _u64(ml_id | _RANGES))
        ctx.env.delete_prefix(ctx.txn, _DB, _u64(ml_id | _SPANS))


def delivered(ctx, info, c, consumer: str, pairs) -> None:
    """delivered events for (offset, redelivery count) pairs just handed to consumer. A
    redelivery carries its reason, the newest `redelivered` event of the subscription (read
    only for redeliveries); the first deliveries share one encoded value."""
    if not pairs or not on(ctx):
        return
    typ = type_of(c)
    first = Event(DELIVERED, ctx.now, c.name, consumer, 0, {"type": typ})
    ml = info.ml_id
    fresh = []
    for o, rc in pairs:
        value = first
        if rc:
            # A redelivery: its own record, with the reason it came back.
            extra = {"type": typ}
            why = last(ctx, ml, o, REDELIVERED, c.name)
            if why is not None and why.extra:
                extra["reason"] = why.reason
            if typ in _SINGLE_ACTIVE:
                extra[BEYOND] = COUNT_NOTE
            value = Event(DELIVERED, ctx.now, c.name, consumer, rc, extra)
            ctx.txn.put(_triple(ml, o, _next_seq(ctx)), _encode(value.to_stored()),
                        db=ctx.env.db[_DB])
        else:
            fresh.append(o)
        if _WATCH is not None:
            _keep(ctx, info, o, value)
    if fresh:
        _put_spans(ctx, info, fresh, first)


# How a reason names a time (10:00:05, 09:00:09.856) and a delay (4s, 4.864s): the one rule of
# pulsarctl/timetext.py, as the cursor picture and top name them.
clock_text, duration_text = timetext.clock_text, timetext.duration_text


def nack_reason(ctx, ml_id: int, offset: int, sub: str) -> str:
    """Why a nacked message came back: when it was nacked and the delay it waited."""
    v = last(ctx, ml_id, offset, NACKED, sub)
    if v is None:
        return "nacked"
    delay = v.detail.get("delay")
    return f"nacked at {clock_text(v.at)}" + (f", nack backoff {duration_text(delay)}"
                                              if delay is not None else "")


# -- why nothing happened -------------------------------------------------------------------------
# A dispatch that passes a message over, or a subscription that turns a consumer away, leaves
# one event, so that `explain` can answer "why did nobody get it?". Each is recorded once per
# cause and message (or per consumer) until the cause changes, never once per fetch: a consumer
# polls many times a second, and a history that grew with every poll would bury the message's
# life (and cost a write per poll). The callers record where the cause starts: a delayed or
# uncovered message when the read position first passes it, a consumer's unacked limit when it
# becomes blocked, a refusal unless the newest event already tells the same one.
KEY_UNCOVERED, UNACKED_LIMIT, SUB_UNACKED_LIMIT, NOT_DUE = "noConsumerForSlot", "unackedLimit", \
    "subscriptionUnackedLimit", "notDueYet"


def held(ctx, info, offsets, sub: str, consumer: str | None, cause: str, reason: str,
         **extra) -> None:
    """A dispatch passed over the entries at offsets for cause (one span record for many)."""
    if offsets:
        record_many(ctx, info, list(offsets), HELD, sub, consumer, cause=cause, reason=reason,
                    **extra)


def refused(ctx, info, offset: int, sub: str, consumer: str, error: str, reason: str) -> None:
    """Subscription sub turned consumer away (error: Pulsar's ServerError name), recorded on
    the message it would have been given next, unless that message's newest event of the
    subscription already tells the same refusal."""
    v = next((x for x in reversed(events_of(ctx, info.ml_id, offset)) if x.subscription == sub),
             None)
    if v is not None and v.kind == REFUSED and v.consumer == consumer and v.reason == reason:
        return
    record(ctx, info, offset, REFUSED, sub, consumer, error=error, reason=reason)
