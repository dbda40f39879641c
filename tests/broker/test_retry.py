"""Retry letter topics: reconsumeLater (pulsar-semantics.md §6.1, §6.3, §7, §10; CLI.md
reconsume-later, --enable-retry, --retry-letter-topic, consume --exec exit 75 and
--exec-retry-delay). Real LMDB in tmp_path; a simulated clock, never a sleep for a timer: the
broker's clock is advanced (clock.advance) or the store's (`clock advance`)."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

import pulsarctl
from pulsarctl.client.client import ConsumerDeadLetterPolicy, ConsumerType, InitialPosition
from pulsarctl.errors import PulsarctlError, Timeout
from pulsarctl.messages import MessageId, OutgoingMessage

from simclock import START_MS
from cli_helpers import ok, assert_error, rows, pjson

FULL = "persistent://public/default/"
LEASE = 600_000
TICK = 1_000          # delayedDeliveryTickTimeMillis: a delayed message may arrive one tick early


# -- helpers -------------------------------------------------------------------------------------
def subscribe(broker, topic, s, consumer, typ="Shared", *, settings=None, position="Earliest"):
    """Subscribe and return the topic names the consumer consumes (a list with retry)."""
    names, _ = broker.subscribe(topic, s, consumer, typ, position, lease_ms=LEASE,
                                settings=settings)
    return names


def fetch(broker, names, s, consumer, n=1000):
    return broker.fetch(names, s, consumer, n)


def topic_messages(broker, topic):
    msgs, _nxt, _last = broker.read_entries(topic, None, 1000, after_id=MessageId.earliest)
    return msgs


def backlog(broker, topic, s):
    return broker.topics.stats(topic)["subscriptions"][s]["msgBacklog"]










# -- RetryTopicTest::testRetryTopic ------------------------------------------------------------------
def test_retry_topic_max_2_shared(broker, clock):
    """max=2, Shared: every delivery reconsumed later -> N*(max+1) receives, then N dead letters;
    the retry copies count RECONSUMETIMES 1, 2 and the dead letter 3; the first REAL_TOPIC and
    ORIGIN_MESSAGE_ID are kept; custom properties show on the next delivery; the delay holds
    (up to one tick early)."""
    n, n_max, delay = 10, 2, 5_000
    sent = [OutgoingMessage(f"m{i}".encode(), {"orig": str(i)}, f"k{i}", f"ok{i}".encode(),
                            event_time=START_MS - 1000 - i) for i in range(n)]
    _, ids = broker.publish("t", sent)
    by_id = {str(mid): i for i, mid in enumerate(ids)}
    names = subscribe(broker, "t", "s", "c1", settings={"enableRetry": True,
                                                         "maxRedeliverCount": n_max})
    retry_t, dlq_t = FULL + "t-s-RETRY", FULL + "t-s-DLQ"
    assert names == [FULL + "t", retry_t]
    desc = broker.subscription("t", "s").describe()
    assert desc["retryLetterTopic"] == retry_t and desc["deadLetterTopic"] == dlq_t
    assert desc["policy"]["maxRedeliverCount"] == n_max

    total = 0
    seen_ids: set[str] = set()
    deliveries: dict[int, list] = defaultdict(list)
    for rnd in range(n_max + 1):
        got = fetch(broker, names, "s", "c1")
        assert len(got) == n, f"round {rnd}: {len(got)} messages"
        total += len(got)
        for m in got:
            assert str(m.message_id()) not in seen_ids          # retry messages are new messages
            seen_ids.add(str(m.message_id()))
            assert m.redelivery_count() == 0
            if rnd == 0:
                i = by_id[str(m.message_id())]
                assert m.topic_name() == FULL + "t"
                assert m.properties() == {"orig": str(i)}
            else:
                i = by_id[m.properties()["ORIGIN_MESSAGE_ID"]]
                assert m.topic_name() == retry_t
                assert m.properties() == {
                    "orig": str(i), "custom": f"v{rnd}",
                    "REAL_TOPIC": FULL + "t",
                    "ORIGIN_MESSAGE_ID": str(ids[i]), "ORIGIN_MESSAGE_IDY_TIME": str(ids[i]),
                    "RECONSUMETIMES": str(rnd), "DELAY_TIME": str(delay),
                }
            assert m.data() == f"m{i}".encode()
            assert m.partition_key() == f"k{i}"
            assert m.ordering_key() == f"ok{i}".encode()
            assert m.event_timestamp() == START_MS - 1000 - i
            deliveries[i].append(rnd)
        t0 = clock.now_ms()
        res = broker.reconsume_later(names, "s", [m.message_id() for m in got], delay,
                                     {"custom": f"v{rnd + 1}"})
        if rnd < n_max:
            assert res == {"retry": n, "dlq": 0}
            # Shared honours the delay: nothing before delay - tick, everything at the delay.
            assert not broker.topics.exists(dlq_t)
            clock.advance(delay - TICK - 1)
            assert fetch(broker, names, "s", "c1") == []
            clock.advance(t0 + delay - clock.now_ms())
        else:
            assert res == {"retry": 0, "dlq": n}
            clock.advance(delay)
    assert total == n * (n_max + 1)
    assert all(v == [0, 1, 2] for v in deliveries.values()) and len(deliveries) == n
    assert fetch(broker, names, "s", "c1") == []

    # The original subscription and the retry topic's are empty; a new consumer gets nothing.
    assert backlog(broker, "t", "s") == 0
    assert backlog(broker, retry_t, "s") == 0
    assert broker.subscription("t", "s").pending() == []
    assert broker.subscription(retry_t, "s").pending() == []
    names2 = subscribe(broker, "t", "s", "c2", settings={"enableRetry": True})
    assert fetch(broker, names2, "s", "c2") == []

    dead = topic_messages(broker, dlq_t)
    assert len(dead) == n
    assert {d.properties()["ORIGIN_MESSAGE_ID"] for d in dead} == {str(i) for i in ids}
    assert len(topic_messages(broker, retry_t)) == n * n_max
    for d in dead:
        i = by_id[d.properties()["ORIGIN_MESSAGE_ID"]]
        p = d.properties()
        assert {k: v for k, v in p.items() if k != "REAL_SUBSCRIPTION"} == {
            "orig": str(i), "custom": f"v{n_max + 1}",           # the last call's value
            "REAL_TOPIC": FULL + "t",
            "ORIGIN_MESSAGE_ID": str(ids[i]), "ORIGIN_MESSAGE_IDY_TIME": str(ids[i]),
            "RECONSUMETIMES": str(n_max + 1), "DELAY_TIME": str(delay),
        }
        assert p.get("REAL_SUBSCRIPTION", "s") == "s"
        assert d.data() == f"m{i}".encode()
        assert d.partition_key() == f"k{i}"
        assert d.ordering_key() == f"ok{i}".encode()
        assert d.event_timestamp() == START_MS - 1000 - i
        assert not d.deliver_at                                  # no delay on the DLQ
        assert str(d.message_id()) not in seen_ids


def test_retry_delay_is_exact_at_the_boundary(broker, clock):
    """A retry message due at T+d is held while now + tick < T+d and goes out at T+d-tick."""
    _, ids = broker.publish("t", [OutgoingMessage(b"x")])
    names = subscribe(broker, "t", "s", "c1", settings={"enableRetry": True})
    assert [m.message_id() for m in fetch(broker, names, "s", "c1")] == ids
    broker.reconsume_later(names, "s", ids, 10_000)
    [stored] = topic_messages(broker, FULL + "t-s-RETRY")
    assert stored.deliver_at == START_MS + 10_000
    assert stored.properties()["DELAY_TIME"] == "10000"
    clock.advance(10_000 - TICK - 1)
    assert fetch(broker, names, "s", "c1") == []
    clock.advance(1)                                   # one tick early is allowed
    [m] = fetch(broker, names, "s", "c1")
    assert m.data() == b"x" and m.properties()["RECONSUMETIMES"] == "1"


@pytest.mark.parametrize("typ,honoured", [("Shared", True), ("Key_Shared", True),
                                          ("Exclusive", False), ("Failover", False)])
def test_retry_delay_honoured_only_on_shared_and_key_shared(broker, clock, typ, honoured):
    _, ids = broker.publish("t", [OutgoingMessage(b"x", None, "k")])
    names = subscribe(broker, "t", "s", "c1", typ, settings={"enableRetry": True})
    assert [m.message_id() for m in fetch(broker, names, "s", "c1")] == ids
    assert broker.reconsume_later(names, "s", ids, 60_000) == {"retry": 1, "dlq": 0}
    got = fetch(broker, names, "s", "c1")
    if honoured:
        assert got == []
        clock.advance(60_000)
        got = fetch(broker, names, "s", "c1")
    assert [(m.data(), m.topic_name(), m.properties()["RECONSUMETIMES"]) for m in got] == \
        [(b"x", FULL + "t-s-RETRY", "1")]
    assert backlog(broker, "t", "s") == 0


def test_retry_default_limit_is_16(broker, clock):
    """enableRetry without a policy: maxRedeliverCount = MAX_RECONSUMETIMES = 16, so 17
    deliveries and the 17th call dead-letters."""
    _, ids = broker.publish("t", [OutgoingMessage(b"x")])
    names = subscribe(broker, "t", "s", "c1", settings={"enableRetry": True})
    assert broker.subscription("t", "s").describe()["policy"]["maxRedeliverCount"] == 16
    receives = 0
    while True:
        got = fetch(broker, names, "s", "c1")
        if not got:
            break
        [m] = got
        receives += 1
        expect = {"retry": 1, "dlq": 0} if receives <= 16 else {"retry": 0, "dlq": 1}
        assert broker.reconsume_later(names, "s", [m.message_id()], 0) == expect
        assert receives <= 17
    assert receives == 17
    [dead] = topic_messages(broker, FULL + "t-s-DLQ")
    assert dead.properties()["RECONSUMETIMES"] == "17"
    assert dead.properties()["ORIGIN_MESSAGE_ID"] == str(ids[0])
    assert len(topic_messages(broker, FULL + "t-s-RETRY")) == 16


def test_retry_copy_resets_the_redelivery_count(broker, clock):
    """A nacked message (count 1) reconsumed later: the retry copy is a new message, count 0,
    and the original is acked (its count forgotten)."""
    _, ids = broker.publish("t", [OutgoingMessage(b"x")])
    names = subscribe(broker, "t", "s", "c1", settings={
        "enableRetry": True, "negativeAckRedeliveryDelayMs": 1000})
    fetch(broker, names, "s", "c1")
    assert broker.nack(names, "s", ids) == 1
    clock.advance(1000)
    [m] = fetch(broker, names, "s", "c1")
    assert m.message_id() == ids[0] and m.redelivery_count() == 1
    broker.reconsume_later(names, "s", ids, 0)
    [r] = fetch(broker, names, "s", "c1")
    assert r.message_id() != ids[0] and r.redelivery_count() == 0
    assert r.properties()["RECONSUMETIMES"] == "1"
    assert backlog(broker, "t", "s") == 0
    assert broker.subscription("t", "s").pending() == []


def test_retry_keeps_properties_already_present(broker, clock):
    """putIfAbsent for REAL_TOPIC / ORIGIN_MESSAGE_ID; custom properties win over the message's
    (putAll); a RECONSUMETIMES already on the message counts on from it."""
    _, ids = broker.publish("t", [OutgoingMessage(b"x", {"REAL_TOPIC": "elsewhere",
                                                         "ORIGIN_MESSAGE_ID": "1:2:-1",
                                                         "a": "old"})])
    names = subscribe(broker, "t", "s", "c1", settings={"enableRetry": True})
    fetch(broker, names, "s", "c1")
    broker.reconsume_later(names, "s", ids, 0, {"a": "new"})
    [m] = fetch(broker, names, "s", "c1")
    p = m.properties()
    assert p["REAL_TOPIC"] == "elsewhere"
    assert p["ORIGIN_MESSAGE_ID"] == "1:2:-1"
    assert p["ORIGIN_MESSAGE_IDY_TIME"] == str(ids[0])
    assert p["a"] == "new"
    assert p["RECONSUMETIMES"] == "1" and p["DELAY_TIME"] == "0"


def test_reconsume_later_without_retry_is_a_conflict_and_changes_nothing(broker, clock):
    _, ids = broker.publish("t", [OutgoingMessage(b"x")])
    names = subscribe(broker, "t", "s", "c1")
    assert names == FULL + "t"
    fetch(broker, names, "s", "c1")
    with pytest.raises(PulsarctlError) as ei:
        broker.reconsume_later(names, "s", ids, 1000)
    assert ei.value.exit_code == 4
    assert not broker.topics.exists(FULL + "t-s-RETRY")
    assert not broker.topics.exists(FULL + "t-s-DLQ")
    [p] = broker.subscription("t", "s").pending()
    assert p["messageId"] == str(ids[0]) and p["consumerName"] == "c1"
    assert backlog(broker, "t", "s") == 1


def test_reconsume_later_is_one_transaction(broker, clock):
    """Several ids, one unknown: nothing is moved, nothing acked."""
    _, ids = broker.publish("t", [OutgoingMessage(b"a"), OutgoingMessage(b"b")])
    names = subscribe(broker, "t", "s", "c1", settings={"enableRetry": True})
    fetch(broker, names, "s", "c1")
    bad = MessageId(ids[0].ledger_id, 99)
    with pytest.raises(PulsarctlError) as ei:
        broker.reconsume_later(names, "s", [ids[0], bad], 0)
    assert ei.value.exit_code == 3
    assert topic_messages(broker, FULL + "t-s-RETRY") == []
    assert backlog(broker, "t", "s") == 2



def test_reconsume_later_to_a_terminated_retry_topic_changes_nothing(broker, clock):
    """testRetryTopicException: a terminated retry topic makes reconsumeLater fail
    (TopicTerminated, exit 4); the original stays unacked."""
    _, ids = broker.publish("t", [OutgoingMessage(b"x")])
    names = subscribe(broker, "t", "s", "c1", settings={"enableRetry": True})
    fetch(broker, names, "s", "c1")
    broker.topics.terminate(FULL + "t-s-RETRY")
    with pytest.raises(PulsarctlError) as ei:
        broker.reconsume_later(names, "s", ids, 0)
    assert ei.value.exit_code == 4
    assert backlog(broker, "t", "s") == 1
    assert [p["messageId"] for p in broker.subscription("t", "s").pending()] == [str(ids[0])]
    assert topic_messages(broker, FULL + "t-s-RETRY") == []


def test_reconsume_later_same_id_twice_moves_it_once(broker, clock):
    _, ids = broker.publish("t", [OutgoingMessage(b"x")])
    names = subscribe(broker, "t", "s", "c1", settings={"enableRetry": True})
    fetch(broker, names, "s", "c1")
    assert broker.reconsume_later(names, "s", [ids[0], ids[0]], 0) == {"retry": 1, "dlq": 0}
    assert broker.reconsume_later(names, "s", ids, 0) == {"retry": 0, "dlq": 0}   # acked
    assert len(topic_messages(broker, FULL + "t-s-RETRY")) == 1


def test_negative_delay_is_zero(broker, clock):
    _, ids = broker.publish("t", [OutgoingMessage(b"x")])
    names = subscribe(broker, "t", "s", "c1", settings={"enableRetry": True})
    fetch(broker, names, "s", "c1")
    broker.reconsume_later(names, "s", ids, -5000)
    [m] = fetch(broker, names, "s", "c1")
    assert m.properties()["DELAY_TIME"] == "0"


def test_multi_topic_consumer_uses_the_first_topic_for_names(broker, clock):
    """ConsumerBuilderImpl: <first topic>-<sub>-RETRY / -DLQ for a multi-topic consumer; the
    REAL_TOPIC is the message's own topic."""
    broker.publish("b", [OutgoingMessage(b"from-b")])
    names = subscribe(broker, ["a", "b"], "s", "c1", settings={"enableRetry": True,
                                                                "maxRedeliverCount": 1})
    assert names == [FULL + "a", FULL + "b", FULL + "a-s-RETRY"]
    [m] = fetch(broker, names, "s", "c1")
    broker.reconsume_later(names, "s", [m.message_id()], 0)
    [r] = fetch(broker, names, "s", "c1")
    assert r.topic_name() == FULL + "a-s-RETRY"
    assert r.properties()["REAL_TOPIC"] == FULL + "b"
    broker.reconsume_later(names, "s", [r.message_id()], 0)
    [d] = topic_messages(broker, FULL + "a-s-DLQ")
    assert d.data() == b"from-b" and d.properties()["ORIGIN_MESSAGE_ID"] == str(m.message_id())
    assert not broker.topics.exists(FULL + "b-s-RETRY")

