"""The message history behind `explain` (issue 17 item 2; CLI.md "Watching and teaching"): every
event recorded in the same transaction as its change, stamped with the store's clock; retention
trims it; a store setting turns it off; a dead letter's life starts with its original's. Real
LMDB in tmp_path, a simulated clock."""
from __future__ import annotations

import pytest

from pulsarctl.broker import Broker, history, policies, retention, topics
from pulsarctl.errors import MessageNotFound
from pulsarctl.messages import MessageId, OutgoingMessage, parse_message_id
from pulsarctl.names import parse_topic

from simclock import START_MS

LEASE = 600_000
FULL = "persistent://public/default/"


def msgs(n, prefix="m"):
    return [OutgoingMessage(f"{prefix}{i}".encode()) for i in range(n)]


def sub(broker, topic, s, consumer, typ="Shared", settings=None, fetch=0):
    return broker.subscribe(topic, s, consumer, typ, "Earliest", lease_ms=LEASE, fetch=fetch,
                            settings=settings)[1]


def life(broker, topic, mid, s=None):
    return [(e["event"], e["subscription"], e["consumerName"], e["redeliveryCount"])
            for e in broker.explain(topic, mid, s)["events"]]


def test_publish_deliver_ack_in_order_with_the_store_clock(broker, clock):
    _p, ids = broker.publish("t", msgs(2), "p1")
    sub(broker, "t", "s", "c1")
    clock.advance(1000)
    broker.fetch("t", "s", "c1", 10)
    clock.advance(1000)
    broker.ack("t", "s", [ids[0]])
    doc = broker.explain("t", ids[0])
    assert doc["messageId"] == str(ids[0]) and doc["topic"] == FULL + "t"
    assert [(e["event"], e["at"]) for e in doc["events"]] == [
        ("published", START_MS), ("delivered", START_MS + 1000), ("acked", START_MS + 2000)]
    pub = doc["events"][0]
    assert (pub["producer"], pub["sequenceId"]) == ("p1", 0)
    assert doc["events"][1]["consumerName"] == "c1" and doc["events"][1]["type"] == "Shared"
    assert life(broker, "t", ids[1]) == [("published", None, None, None),
                                         ("delivered", "s", "c1", 0)]


def test_nack_redelivery_says_why(broker, clock):
    _p, ids = broker.publish("t", msgs(1))
    sub(broker, "t", "s", "c1", settings={"negativeAckRedeliveryDelayMs": 4000})
    broker.fetch("t", "s", "c1", 10)
    clock.advance(5000)
    broker.nack("t", "s", ids)
    clock.advance(5000)
    got = broker.fetch("t", "s", "c1", 10)
    assert [m.redelivery_count() for m in got] == [1]
    events = broker.explain("t", ids[0])["events"]
    assert [e["event"] for e in events] == ["published", "delivered", "nacked", "redelivered",
                                            "delivered"]
    assert events[2]["delay"] == 4000
    assert events[3]["reason"] == "nacked at 00:00:05, nack backoff 4s"
    assert events[4]["redeliveryCount"] == 1
    assert events[4]["reason"] == "nacked at 00:00:05, nack backoff 4s"


def test_ack_timeout_and_consumer_gone(broker, clock):
    _p, ids = broker.publish("t", msgs(2))
    sub(broker, "t", "s", "c1", settings={"ackTimeoutMs": 30_000})
    broker.fetch("t", "s", "c1", 1)
    clock.advance(31_000)
    broker.fetch("t", "s", "c1", 1)  # fires the ack timeout
    events = broker.explain("t", ids[0])["events"]
    assert [e["event"] for e in events][:4] == ["published", "delivered", "ackTimeout",
                                                "redelivered"]
    assert events[3]["reason"] == "ack timeout 30s"
    # A second consumer closes while holding a message: it goes back, consumerGone.
    sub(broker, "t", "s", "c2")
    broker.fetch("t", "s", "c2", 5)
    broker.close_consumer("t", "s", "c2")
    gone = [e for e in broker.explain("t", ids[1])["events"] if e["event"] == "consumerGone"]
    assert gone and gone[-1]["reason"] == "consumer c2 closed"


