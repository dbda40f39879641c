"""A read-only snapshot of a namespace (or the whole store) for `pulsarctl top`: per topic its
counters, backlog, subscriptions with their type, consumers and what each holds, the
redeliveries counted so far, and the dead letter topics with their sizes; and the store's clock.
One read transaction; nothing is changed and nothing fires.

The work is O(topics + subscriptions + what the subscriptions hold): the counters are kept
(the ledger's entries_added, the subscription's out and redelivered counts, the cursor's
backlog), and each subscription's stats come from stats.subscription_stats, as `topics stats`
shows them (its pending messages, replay set and delayed index are read, never the ledger).

Rates need two snapshots: pulsarctl/dashboard.py keeps the previous one and divides the
counters' differences by the time between them (rates() below does the arithmetic)."""
from __future__ import annotations

from pulsarctl.broker import deadletter, stats, subscriptions, tenants
from pulsarctl.broker.subscription_state import state
from pulsarctl.broker.dlq import SUBSCRIPTION as DLQ_SUBSCRIPTION
from pulsarctl.messages import iso_ms
from pulsarctl.names import DLQ_SUFFIX, parse_namespace, parse_topic

# The subscription counters that become rates between two snapshots (counter -> rate key),
# per second, except redeliveries, which a person counts per minute.
_PER_SECOND = {"msgInCounter": "msgRateIn", "msgOutCounter": "msgRateOut"}
_PER_MINUTE = {"redeliveredCounter": "redeliveriesPerMinute"}


def take(ctx, namespace: str | None = None) -> dict:
    """The snapshot of one namespace (every namespace when None); Broker.snapshot's body."""
    prefix = ""
    if namespace:
        parse_namespace(namespace)  # a malformed name is a usage error (exit 2)
        tenants.get_namespace(ctx, namespace)  # NamespaceNotFound (exit 3) with its hint
        prefix = f"persistent://{namespace}/"
    groups: dict[str, list] = {}   # topic (a partitioned topic once) -> [(partition, info)]
    for name, ml_id in ctx.ledgers.names(ctx.txn, prefix):
        # persistent://tenant/ns/local: a name with more slashes is no topic of a namespace
        if not name.startswith("persistent://") or name.count("/") != 4:
            continue
        t = parse_topic(name)
        base = str(t.partitioned_topic_name) if t.is_partition else name
        groups.setdefault(base, []).append((t.partition_index if t.is_partition else -1,
                                            ctx.ledgers.info(ctx.txn, ml_id)))
    rows, dead_letters = [], {}
    for base in sorted(groups):
        row = _topic(ctx, base, sorted(groups[base], key=lambda p: p[0]))
        rows.append(row)
        for s in row["subscriptions"]:
            if s["deadLetterTopic"]:
                dead_letters.setdefault(s["deadLetterTopic"], (base, s["name"]))
    by_name = {r["topic"]: r for r in rows}
    dlqs = []
    for r in rows:
        origin = dead_letters.get(r["topic"])
        r["isDeadLetterTopic"] = r["topic"].endswith(DLQ_SUFFIX) or origin is not None
        if r["isDeadLetterTopic"]:
            dlqs.append({"topic": r["topic"], "messages": r["deadLetters"],
                         "originTopic": origin[0] if origin else None,
                         "originSubscription": origin[1] if origin else None})
    for s_topic, (origin, sub) in sorted(dead_letters.items()):
        if s_topic not in by_name:  # named by a policy, outside the namespace or not made yet
            dlqs.append({"topic": s_topic, "messages": _dlq_elsewhere(ctx, s_topic),
                         "originTopic": origin, "originSubscription": sub})
    for r in rows:
        del r["deadLetters"]
    # The clock this transaction ran on: the store's (real, or simulated by `clock simulate`),
    # or the one the Broker was given (tests, lessons).
    simulated = ctx.broker._clock_for(ctx.txn).simulated
    return {
        "namespace": namespace,
        "clock": {"mode": "simulated" if simulated else "real", "now": iso_ms(ctx.now),
                  "nowMs": ctx.now},
        "topics": rows,
        "deadLetterTopics": dlqs,
    }


def _topic(ctx, name: str, parts: list) -> dict:
    subs: dict[str, dict] = {}
    msg_in = bytes_in = storage = 0
    for index, info in parts:
        msg_in += info.entries_added + (ctx.get("msgInExtra", info.ml_id) or 0)
        bytes_in += info.bytes_added
        storage += info.total_size
        for c in ctx.cursors.list(ctx.txn, info.ml_id):
            _merge(subs, _subscription(ctx, info, c))
    # What waits in a dead letter topic: the backlog of `pulsarctl dlq`'s own subscription
    # when it has one, else every entry kept. Both are counters (O(1)); `dlq list` counts a
    # batch's messages one by one.
    dlq_sub = subs.get(DLQ_SUBSCRIPTION)
    dead = dlq_sub["msgBacklog"] if dlq_sub else sum(i.entries for _, i in parts)
    sub_rows = [subs[k] for k in sorted(subs)]
    return {
        "topic": name,
        "partitions": len(parts) if parts[0][0] >= 0 else 0,
        "msgInCounter": msg_in,
        "msgOutCounter": sum(s["msgOutCounter"] for s in sub_rows),
        "bytesInCounter": bytes_in,
        "storageSize": storage,
        "msgBacklog": sum(s["msgBacklog"] for s in sub_rows),
        "backlogMessages": sum(s["backlogMessages"] for s in sub_rows),
        "backlogMessagesExact": all(s["backlogMessagesExact"] for s in sub_rows),
        "unackedMessages": sum(s["unackedMessages"] for s in sub_rows),
        "redeliveredCounter": sum(s["redeliveredCounter"] for s in sub_rows),
        "consumers": sum(len(s["consumers"]) for s in sub_rows),
        "msgRateIn": None, "msgRateOut": None, "redeliveriesPerMinute": None,
        "subscriptions": sub_rows,
        "deadLetters": dead,
    }


