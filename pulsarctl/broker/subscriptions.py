"""Subscriptions: a durable cursor plus its settings (type, mode, policies), acknowledgement,
and the admin operations on one subscription.

A subscription's settings live in its cursor's properties, so a dispatch reads one record.
"""
from __future__ import annotations

from store import codec, keys
from store.ledger_row import L_ENTRIES, L_FIRST
from pulsarctl.broker import (
    redelivery_state, policies, batches, delayed, timers, retention, history,
)
from pulsarctl.broker.records import NACK, Pending, Timer
# offset_of belongs to the topic (batches.py uses it too); subs.offset_of is still its name here.
from pulsarctl.broker.topics import offset_of
from pulsarctl.errors import (
    AlreadyExists, CumulativeAckNotAllowed, InvalidValue, SubscriptionNotFound,
)
from pulsarctl.messages import MessageId
from pulsarctl.entries import batch_size

# The types, and the one reader and writer of a subscription's (subscription_state.py).
from pulsarctl.broker.subscription_state import (  # noqa: F401
    EXCLUSIVE, FAILOVER, KEY_SHARED, SHARED, SINGLE_ACTIVE, TYPES, clear_type, set_type,
    shown_type, start, state, stored_type, type_of,
)


def normalize_type(text: str) -> str:
    for t in TYPES:
        if str(text).lower().replace("-", "_") == t.lower():
            return t
    raise InvalidValue(f"unknown subscription type {text!r}",
                       hint="use Exclusive, Shared, Failover or Key_Shared")


def get(ctx, info, name: str):
    return ctx.cursors.get(ctx.txn, info.ml_id, name)


def require(ctx, info, name: str):
    c = get(ctx, info, name)
    if c is None:
        short = info.name.split("/")[-1]
        raise SubscriptionNotFound(
            f"subscription '{name}' not found on {info.name}",
            hint=f"list them with `pulsarctl topics subscriptions {short}`")
    return c


def initial_mark_delete(ctx, info, position) -> int:
    """Latest: after the last entry; Earliest: before the first; a MessageId: just before it."""
    if position in (None, "Latest", "latest") or position == MessageId.latest:
        return info.last_offset
    if position in ("Earliest", "earliest") or position == MessageId.earliest:
        return info.first_offset - 1
    if isinstance(position, MessageId):
        return offset_of(ctx, info, position) - 1
    raise InvalidValue(f"unknown initial position {position!r}", hint="use Latest or Earliest")


def create(ctx, info, name: str, position="Latest", sub_type: str | None = None,
           exist_ok: bool = True):
    """The subscription, made where it is missing. sub_type: its first consumer's type; None
    for one made with no consumer (create-subscription, a dead letter topic's initial
    subscription), which has no type until a consumer attaches: Pulsar reports "None" for a
    subscription without a dispatcher (PersistentSubscription.getTypeString; shown_type), and
    the semantics read such a subscription as Exclusive until then."""
    c = get(ctx, info, name)
    if c is not None:
        if not exist_ok:
            raise AlreadyExists(f"subscription '{name}' already exists on {info.name}")
        return c

    md = initial_mark_delete(ctx, info, position)
    c = ctx.cursors.create(ctx.txn, info.ml_id, name, md)
    # A namespace or topic dead-letter policy is where a new subscription's policy starts;
    # its consumers' flags override it.
    dlp = policies.effective(ctx, info.name, policies.DEAD_LETTER)
    start(c, ctx.now, dict(dlp) if dlp else {})
    if sub_type is not None:
        set_type(c, sub_type)
    ctx.cursors.save(ctx.txn, c)
    return c


# How many backlog entries of a batched topic backlog_messages reads to count their messages;
# past it, the rest are counted at the topic's average batch size (and said to be estimated).
BACKLOG_COUNT_LIMIT = 5_000


