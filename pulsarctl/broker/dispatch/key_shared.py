"""Key_Shared: every sticky key goes to one consumer, chosen by the subscription's selector
(auto-split hash ranges, consistent hashing, or sticky ranges), and a key is never processed
by two consumers at once.

The selector's state lives in the cursor's properties, so consumers in different processes see
one assignment; it is reconciled with the live consumers on every dispatch. A message for
another consumer (or for a key still held elsewhere) goes to the replay set, where its owner
finds it; a message whose key has an older message waiting there waits too, so each key stays
in order. When consumers join, the keys that moved are held back until the messages of those
keys that other consumers still hold are acked (Pulsar 4.x's draining hashes, PIP-379).
"""
from __future__ import annotations

from store import codec, keys
from pulsarctl.broker import (
    delayed, history, redelivery_state, subscriptions as subs, unacked, batches,
)
from pulsarctl.broker.dispatch.selectors import make_selector, sticky_key, slot_of
from pulsarctl.broker.records import Pending
from pulsarctl.errors import ConsumerBusy
from pulsarctl.entries import (
    F_DELIVER_AT, F_KEY, F_KEY_B64, F_NUM_MESSAGES, F_ORDERING_KEY, F_PRODUCER_NAME,
    F_SEQUENCE_ID,
)
from pulsarctl.messages import MessageId, message_from_entry

DEFAULT_POLICY = "auto-split"
# How far a consumer looks into the replay set, and how large it may grow before dispatch
# stops reading new entries (Pulsar's keySharedLookAheadMsgInReplayThresholdPerConsumer).
LOOK_AHEAD = 2000
# As the Shared dispatcher says it (dispatch/__init__.py: DELAYED_REASON).
DELAYED_REASON = "its delivery time has not come (delayed delivery holds it until then)"

_decode = codec.decode


def policy_of(rec) -> str:
    """The Key_Shared policy a consumer (records.Consumer) asked for."""
    return (rec.policy or {}).get("keySharedPolicy", DEFAULT_POLICY)


def out_of_order(rec) -> bool:
    """The consumer (records.Consumer) allows out of order delivery (KeySharedPolicy's
    allowOutOfOrderDelivery): no draining hashes, no key held behind its replayed messages."""
    return bool((rec.policy or {}).get("allowOutOfOrderDelivery"))


def check_policy(c, live: list, rec) -> None:
    """All consumers of a Key_Shared subscription use one selector and agree on out of order
    delivery, as in Pulsar (AbstractSubscription's
    checkForConsumerCompatibilityErrorWithDispatcher)."""
    mine = policy_of(rec)
    for other in live:
        if other.name == rec.name:
            continue
        if policy_of(other) != mine:
            raise ConsumerBusy(
                f"subscription '{c.name}' uses Key_Shared policy {policy_of(other)}; a consumer "
                f"with policy {mine} cannot join it",
                hint=f"use --key-shared-policy {policy_of(other)}")
        if out_of_order(other) != out_of_order(rec):
            theirs, mine_ = (("allows", "does not") if out_of_order(other)
                             else ("does not allow", "does"))
            raise ConsumerBusy(
                f"Subscription is of different type. Active subscription {theirs} out of order "
                f"delivery while the connecting consumer {mine_}",
                hint="give every consumer of the subscription the same allowOutOfOrderDelivery")


def reconcile(ctx, c, live: list):
    """The selector, brought up to date with the live consumers (in order of arrival)."""
    sub_state = subs.state(c)
    ks = sub_state.key_shared or {}
    policy = policy_of(live[0]) if live else ks.get("policy", DEFAULT_POLICY)
    if ks.get("policy") != policy:
        ks = {"policy": policy, "members": [], "state": None}
    selector = make_selector(policy, ks.get("state"))
    members = list(ks.get("members", []))
    names = {r.name for r in live}
    changed = False
    for name in [m for m in members if m not in names]:
        selector.remove_consumer(name)
        members.remove(name)
        changed = True
    for r in sorted(live, key=lambda r: (r.since or 0, r.name)):
        if r.name not in members:
            kw = {}
            if policy == "sticky":
                kw["ranges"] = [tuple(x) for x in (r.policy or {}).get("ranges", [])]
            selector.add_consumer(r.name, **kw)
            members.append(r.name)
            changed = True
            ks["draining"] = True
    if changed or "state" not in ks or ks.get("state") is None:
        ks.update(policy=policy, members=members, state=selector.to_state())
        sub_state.key_shared = ks
    return selector, ks