# -- partitioned topics ------------------------------------------------------------------------------
def test_partitioned_topic_shares_one_retry_and_dlq(broker, clock):
    """§6.1: with retry enabled the RETRY and DLQ names come from the topic as given, so every
    partition shares them; REAL_TOPIC strips the partition suffix."""
    broker.topics.create_partitioned("pt", 3)
    n = 6
    _, ids = broker.publish("pt", [OutgoingMessage(f"m{i}".encode(), None, f"key-{i}")
                                   for i in range(n)])
    assert len({i.partition for i in ids}) > 1
    names = subscribe(broker, "pt", "s", "c1", settings={"enableRetry": True,
                                                          "maxRedeliverCount": 1})
    retry_t, dlq_t = FULL + "pt-s-RETRY", FULL + "pt-s-DLQ"
    assert sorted(names) == sorted([FULL + f"pt-partition-{i}" for i in range(3)] + [retry_t])
    got = fetch(broker, names, "s", "c1")
    assert sorted(str(m.message_id()) for m in got) == sorted(str(i) for i in ids)
    assert broker.reconsume_later("pt", "s", [m.message_id() for m in got], 0) == \
        {"retry": n, "dlq": 0}
    retried = fetch(broker, names, "s", "c1")
    assert len(retried) == n
    for m in retried:
        assert m.topic_name() == retry_t
        assert m.properties()["REAL_TOPIC"] == FULL + "pt"
    assert {m.properties()["ORIGIN_MESSAGE_ID"] for m in retried} == {str(i) for i in ids}
    assert broker.reconsume_later("pt", "s", [m.message_id() for m in retried], 0) == \
        {"retry": 0, "dlq": n}
    dead = topic_messages(broker, dlq_t)
    assert {d.properties()["ORIGIN_MESSAGE_ID"] for d in dead} == {str(i) for i in ids}
    assert all(d.properties()["REAL_TOPIC"] == FULL + "pt" for d in dead)
    listed = broker.topics.list("public/default")
    assert not [t for t in listed if "-partition-" in t and t.endswith(("-RETRY", "-DLQ"))], listed
    assert backlog(broker, "pt", "s") == 0


