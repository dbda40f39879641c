"""pulsar-admin's cursor administration: skip, clear-backlog, reset-cursor, expire-messages,
terminate and examine-message (pulsar-semantics.md §10, §11.2, §11.5).

Moving mark-delete forward (skip, clear-backlog, expire) acknowledges what it passes: pending,
replay and delayed-index records at or below the new mark-delete go with it; those above stay,
as the dispatcher keeps them in Pulsar. A reset puts the read position right after the new
mark-delete and forgets the ack holes (ManagedCursorImpl.internalResetCursor), so every entry
above it is read from the ledger again: all pending, replay and delayed records go. Consumer
records stay (a Pulsar client reconnects at once after the reset's disconnect); their pending
messages are gone, and acking one at or below mark-delete is a no-op.
"""
from __future__ import annotations

from store import codec, keys
from store.ledger_row import LedgerRow
from pulsarctl.broker.subscription_state import state
from pulsarctl.broker import (
    topics, unpack, subscriptions as subs, batches, consumers, delayed, redelivery_state, timers,
    history,
)
from pulsarctl.errors import InvalidValue, MessageNotFound
from pulsarctl.messages import MessageId
from pulsarctl.names import TopicName
from pulsarctl.units import parse_time_or_duration_ms


# -- what the commands report ------------------------------------------------------------------
def summary(ctx, info, c) -> dict:
    return {
        "msgBacklog": c.backlog(info.next_offset),
        "markDeletePosition": str(info.mark_position(c.mark_delete)),
        "readPosition": str(info.position(c.read_position)),
    }


# -- keeping pending, replay and the delayed index consistent with the cursor -----------------
def drop_through(ctx, c, upto: int) -> None:
    """Forget pending, replay and delayed records at or below offset upto (now acknowledged)."""
    if upto < 0:
        return
    txn, cid = ctx.txn, c.id
    end = keys.pair(cid, upto)
    for dbname in ("pending", "replay"):
        cur = ctx.env.cursor(txn, dbname)
        if cur.set_range(keys.pair(cid, 0)):
            while cur.key() and cur.key() <= end:
                if not cur.delete():
                    break
    # The delayed index is ordered by delivery time, not offset: look at all of it.
    db = ctx.env.db["delayed"]
    prefix = keys.u64(cid)
    cur = txn.cursor(db=db)
    doomed = []
    if cur.set_range(prefix):
        for k in cur.iternext(values=False):
            if not k.startswith(prefix):
                break
            if keys.unpack_triple(k)[2] <= upto:
                doomed.append(k)
    for k in doomed:
        txn.delete(k, db=db)


def _advanced(ctx, info, c) -> None:
    """After mark-delete moved forward: drop what it passed, save, trim passed ledgers."""
    drop_through(ctx, c, c.mark_delete)
    batches.forget_through(ctx, c, c.mark_delete)
    ctx.cursors.save(ctx.txn, c)
    subs.maybe_trim(ctx, info, c)


def open_cursor(ctx, t: TopicName, sub: str):
    """Topic and subscription, after disconnecting consumers that are gone (what is due for the
    subscription fires before the operation, as in every broker call)."""
    info = topics.require(ctx, t)
    c = subs.require(ctx, info, sub)
    consumers.sweep(ctx, info, c)
    return info, c


# -- skip and clear-backlog ----------------------------------------------------------------------
def skip(ctx, info, c, n: int) -> int:
    """Skip the next n unacknowledged messages (ManagedCursorImpl.skipEntries with
    IndividualDeletedEntries.Exclude); fewer when the backlog is smaller. Returns how many."""
    if n < 1:
        raise InvalidValue(f"the number of messages to skip must be positive, not {n}")
    first = c.mark_delete + 1
    done = ctx.cursors.skip(ctx.txn, c, n, info.next_offset)
    _record_passed(ctx, info, c, first, history.SKIPPED)
    _advanced(ctx, info, c)
    return done


def clear_backlog(ctx, info, c) -> int:
    """Mark-delete to the last entry (skip-all). Returns how many were acknowledged."""
    first = c.mark_delete + 1
    done = ctx.cursors.ack_cumulative(ctx.txn, c, info.last_offset)
    _record_passed(ctx, info, c, first, history.CLEARED)
    _advanced(ctx, info, c)
    return done


def _record_passed(ctx, info, c, first: int, event: str, **extra) -> None:
    """Record event, once, for the entries from first to where the mark-delete now is (the
    history's range event: O(1) however many there are, as the cursor's move is; explain
    leaves out the entries the subscription had acked before)."""
    history.record_range(ctx, info, first, c.mark_delete, event, c.name, **extra)


# -- reset-cursor ----------------------------------------------------------------------------------
def _publish_time(ctx, info, offset: int) -> int:
    return codec.decode(ctx.ledgers.read(ctx.txn, info, offset))[0]


def newest_matching(ctx, info, lo: int, hi: int, pred) -> int | None:
    """The highest offset in [lo, hi) whose publish time satisfies pred, or None. As
    ManagedCursor.asyncFindNewestMatching, a binary search: it relies on publish times never
    decreasing along the topic, so pred holds for a prefix of the range."""
    found = None
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(_publish_time(ctx, info, mid)):
            found, lo = mid, mid + 1
        else:
            hi = mid
    return found