def test_dead_letter_is_followed_back_to_its_original(broker, clock):
    _p, ids = broker.publish("t", msgs(1))
    sub(broker, "t", "s", "c1", settings={"negativeAckRedeliveryDelayMs": 1000,
                                          "maxRedeliverCount": 1})
    for _ in range(2):
        broker.fetch("t", "s", "c1", 10)
        broker.nack("t", "s", ids)
        clock.advance(2000)
    broker.fetch("t", "s", "c1", 10)  # fires: past maxRedeliverCount, to the DLQ
    events = broker.explain("t", ids[0])["events"]
    dead = [e for e in events if e["event"] == "deadLettered"]
    assert dead and dead[0]["toTopic"] == FULL + "t-s-DLQ"
    dlq_id = parse_message_id(dead[0]["toMessageId"])
    doc = broker.explain("t-s-DLQ", dlq_id)
    kinds = [(e["topic"].rsplit("/", 1)[1], e["event"]) for e in doc["events"]]
    assert kinds[0] == ("t", "published")
    assert ("t", "deadLettered") in kinds
    assert kinds[-1] == ("t-s-DLQ", "published")
    assert doc["events"][-1]["fromMessageId"] == str(ids[0])


def test_retry_letter_names_topic_and_delay(broker, clock):
    _p, ids = broker.publish("t", msgs(1))
    sub(broker, "t", "s", "c1", settings={"enableRetry": True})
    broker.fetch("t", "s", "c1", 10)
    broker.reconsume_later("t", "s", ids, 5000)
    retried = [e for e in broker.explain("t", ids[0])["events"] if e["event"] == "retried"]
    assert retried and retried[0]["toTopic"].endswith("t-s-RETRY") and retried[0]["delay"] == 5000


def test_delayed_skipped_cleared_expired(broker, clock):
    m = OutgoingMessage(b"later", deliver_at=START_MS + 60_000)
    _p, ids = broker.publish("t", [m] + msgs(3))
    sub(broker, "t", "s", "c1")
    events = broker.explain("t", ids[0])["events"]
    assert events[1]["event"] == "delayed" and events[1]["until"] == START_MS + 60_000
    broker.subscription("t", "s").skip(1)
    broker.subscription("t", "s").clear_backlog()
    assert [e["event"] for e in broker.explain("t", ids[0])["events"]][-1] == "skipped"
    assert [e["event"] for e in broker.explain("t", ids[3])["events"]][-1] == "cleared"
    _p, more = broker.publish("t", msgs(1, "x"))
    clock.advance(120_000)
    broker.subscription("t", "s").expire_messages(60_000)
    last = broker.explain("t", more[0])["events"][-1]
    assert (last["event"], last["reason"]) == ("expired", "TTL 1m")


def test_an_aborted_transaction_leaves_no_event(broker, clock):
    _p, ids = broker.publish("t", msgs(1))
    sub(broker, "t", "s", "c1")

    def fails(ctx):
        from pulsarctl.broker import consuming
        consuming.ack(ctx, "t", "s", ids)
        assert history.events_of(ctx, ctx.ledgers.lookup(ctx.txn, FULL + "t"), 0)[-1][0] == "acked"
        raise RuntimeError("crash before commit")
    with pytest.raises(RuntimeError):
        broker._write(fails)
    assert [e["event"] for e in broker.explain("t", ids[0])["events"]] == ["published"]


def test_off_switch(broker, clock):
    broker._write(lambda ctx: ctx.put(False, "setting", "messageHistoryEnabled"))
    _p, ids = broker.publish("t", msgs(1))
    assert broker.explain("t", ids[0])["events"] == []


def test_unknown_id_is_message_not_found(broker):
    broker.publish("t", msgs(1))
    with pytest.raises(MessageNotFound):
        broker.explain("t", MessageId(1, 99, -1))
    with pytest.raises(MessageNotFound):
        broker.explain("nope", MessageId(1, 0, -1))


def test_retention_trims_the_history_of_trimmed_ledgers(store_path, clock):
    """The history of trimmed entries is kept for messageHistoryRetention: an entry with a life
    of its own keeps its published event (stored from the entry before it went); one the
    backlog clear passed keeps that range event. After the retention, explain knows neither."""
    b = Broker(store_path, clock)
    try:
        b._write(lambda ctx: ctx.put(10, "setting", "managedLedgerMaxEntriesPerLedger"))
        b.ledgers.rollover_entries = 10
        _p, ids = b.publish("t", msgs(25))
        sub(b, "t", "s", "c1")
        got = b.fetch("t", "s", "c1", 1)
        b.ack("t", "s", [got[0].id])
        b.subscription("t", "s").clear_backlog()  # ledgers 1 and 2 trimmed (retention 0)
        assert b.topics.internal_stats("t")["numberOfEntries"] < 25
        assert [e["event"] for e in b.explain("t", ids[0])["events"]] == \
            ["published", "delivered", "acked"]
        assert [e["event"] for e in b.explain("t", ids[1])["events"]] == ["cleared"]
        clock.advance(8 * 24 * 3600 * 1000)
        b._write(lambda ctx: retention.trim(ctx, topics.require(ctx, parse_topic("t"))))
        for mid in ids[:2]:
            with pytest.raises(MessageNotFound):
                b.explain("t", mid)
        assert b.explain("t", ids[24])["events"]  # the ledger that takes appends stays
    finally:
        b.close()


