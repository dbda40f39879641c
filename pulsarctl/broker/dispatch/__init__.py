"""Dispatch: choose the entries a consumer gets next, record them as pending for it, and
return them as Messages. One module per subscription type, as Pulsar's dispatchers."""
from __future__ import annotations

from store import codec, keys
from pulsarctl.broker import (
    delayed, history, redelivery_state, subscriptions as subs, batches, unacked, policies,
)
from pulsarctl.broker.dispatch import exclusive, failover, shared, key_shared
from pulsarctl.broker.records import Pending
from pulsarctl.entries import F_NUM_MESSAGES, batch_size
from pulsarctl.messages import MessageId, message_from_entry

_decode = codec.decode
MAX_SCAN_PER_FETCH = 100_000  # entries one fetch may read past delayed ones
# Pulsar's dispatcherMaxReadBatchSize and dispatcherMaxReadSizeBytes: the most entries, and
# bytes, one read of the dispatcher takes.
READ_BATCH_ENTRIES = 100
READ_BATCH_BYTES = 5 * 1024 * 1024
# Why a message the dispatcher read was not delivered (history.held): recorded when the read
# position passes it, once, not at every fetch (history.py: why nothing happened).
DELAYED_REASON = "its delivery time has not come (delayed delivery holds it until then)"

_SELECTORS = {
    subs.EXCLUSIVE: exclusive.select,
    subs.FAILOVER: failover.select,
    subs.SHARED: shared.select,
}


def fetch(ctx, info, c, consumer, live: list, max_n: int, topic_name: str,
          partition: int = -1, whole_batches: bool = False):
    """Give consumer up to max_n messages (a batch entry goes whole, so a few more may come);
    they stay pending for it until acked. whole_batches: a batch entry comes as one
    batches.Batch, not a Message per index (Shared, Exclusive and Failover; Key_Shared
    always gives Messages); max_n still counts messages, a wire consumer's permits (serve):
    an Exclusive or Failover one gets as many entries as it has permits, as Pulsar's."""
    if max_n <= 0:
        return []
    if subs.state(c).batch_queued:
        # A receive that stopped inside a batch left the rest for this consumer: those first.

        queued = batches.take_queued(ctx, info, c, consumer.name, max_n, topic_name,
                                     partition)
        if queued:
            ctx.cursors.save(ctx.txn, c)
            return queued + (_fetch(ctx, info, c, consumer, live, max_n - len(queued),
                                    topic_name, partition, whole_batches)
                             if len(queued) < max_n else [])
    return _fetch(ctx, info, c, consumer, live, max_n, topic_name, partition, whole_batches)