def backlog_messages(ctx, info, c) -> tuple[int, bool]:
    """(messages in the backlog, exact): msgBacklog counts entries, a batch as one, as
    Pulsar's does; a person also wants the messages. An unbatched topic's are its entries (no
    read); a batched topic's backlog is read entry by entry (its batch sizes, less the indexes
    acked one by one) up to BACKLOG_COUNT_LIMIT entries, the rest estimated."""
    entries = c.backlog(info.next_offset)
    extra = ctx.get("msgInExtra", info.ml_id)
    if not extra or not entries:
        return entries, True
    n = seen = 0
    for o in ctx.cursors.unacked(ctx.txn, c, c.mark_delete + 1, info.next_offset):
        if seen >= BACKLOG_COUNT_LIMIT:
            break
        raw = ctx.ledgers.read(ctx.txn, info, o) if info.contains(o) else None
        size = batch_size(codec.decode(raw)) if raw is not None else 1
        if size > 1:
            size -= len(batches.acked_indexes(ctx, c, o))
        n += size
        seen += 1
    if seen < entries:
        per_entry = (info.entries_added + extra) / max(1, info.entries_added)
        return n + round((entries - seen) * per_entry), False
    return n, True


def update_policy(ctx, c, settings: dict) -> None:
    """The consumer's policy flags, persisted with the subscription: a flag that is given
    replaces the stored value, one that is left out keeps it (the latest consumer wins)."""
    s = state(c)
    policy = dict(s.policy)
    policy.update({k: v for k, v in settings.items() if v is not None})
    s.policy = policy
    ctx.cursors.save(ctx.txn, c)


def offsets_of(ctx, info, ids) -> list[int]:
    """offset_of for many ids; all must name messages of this topic or nothing is returned.
    An id in a ledger already trimmed was acknowledged by every subscription: it is left out,
    so acking it again is the no-op Pulsar makes it."""
    out = []
    offset, first, nxt = info.offset, info.first_offset, info.next_offset
    for mid in ids:
        o = offset(mid.ledger_id, mid.entry_id)
        if o is not None and 0 <= o < first and mid.entry_id >= 0:
            continue
        if o is None or mid.entry_id < 0 or not (first <= o < nxt):
            offset_of(ctx, info, mid)  # raises MessageNotFound with the hint
        out.append(o)
    return out


# -- pending: delivered, not acked (records.Pending) ---------------------------------------------
# (What is to be delivered again, the replay set, is the redelivery controller's:
# redelivery_state.py.)
def pending_items(ctx, cid: int):
    """(offset, records.Pending) in offset order."""
    cur = ctx.env.cursor(ctx.txn, "pending")
    prefix = keys.u64(cid)
    if cur.set_range(prefix):
        unpair, decode, record = keys.unpack_pair, codec.decode, Pending.from_stored
        for k, v in cur:
            if not k.startswith(prefix):
                break
            yield unpair(k)[1], record(decode(v))


def pending_map(ctx, cid: int) -> dict:
    """{offset: records.Pending}, all at once (decoded in one go: what a timer sweep over many
    messages wants)."""
    cur = ctx.env.cursor(ctx.txn, "pending")
    prefix = keys.u64(cid)
    offs, vals = [], []
    if cur.set_range(prefix):
        unpair = keys.unpack_pair
        for k, v in cur:
            if not k.startswith(prefix):
                break
            offs.append(unpair(k)[1])
            vals.append(v)
    record = Pending.from_stored
    return dict(zip(offs, map(record, codec.decode_many(vals))))


def forget_pending(ctx, cid: int, offset: int) -> None:
    ctx.txn.delete(keys.pair(cid, offset), db=ctx.env.db["pending"])


def unacked_by_consumer(ctx, info, c) -> dict:
    """Unacked messages per consumer, counted as Pulsar counts them: a pending batch entry
    counts its messages (its record keeps the count; a record written before it did is sized
    from the entry), less the indexes acked with acknowledgmentAtBatchIndexLevelEnabled on."""
    counts: dict = {}
    batched = bool(ctx.get("msgInExtra", info.ml_id))  # the topic has batch entries
    if batched:
        by_index = batches.index_level(ctx)
    for o, rec in pending_map(ctx, c.id).items():
        n = 1
        if batched:
            if rec.size is not None:
                n = rec.size
            else:
                raw = ctx.ledgers.read(ctx.txn, info, o)
                n = batch_size(codec.decode(raw)) if raw is not None else 1
            if by_index and n > 1:
                n -= len(batches.acked_indexes(ctx, c, o))
        counts[rec.consumer] = counts.get(rec.consumer, 0) + n
    return counts