def test_watch_hands_out_committed_events_only(broker, clock, monkeypatch):
    monkeypatch.setattr(history, "_WATCH", None)
    history.watch()
    _p, ids = broker.publish("t", msgs(1))
    sub(broker, "t", "s", "c1")
    broker.fetch("t", "s", "c1", 1)
    seen = history.watched()
    assert [(t.rsplit("/", 1)[1], pos, v[0]) for t, pos, v in seen] == [
        ("t", f"{ids[0].ledger_id}:{ids[0].entry_id}", "published"),
        ("t", f"{ids[0].ledger_id}:{ids[0].entry_id}", "delivered")]


def _history_records(broker) -> int:
    def count(ctx):
        return sum(1 for _ in ctx.env.cursor(ctx.txn, "history"))
    return broker._read(count)


def test_moving_the_cursor_over_many_is_one_range_event(broker):
    """clear-backlog, skip and a cumulative ack write one event for their range (O(1), as the
    cursor's move is), and explain shows it on each entry of the range — but not on one the
    subscription had acked before."""
    _p, ids = broker.publish("t", msgs(1000))
    sub(broker, "t", "s", "c1", typ="Exclusive")
    got = broker.fetch("t", "s", "c1", 1)
    broker.ack("t", "s", [got[0].id])
    before = _history_records(broker)
    broker.subscription("t", "s").skip(10)
    broker.subscription("t", "s").clear_backlog()
    assert _history_records(broker) - before == 2
    assert [e["event"] for e in broker.explain("t", ids[0])["events"]] == \
        ["published", "delivered", "acked"]
    assert [e["event"] for e in broker.explain("t", ids[5])["events"]] == ["published", "skipped"]
    assert [e["event"] for e in broker.explain("t", ids[500])["events"]] == \
        ["published", "cleared"]
    _p, more = broker.publish("t", msgs(100))
    before = _history_records(broker)
    broker.ack("t", "s", [more[49]], cumulative=True)
    assert _history_records(broker) - before == 1
    acked = broker.explain("t", more[10])["events"][-1]
    assert acked["event"] == "acked" and acked["cumulative"] is True
    assert [e["event"] for e in broker.explain("t", more[60])["events"]] == ["published"]


def test_a_fetch_and_an_ack_of_many_are_a_few_span_records(broker):
    """Deliveries of one fetch and acks of one call are span records of at most MAX_SPAN
    offsets (one put each, not one per message), and explain finds them on every entry,
    at the span's edges too."""
    _p, ids = broker.publish("t", msgs(3000))
    sub(broker, "t", "s", "c1")
    sub(broker, "t", "other", "c2")   # a subscription that never fetches
    before = _history_records(broker)
    got = broker.fetch("t", "s", "c1", 3000)
    assert len(got) == 3000
    assert _history_records(broker) - before == 3  # 3000 offsets in spans of 1024
    broker.ack("t", "s", [m.id for m in got[::2]])  # every other one: not a run
    assert _history_records(broker) - before == 6
    for i in (0, 1, 1023, 1024, 2047, 2048, 2998, 2999):
        events = [e["event"] for e in broker.explain("t", ids[i])["events"]]
        assert events == (["published", "delivered", "acked"] if i % 2 == 0
                          else ["published", "delivered"]), i
        assert broker.explain("t", ids[i], "other")["events"][1:] == []


def test_an_ack_of_some_indexes_of_a_batch_is_theirs(broker):
    from pulsarctl.broker import batches as batching

    _p, ids = broker.publish("t", msgs(3), batching=batching.Spec(10, 1 << 20))
    sub(broker, "t", "s", "c1")
    got = broker.fetch("t", "s", "c1", 10)
    broker.ack("t", "s", [got[1].id])
    kinds = {i: [e["event"] for e in broker.explain("t", ids[i])["events"]] for i in range(3)}
    assert kinds == {0: ["published", "delivered"], 1: ["published", "delivered", "acked"],
                     2: ["published", "delivered"]}
    broker.ack("t", "s", [got[0].id, got[2].id])   # the entry is acked whole now
    kinds = {i: [e["event"] for e in broker.explain("t", ids[i])["events"]] for i in range(3)}
    assert kinds == {0: ["published", "delivered", "acked"],
                     1: ["published", "delivered", "acked", "acked"],
                     2: ["published", "delivered", "acked"]}
    assert broker.explain("t", ids[1])["events"][2]["batchIndexes"] == [1]