def _fetch(ctx, info, c, consumer, live: list, max_n: int, topic_name: str,
           partition: int = -1, whole_batches: bool = False):
    """consumer: its records.Consumer; live: every live consumer's."""
    if max_n <= 0:
        return []
    typ = subs.type_of(c)
    reached = _NOTHING
    if typ in (subs.SHARED, subs.KEY_SHARED):
        max_n, reached = unacked_allowance(ctx, info, c, consumer.name, max_n)
        if max_n <= 0:
            ctx.cursors.save(ctx.txn, c)
            return []
    # A wire consumer (whole_batches: serve) of one active consumer's subscription, or of a
    # Key_Shared one: Pulsar's dispatcher gives it as many entries as it has permits.
    by_entries = whole_batches and typ in (subs.EXCLUSIVE, subs.FAILOVER, subs.KEY_SHARED)
    if typ == subs.KEY_SHARED:
        got = key_shared.fetch(ctx, info, c, consumer, live, max_n, topic_name, partition,
                               by_entries)
        if got is not None:
            if got and reached is not _NOTHING:
                reached(len(got))
                ctx.cursors.save(ctx.txn, c)
            return got
        typ = subs.SHARED
    txn, now, name = ctx.txn, ctx.now, consumer.name
    pdb = ctx.env.db["pending"]
    pair, cid, encode = keys.pair, c.id, codec.encode
    delivery = Pending.delivered
    # The pending records (records.Pending) of this fetch, encoded once per redelivery count:
    # the messages with the same count share their bytes (subscriptions.ack decodes each once).
    held = {0: encode(delivery(name, now, 0).to_stored())}
    out = []
    got = 0  # messages in out (a Batch counts its messages)
    records = []
    delivered = []
    nbytes = 0
    sub = c.name
    sub_state = subs.state(c)
    count_of = redelivery_state.lookup(ctx, cid) if sub_state.counted else None
    # Shared and Key_Shared hold back messages whose delivery time is ahead.
    hold_until = delayed.cutoff(ctx, info.name) if typ in (subs.SHARED, subs.KEY_SHARED) else None
    select = _SELECTORS[typ]
    scanned = 0
    batch = None  # batches.Delivery, once a batch entry comes by
    # max_n counts messages, as a consumer's permits do; on a topic that has batches, entries
    # are chosen a few at a time, by its average batch size, so a fetch does not take far
    # more than max_n messages (a batch goes whole, so it may end a few over).
    extra = ctx.get("msgInExtra", info.ml_id)
    per_entry = 1 + extra / info.entries_added if extra and info.entries_added else 1
    # by_entries: Pulsar's dispatcher reads as many entries as the consumer has permits (at
    # most dispatcherMaxReadBatchSize, and as many as dispatcherMaxReadSizeBytes holds at the
    # ledger's average entry size, at least one) and sends them all, a batch whole, so the
    # permits may end below zero (PersistentDispatcherSingleActiveConsumer.calculateToRead,
    # preciseDispatcherFlowControl off by default; a lone Key_Shared consumer, whose keys are
    # all its own, comes here as Shared: PersistentStickyKeyDispatcherMultipleConsumers).
    read_entries = READ_BATCH_ENTRIES
    if by_entries:
        per_entry = 1
        if info.entries_added and info.bytes_added:
            average = info.bytes_added / info.entries_added
            read_entries = max(1, min(read_entries, int(READ_BATCH_BYTES // average)))
    taken = None  # offsets chosen by earlier rounds of this fetch
    not_due: list = []  # delayed messages this fetch read and held back (history: held)
    while got < max_n:
        want = max_n - got
        if per_entry > 1:
            want = max(1, int(want / per_entry))
        elif by_entries:
            want = min(want, read_entries)
        chosen = select(ctx, info, c, consumer, live, want)
        if not chosen:
            break
        deferred = 0
        if taken is not None:
            # A second round of this fetch: nothing chosen in the first goes out twice (its
            # pending record is written only at the end).
            chosen = [x for x in chosen if x[0] not in taken]
        for start, stop, counts in _runs(chosen):
            for o, lid, eid, raw in ctx.ledgers.scan(txn, info, start, stop):
                rc = count_of(o) if count_of else counts.get(o, 0) if counts else 0
                v = held.get(rc)
                if v is None:
                    v = held[rc] = encode(delivery(name, now, rc).to_stored())
                records.append((pair(cid, o), v))
                rec = _decode(raw)
                if len(rec) > F_NUM_MESSAGES and rec[F_NUM_MESSAGES]:  # a batch (never delayed)
                    if batch is None:
                        batch = batches.Delivery(ctx, c)
                    # The pending record keeps the batch's size: the unacked limits count
                    # messages (unacked_allowance).
                    records[-1] = (records[-1][0], encode(
                        delivery(name, now, rc, batch_size(rec)).to_stored()))
                    delivered.append((o, rc))
                    if whole_batches:
                        b = batch.whole(o, rec, MessageId(lid, eid, partition), rc,
                                        topic_name, sub, name)
                        nbytes += b.payload_bytes()
                        got += b.count
                        out.append(b)
                        continue
                    ms = batch.messages(o, rec, lid, eid, partition, topic_name, rc, sub, name)
                    nbytes += sum(len(m.payload) for m in ms)
                    got += len(ms)
                    out.extend(ms)
                    continue
                # A plain entry's one message, as unpack.messages makes it, built directly with
                # the helper it uses: this runs once per message of every consume, and going
                # through unpack.messages (about 1.0 us against 0.4 us a message) would cost a
                # consume, about 2 us of CPU a message, a quarter more.
                m = message_from_entry(rec, MessageId(lid, eid, partition), topic_name,
                                       rc, sub, name)
                if hold_until is not None and m.deliver_at > hold_until:
                    records.pop()
                    delayed.defer(ctx, cid, m.deliver_at, o)
                    deferred += 1
                    not_due.append(o)
                    continue
                delivered.append((o, rc))
                nbytes += len(m.payload)
                got += 1
                out.append(m)
        scanned += len(chosen)
        taken = (taken or set()) | {o for o, _rc in chosen}
        # Entries that went to the delayed index gave the consumer nothing: read on, as
        # Pulsar's dispatcher reads more entries, within a bound on the work of one call
        # once something was found (a fetch that returns nothing while more is deliverable
        # would leave a waiting wire consumer waiting).
        if (not deferred and per_entry == 1) or got >= max_n \
                or (scanned >= MAX_SCAN_PER_FETCH and got):
            break
    if not_due:
        history.held(ctx, info, not_due, sub, name, history.NOT_DUE, DELAYED_REASON)
    if not records:
        if scanned:
            ctx.cursors.save(txn, c)
        return []
    txn.cursor(db=pdb).putmulti(records)
    history.delivered(ctx, info, c, name, delivered)
    if unacked.timeout_ms(sub_state.policy):
        unacked.track(ctx, c, name, delivered)
    reached(got)  # the limits count messages, a batch's each
    sub_state.out += got
    sub_state.out_bytes += nbytes
    sub_state.last_consumed = now
    ctx.cursors.save(txn, c)
    return out


def unacked_allowance(ctx, info, c, name: str, max_n: int):
    """How many more messages the consumer may get under maxUnackedMessagesPerConsumer and
    maxUnackedMessagesPerSubscription (Shared and Key_Shared only, as in Pulsar), and a
    function to call with how many it got. Like Pulsar, a consumer or subscription that
    reaches its limit is blocked until its unacked messages drop to half of it; the blocks
    are kept in the cursor's properties. Both limits count messages: on a topic with batches
    the pending records are read for their sizes; elsewhere an entry is a message and only
    the keys are counted."""
    per_c = policies.effective(ctx, info.name, policies.MAX_UNACKED_CONSUMER) or 0
    per_s = policies.effective(ctx, info.name, policies.MAX_UNACKED_SUBSCRIPTION) or 0
    sub_state = subs.state(c)
    if not per_c and not per_s:
        del sub_state.blocked_consumers
        del sub_state.blocked_subscription
        return max_n, _NOTHING
    per = subs.unacked_by_consumer(ctx, info, c) if ctx.get("msgInExtra", info.ml_id) else None
    total = sum(per.values()) if per is not None else subs.pending_count(ctx, c.id)

    def held_sub() -> None:
        # The subscription became blocked: the message waiting next says why (once, until it
        # is unblocked: history.py, why nothing happened).
        _held(ctx, info, c, None, history.SUB_UNACKED_LIMIT,
              f"the subscription is at maxUnackedMessagesPerSubscription ({per_s} unacked); "
              f"it gets more when that falls to half")

    def held_consumer() -> None:
        _held(ctx, info, c, name, history.UNACKED_LIMIT,
              f"consumer {name} is at maxUnackedMessagesPerConsumer ({per_c} unacked); it gets "
              f"more when that falls to half")
    if per_s:
        if sub_state.blocked_subscription and total <= per_s // 2:
            sub_state.blocked_subscription = False
        if sub_state.blocked_subscription or total >= per_s:
            if not sub_state.blocked_subscription:
                held_sub()
            sub_state.blocked_subscription = True
            return 0, _NOTHING
        max_n = min(max_n, per_s - total)
    mine = None
    if per_c:
        blocked = sub_state.blocked_consumers
        if name in blocked or total + max_n >= per_c:  # else it cannot reach the limit
            mine = per.get(name, 0) if per is not None else sum(
                1 for _o, rec in subs.pending_items(ctx, c.id) if rec.consumer == name)
            if name in blocked and mine <= per_c // 2:
                blocked.remove(name)
            if name in blocked or mine >= per_c:
                if name not in blocked:
                    blocked.append(name)
                    held_consumer()
                sub_state.blocked_consumers = blocked
                return 0, _NOTHING
            sub_state.blocked_consumers = blocked  # an empty list is not kept
            max_n = min(max_n, per_c - mine)

    def delivered(k: int) -> None:
        # Reaching the limit blocks at once, not at the next fetch.
        if per_s and total + k >= per_s:
            sub_state.blocked_subscription = True
            held_sub()
        if mine is not None and mine + k >= per_c:
            sub_state.blocked_consumers = [*sub_state.blocked_consumers, name]
            held_consumer()
    return max_n, delivered


def _held(ctx, info, c, consumer, cause: str, reason: str) -> None:
    o = next_waiting(ctx, info, c)
    if o is not None:
        history.held(ctx, info, [o], c.name, consumer, cause, reason)


def next_waiting(ctx, info, c) -> int | None:
    """The offset of the message the subscription would deliver next (the first of its replay
    set still unacked, else the first unacked entry from its read position, else the first
    unacked one nobody holds: a delayed message, a nack held for its timer), or None when
    nothing waits: where an event about why nothing is delivered belongs."""
    for o, _rc in redelivery_state.replay_items(ctx, c.id):
        if info.contains(o) and not ctx.cursors.is_acked(ctx.txn, c, o):
            return o
    for o in ctx.cursors.unacked(ctx.txn, c, max(c.read_position, c.mark_delete + 1),
                                 info.next_offset):
        return o
    pdb = ctx.env.db["pending"]
    for o in ctx.cursors.unacked(ctx.txn, c, c.mark_delete + 1, min(c.read_position,
                                                                      info.next_offset)):
        if ctx.txn.get(keys.pair(c.id, o), db=pdb) is None:
            return o
    return None


def _NOTHING(_k: int) -> None:
    return None


def _runs(chosen):
    """Group (offset, redelivery count) pairs into contiguous runs: (start, stop, counts)."""
    start = prev = None
    counts: dict = {}
    for o, rc in chosen:
        if start is None:
            start = prev = o
        elif o != prev + 1:
            yield start, prev + 1, counts
            start, counts = o, {}
        prev = o
        if rc:
            counts[o] = rc
    if start is not None:
        yield start, prev + 1, counts
