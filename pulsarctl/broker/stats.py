"""topics stats / stats-internal / subscriptions, with pulsar-admin's JSON key names."""
from __future__ import annotations

import json

from store import codec, keys
from store.ledger_row import LedgerRow, rows as ledger_rows
from pulsarctl.broker import access, backlog_quota, consumers, delayed, policies, redelivery_state
from pulsarctl.broker import subscriptions as subs
from pulsarctl.broker.subscription_state import state
from pulsarctl.broker.records import Pending
from pulsarctl.messages import iso_ms
from pulsarctl.broker.dispatch import key_shared
from pulsarctl.broker.dispatch.failover import active
from pulsarctl.names import partition_index


class RedeliveryCounts(dict):
    """{subscription: redelivery count} of one message (get-message-by-id): a message is
    redelivered per subscription, so it has no one count. Printed as JSON in the text view
    (redeliveryCount:[{"sub-a": 2, "sub-b": 0}]), an object in -o json."""

    def __str__(self) -> str:
        return json.dumps(self, ensure_ascii=False)


def redelivery_counts(ctx, info, o: int) -> RedeliveryCounts:
    """The redelivery count of the message at offset o on every subscription of its topic, as
    `subscriptions pending` and consumers see it: the stored count (kept once a subscription
    has redelivered), else the one its replay set or its pending delivery carries."""
    out = RedeliveryCounts()
    for c in ctx.cursors.list(ctx.txn, info.ml_id):
        n = redelivery_state.get(ctx, c.id, o)
        if not n:
            n = redelivery_state.replay_get(ctx, c.id, o)
            if n is None:
                raw = ctx.txn.get(keys.pair(c.id, o), db=ctx.env.db["pending"])
                n = 0 if raw is None else Pending.from_stored(codec.decode(raw)).redelivery_count
        out[c.name] = n
    return out


def subscription_stats(ctx, info, c, live=None) -> dict:
    live = consumers.records(ctx, c) if live is None else live
    pend = subs.unacked_by_consumer(ctx, info, c)
    queue = ctx.setting("receiverQueueSize")
    cons = []
    for r in sorted(live, key=lambda r: (r.priority, r.name)):
        cons.append({
            "consumerName": r.name,
            "unackedMessages": pend.get(r.name, 0),
            "availablePermits": max(0, queue - pend.get(r.name, 0)),
            "priorityLevel": r.priority,
            "connectedSince": iso_ms(r.since),
            "lastActiveTime": iso_ms(r.last_active),
            "address": f"pid:{r.pid}" if r.pid else "lease",
            "leaseUntil": iso_ms(r.lease_until),
            "alive": consumers.alive(ctx, r),
        })
    s = state(c)
    typ = subs.type_of(c)
    if typ == subs.KEY_SHARED:
        ranges = key_shared.ranges_of(ctx, c)
        for x in cons:
            x["keyHashRanges"] = [f"[{a}, {b}]" for a, b in ranges.get(x["consumerName"], [])]
    active_name = None
    if typ in subs.SINGLE_ACTIVE and live:
        alive = [r for r in live if consumers.alive(ctx, r)]
        act = active(alive, partition_index(info.name), info.name) if typ == subs.FAILOVER \
            else (alive[0] if alive else None)
        active_name = act.name if act else None
        for x in cons:
            x["isActive"] = x["consumerName"] == active_name
    out = {
        "msgRateOut": 0.0, "msgThroughputOut": 0.0,
        "bytesOutCounter": s.out_bytes, "msgOutCounter": s.out,
        "msgRateRedeliver": 0.0,
        "msgBacklog": c.backlog(info.next_offset),
        "backlogSize": backlog_quota.backlog_bytes(info, c.mark_delete + 1),
        "unackedMessages": sum(pend.values()),
        "type": subs.shown_type(c),
        "msgRateExpired": 0.0,
        "lastAckedTimestamp": s.last_ack,
        "lastConsumedTimestamp": s.last_consumed,
        "consumers": cons,
        "isDurable": True,
        "isReplicated": False,
        "replayCount": redelivery_state.replay_count(ctx, c.id),
        "delayedMessages": delayed.count(ctx, c.id),
    }
    if active_name is not None:
        out["activeConsumerName"] = active_name
    return out


