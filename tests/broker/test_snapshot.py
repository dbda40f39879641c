"""What `pulsarctl top` reads (issue 17 item 4): the broker's snapshot of a namespace (counters,
backlog, subscriptions, consumers and what each holds, dead letter topics and their sizes, the
clock), rates from two snapshots on the simulated clock, and who runs the timers. Real LMDB in
tmp_path, the simulated clock; no sleep."""
from __future__ import annotations

import os

import pytest

from pulsarctl import daemon as daemons
from pulsarctl import dashboard
from pulsarctl.broker import snapshot
from pulsarctl.errors import NamespaceNotFound, UsageError
from pulsarctl.messages import OutgoingMessage
from simclock import START_MS

FULL = "persistent://public/default/"
LEASE = 600_000


def _msgs(n):
    return [OutgoingMessage(f"m{i}".encode()) for i in range(n)]


def _sub(broker, topic, s, consumer, typ="Shared", settings=None):
    broker.subscribe(topic, s, consumer, typ, "Earliest", lease_ms=LEASE, fetch=0,
                     settings=settings)


def _topic(snap, name):
    return next(t for t in snap["topics"] if t["topic"] == FULL + name)


def test_counts_backlog_subscriptions_and_what_each_consumer_holds(broker):
    broker.publish("t", _msgs(5))
    _sub(broker, "t", "jobs", "c1")
    _sub(broker, "t", "jobs", "c2")
    _sub(broker, "t", "audit", "a1", "Exclusive")
    assert len(broker.fetch("t", "jobs", "c1", 2)) == 2
    assert len(broker.fetch("t", "jobs", "c2", 1)) == 1
    broker.publish("other", _msgs(1))

    snap = broker.snapshot("public/default")
    assert snap["namespace"] == "public/default"
    assert snap["clock"] == {"mode": "simulated", "now": "2026-01-01T00:00:00.000Z",
                             "nowMs": START_MS}
    assert [t["topic"] for t in snap["topics"]] == [FULL + "other", FULL + "t"]
    t = _topic(snap, "t")
    assert (t["msgInCounter"], t["msgOutCounter"], t["msgBacklog"], t["unackedMessages"],
            t["consumers"], t["partitions"], t["isDeadLetterTopic"]) == (5, 3, 10, 3, 3, 0, False)
    jobs, audit = t["subscriptions"][1], t["subscriptions"][0]
    assert (audit["name"], audit["type"], audit["msgBacklog"]) == ("audit", "Exclusive", 5)
    assert audit["consumers"][0]["isActive"] is True
    assert (jobs["name"], jobs["type"], jobs["msgBacklog"], jobs["unackedMessages"]) == \
        ("jobs", "Shared", 5, 3)
    assert {c["consumerName"]: c["unackedMessages"] for c in jobs["consumers"]} == \
        {"c1": 2, "c2": 1}
    assert t["msgRateIn"] is None and jobs["redeliveriesPerMinute"] is None  # one snapshot


def test_a_partitioned_topic_is_one_row_with_its_partitions_added_up(broker):
    broker.topics.create_partitioned("p", 3)
    broker.publish("p", _msgs(6))
    _sub(broker, "p", "s", "c1")
    broker.fetch("p", "s", "c1", 100)
    snap = broker.snapshot("public/default")
    (p,) = snap["topics"]
    assert (p["topic"], p["partitions"], p["msgInCounter"], p["unackedMessages"]) == \
        (FULL + "p", 3, 6, 6)
    (s,) = p["subscriptions"]
    assert s["consumers"] == [{"consumerName": "c1", "unackedMessages": 6, "alive": True}]


def test_every_namespace_without_one_and_errors_for_a_bad_one(broker):
    broker.tenants.create("acme")
    broker.namespaces.create("acme/orders")
    broker.publish("acme/orders/o", _msgs(1))
    broker.publish("t", _msgs(1))
    assert [t["topic"] for t in broker.snapshot()["topics"]] == \
        ["persistent://acme/orders/o", FULL + "t"]
    assert [t["topic"] for t in broker.snapshot("acme/orders")["topics"]] == \
        ["persistent://acme/orders/o"]
    with pytest.raises(NamespaceNotFound):
        broker.snapshot("acme/nope")
    with pytest.raises(UsageError):
        broker.snapshot("no-slash")


def test_rates_from_two_snapshots_on_the_simulated_clock(broker, clock):
    d = dashboard.Dashboard(broker, "public/default")
    _sub(broker, "t", "s", "c1", settings={"negativeAckRedeliveryDelayMs": 1000})
    first = d.take()
    assert first["intervalMs"] is None
    broker.publish("t", _msgs(30))
    got = broker.fetch("t", "s", "c1", 100)
    broker.nack("t", "s", [m.message_id() for m in got[:6]])
    clock.advance(60_000)                     # a minute of the store's clock
    broker.chores.fire_due()                  # the six nacked messages are redelivered
    second = d.take()
    t = _topic(second, "t")
    (s,) = t["subscriptions"]
    assert second["intervalMs"] == 60_000
    assert (t["msgRateIn"], t["msgRateOut"]) == (0.5, 0.5)      # 30 messages in 60 s
    assert (s["redeliveredCounter"], s["awaitingRedelivery"]) == (6, 6)
    assert s["redeliveriesPerMinute"] == t["redeliveriesPerMinute"] == 6.0
    # Nothing more happens in the next 30 s: the rates fall to zero.
    clock.advance(30_000)
    third = d.take()
    t3 = _topic(third, "t")
    assert (third["intervalMs"], t3["msgRateIn"], t3["redeliveriesPerMinute"]) == \
        (30_000, 0.0, 0.0)