def slot(selector_policy, rec) -> int:
    """The hash slot of a stored entry's sticky key (its ordering key, else its key, else its
    producer and sequence id), under the subscription's selector policy."""
    return _slot(selector_policy, rec)


def selector_of(c):
    """The subscription's selector as stored (for a look that changes nothing), or None."""
    ks = subs.state(c).key_shared
    if not ks or ks.get("state") is None:
        return None
    return make_selector(ks["policy"], ks["state"]), ks["policy"]


def _slot(selector_policy, rec) -> int:
    n = len(rec)
    okey = rec[F_ORDERING_KEY] if n > F_ORDERING_KEY else None
    key = rec[F_KEY] if n > F_KEY else None
    # A key sent as bytes (stored as base64 text, field 17) hashes as those bytes, as in Pulsar.
    b64 = n > F_KEY_B64 and bool(rec[F_KEY_B64])
    return slot_of(selector_policy,
                   sticky_key(okey, key, rec[F_PRODUCER_NAME], rec[F_SEQUENCE_ID],
                              partition_key_b64_encoded=b64))


def _held_elsewhere(ctx, info, c, selector, policy, live) -> dict:
    """slot -> holder for pending messages whose slot now belongs to another consumer. A nack
    held for a consumer that has gone blocks nothing: no one processes its key meanwhile."""
    out = {}
    read = ctx.ledgers.read
    names = {r.name for r in live}
    for o, prec in subs.pending_items(ctx, c.id):
        if prec.consumer not in names:
            continue
        raw = read(ctx.txn, info, o)
        if raw is None:
            continue
        s = _slot(policy, _decode(raw))
        if selector.select(s) != prec.consumer:
            out[s] = prec.consumer
    return out