def topic_stats(ctx, info) -> dict:
    subs_out = {}
    for c in ctx.cursors.list(ctx.txn, info.ml_id):
        subs_out[c.name] = subscription_stats(ctx, info, c)
    # msgInCounter counts messages, a batch as its messages (the ledger counts entries:
    # entriesAddedCounter in stats-internal); averageMsgSize is per message too.
    msgs_in = info.entries_added + (ctx.get("msgInExtra", info.ml_id) or 0)
    avg = (info.bytes_added / msgs_in) if msgs_in else 0.0
    pubs, waiting = access.publishers(ctx, info.name)
    out = {
        "msgRateIn": 0.0, "msgThroughputIn": 0.0, "msgRateOut": 0.0, "msgThroughputOut": 0.0,
        "bytesInCounter": info.bytes_added, "msgInCounter": msgs_in,
        "bytesOutCounter": sum(s["bytesOutCounter"] for s in subs_out.values()),
        "msgOutCounter": sum(s["msgOutCounter"] for s in subs_out.values()),
        "averageMsgSize": avg,
        "storageSize": info.total_size,
        "offloadedStorageSize": sum(r.size for r in ledger_rows(info) if r.offloaded),
        # The slowest subscription's estimated backlog, as the managed ledger reports it.
        "backlogSize": max((s["backlogSize"] for s in subs_out.values()), default=0),
        "earliestMsgPublishTimeInBacklogs": 0,
        "publishers": pubs,
        "waitingPublishers": waiting,
        "subscriptions": subs_out,
        "replication": {},
        "deduplicationStatus": _dedup_status(ctx, info.name),
    }
    epoch = access.topic_epoch(ctx, info.name)
    if epoch is not None:   # set once an exclusive producer has held the topic
        out["topicEpoch"] = epoch
    return out


# -- the stats as Pulsar's admin REST answers them (serve) ----------------------------------------
# The command line's stats stay as they are (tests/store/test_old_store.py fences their every
# byte); serve's REST adds what pulsar-admin reads from Pulsar that they leave out.
def pulsar_topic_stats(ctx, info) -> dict:
    doc = topic_stats(ctx, info)
    doc.update(_backlog_quota(ctx, info))
    for c in ctx.cursors.list(ctx.txn, info.ml_id):
        sub = doc["subscriptions"][c.name]
        sub["msgBacklogNoDelayed"] = max(0, sub["msgBacklog"] - sub["delayedMessages"])
        # Made by pulsar-admin, no consumer yet: Pulsar's subscription has no dispatcher.
        sub["type"] = subs.shown_type(c)
        # Stamped by expire-messages when it had a backlog to look at, and when an ack or an
        # expiry moved the mark-delete position (not skip, clear-backlog or a reset).
        s = state(c)
        sub["lastExpireTimestamp"] = s.last_expire
        sub["lastMarkDeleteAdvancedTimestamp"] = s.last_mark_delete_advanced
        sub["totalMsgExpired"] = s.expired
    return doc


def pulsar_internal_stats(ctx, info) -> dict:
    """internal_stats as Pulsar answers them: the ledger being written shows 0 entries and 0
    bytes (BookKeeper learns them when it closes; currentLedgerEntries counts them), a cursor
    is active while consumers are connected, numberOfEntriesSinceFirstNotAckedMessage counts
    the positions in (mark-delete, read position] as ManagedLedgerImpl.getNumberOfEntries does,
    and a topic without a schema or a compacted ledger says so."""
    doc = internal_stats(ctx, info)
    if doc["ledgers"]:
        doc["ledgers"][-1].update(entries=0, size=0)
    for c in ctx.cursors.list(ctx.txn, info.ml_id):
        cs = doc["cursors"][c.name]
        cs["active"] = any(consumers.alive(ctx, r) for r in consumers.records(ctx, c))
        cs["numberOfEntriesSinceFirstNotAckedMessage"] = max(0, c.read_position - c.mark_delete)
    doc["schemaLedgers"] = []
    doc["compactedLedger"] = {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False,
                              "underReplicated": False}
    return doc


def pulsar_aggregate(parts: list[dict]) -> dict:
    """aggregate() as TopicStatsImpl.add makes it: the quota limits are the partitions' (the
    last one's), the whole has no deduplicationStatus, and the subscriptions' counters of
    pulsar_topic_stats add up."""
    out = aggregate(parts)
    del out["deduplicationStatus"]
    for k in ("backlogQuotaLimitSize", "backlogQuotaLimitTime"):
        out[k] = parts[-1][k] if parts else 0
    for name, sub in out["subscriptions"].items():
        for k in ("msgBacklogNoDelayed", "totalMsgExpired"):  # SubscriptionStatsImpl.add's
            sub[k] = sum(p["subscriptions"][name][k] for p in parts if name in p["subscriptions"])
    return out


def _backlog_quota(ctx, info) -> dict:
    """The topic's backlog quota limits, -1 where none is set (Pulsar's defaults), and the age
    of the oldest unacknowledged message, which Pulsar knows (else -1) only where a time
    limit makes it check."""
    quotas = policies.effective(ctx, info.name, policies.BACKLOG_QUOTA) or {}
    age = -1
    if "message_age" in quotas:
        ages = [backlog_quota.oldest_age_ms(ctx, info, c)
                for c in ctx.cursors.list(ctx.txn, info.ml_id)]
        age = max(ages, default=0) // 1000 if ages else -1
    return {"backlogQuotaLimitSize": quotas.get("destination_storage", {}).get("limitSize", -1),
            "backlogQuotaLimitTime": quotas.get("message_age", {}).get("limitTime", -1),
            "oldestBacklogMessageAgeSeconds": age}


def _dedup_status(ctx, topic: str) -> str:
    return "Enabled" if policies.effective(ctx, topic, policies.DEDUP) else "Disabled"