def test_a_clock_standing_still_uses_the_real_seconds_between(broker, fake_time):
    d = dashboard.Dashboard(broker)
    d.take()
    broker.publish("t", _msgs(4))
    fake_time.sleep(2.0)                       # two real seconds; the store's clock stands
    t = _topic(d.take(), "t")
    assert t["msgRateIn"] == 2.0


def test_once_takes_two_snapshots_a_second_apart(broker, fake_time):
    fake_time.at(fake_time.now + 0.5, lambda: broker.publish("t", _msgs(3)))
    snap = dashboard.once(broker, "public/default")
    assert fake_time.slept == [1.0]
    assert snap["intervalMs"] == 1000 and _topic(snap, "t")["msgRateIn"] == 3.0


def test_rates_for_a_topic_made_between_snapshots_or_made_again():
    def snap(at, n):
        return {"clock": {"nowMs": at}, "topics": [
            {"topic": "x", "msgInCounter": n, "msgOutCounter": 0, "redeliveredCounter": 0,
             "subscriptions": []}]}
    assert snapshot.rates({"clock": {"nowMs": 0}, "topics": []}, snap(1000, 7))["topics"][0][
        "msgRateIn"] == 7.0
    assert snapshot.rates(snap(0, 50), snap(1000, 4))["topics"][0]["msgRateIn"] == 4.0


def _dead_letter(broker, clock, ids):
    """With maxRedeliverCount 1: delivered twice, nacked twice, then moved."""
    for _ in range(2):
        broker.fetch("t", "s", "c1", 100)
        broker.nack("t", "s", ids)
        clock.advance(1000)
        broker.chores.fire_due()


def test_dead_letter_topics_and_their_sizes(broker, clock):
    _sub(broker, "t", "s", "c1", settings={"maxRedeliverCount": 1,
                                           "negativeAckRedeliveryDelayMs": 1000})
    _, ids = broker.publish("t", _msgs(3))
    _dead_letter(broker, clock, ids)
    broker.publish("manual-DLQ", _msgs(2))      # named as a dead letter topic
    snap = broker.snapshot("public/default")
    (s,) = _topic(snap, "t")["subscriptions"]
    assert s["deadLetterTopic"] == FULL + "t-s-DLQ"
    assert _topic(snap, "t-s-DLQ")["isDeadLetterTopic"] is True
    assert {x["topic"]: (x["messages"], x["originTopic"], x["originSubscription"])
            for x in snap["deadLetterTopics"]} == {
        FULL + "manual-DLQ": (2, None, None),
        FULL + "t-s-DLQ": (3, FULL + "t", "s"),
    }
    # `dlq` tooling's own subscription: what it has not handled yet.
    broker.dlq("t-s-DLQ").peek(1)
    assert {x["topic"]: x["messages"] for x in broker.snapshot()["deadLetterTopics"]}[
        FULL + "t-s-DLQ"] == 3


def test_a_dead_letter_topic_in_another_namespace_is_listed_with_its_size(broker, clock):
    broker.tenants.create("ops")
    broker.namespaces.create("ops/dead")
    _sub(broker, "t", "s", "c1", settings={"maxRedeliverCount": 1,
                                           "deadLetterTopic": "ops/dead/all",
                                           "negativeAckRedeliveryDelayMs": 1000})
    _, ids = broker.publish("t", _msgs(1))
    _dead_letter(broker, clock, ids)
    snap = broker.snapshot("public/default")
    assert snap["deadLetterTopics"] == [{"topic": "persistent://ops/dead/all", "messages": 1,
                                         "originTopic": FULL + "t", "originSubscription": "s"}]


def test_daemon_state_none_running_then_a_holder_of_the_lock(broker):
    store = broker.path
    assert dashboard.daemon_state(store)["running"] is False
    fd = daemons.try_lock(store)
    try:
        daemons.write_state(store, {"pid": os.getpid(), "lastTick": "2026-01-01T00:00:01.000Z",
                                    "timersScheduled": 2, "timersDue": 0})
        d = dashboard.Dashboard(broker).take()["daemon"]
        assert (d["running"], d["pid"], d["lastTick"], d["timersScheduled"]) == \
            (True, os.getpid(), "2026-01-01T00:00:01.000Z", 2)
        assert d["kind"] == dashboard.runner_kind(dashboard._argv(os.getpid()))
    finally:
        daemons.step_down(store, fd)
    assert dashboard.daemon_state(store)["running"] is False


@pytest.mark.parametrize("argv,kind", [
    (["/usr/bin/python3", "-P", "-m", "pulsarctl", "--store", "/s", "daemon", "run"], "daemon"),
    (["/home/u/.venv/bin/pulsarctl", "serve", "--port", "6650"], "serve"),
    (["python", "-m", "pytest"], "process"),
])
def test_who_holds_the_lock_is_told_by_its_command_line(argv, kind):
    assert dashboard.runner_kind(argv) == kind