def test_partitioned_topic_with_retry_nack_path_uses_the_shared_dlq(broker, clock):
    broker.topics.create_partitioned("pt", 2)
    _, ids = broker.publish("pt", [OutgoingMessage(b"a", None, "ka")])
    names = subscribe(broker, "pt", "s", "c1", settings={
        "enableRetry": True, "maxRedeliverCount": 1, "negativeAckRedeliveryDelayMs": 1000})
    for rc in range(2):
        [m] = fetch(broker, names, "s", "c1")
        assert m.redelivery_count() == rc
        broker.nack(names, "s", [m.message_id()])
        clock.advance(1000)
    broker.chores.fire_due()
    [dead] = topic_messages(broker, FULL + "pt-s-DLQ")
    assert dead.properties()["ORIGIN_MESSAGE_ID"] == str(ids[0])
    part = FULL + f"pt-partition-{ids[0].partition}-s-DLQ"
    assert not broker.topics.exists(part)


# -- the command line --------------------------------------------------------------------------------
RECV = ("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-o", "ndjson",
        "--idle-timeout", "100ms")


def test_cli_reconsume_later_without_retry_is_exit_4(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "a"))
    [rec] = rows(ok(cli(*RECV)).stdout)
    before = pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]
    line = assert_error(cli("reconsume-later", "t", "-s", "s", rec["messageId"], "--delay", "1s"), 4)
    assert "retry" in line.lower()
    assert not [t for t in pjson(cli("topics", "list", "public/default", "-o", "json"))
                if t.endswith(("-RETRY", "-DLQ"))]
    after = pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]
    assert after["msgBacklog"] == before["msgBacklog"] == 1
    [p] = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
    assert p["messageId"] == rec["messageId"] and p["consumerName"] == "cli"
    assert pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))["timersScheduled"] == 0