def offset_for_time(ctx, info, t_ms: int) -> int:
    """The offset to deliver next after a reset to time t_ms (PersistentSubscription.resetCursor
    with PersistentMessageFinder): right after the newest message published at or before t_ms,
    so messages published after t_ms come again; the first position when there is none."""
    found = newest_matching(ctx, info, info.first_offset, info.next_offset,
                            lambda pt: pt <= t_ms)
    return info.first_offset if found is None else found + 1


def offset_for_id(ctx, info, mid: MessageId) -> int:
    """The offset of mid, delivered next (inclusive). Like Pulsar's isValidPosition, the position
    just after the last entry is accepted too: nothing is delivered again."""
    if mid == MessageId.earliest:
        return info.first_offset
    if mid == MessageId.latest:
        return info.next_offset
    cur = LedgerRow.from_stored(info.ledgers[-1]) if info.ledgers else None
    if cur is not None and mid.ledger_id == cur.ledger_id and mid.entry_id == cur.entries:
        return info.next_offset
    return subs.offset_of(ctx, info, mid)


def parse_reset_time(text: str, now_ms: int) -> int:
    """reset-cursor -t: a duration ago, ISO 8601, or epoch milliseconds."""
    try:
        return parse_time_or_duration_ms(text, now_ms)
    except InvalidValue:
        raise InvalidValue(f"invalid time {text!r} for reset-cursor -t",
                           hint="give a duration ago (10m, 2h, 1d; a bare number is seconds), "
                           "ISO 8601 (2026-01-01T10:00:00Z) or epoch milliseconds") from None


def reset(ctx, info, c, next_offset: int) -> None:
    """Deliver again from next_offset: mark-delete just before it, no ack holes above it, and no
    pending, replay or delayed state (a reset disconnects consumers in Pulsar)."""
    ctx.cursors.seek(ctx.txn, c, next_offset - 1)
    subs.clear_delivery_state(ctx, c)
    batches.forget_through(ctx, c)  # the ack holes go, partial batch acks with them
    delayed.clear(ctx, c.id)
    # Pulsar's reset clears the dispatcher's redelivery tracker; nack timers go with it.
    redelivery_state.clear(ctx, c.id)
    timers.clear(ctx, c.id)
    ctx.cursors.save(ctx.txn, c)
    subs.maybe_trim(ctx, info, c)


# -- expire-messages ------------------------------------------------------------------------------
def expire(ctx, info, c, ttl_ms: int) -> int:
    """Acknowledge every message older than ttl_ms (expired when now > publishTime + ttl), by
    mark-deleting up to the newest expired entry after mark-delete (PersistentMessageExpiryMonitor).
    A TTL of 0 (only `expire-messages -t 0` asks for one: a TTL policy of 0 is no TTL) expires
    every message published until now, as the monitor's search for messages published at or
    before now - 0 does in Pulsar. Returns how many."""
    if ttl_ms < 0:
        raise InvalidValue(f"the expiry time must not be negative, not {ttl_ms} ms")
    cutoff = ctx.now - ttl_ms
    lo = max(c.mark_delete + 1, info.first_offset)
    found = newest_matching(ctx, info, lo, info.next_offset,
                            (lambda pt: pt <= cutoff) if ttl_ms == 0 else (lambda pt: pt < cutoff))
    if found is None:
        return 0
    first = c.mark_delete + 1
    done = ctx.cursors.ack_cumulative(ctx.txn, c, found)
    if done:
        s = state(c)
        s.last_mark_delete_advanced = ctx.now
        s.expired += done
    _record_passed(ctx, info, c, first, history.EXPIRED,
                   reason=f"TTL {history.duration_text(ttl_ms)}")
    _advanced(ctx, info, c)
    return done


# -- terminate and examine-message --------------------------------------------------------------
def terminate(ctx, t: TopicName) -> MessageId:
    """No more messages: producers.publish refuses a terminated topic. Terminating again is
    fine and gives the same last message id."""
    info = topics.require(ctx, t)
    meta = topics.meta(ctx, t)
    if not meta.get("terminated"):
        meta["terminated"] = True
        meta["terminatedAt"] = ctx.now
        ctx.put(meta, "topicmeta", str(t))
    p = info.mark_position(info.last_offset)
    return MessageId(p.ledger_id, p.entry_id, t.partition_index)


INITIAL_POSITIONS = ("latest", "earliest")


def check_examine(initial_position: str, n: int) -> str:
    pos = str(initial_position).lower()
    if pos not in INITIAL_POSITIONS:
        raise InvalidValue(f"invalid initial position {initial_position!r}",
                           hint="use latest or earliest")
    if n < 1:
        raise InvalidValue(f"invalid message position {n}: it must be 1 or more",
                           hint="1 is the first (earliest) or the last (latest) message")
    return pos


def examine(ctx, info, t: TopicName, initial_position: str, n: int):
    """The nth message counted from the first (earliest) or the last (latest) one."""
    pos = check_examine(initial_position, n)
    if info.entries <= 0:
        raise MessageNotFound(f"{t} has no messages to examine")
    o = info.first_offset + n - 1 if pos == "earliest" else info.last_offset - n + 1
    if not info.contains(o):
        raise MessageNotFound(f"{t} has {info.entries} message(s); there is no message {n} "
                              f"from the {pos}", hint=f"use -m 1 to -m {info.entries}")
    p = info.position(o)
    rec = codec.decode(ctx.ledgers.read(ctx.txn, info, o))
    # Messages are counted in entries (a batch is one) and a batch shows its first message,
    # as pulsar-admin's examineMessage does.
    return unpack.first_message(rec, p.ledger_id, p.entry_id, t.partition_index, str(t))