def _subscription(ctx, info, c) -> dict:
    st = stats.subscription_stats(ctx, info, c)
    messages, exact = subscriptions.backlog_messages(ctx, info, c)
    s = state(c)
    policy = s.policy
    dlq = None
    if policy.get("maxRedeliverCount") or policy.get("deadLetterTopic"):
        dlq = str(parse_topic(deadletter.dlq_topic(info.name, c.name, policy)))
    return {
        "name": c.name,
        "type": st["type"],
        "msgBacklog": st["msgBacklog"],   # entries, a batch as one: Pulsar's msgBacklog
        "backlogMessages": messages, "backlogMessagesExact": exact,
        "msgOutCounter": st["msgOutCounter"],
        "unackedMessages": st["unackedMessages"],
        # Waiting to go out again (the replay set) and held back until their time.
        "awaitingRedelivery": st["replayCount"],
        "delayedMessages": st["delayedMessages"],
        # Counted by the redelivery controller (redelivery.redeliver): a nack, an ack timeout or
        # an explicit redelivery, each message once per redelivery.
        "redeliveredCounter": s.redelivered,
        "deadLetterTopic": dlq,
        "msgRateOut": None, "redeliveriesPerMinute": None,
        "consumers": [{"consumerName": x["consumerName"],
                       "unackedMessages": x["unackedMessages"],
                       "alive": x["alive"],
                       **({"isActive": x["isActive"]} if "isActive" in x else {})}
                      for x in st["consumers"]],
    }


def _merge(subs: dict, s: dict) -> None:
    """A partitioned topic's subscription: its partitions' counts added up, a consumer that
    holds messages on several partitions shown once with what it holds on all of them."""
    have = subs.get(s["name"])
    if have is None:
        subs[s["name"]] = s
        return
    for k in ("msgBacklog", "backlogMessages", "msgOutCounter", "unackedMessages",
              "awaitingRedelivery", "delayedMessages", "redeliveredCounter"):
        have[k] += s[k]
    have["backlogMessagesExact"] = have["backlogMessagesExact"] and s["backlogMessagesExact"]
    if have["deadLetterTopic"] is None:
        have["deadLetterTopic"] = s["deadLetterTopic"]
    named = {x["consumerName"]: x for x in have["consumers"]}
    for x in s["consumers"]:
        if x["consumerName"] in named:
            y = named[x["consumerName"]]
            y["unackedMessages"] += x["unackedMessages"]
            y["alive"] = y["alive"] or x["alive"]
            if "isActive" in x:
                y["isActive"] = y.get("isActive", False) or x["isActive"]
        else:
            have["consumers"].append(x)
            named[x["consumerName"]] = x


def _dlq_elsewhere(ctx, name: str) -> int:
    """The size of a dead letter topic outside the snapshot's namespace (0 if not made yet)."""
    ml_id = next((i for n, i in ctx.ledgers.names(ctx.txn, name) if n == name), None)
    if ml_id is None:
        return 0
    info = ctx.ledgers.info(ctx.txn, ml_id)
    c = next((x for x in ctx.cursors.list(ctx.txn, ml_id) if x.name == DLQ_SUBSCRIPTION), None)
    return c.backlog(info.next_offset) if c is not None else info.entries


def rates(prev: dict | None, cur: dict, mono_s: float | None = None) -> dict:
    """cur with its rates filled in from the counters' growth since prev (a snapshot of the same
    scope): messages in and out per second, redeliveries per minute. The time between them is
    the store clock's when it moved (a simulated clock advanced by `clock advance 1m` gives
    per-minute rates of that minute), else mono_s, the real seconds between them (a simulated
    clock standing still while messages flow). Without prev, or with no time between them,
    the rates stay None: unknown, not zero. Sets cur["intervalMs"]."""
    cur["intervalMs"] = None
    if prev is None:
        return cur
    elapsed_ms = cur["clock"]["nowMs"] - prev["clock"]["nowMs"]
    if elapsed_ms <= 0:
        elapsed_ms = int(mono_s * 1000) if mono_s and mono_s > 0 else 0
    if elapsed_ms <= 0:
        return cur
    cur["intervalMs"] = elapsed_ms
    before = {t["topic"]: t for t in prev["topics"]}
    for t in cur["topics"]:
        p = before.get(t["topic"])
        _fill(p, t, elapsed_ms)
        p_subs = {s["name"]: s for s in p["subscriptions"]} if p else {}
        for s in t["subscriptions"]:
            _fill(p_subs.get(s["name"]), s, elapsed_ms)
    return cur


def _fill(prev: dict | None, row: dict, elapsed_ms: int) -> None:
    # A topic or subscription new since prev started from zero; a counter that went down (the
    # topic was deleted and made again) starts over.
    for per, table in ((1000, _PER_SECOND), (60_000, _PER_MINUTE)):
        for counter, rate in table.items():
            if counter not in row:
                continue
            was = prev.get(counter, 0) if prev else 0
            grew = row[counter] - was if row[counter] >= was else row[counter]
            row[rate] = round(grew * per / elapsed_ms, 2)