def test_cli_reconsume_later_usage_and_not_found(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "a"))
    [rec] = rows(ok(cli(*RECV, "--enable-retry")).stdout)
    mid = rec["messageId"]
    ledger = mid.split(":")[0]
    assert_error(cli("reconsume-later", "t", "-s", "s"), 2)                    # no ids
    assert_error(cli("reconsume-later", "t", "-s", "s", "not-an-id"), 2)
    assert_error(cli("reconsume-later", "t", "-s", "s", mid, "--delay", "soon"), 2)
    assert_error(cli("reconsume-later", "t", "-s", "s", f"{ledger}:99"), 3)    # unknown id
    assert_error(cli("reconsume-later", "t", "-s", "s", mid, f"{ledger}:99"), 3)
    assert_error(cli("reconsume-later", "t", "-s", "nosub", mid), 3)
    assert_error(cli("reconsume-later", "nope", "-s", "s", mid), 3)
    # Nothing moved by any of those.
    r = ok(cli("read", FULL + "t-s-RETRY", "-m", "earliest", "-n", "1", "-o", "ndjson",
               "--idle-timeout", "100ms"))
    assert rows(r.stdout) == []
    assert pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]["msgBacklog"] == 1


def test_cli_reconsume_later_full_cycle(cli):
    """receive --enable-retry --max-redeliver-count 2, reconsume-later by id, from stdin (ndjson
    records), and by a retry message's id given with the original TOPIC; the third call
    dead-letters."""
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "hello", "-k", "the-key", "--ordering-key", "ok",
           "-p", "color=red"))
    ok(cli("produce", "t", "-m", "world", "-k", "k2"))
    flags = ("--enable-retry", "--max-redeliver-count", "2")
    first = rows(ok(cli(*RECV, *flags, "-n", "2")).stdout)
    assert [r["payload"] for r in first] == ["hello", "world"]
    origin = {r["payload"]: r["messageId"] for r in first}
    desc = pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))
    assert desc["retryLetterTopic"] == FULL + "t-s-RETRY"
    assert desc["deadLetterTopic"] == FULL + "t-s-DLQ"
    assert desc["policy"]["maxRedeliverCount"] == 2 and desc["policy"]["enableRetry"] is True

    # Call 1 by ids, with a delay and a custom property.
    out = pjson(cli("reconsume-later", "t", "-s", "s", *origin.values(), "--delay", "3s",
                    "-p", "custom=v1", "-o", "json"))
    assert out == {"retry": 2, "dlq": 0}
    assert pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]["msgBacklog"] == 0
    assert rows(ok(cli(*RECV, *flags)).stdout) == []                 # not yet: delayed
    ok(cli("clock", "advance", "3s"))
    second = rows(ok(cli(*RECV, *flags, "-n", "2")).stdout)
    assert sorted(r["payload"] for r in second) == ["hello", "world"]
    for r in second:
        assert r["topic"] == FULL + "t-s-RETRY"
        assert r["messageId"] not in origin.values()
        assert r["redeliveryCount"] == 0
        assert r["properties"]["RECONSUMETIMES"] == "1"
        assert r["properties"]["DELAY_TIME"] == "3000"
        assert r["properties"]["custom"] == "v1"
        assert r["properties"]["REAL_TOPIC"] == FULL + "t"
        assert r["properties"]["ORIGIN_MESSAGE_ID"] == origin[r["payload"]]
    hello = next(r for r in second if r["payload"] == "hello")
    assert hello["key"] == "the-key" and hello["orderingKey"] == "ok"
    assert hello["properties"]["color"] == "red"

    # Call 2 from stdin: ndjson records of the retry messages, with the original TOPIC.
    out = pjson(cli("reconsume-later", "t", "-s", "s", "-", "-p", "custom=v2", "-o", "json",
                    input="".join(json.dumps(r) + "\n" for r in second)))
    assert out == {"retry": 2, "dlq": 0}
    third = rows(ok(cli(*RECV, *flags, "-n", "2")).stdout)
    assert len(third) == 2
    for r in third:
        assert r["properties"]["RECONSUMETIMES"] == "2"
        assert r["properties"]["DELAY_TIME"] == "0"
        assert r["properties"]["custom"] == "v2"
        assert r["properties"]["ORIGIN_MESSAGE_ID"] == origin[r["payload"]]

    # Call 3 (max + 1): the dead letter topic, carrying the last call's custom value.
    out = pjson(cli("reconsume-later", "t", "-s", "s", *[r["messageId"] for r in third],
                    "-p", "custom=v3", "-o", "json"))
    assert out == {"retry": 0, "dlq": 2}
    assert rows(ok(cli(*RECV, *flags)).stdout) == []
    dead = rows(ok(cli("read", "t-s-DLQ", "-m", "earliest", "-n", "2", "-o", "ndjson")).stdout)
    assert sorted(d["payload"] for d in dead) == ["hello", "world"]
    for d in dead:
        assert d["properties"]["RECONSUMETIMES"] == "3"
        assert d["properties"]["custom"] == "v3"
        assert d["properties"]["ORIGIN_MESSAGE_ID"] == origin[d["payload"]]
        assert d["properties"]["REAL_TOPIC"] == FULL + "t"
    dh = next(d for d in dead if d["payload"] == "hello")
    assert dh["key"] == "the-key" and dh["orderingKey"] == "ok"
    stats = pjson(cli("topics", "stats", "t-s-RETRY", "-o", "json"))
    assert stats["subscriptions"]["s"]["msgBacklog"] == 0
    assert pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]["msgBacklog"] == 0