def pending_count(ctx, cid: int) -> int:
    """How many messages are pending on the subscription (keys only: nothing decoded)."""
    cur = ctx.env.cursor(ctx.txn, "pending")
    prefix = keys.u64(cid)
    n = 0
    if cur.set_range(prefix):
        for k in cur.iternext(values=False):
            if not k.startswith(prefix):
                break
            n += 1
    return n


def clear_delivery_state(ctx, c) -> None:
    """Forget pending and replay state: after a reset, a skip or the last consumer leaving."""
    ctx.env.delete_prefix(ctx.txn, "pending", keys.u64(c.id))
    redelivery_state.replay_clear(ctx, c.id)
    del state(c).held_to


def rewind(ctx, c, release=()) -> None:
    """Deliver again from the first unacknowledged entry (Pulsar's cursor rewind).

    Every entry above mark-delete is read again, so whatever dispatch kept about the entries it
    had read goes with the old read position: pending and replay records. Two things stay, and
    dispatch skips their entries when it reads past them again (held_offsets):
    - a nacked message whose nack timer still waits stays pending for the consumer that nacked
      it, until the timer gives it back counted (nack timers are durable, whoever runs then);
    - the delayed index: a message whose deliver-at is still ahead stays held there (and counted
      in delayedMessages) until it comes due; read again from the rewound position too, it
      would come due from both and go out twice.
    release: offsets whose hold ends now (their timer fired)."""
    held = _held_nacks(ctx, c, set(release))
    s = state(c)
    c.read_position = c.mark_delete + 1
    ctx.env.delete_prefix(ctx.txn, "pending", keys.u64(c.id))
    redelivery_state.replay_clear(ctx, c.id)
    if held:
        pdb = ctx.env.db["pending"]
        for o, raw in held:
            ctx.txn.put(keys.pair(c.id, o), raw, db=pdb)
    else:
        s.nacked = False
    tops = [held[-1][0]] if held else []
    in_index = delayed.highest(ctx, c.id)
    if in_index is not None:
        tops.append(in_index)
    # The highest offset a held nack or the delayed index keeps, or none: dispatch reading
    # from the read position looks nothing up without one (held_offsets).
    s.held_to = max(tops, default=None)


def _held_nacks(ctx, c, release: set) -> list[tuple[int, bytes]]:
    """(offset, raw pending record) of the nacked messages whose nack timer still waits, in
    offset order (nothing is decoded unless the subscription has nacked something)."""
    if not state(c).nacked:
        return []

    out = []
    waiting = None
    cur = ctx.env.cursor(ctx.txn, "pending")
    prefix = keys.u64(c.id)
    if cur.set_range(prefix):
        for k, v in cur:
            if not k.startswith(prefix):
                break
            o = keys.unpack_pair(k)[1]
            rec = Pending.from_stored(codec.decode(v))
            if not rec.nacked or o in release:
                continue
            if waiting is None:
                waiting = timers.pending(ctx, c.id)
            if any(_waits_for(t, rec) for _due, t in waiting.get(o, ())):
                out.append((o, bytes(v)))
    return out


def _waits_for(timer: Timer, rec: Pending) -> bool:
    """Whether timer is the nack timer of this very delivery."""
    return (timer.kind == NACK and timer.consumer == rec.consumer
            and timer.delivered_at == rec.delivered_at)


