"""Issue 14: Pulsar's compatibility rule for retry and dead letter topic names (the Java client's
ConsumerBuilderImpl, issue 9327, RetryTopicTest.testRetryTopicNameForCompatibility). With retry
enabled and a name left to the default, a *partitioned* topic
persistent://<tenant>/<namespace>/<subscription>-RETRY (or -DLQ), the default before Pulsar 2.8,
is used instead of <topic>-<subscription>-RETRY (-DLQ) where it exists; each name on its own.
Letters sent there land on its partitions. Real LMDB in tmp_path, the simulated clock.
"""
from __future__ import annotations

from collections import Counter

import pytest

from pulsarctl.messages import MessageId, OutgoingMessage

from simclock import START_MS  # noqa: F401  (the clock fixture starts there)
from cli_helpers import ok, pjson, rows

FULL = "persistent://public/default/"
LEASE = 600_000
RETRY = {"enableRetry": True, "maxRedeliverCount": 2}


def subscribe(broker, topic, s="my-subscription", settings=RETRY):
    names, _ = broker.subscribe(topic, s, "c", "Shared", "Earliest", lease_ms=LEASE,
                                settings=settings)
    return names


def everything(broker, topic):
    """What a partitioned (or plain) topic holds, all partitions together."""
    n = broker.partitions_of(topic)
    out = []
    for name in [f"{topic}-partition-{i}" for i in range(n)] if n else [topic]:
        if broker.topics.exists(name):
            msgs, _n, _l = broker.read_entries(name, None, 1000, after_id=MessageId.earliest)
            out += msgs
    return out


def test_old_partitioned_retry_and_dlq_topics_are_used(broker, clock):
    """testRetryTopicNameForCompatibility: both old names exist with 2 partitions; every
    message is reconsumed later until it is dead: N*(max+1) receives, N dead letters, all in
    the old topics, and nothing under the new names."""
    old_retry, old_dlq = "my-property/my-ns/my-subscription-RETRY", \
        "my-property/my-ns/my-subscription-DLQ"
    broker.tenants.create("my-property")
    broker.namespaces.create("my-property/my-ns")
    broker.topics.create_partitioned(old_retry, 2)
    broker.topics.create_partitioned(old_dlq, 2)
    topic = "persistent://my-property/my-ns/retry-topic"
    n = 10
    broker.publish(topic, [OutgoingMessage(f"Hello Pulsar [{i}]".encode()) for i in range(n)])
    names = subscribe(broker, topic)
    assert names == [topic, "persistent://" + old_retry + "-partition-0",
                     "persistent://" + old_retry + "-partition-1"]
    desc = broker.subscription(topic, "my-subscription").describe()
    assert desc["retryLetterTopic"] == "persistent://" + old_retry
    assert desc["deadLetterTopic"] == "persistent://" + old_dlq
    total = 0
    for _ in range(3 + 2):
        got = broker.fetch(names, "my-subscription", "c", 1000)
        total += len(got)
        if got:
            broker.reconsume_later(names, "my-subscription", [m.message_id() for m in got],
                                   1000)
        clock.advance(1000)
    assert total == n * 3
    dead = everything(broker, old_dlq)
    assert Counter(m.data() for m in dead) == Counter(
        f"Hello Pulsar [{i}]".encode() for i in range(n))
    assert {m.topic_name() for m in dead} == {"persistent://" + old_dlq + "-partition-0",
                                              "persistent://" + old_dlq + "-partition-1"}
    assert len(everything(broker, old_retry)) == n * 2
    listed = set(broker.topics.list("my-property/my-ns"))
    assert not any(t.startswith(topic + "-") for t in listed), listed
    assert broker.fetch(names, "my-subscription", "c", 1000) == []


@pytest.mark.parametrize("old", ["RETRY", "DLQ"])
def test_each_name_is_checked_on_its_own(broker, old):
    broker.topics.create_partitioned(f"s-{old}", 3)
    subscribe(broker, "t", "s")
    desc = broker.subscription("t", "s").describe()
    expect = {"RETRY": (FULL + "s-RETRY", FULL + "t-s-DLQ"),
              "DLQ": (FULL + "t-s-RETRY", FULL + "s-DLQ")}[old]
    assert (desc["retryLetterTopic"], desc["deadLetterTopic"]) == expect


def test_only_a_partitioned_old_topic_counts(broker):
    """getPartitionedTopicMetadata(...).partitions > 0: a plain topic of the old name does not
    count (subscription a); a partitioned one does (subscription b)."""
    broker.topics.create("a-RETRY")
    broker.topics.create("a-DLQ")
    broker.topics.create_partitioned("b-RETRY", 1)
    broker.topics.create_partitioned("b-DLQ", 1)
    subscribe(broker, "t", "a")
    subscribe(broker, "t", "b")
    a, b = (broker.subscription("t", s).describe() for s in "ab")
    assert (a["retryLetterTopic"], a["deadLetterTopic"]) == (FULL + "t-a-RETRY", FULL + "t-a-DLQ")
    assert (b["retryLetterTopic"], b["deadLetterTopic"]) == (FULL + "b-RETRY", FULL + "b-DLQ")