def test_cli_retry_letter_topic_custom_name(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "a"))
    # --retry-letter-topic alone enables retry, as in Java's builder.
    [rec] = rows(ok(cli(*RECV, "--retry-letter-topic", "my-retry")).stdout)
    desc = pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))
    assert desc["retryLetterTopic"] == FULL + "my-retry"
    assert desc["policy"]["enableRetry"] is True
    assert desc["deadLetterTopic"] == FULL + "t-s-DLQ"
    out = pjson(cli("reconsume-later", "t", "-s", "s", rec["messageId"], "-o", "json"))
    assert out == {"retry": 1, "dlq": 0}
    [r] = rows(ok(cli(*RECV, "--retry-letter-topic", "my-retry")).stdout)
    assert r["topic"] == FULL + "my-retry"
    assert r["properties"]["RECONSUMETIMES"] == "1"
    assert r["properties"]["ORIGIN_MESSAGE_ID"] == rec["messageId"]
    listed = pjson(cli("topics", "list", "public/default", "-o", "json"))
    assert FULL + "my-retry" in listed and FULL + "t-s-RETRY" not in listed


def test_cli_partitioned_topic_retry_names(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("topics", "create-partitioned-topic", "pt", "-p", "2"))
    ok(cli("produce", "pt", "-m", "a", "-m", "b", "-m", "c", "-m", "d"))
    got = rows(ok(cli("receive", "pt", "-s", "s", "-t", "Shared", "-p", "Earliest",
                      "-o", "ndjson", "--idle-timeout", "100ms", "-n", "4",
                      "--enable-retry", "--max-redeliver-count", "1")).stdout)
    assert len(got) == 4 and len({r["topic"] for r in got}) == 2
    out = pjson(cli("reconsume-later", "pt", "-s", "s", "-", "-o", "json",
                    input="".join(json.dumps(r) + "\n" for r in got)))
    assert out == {"retry": 4, "dlq": 0}
    again = rows(ok(cli("receive", "pt", "-s", "s", "-t", "Shared", "-o", "ndjson",
                        "--idle-timeout", "100ms", "-n", "4", "--enable-retry",
                        "--max-redeliver-count", "1")).stdout)
    assert {r["topic"] for r in again} == {FULL + "pt-s-RETRY"}
    assert all(r["properties"]["REAL_TOPIC"] == FULL + "pt" for r in again)
    out = pjson(cli("reconsume-later", "pt", "-s", "s", *[r["messageId"] for r in again],
                    "-o", "json"))
    assert out == {"retry": 0, "dlq": 4}
    listed = pjson(cli("topics", "list", "public/default", "-o", "json"))
    assert FULL + "pt-s-DLQ" in listed and FULL + "pt-s-RETRY" in listed
    assert not [t for t in listed if "-partition-" in t and t.endswith(("-RETRY", "-DLQ"))], listed