def held_offsets(ctx, c):
    """A function offset -> whether something other than the read position holds it (for
    dispatch reading from the read position after a rewind): a held nack, a delayed message
    still in the delayed index, or a message already handed out or queued again from there
    (pending or in the replay set). None when nothing at or past the read position is held."""
    s = state(c)
    upto = s.held_to
    if upto is None:
        return None
    if c.read_position > upto:
        del s.held_to
        return None

    txn, pair, cid = ctx.txn, keys.pair, c.id
    pdb = ctx.env.db["pending"]
    in_replay = redelivery_state.replay_member(ctx, cid)
    in_index = None

    def held(o: int) -> bool:
        nonlocal in_index
        if o > upto:
            return False
        if txn.get(pair(cid, o), db=pdb) is not None or in_replay(o):
            return True
        if in_index is None:
            in_index = delayed.offsets(ctx, cid)
        return o in in_index
    return held


# -- acknowledgement -------------------------------------------------------------------------
def ack(ctx, info, c, offsets: list[int], cumulative: bool = False) -> tuple[int, set]:
    """Acknowledge on the cursor and drop the pending/replay records. Returns (newly acked,
    names of the consumers that held the acked messages)."""
    holders = set()
    txn = ctx.txn
    pdb = ctx.env.db["pending"]
    md_before = c.mark_delete
    s = state(c)
    if cumulative:
        typ = type_of(c)
        if typ not in SINGLE_ACTIVE:
            raise CumulativeAckNotAllowed(
                f"Cannot use cumulative acks on a non-exclusive/non-failover subscription "
                f"('{c.name}' is {typ})")
        upto = max(offsets)
        # One range event (history.record_range), as the cursor's move is one.
        history.record_range(ctx, info, c.mark_delete + 1, upto, history.ACKED, c.name,
                             cumulative=True)
        for o, rec in list(pending_items(ctx, c.id)):
            if o > upto:
                break
            holders.add(rec.consumer)
            txn.delete(keys.pair(c.id, o), db=pdb)
        redelivery_state.replay_remove_through(ctx, c.id, upto)
        newly = ctx.cursors.ack_cumulative(txn, c, upto)

        redelivery_state.forget_through(ctx, c.id, upto)
        batches.forget_through(ctx, c, c.mark_delete)
    else:
        pair, cid = keys.pair, c.id
        replay_remove = redelivery_state.replay_remove \
            if redelivery_state.replay_has_any(ctx, cid) else None
        last = None
        for o in offsets:
            raw = txn.pop(pair(cid, o), db=pdb)
            if raw is not None and raw != last:
                # Records of one fetch share their bytes; decode each distinct one once.
                holders.add(Pending.from_stored(codec.decode(raw)).consumer)
                last = raw
            if replay_remove is not None:
                replay_remove(ctx, cid, o)
        newly = ctx.cursors.ack(txn, c, offsets)
        history.record_many(ctx, info, offsets, history.ACKED, c.name)
        if s.counted:
            redelivery_state.forget(ctx, cid, offsets)
        if s.batch_acks or s.batch_queued:
            batches.forget(ctx, c, offsets)
    if newly:
        s.last_ack = ctx.now
        if c.mark_delete != md_before:
            s.last_mark_delete_advanced = ctx.now
    ctx.cursors.save(txn, c)
    maybe_trim(ctx, info, c)
    return newly, holders


def maybe_trim(ctx, info, c) -> None:
    """Delete the ledgers every cursor has passed and retention does not keep, once this
    cursor passes a ledger boundary."""
    if len(info.ledgers) < 2:
        return
    first = info.ledgers[0]
    if c.mark_delete < first[L_FIRST] + first[L_ENTRIES] - 1:
        return

    retention.trim(ctx, info)


def drop(ctx, info, c) -> None:
    """Delete a subscription with everything that hangs off it."""
    clear_delivery_state(ctx, c)
    delayed.clear(ctx, c.id)
    redelivery_state.clear(ctx, c.id)
    timers.clear(ctx, c.id)
    batches.forget_through(ctx, c)
    for k, _ in list(ctx.scan("consumer", c.id)):
        ctx.delete(*k)
    ctx.cursors.delete(ctx.txn, c)