def test_names_given_are_kept_and_the_other_is_still_checked(broker):
    """A given retry topic stays; the dead letter topic, left to the default, follows the
    rule (ConsumerBuilderImpl checks when either is blank). Both given: no lookup."""
    broker.topics.create_partitioned("s-RETRY", 2)
    broker.topics.create_partitioned("s-DLQ", 2)
    subscribe(broker, "t", "s", {**RETRY, "retryLetterTopic": FULL + "mine"})
    desc = broker.subscription("t", "s").describe()
    assert (desc["retryLetterTopic"], desc["deadLetterTopic"]) == (FULL + "mine",
                                                                   FULL + "s-DLQ")
    subscribe(broker, "t2", "s", {**RETRY, "retryLetterTopic": FULL + "r2",
                                  "deadLetterTopic": FULL + "d2"})
    desc = broker.subscription("t2", "s").describe()
    assert (desc["retryLetterTopic"], desc["deadLetterTopic"]) == (FULL + "r2", FULL + "d2")


def test_the_rule_belongs_to_retry(broker, clock):
    """A plain dead letter policy (t1) dead-letters to <topic>-<subscription>-DLQ even where the
    old partitioned topic exists; with retry enabled (t2) the old topic takes the letter."""
    broker.topics.create_partitioned("s-DLQ", 2)
    names = {}
    for topic, extra in (("t1", {}), ("t2", {"enableRetry": True})):
        broker.publish(topic, [OutgoingMessage(topic.encode())])
        names[topic] = subscribe(broker, topic, "s", {
            "maxRedeliverCount": 1, "negativeAckRedeliveryDelayMs": 1000, **extra})
    for _ in range(3):
        for topic in ("t1", "t2"):
            got = broker.fetch(names[topic], "s", "c", 10)
            if got:
                broker.nack(names[topic], "s", [m.message_id() for m in got])
        clock.advance(1000)
        broker.chores.fire_due()
    assert [m.data() for m in everything(broker, "t1-s-DLQ")] == [b"t1"]
    assert [m.data() for m in everything(broker, "s-DLQ")] == [b"t2"]
    assert not broker.topics.exists("t2-s-DLQ")


def test_nacks_past_the_limit_land_on_the_old_partitioned_dlq(broker, clock):
    """With retry enabled a nack past the limit dead-letters too: to a partition of the old
    DLQ (by key hash; round robin without a key), never to a plain topic of its name."""
    broker.topics.create_partitioned("s-DLQ", 2)
    _, ids = broker.publish("t", [OutgoingMessage(b"a", key="k"), OutgoingMessage(b"b"),
                                  OutgoingMessage(b"c")])
    names = subscribe(broker, "t", "s", {**RETRY, "maxRedeliverCount": 1,
                                          "negativeAckRedeliveryDelayMs": 1000})
    for _ in range(3):
        got = broker.fetch(names, "s", "c", 10)
        if got:
            broker.nack(names, "s", [m.message_id() for m in got])
        clock.advance(1000)
        broker.chores.fire_due()
    dead = everything(broker, "s-DLQ")
    assert sorted(m.data() for m in dead) == [b"a", b"b", b"c"]
    parts = {m.data(): m.topic_name()[-1] for m in dead}
    assert parts[b"b"] != parts[b"c"]                        # round robin without a key
    assert FULL + "s-DLQ" not in broker.topics.list("public/default")


def test_the_names_stay_with_the_subscription(broker):
    """Chosen when retry is first enabled and stored: a later consumer keeps them even if the
    old topic is gone by then."""
    broker.topics.create_partitioned("s-RETRY", 2)
    subscribe(broker, "t", "s")
    broker.topics.delete("s-RETRY", force=True)
    names = subscribe(broker, "t", "s", {"enableRetry": True})
    assert broker.subscription("t", "s").describe()["retryLetterTopic"] == FULL + "s-RETRY"
    assert names == [FULL + "t", FULL + "s-RETRY"]


def test_cli_consume_exec_uses_the_old_partitioned_retry_topic(cli):
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    ok(cli("topics", "create-partitioned-topic", "s-RETRY", "-p", "2"))
    ok(cli("produce", "t", "-m", "hello"))
    ok(cli("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "1",
           "--enable-retry", "--exec", "exit 75", "--exec-retry-delay", "5s",
           "--idle-timeout", "2s"))
    desc = pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))
    assert desc["retryLetterTopic"] == FULL + "s-RETRY"
    got = []
    for i in range(2):
        got += rows(ok(cli("read", f"s-RETRY-partition-{i}", "-m", "earliest", "-n", "0",
                           "--until-end", "-o", "ndjson")).stdout)
    assert [r["payload"] for r in got] == ["hello"]
    assert got[0]["properties"]["RECONSUMETIMES"] == "1"
    ok(cli("clock", "advance", "5s"))
    r = ok(cli("consume", "t", "-s", "s", "-t", "Shared", "-n", "1", "--idle-timeout", "2s",
               "--exec", 'test "$PULSAR_PROP_RECONSUMETIMES" = 1', "--fail-if-empty"))
    assert "1 acked" in r.stderr