def test_cli_enable_retry_again_keeps_the_stored_retry_policy(cli):
    """CLI.md: a policy flag that is left out keeps the stored value. A later consumer that
    gives only --enable-retry must not reset --max-redeliver-count, --retry-letter-topic or
    --dead-letter-topic to the defaults."""
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "a"))
    [rec] = rows(ok(cli(*RECV, "--enable-retry", "--max-redeliver-count", "1",
                        "--retry-letter-topic", "my-retry", "--dead-letter-topic", "my-dlq")).stdout)
    ok(cli(*RECV, "--enable-retry"))                               # flags left out: kept
    desc = pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))
    assert desc["policy"]["maxRedeliverCount"] == 1
    assert desc["retryLetterTopic"] == FULL + "my-retry"
    assert desc["deadLetterTopic"] == FULL + "my-dlq"
    out = pjson(cli("reconsume-later", "t", "-s", "s", rec["messageId"], "-o", "json"))
    assert out == {"retry": 1, "dlq": 0}
    [r] = rows(ok(cli(*RECV, "--enable-retry")).stdout)
    assert r["topic"] == FULL + "my-retry"
    out = pjson(cli("reconsume-later", "t", "-s", "s", r["messageId"], "-o", "json"))
    assert out == {"retry": 0, "dlq": 1}                           # max 1: call 2 dead-letters
    [d] = rows(ok(cli("read", "my-dlq", "-m", "earliest", "-n", "1", "-o", "ndjson")).stdout)
    assert d["properties"]["ORIGIN_MESSAGE_ID"] == rec["messageId"]