def _ranges_text(info, ranges) -> str:
    # Pulsar prints open-closed position ranges: [(3:4..3:7]] holds 3:5, 3:6 and 3:7.
    parts = [f"({info.mark_position(a - 1)}..{info.position(b)}]" for a, b in ranges]
    return "[" + ", ".join(parts) + "]"


def internal_stats(ctx, info) -> dict:
    cur = LedgerRow.from_stored(info.ledgers[-1]) if info.ledgers else None
    cursors = {}
    for c in ctx.cursors.list(ctx.txn, info.ml_id):
        ranges = ctx.cursors.individually_deleted(ctx.txn, c)
        cursors[c.name] = {
            "markDeletePosition": str(info.mark_position(c.mark_delete)),
            "readPosition": str(info.position(c.read_position)),
            "waitingReadOp": False,
            "pendingReadOps": 0,
            "messagesConsumedCounter": state(c).out,
            "cursorLedger": -1,
            "cursorLedgerLastEntry": -1,
            "individuallyDeletedMessages": _ranges_text(info, ranges),
            "lastLedgerSwitchTimestamp": "",
            "state": "Open",
            "active": True,
            "numberOfEntriesSinceFirstNotAckedMessage": max(0, c.read_position - c.mark_delete - 1),
            "totalNonContiguousDeletedMessagesRange": len(ranges),
            "subscriptionHavePendingRead": False,
            "subscriptionHavePendingReplayRead": False,
            "properties": {},
        }
    return {
        "entriesAddedCounter": info.entries_added,
        "numberOfEntries": info.entries,
        "totalSize": info.total_size,
        "currentLedgerEntries": cur.entries if cur else 0,
        "currentLedgerSize": cur.size if cur else 0,
        "lastLedgerCreatedTimestamp": iso_ms(cur.created_ms) if cur else "",
        "waitingCursorsCount": 0,
        "pendingAddEntriesCount": 0,
        "lastConfirmedEntry": str(info.mark_position(info.last_offset)),
        "state": "LedgerOpened",
        "ledgers": [{"ledgerId": r.ledger_id, "entries": r.entries, "size": r.size,
                     "offloaded": r.offloaded, "underReplicated": False}
                    for r in ledger_rows(info)],
        "cursors": cursors,
    }


_SUMMED = ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "bytesInCounter",
           "msgInCounter", "bytesOutCounter", "msgOutCounter", "storageSize",
           "offloadedStorageSize", "backlogSize", "waitingPublishers")
_SUB_SUMMED = ("msgRateOut", "msgThroughputOut", "bytesOutCounter", "msgOutCounter",
               "msgRateRedeliver", "msgBacklog", "backlogSize", "unackedMessages",
               "msgRateExpired", "replayCount", "delayedMessages")


def _publishers_by_index(parts: list[dict]) -> list[dict]:
    """A partitioned topic's publishers as PartitionedTopicStats adds them up by default
    (aggregatePublisherStatsByProducerName off): the i-th publisher of every partition into one
    entry, which keeps rates and the mean of the average sizes and nothing that names a
    producer (see each partition's own stats for that)."""
    out: list[dict] = []
    counts: list[int] = []
    for p in parts:
        for i, s in enumerate(p["publishers"]):
            if i == len(out):
                out.append({"msgRateIn": 0.0, "msgThroughputIn": 0.0, "averageMsgSize": 0.0,
                            "chunkedMessageRate": 0.0, "producerId": 0,
                            "supportsPartialProducer": False})
                counts.append(0)
            agg = out[i]
            counts[i] += 1
            agg["msgRateIn"] += s["msgRateIn"]
            agg["msgThroughputIn"] += s["msgThroughputIn"]
            agg["averageMsgSize"] = (agg["averageMsgSize"] * (counts[i] - 1)
                                     + s["averageMsgSize"]) / counts[i]
    return out


def aggregate(parts: list[dict]) -> dict:
    """A partitioned topic's stats: the partitions' counters added up, subscriptions merged by
    name (pulsar-admin's PartitionedTopicStats)."""
    out = {k: sum(p.get(k, 0) for p in parts) for k in _SUMMED}
    n = out["msgInCounter"]
    out["averageMsgSize"] = (out["bytesInCounter"] / n) if n else 0.0
    out["earliestMsgPublishTimeInBacklogs"] = 0
    out["publishers"] = _publishers_by_index(parts)
    out["replication"] = {}
    out["deduplicationStatus"] = parts[0]["deduplicationStatus"] if parts else "Disabled"
    subs_out: dict = {}
    for p in parts:
        for name, s in p["subscriptions"].items():
            agg = subs_out.get(name)
            if agg is None:
                subs_out[name] = dict(s, consumers=list(s["consumers"]))
                continue
            for k in _SUB_SUMMED:
                agg[k] = agg.get(k, 0) + s.get(k, 0)
            agg["consumers"].extend(s["consumers"])
            agg["lastAckedTimestamp"] = max(agg["lastAckedTimestamp"], s["lastAckedTimestamp"])
            agg["lastConsumedTimestamp"] = max(agg["lastConsumedTimestamp"],
                                               s["lastConsumedTimestamp"])
    out["subscriptions"] = subs_out
    return out