# -- why nothing happened (issue 27 item 5): held and refused, once per cause ---------------------
def held(broker, topic, mid, s=None):
    return [(e["cause"], e["consumerName"]) for e in broker.explain(topic, mid, s)["events"]
            if e["event"] == "held"]


def test_a_delayed_message_not_due_is_held_once_however_often_consumers_fetch(broker, clock):
    _p, (later,) = broker.publish("t", [OutgoingMessage(b"later", deliver_at=START_MS + 60_000)])
    sub(broker, "t", "s", "c1")
    for _ in range(3):
        assert broker.fetch("t", "s", "c1", 10) == []
    assert held(broker, "t", later) == [("notDueYet", "c1")]
    clock.advance(61_000)
    assert [m.id for m in broker.fetch("t", "s", "c1", 10)] == [later]
    assert [e["event"] for e in broker.explain("t", later)["events"]] == [
        "published", "delayed", "held", "delivered"]
    # Exclusive delivers delayed messages at once: nothing held there.
    sub(broker, "t", "ex", "e1", "Exclusive")
    broker.fetch("t", "ex", "e1", 10)
    assert held(broker, "t", later, "ex") == []


def test_a_key_no_consumer_covers_is_held_once(broker):
    _p, ids = broker.publish("t", [OutgoingMessage(b"x", key=f"k{i}") for i in range(30)])
    broker.subscribe("t", "s", "c1", "Key_Shared", "Earliest", lease_ms=LEASE,
                     policy={"keySharedPolicy": "sticky", "ranges": [[0, 9999]]})
    got = {m.id for m in broker.fetch("t", "s", "c1", 30)}
    broker.fetch("t", "s", "c1", 30)
    waiting = [mid for mid in ids if mid not in got]
    assert waiting
    for mid in waiting:
        assert held(broker, "t", mid) == [("noConsumerForSlot", None)]
    assert held(broker, "t", next(iter(got))) == []


def test_a_consumer_at_its_unacked_limit_holds_the_next_message_once(broker):
    _p, ids = broker.publish("t", msgs(5))
    broker.policies.set("topic", "t", policies.MAX_UNACKED_CONSUMER, 2)
    sub(broker, "t", "s", "c1")
    assert len(broker.fetch("t", "s", "c1", 10)) == 2    # the limit: blocked now
    for _ in range(3):
        assert broker.fetch("t", "s", "c1", 10) == []
    assert held(broker, "t", ids[2]) == [("unackedLimit", "c1")]
    reason = [e for e in broker.explain("t", ids[2])["events"] if e["event"] == "held"][0][
        "reason"]
    assert reason.startswith("consumer c1 is at maxUnackedMessagesPerConsumer (2 unacked)")
    assert held(broker, "t", ids[3]) == []
    broker.ack("t", "s", ids[:2])                         # half the limit: unblocked
    assert len(broker.fetch("t", "s", "c1", 10)) == 2
    assert held(broker, "t", ids[2]) == [("unackedLimit", "c1")]    # still the one event


def test_a_refused_consumer_is_told_on_the_message_it_would_have_got_once(broker):
    from pulsarctl.errors import ConsumerBusy

    _p, ids = broker.publish("t", msgs(2))
    sub(broker, "t", "s", "c1", "Exclusive")
    for _ in range(2):
        with pytest.raises(ConsumerBusy):
            sub(broker, "t", "s", "c2", "Exclusive")
    with pytest.raises(ConsumerBusy):
        sub(broker, "t", "s", "c3", "Shared")            # the wrong type
    refusals = [(e["consumerName"], e["error"]) for e in broker.explain("t", ids[0])["events"]
                if e["event"] == "refused"]
    assert refusals == [("c2", "ConsumerBusy"), ("c3", "ConsumerBusy")]
    assert [e["event"] for e in broker.explain("t", ids[1])["events"]] == ["published"]
    # The refusal rolled back whole: c2 and c3 are not consumers of s.
    assert {c["consumerName"] for c in broker.subscription("t", "s").consumers()} == {"c1"}


def test_a_subscription_at_its_unacked_limit_holds_the_next_message_once(broker):
    _p, ids = broker.publish("t", msgs(5))
    broker.policies.set("topic", "t", policies.MAX_UNACKED_SUBSCRIPTION, 2)
    sub(broker, "t", "s", "c1")
    sub(broker, "t", "s", "c2")
    assert len(broker.fetch("t", "s", "c1", 1)) == 1
    assert len(broker.fetch("t", "s", "c2", 5)) == 1     # the subscription's limit: blocked
    for name in ("c1", "c2", "c1"):
        assert broker.fetch("t", "s", name, 5) == []
    assert held(broker, "t", ids[2]) == [("subscriptionUnackedLimit", None)]