def test_broker_subscribe_enable_retry_keeps_stored_max(broker, clock):
    """The same at the broker: settings {"enableRetry": True} with the limit left out keeps a
    stored maxRedeliverCount; 16 is the default only when none is stored."""
    subscribe(broker, "t", "s", "c1", settings={"enableRetry": True, "maxRedeliverCount": 2})
    subscribe(broker, "t", "s", "c2", settings={"enableRetry": True})
    assert broker.subscription("t", "s").describe()["policy"]["maxRedeliverCount"] == 2


def test_cli_receive_after_retry_was_enabled_still_gets_retry_messages(cli):
    """enableRetry is a stored policy flag (left out: kept), so reconsume-later keeps working on
    the subscription; a later `receive` without the flag must then also deliver what is on the
    retry topic, or those messages are never seen again."""
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "a"))
    [rec] = rows(ok(cli(*RECV, "--enable-retry")).stdout)
    desc = pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))
    assert desc["policy"]["enableRetry"] is True
    ok(cli(*RECV))                                                 # no flag: retry still on
    assert pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))["policy"][
        "enableRetry"] is True
    ok(cli("reconsume-later", "t", "-s", "s", rec["messageId"]))
    [r] = rows(ok(cli(*RECV)).stdout)
    assert r["topic"] == FULL + "t-s-RETRY" and r["payload"] == "a"

# -- consume --exec ------------------------------------------------------------------------------------
EXEC = ("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "1")


@pytest.mark.parametrize("extra,delay", [((), 60_000), (("--nack-delay", "5s"), 5_000),
                                         (("--exec-retry-delay", "2s"), 2_000)])
def test_cli_exec_75_with_retry_reconsumes_later(cli, extra, delay):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "hello", "-k", "k1", "-p", "a=1"))
    ok(cli(*EXEC, "--enable-retry", "--exec", "exit 75", *extra))
    st = pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]
    assert st["msgBacklog"] == 0                                    # the original is acked
    [r] = rows(ok(cli("read", "t-s-RETRY", "-m", "earliest", "-n", "1", "-o", "ndjson")).stdout)
    assert r["payload"] == "hello" and r["key"] == "k1"
    assert r["properties"]["RECONSUMETIMES"] == "1"
    assert r["properties"]["DELAY_TIME"] == str(delay)
    assert r["properties"]["a"] == "1"
    assert r["properties"]["REAL_TOPIC"] == FULL + "t"
    assert r["deliverAt"] is not None
    # Once due, the next consume sees it with its retry properties; exit 0 acks it.
    ok(cli("clock", "advance", f"{delay}ms"))
    check = 'test "$PULSAR_PROP_RECONSUMETIMES" = 1 && test "$PULSAR_TOPIC" = ' \
            f'"{FULL}t-s-RETRY" && test "$(cat)" = hello'
    ok(cli(*EXEC, "--enable-retry", "--exec", check, "--idle-timeout", "2s", "--fail-if-empty"))
    assert pjson(cli("topics", "stats", "t-s-RETRY", "-o", "json"))["subscriptions"]["s"][
        "msgBacklog"] == 0


def test_cli_exec_75_without_retry_nacks(cli, monkeypatch):
    from pulsarctl.broker.service import Broker

    calls = {"nack": 0, "reconsume": 0}
    real_nack, real_rl = Broker.nack, Broker.reconsume_later

    def spy_nack(self, *a, **kw):
        calls["nack"] += 1
        return real_nack(self, *a, **kw)

    def spy_rl(self, *a, **kw):
        calls["reconsume"] += 1
        return real_rl(self, *a, **kw)

    monkeypatch.setattr(Broker, "nack", spy_nack)
    monkeypatch.setattr(Broker, "reconsume_later", spy_rl)
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "hello"))
    r = ok(cli(*EXEC, "--exec", "exit 75", "--nack-delay", "1s"))
    assert calls == {"nack": 1, "reconsume": 0}
    assert "1 nacked" in r.stderr
    assert pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]["msgBacklog"] == 1
    listed = pjson(cli("topics", "list", "public/default", "-o", "json"))
    assert not [t for t in listed if t.endswith(("-RETRY", "-DLQ"))]
    # The message comes back to the subscription (not to a retry topic).
    ok(cli("clock", "advance", "1s"))
    [rec] = rows(ok(cli(*RECV)).stdout)
    assert rec["payload"] == "hello" and rec["topic"] == FULL + "t"
    assert "RECONSUMETIMES" not in rec["properties"]