def fetch(ctx, info, c, consumer, live: list, max_n: int, topic_name: str,
          partition: int, by_entries: bool = False) -> list | None:
    """Deliver to consumer; None when every key is its anyway (a lone consumer owning all
    slots, nothing draining): then the Shared dispatcher does the same work without hashing.
    by_entries: max_n counts entries, a batch one, as a wire consumer's permits do in Pulsar's
    dispatcher ("permits are for entries/batches"); else messages."""
    selector, ks = reconcile(ctx, c, live)
    policy = ks["policy"]
    me = consumer.name
    blocked: dict = {}
    # allowOutOfOrderDelivery: no key waits for its consumer's predecessor to drain, nor
    # behind its own messages in the replay set (Pulsar's drainingHashesRequired is false and
    # its replay filter lets every position through)
    ooo = any(out_of_order(r) for r in live)
    if ooo:
        ks["draining"] = False
    if ks.get("draining"):
        blocked = _held_elsewhere(ctx, info, c, selector, policy, live)
        if not blocked:
            ks["draining"] = False
    sub_state = subs.state(c)
    if not blocked and len(live) == 1 and policy != "sticky":
        sub_state.key_shared = ks
        return None
    txn, now = ctx.txn, ctx.now
    pdb = ctx.env.db["pending"]
    pair, cid = keys.pair, c.id
    replay_add, replay_remove = redelivery_state.replay_add, redelivery_state.replay_remove
    hold_until = delayed.cutoff(ctx, info.name)
    waiting: set = set()      # slots with an older message still waiting: keep key order
    out: list = []
    taken: list = []
    nbytes = 0

    count_of = redelivery_state.lookup(ctx, cid) if sub_state.counted else None
    batch = None  # batches.Delivery, once a batch entry comes by

    def take(o, rec, rc, from_replay):
        nonlocal nbytes, batch
        if count_of:
            rc = count_of(o)
        pos = info.position(o)
        if len(rec) > F_NUM_MESSAGES and rec[F_NUM_MESSAGES]:
            # A batch goes whole to the consumer of its entry's key (its first message's).
            if batch is None:
                batch = batches.Delivery(ctx, c)
            ms = batch.messages(o, rec, pos.ledger_id, pos.entry_id, partition, topic_name,
                                rc, c.name, me)
            size = rec[F_NUM_MESSAGES]
        else:
            size = 1
            ms = [message_from_entry(rec, MessageId(pos.ledger_id, pos.entry_id, partition),
                                     topic_name, rc, c.name, me)]
        # A batch's pending record keeps its size (the unacked limits count messages).
        txn.put(pair(cid, o), codec.encode(Pending.delivered(me, now, rc, size).to_stored()),
                db=pdb)
        if from_replay:
            replay_remove(ctx, cid, o)
        nbytes += sum(len(m.payload) for m in ms)
        out.extend(ms)
        taken.append((o, rc))

    not_due, uncovered = [], []   # read and passed over: history.held, once each
    round_base = 0   # not_due's length when this read round began

    def full() -> bool:
        # by_entries: Pulsar reads as many entries as there are permits and then drops the
        # delayed ones it read (trackDelayedDelivery), so a delayed entry uses up a read slot.
        # A read that sent nothing left the permits as they were, and Pulsar reads again at
        # once: so does this fetch (else the consumer would wait, permits in hand, for a wake
        # that may never come).
        nonlocal round_base
        if not by_entries:
            return len(out) >= max_n
        if len(taken) + len(not_due) - round_base < max_n:
            return False
        if not taken:
            round_base = len(not_due)
            return False
        return True

    # 1. Delayed messages that came due, then redeliveries and deferred messages, in order.
    due = delayed.take_due(ctx, c, LOOK_AHEAD, hold_until)
    for o in due:
        replay_add(ctx, cid, o)
    scanned = 0
    replay_size = 0
    unscanned = False
    for o, rc in list(redelivery_state.replay_items(ctx, cid)):
        replay_size += 1
        if scanned >= LOOK_AHEAD or full():
            unscanned = True
            continue
        scanned += 1
        if ctx.cursors.is_acked(txn, c, o) or not info.contains(o):
            replay_remove(ctx, cid, o)
            replay_size -= 1
            continue
        rec = _decode(ctx.ledgers.read(txn, info, o))
        s = _slot(policy, rec)
        if selector.select(s) == me and s not in blocked and s not in waiting:
            take(o, rec, rc, True)
            replay_size -= 1
        elif not ooo:
            waiting.add(s)
    # 2. New entries from the read position — only when every waiting message was looked at,
    # or a newer message of a key could overtake an older one still in the replay set.
    if not full() and not unscanned and replay_size < LOOK_AHEAD * max(1, len(live)):
        held = subs.held_offsets(ctx, c)  # nacks held past a rewind: their timers bring them
        for o in ctx.cursors.unacked(txn, c, c.read_position, info.next_offset):
            if full():
                break
            c.read_position = o + 1
            if held is not None and held(o):
                continue
            rec = _decode(ctx.ledgers.read(txn, info, o))
            if len(rec) > F_DELIVER_AT and rec[F_DELIVER_AT] > hold_until:
                delayed.defer(ctx, cid, rec[F_DELIVER_AT], o)
                not_due.append(o)
                continue
            s = _slot(policy, rec)
            owner = selector.select(s)
            if owner is None:
                uncovered.append(o)
            if owner == me and s not in blocked and s not in waiting:
                take(o, rec, 0, False)
            else:
                # Someone else's key, or a key that must wait: its owner takes it from replay.
                replay_add(ctx, cid, o)
                if not ooo:
                    waiting.add(s)
                replay_size += 1
                if replay_size >= LOOK_AHEAD * max(1, len(live)):
                    break
    history.delivered(ctx, info, c, me, taken)
    history.held(ctx, info, not_due, c.name, me, history.NOT_DUE, DELAYED_REASON)
    history.held(ctx, info, uncovered, c.name, None, history.KEY_UNCOVERED,
                 "no consumer's hash range covers its key; it waits in the replay set for one "
                 "that does")
    if out and unacked.timeout_ms(sub_state.policy):
        unacked.track(ctx, c, me, taken)
    sub_state.out += len(out)
    sub_state.out_bytes += nbytes
    sub_state.last_consumed = now
    sub_state.key_shared = ks
    ctx.cursors.save(txn, c)
    return out


def ranges_of(ctx, c) -> dict:
    """consumer -> inclusive slot ranges it owns (keyHashRanges in Pulsar's consumer stats)."""
    got = selector_of(c)
    return {} if got is None else got[0].consumer_ranges()