def test_cli_exec_75_with_retry_calls_reconsume_not_nack(cli, monkeypatch):
    from pulsarctl.broker.service import Broker

    calls = {"nack": 0}
    real_nack = Broker.nack

    def spy_nack(self, *a, **kw):
        calls["nack"] += 1
        return real_nack(self, *a, **kw)

    monkeypatch.setattr(Broker, "nack", spy_nack)
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "x"))
    ok(cli(*EXEC, "--enable-retry", "--exec", "exit 75", "--exec-retry-delay", "1s"))
    assert calls["nack"] == 0
    # Any other failure still nacks with retry enabled.
    ok(cli("produce", "t", "-m", "y"))
    ok(cli(*EXEC, "--enable-retry", "--exec", "exit 1"))
    assert calls["nack"] == 1
    [r] = rows(ok(cli("read", "t-s-RETRY", "-m", "earliest", "-n", "5", "-o", "ndjson",
                      "--idle-timeout", "100ms")).stdout)
    assert r["payload"] == "x"


# -- the Python API ------------------------------------------------------------------------------------
def test_python_reconsume_later(broker, clock):
    client = pulsarctl.Client(broker=broker)
    consumer = client.subscribe("t", "my-sub", consumer_type=ConsumerType.Shared,
                                initial_position=InitialPosition.Earliest, enable_retry=True,
                                dead_letter_policy=ConsumerDeadLetterPolicy(2),
                                consumer_name="my-consumer")
    assert consumer.topics() == [FULL + "t", FULL + "t-my-sub-RETRY"]
    producer = client.create_producer("t")
    sent = producer.send(b"hello", properties={"a": "1"}, partition_key="k",
                         ordering_key=b"ok")
    seen = []
    for k in range(3):
        msg = consumer.receive(timeout_millis=2000)
        seen.append(msg)
        assert msg.data() == b"hello"
        assert msg.partition_key() == "k" and msg.ordering_key() == b"ok"
        assert msg.redelivery_count() == 0
        if k:
            assert msg.properties()["RECONSUMETIMES"] == str(k)
            assert msg.properties()["custom"] == f"c{k}"
            assert msg.properties()["ORIGIN_MESSAGE_ID"] == str(sent)
            assert msg.topic_name() == FULL + "t-my-sub-RETRY"
        consumer.reconsume_later(msg, 2500, {"custom": f"c{k + 1}"})
        if k < 2:
            with pytest.raises(Timeout):
                consumer.receive(timeout_millis=30)
            clock.advance(2500)
    assert len({str(m.message_id()) for m in seen}) == 3
    with pytest.raises(Timeout):
        consumer.receive(timeout_millis=30)
    [dead] = topic_messages(broker, FULL + "t-my-sub-DLQ")
    assert dead.properties()["RECONSUMETIMES"] == "3"
    assert dead.properties()["custom"] == "c3"
    assert dead.properties()["ORIGIN_MESSAGE_ID"] == str(sent)
    assert dead.properties()["a"] == "1"
    assert backlog(broker, "t", "my-sub") == 0
    client.close()


def test_python_reconsume_later_without_retry_raises(broker, clock):
    client = pulsarctl.Client(broker=broker)
    consumer = client.subscribe("t", "s", consumer_type=ConsumerType.Shared,
                                initial_position=InitialPosition.Earliest)
    client.create_producer("t").send(b"x")
    msg = consumer.receive(timeout_millis=2000)
    with pytest.raises(PulsarctlError) as ei:
        consumer.reconsume_later(msg, 1000)
    assert ei.value.exit_code == 4
    assert "reconsumeLater" in str(ei.value) or "retry" in str(ei.value).lower()
    assert not broker.topics.exists(FULL + "t-s-RETRY")
    client.close()


def test_python_retry_letter_topic_custom(broker, clock):
    client = pulsarctl.Client(broker=broker)
    consumer = client.subscribe("t", "s", consumer_type=ConsumerType.Shared,
                                initial_position=InitialPosition.Earliest,
                                retry_letter_topic="custom-retry")
    assert FULL + "custom-retry" in consumer.topics()
    client.create_producer("t").send(b"x")
    msg = consumer.receive(timeout_millis=2000)
    consumer.reconsume_later(msg, 0)
    again = consumer.receive(timeout_millis=2000)
    assert again.topic_name() == FULL + "custom-retry"
    assert again.properties()["RECONSUMETIMES"] == "1"
    assert not broker.topics.exists(FULL + "t-s-RETRY")
    client.close()
