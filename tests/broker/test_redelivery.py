"""Negative acks, redelivery counts and dead letter topics (pulsar-semantics.md §5, §6, §8.1-8.2,
§12.4, §12.6, §14; CLI.md nack, the consume/receive policy flags, subscriptions describe/pending,
"Redelivery rules beyond Pulsar"). Real LMDB in tmp_path; a simulated clock, never a sleep for a
timer: the broker's clock is advanced (clock.advance) or the store's (`clock advance`)."""
from __future__ import annotations

import json
import re
import types

import pytest

import pulsarctl
from pulsarctl.broker import deadletter
from pulsarctl.broker.backoff import backoff_next, parse_backoff
from pulsarctl.broker.nacks import delay_ms
from pulsarctl.client.client import ConsumerDeadLetterPolicy, ConsumerType, InitialPosition
from pulsarctl.errors import InvalidValue, MessageNotFound, PulsarctlError, Timeout
from pulsarctl.messages import MessageId, OutgoingMessage, iso_ms, parse_message_id
from pulsarctl.names import parse_topic

from simclock import START_MS
from cli_helpers import ok, assert_error, rows, pjson

FULL = "persistent://public/default/"
LEASE = 600_000
DELAY = 1_000
ISO_START = "2026-01-01T00:00:00.000Z"


# -- helpers -------------------------------------------------------------------------------------
def n_msgs(n, prefix="m"):
    return [OutgoingMessage(f"{prefix}{i}".encode()) for i in range(n)]


def sub(broker, topic, s, consumer, typ="Shared", *, fetch=0, lease=LEASE, settings=None,
        position="Earliest"):
    return broker.subscribe(topic, s, consumer, typ, position, lease_ms=lease, fetch=fetch,
                            settings=settings)[1]


def fetch(broker, topic, s, consumer, n=100):
    return broker.fetch(topic, s, consumer, n)


def ids_of(msgs):
    return [m.message_id() for m in msgs]


def counts_of(msgs):
    return [m.redelivery_count() for m in msgs]


def backlog(broker, topic, s):
    return broker.topics.stats(topic)["subscriptions"][s]["msgBacklog"]


def topic_messages(broker, topic):
    msgs, _nxt, _last = broker.read_entries(topic, None, 1000, after_id=MessageId.earliest)
    return msgs


def pending_by_id(broker, topic, s):
    return {r["messageId"]: r for r in broker.subscription(topic, s).pending()}


def stored_count(broker, topic, s, mid):
    """The persisted redelivery count of a message on a subscription (internal view)."""
    from pulsarctl.broker import redelivery, subscriptions as subs, topics

    def run(ctx):
        info = topics.lookup(ctx, parse_topic(topic))
        c = subs.get(ctx, info, s)
        return redelivery.get(ctx, c.id, subs.offset_of(ctx, info, mid))
    return broker._read(run)


def dlq_producer_re(topic, s, consumer):
    return re.compile("^" + re.escape(f"{topic}-{s}-{consumer}") + r"-[a-zA-Z0-9]{5}-DLQ$")










# -- §12.4 MultiplierRedeliveryBackoff, parse_backoff, the nack delay ------------------------------
BACKOFF_ROWS = {
    (10_000, 600_000, 2.0): [10000, 20000, 40000, 80000, 160000, 320000, 600000, 600000, 600000],
    (1_000, 60_000, 2.0): [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000],
    (100, 1_000, 2.0): [100, 200, 400, 800, 1000, 1000, 1000, 1000, 1000],
}


@pytest.mark.parametrize("config", list(BACKOFF_ROWS))
def test_backoff_next_matches_the_table(config):
    lo, hi, mult = config
    assert [backoff_next(lo, hi, mult, c) for c in range(9)] == BACKOFF_ROWS[config]
    assert backoff_next(lo, hi, mult, 1000) == hi
    assert backoff_next(lo, hi, mult, -1) == lo


def test_parse_backoff_accepts_durations_and_defaults_multiplier():
    assert parse_backoff("1s:60s") == [1000, 60000, 2.0]
    assert parse_backoff("100ms:1s:3") == [100, 1000, 3.0]
    assert parse_backoff("10s:10m:2.5") == [10000, 600000, 2.5]
    assert parse_backoff("1s:1s") == [1000, 1000, 2.0]          # max == min is allowed


@pytest.mark.parametrize("text", ["2s:1s", "1s:2s:1", "1s:2s:0.5", "1s:2s:0", "1s", "",
                                  "a:b", "1s:2s:x", "1s:2s:3:4", "-1s:2s"])
def test_parse_backoff_rejects_bad_values(text):
    with pytest.raises(InvalidValue) as ei:
        parse_backoff(text)
    assert ei.value.exit_code == 2


def test_delay_ms_has_a_100ms_minimum_and_a_1m_default():
    assert delay_ms({}, 0) == 60_000
    assert delay_ms({"negativeAckRedeliveryDelayMs": 10}, 0) == 100
    assert delay_ms({"negativeAckRedeliveryDelayMs": 0}, 3) == 100
    assert delay_ms({"negativeAckRedeliveryDelayMs": 100}, 0) == 100
    assert delay_ms({"negativeAckRedeliveryDelayMs": 2500}, 7) == 2500
    # With a backoff, the delay follows the redelivery count (and wins over the fixed delay).
    policy = {"negativeAckRedeliveryDelayMs": 2500, "negativeAckBackoff": [1000, 60000, 2.0]}
    assert [delay_ms(policy, c) for c in range(8)] == [1000, 2000, 4000, 8000, 16000, 32000,
                                                       60000, 60000]


# -- nack on Shared ----------------------------------------------------------------------------------
def test_shared_nack_deadline_is_rounded_down_to_256ms(broker, clock):
    """§12.6: trimLowerBit(t, 8); a 1000 ms nack issued at a 256-aligned time fires at 768 ms."""
    assert START_MS % 256 == 0
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", settings={"negativeAckRedeliveryDelayMs": 1000})
    assert ids_of(fetch(broker, "t", "s", "c1")) == ids
    assert broker.nack("t", "s", [ids[0]]) == 1
    assert pending_by_id(broker, "t", "s")[str(ids[0])]["nextRedelivery"] == iso_ms(START_MS + 768)
    clock.advance(767)
    assert fetch(broker, "t", "s", "c1") == []
    clock.advance(1)
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == ids and counts_of(got) == [1]


def test_shared_nack_redelivers_only_the_nacked_message_after_the_delay(broker, clock):
    _, ids = broker.publish("t", n_msgs(4))
    sub(broker, "t", "s", "c1", settings={"negativeAckRedeliveryDelayMs": 5000})
    clock.advance(100)                         # a deadline that is not on a 256 ms boundary
    assert ids_of(fetch(broker, "t", "s", "c1")) == ids
    t0 = clock.now_ms()
    assert broker.nack("t", "s", [ids[1]]) == 1
    due = (t0 + 5000) & ~255
    assert due < t0 + 5000
    pend = pending_by_id(broker, "t", "s")
    assert pend[str(ids[1])]["nextRedelivery"] == iso_ms(due)
    assert all(pend[str(i)]["nextRedelivery"] is None for i in (ids[0], ids[2], ids[3]))

    clock.advance(5000 - 256)                  # never before delay - 256
    assert broker.chores.fire_due() == 0
    assert fetch(broker, "t", "s", "c1") == []
    clock.advance(256)                         # at the delay it is back
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == [ids[1]]
    assert counts_of(got) == [1]
    # The other pending messages are untouched: same consumer, count 0, no timer, not redelivered.
    pend = pending_by_id(broker, "t", "s")
    assert set(pend) == {str(i) for i in ids}
    for i in (ids[0], ids[2], ids[3]):
        r = pend[str(i)]
        assert (r["consumerName"], r["redeliveryCount"], r["nextRedelivery"]) == ("c1", 0, None)
        assert r["deliveredAt"] == iso_ms(START_MS + 100)
    assert pend[str(ids[1])]["redeliveryCount"] == 1
    assert fetch(broker, "t", "s", "c1") == []
    assert backlog(broker, "t", "s") == 4


def test_key_shared_nack_redelivers_only_the_nacked(broker, clock):
    _, ids = broker.publish("t", [OutgoingMessage(f"m{i}".encode(), None, "k")
                                  for i in range(3)])
    sub(broker, "t", "s", "c1", "Key_Shared", settings={"negativeAckRedeliveryDelayMs": 1000})
    assert ids_of(fetch(broker, "t", "s", "c1")) == ids
    assert broker.nack("t", "s", [ids[1]]) == 1
    clock.advance(1000 - 256)
    assert fetch(broker, "t", "s", "c1") == []
    clock.advance(256)
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == [ids[1]] and counts_of(got) == [1]


def test_shared_nacked_message_can_go_to_another_consumer(broker, clock):
    _, ids = broker.publish("t", n_msgs(2))
    sub(broker, "t", "s", "c1", settings={"negativeAckRedeliveryDelayMs": 1000})
    sub(broker, "t", "s", "c2")
    assert ids_of(fetch(broker, "t", "s", "c1", 1)) == [ids[0]]
    broker.nack("t", "s", [ids[0]])
    clock.advance(1000)
    got = fetch(broker, "t", "s", "c2", 10)
    assert ids_of(got) == ids and counts_of(got) == [1, 0]


def test_fire_due_fires_the_timer_without_a_fetch(broker, clock):
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", fetch=1, settings={"negativeAckRedeliveryDelayMs": 1000})
    broker.nack("t", "s", ids)
    d = broker.subscription("t", "s").describe()
    assert (d["timersScheduled"], d["timersDue"]) == (1, 0)   # waiting, not due yet
    clock.advance(1000)
    assert broker.subscription("t", "s").describe()["timersDue"] == 1
    assert broker.chores.fire_due() == 1
    assert broker.subscription("t", "s").describe()["timersScheduled"] == 0
    assert broker.subscription("t", "s").pending() == []       # given back, waiting for a consumer
    assert stored_count(broker, "t", "s", ids[0]) == 1
    got = fetch(broker, "t", "s", "c1")
    assert counts_of(got) == [1]


def test_nack_backoff_uses_the_message_count(broker, clock):
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", settings={"negativeAckBackoff": [1000, 60000, 2.0],
                                          "negativeAckRedeliveryDelayMs": 30000})
    clock.advance(37)
    got = fetch(broker, "t", "s", "c1")
    for rc, d in enumerate([1000, 2000, 4000, 8000, 16000]):
        assert counts_of(got) == [rc]
        t0 = clock.now_ms()
        assert broker.nack("t", "s", ids) == 1
        due = (t0 + d) & ~255
        assert pending_by_id(broker, "t", "s")[str(ids[0])]["nextRedelivery"] == iso_ms(due)
        clock.advance(d - 256)
        assert fetch(broker, "t", "s", "c1") == [], f"count {rc}: back before {d} - 256 ms"
        clock.advance(256)
        got = fetch(broker, "t", "s", "c1")
        assert ids_of(got) == ids, f"count {rc}: not back after {d} ms"
    assert counts_of(got) == [5]


def test_cli_nack_backoff_next_redelivery_follows_the_count(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "x"))
    args = ("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-o", "ndjson",
            "--idle-timeout", "2s")
    rec = rows(ok(cli(*args, "--nack-backoff", "1s:60s")).stdout)[0]
    t = START_MS
    for rc, d in enumerate([1000, 2000, 4000]):
        assert rec["redeliveryCount"] == rc
        ok(cli("nack", "t", "-s", "s", rec["messageId"]))
        pend = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
        assert pend[0]["nextRedelivery"] == iso_ms((t + d) & ~255)
        assert pend[0]["redeliveryCount"] == rc
        ok(cli("clock", "advance", f"{d}ms"))
        t += d
        rec = rows(ok(cli(*args)).stdout)[0]
    assert rec["redeliveryCount"] == 3


# -- nack on Exclusive: a rewind -----------------------------------------------------------------
@pytest.mark.parametrize("typ", ["Exclusive", "Failover"])
def test_exclusive_nack_rewinds_and_counts_only_the_nacked(broker, clock, typ):
    _, ids = broker.publish("t", n_msgs(5))
    sub(broker, "t", "s", "c1", typ, settings={"negativeAckRedeliveryDelayMs": 2000})
    assert ids_of(fetch(broker, "t", "s", "c1", 4)) == ids[:4]
    broker.ack("t", "s", [ids[1]])
    assert broker.nack("t", "s", [ids[0], ids[2]]) == 2
    clock.advance(2000 - 256)
    # Not yet: only the one never delivered comes.
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == [ids[4]] and counts_of(got) == [0]
    clock.advance(256)
    got = fetch(broker, "t", "s", "c1")
    # Every unacked message again, in order.
    assert ids_of(got) == [ids[0], ids[2], ids[3], ids[4]]
    assert counts_of(got) == [1, 1, 0, 0]
    # Again, nacking just one: the counts persist on Exclusive too (pulsarctl keeps them).
    broker.nack("t", "s", [ids[2]])
    clock.advance(2000)
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == [ids[0], ids[2], ids[3], ids[4]]
    assert counts_of(got) == [1, 2, 0, 0]


# -- dead letter topic -------------------------------------------------------------------------------
def test_dead_letter_after_max_plus_one_deliveries_shared(broker, clock):
    n_max = 3
    props = {"a": "1", "b": "two"}
    _, ids = broker.publish("t", [OutgoingMessage(b"payload-1", props, "k1", b"ok1",
                                                  event_time=START_MS - 5000)])
    sub(broker, "t", "s", "c1", settings={"maxRedeliverCount": n_max,
                                          "negativeAckRedeliveryDelayMs": DELAY})
    dlq = FULL + "t-s-DLQ"
    seen = []
    for _ in range(n_max + 1):
        got = fetch(broker, "t", "s", "c1")
        assert ids_of(got) == ids
        seen.append(got[0].redelivery_count())
        assert broker.nack("t", "s", ids) == 1
        assert not broker.topics.exists(dlq)
        clock.advance(DELAY)
    broker.chores.fire_due()
    assert seen == list(range(n_max + 1))                   # N+1 deliveries, counts 0..N
    assert fetch(broker, "t", "s", "c1") == []
    assert backlog(broker, "t", "s") == 0
    assert broker.subscription("t", "s").pending() == []
    assert broker.subscription("t", "s").describe()["timersScheduled"] == 0
    dead = topic_messages(broker, dlq)
    assert len(dead) == 1
    m = dead[0]
    assert m.data() == b"payload-1"
    assert m.partition_key() == "k1"
    assert m.ordering_key() == b"ok1"
    assert m.event_timestamp() == START_MS - 5000
    assert m.properties() == {
        "a": "1", "b": "two",
        "REAL_TOPIC": FULL + "t",
        "ORIGIN_MESSAGE_ID": str(ids[0]),
        "ORIGIN_MESSAGE_IDY_TIME": str(ids[0]),
        "REAL_SUBSCRIPTION": "s",
    }
    assert re.fullmatch(r"\d+:\d+:-1", str(ids[0]))
    assert dlq_producer_re(FULL + "t", "s", "c1").match(m.producer_name), m.producer_name
    # A new consumer with Earliest on the original subscription receives nothing.
    sub(broker, "t", "s", "c2")
    assert fetch(broker, "t", "s", "c2") == []


def test_dead_letter_keeps_properties_already_present(broker, clock):
    """putIfAbsent: a REAL_TOPIC / ORIGIN_MESSAGE_ID / REAL_SUBSCRIPTION already on the message
    wins (the first origin is kept through retries)."""
    props = {"REAL_TOPIC": "persistent://public/default/first", "ORIGIN_MESSAGE_ID": "9:9:-1",
             "REAL_SUBSCRIPTION": "orig-sub", "x": "y"}
    _, ids = broker.publish("t", [OutgoingMessage(b"p", props)])
    sub(broker, "t", "s", "c1", settings={"maxRedeliverCount": 1,
                                          "negativeAckRedeliveryDelayMs": DELAY})
    for _ in range(2):
        assert ids_of(fetch(broker, "t", "s", "c1")) == ids
        broker.nack("t", "s", ids)
        clock.advance(DELAY)
    broker.chores.fire_due()
    [m] = topic_messages(broker, FULL + "t-s-DLQ")
    assert m.properties() == {**props, "ORIGIN_MESSAGE_IDY_TIME": str(ids[0])}


def test_dead_letter_goes_only_past_the_limit_per_message(broker, clock):
    """Two messages: one nacked every time, one acked; only the first is dead-lettered, and the
    second never reaches the DLQ."""
    _, ids = broker.publish("t", n_msgs(2))
    sub(broker, "t", "s", "c1", settings={"maxRedeliverCount": 2,
                                          "negativeAckRedeliveryDelayMs": DELAY})
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == ids
    broker.ack("t", "s", [ids[1]])
    got = got[:1]
    for rc in range(3):
        assert counts_of(got) == [rc]
        broker.nack("t", "s", [ids[0]])
        clock.advance(DELAY)
        got = fetch(broker, "t", "s", "c1")
    assert got == []
    dead = topic_messages(broker, FULL + "t-s-DLQ")
    assert [m.data() for m in dead] == [b"m0"]
    assert backlog(broker, "t", "s") == 0


def test_dead_letter_publish_and_ack_are_one_transaction(broker, clock, monkeypatch):
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", settings={"maxRedeliverCount": 1,
                                          "negativeAckRedeliveryDelayMs": DELAY})
    for _ in range(2):
        assert ids_of(fetch(broker, "t", "s", "c1")) == ids
        broker.nack("t", "s", ids)
        clock.advance(DELAY)
    real = deadletter.subs

    def boom(*a, **kw):
        raise RuntimeError("ack failed")
    monkeypatch.setattr(deadletter, "subs", types.SimpleNamespace(create=real.create, ack=boom))
    with pytest.raises(RuntimeError):
        broker.chores.fire_due()
    # Nothing half-done: no DLQ, the message still pending with its timer.
    assert not broker.topics.exists(FULL + "t-s-DLQ")
    assert backlog(broker, "t", "s") == 1
    assert broker.subscription("t", "s").describe()["timersScheduled"] == 1
    monkeypatch.setattr(deadletter, "subs", real)
    assert broker.chores.fire_due() == 1
    assert len(topic_messages(broker, FULL + "t-s-DLQ")) == 1
    assert backlog(broker, "t", "s") == 0


def test_dead_letter_on_exclusive_to_a_given_topic(broker, clock):
    custom = FULL + "my-dead-letters"
    _, ids = broker.publish("t", n_msgs(2))
    sub(broker, "t", "s", "ex", "Exclusive",
        settings={"maxRedeliverCount": 2, "negativeAckRedeliveryDelayMs": DELAY,
                  "deadLetterTopic": custom})
    seen = []
    for _ in range(3):
        got = fetch(broker, "t", "s", "ex")
        assert ids_of(got) == ids                       # a rewind brings both back, in order
        seen.append(counts_of(got))
        broker.nack("t", "s", [ids[0]])
        clock.advance(DELAY)
    broker.chores.fire_due()
    assert seen == [[0, 0], [1, 0], [2, 0]]
    assert not broker.topics.exists(FULL + "t-s-DLQ")
    [m] = topic_messages(broker, custom)
    assert m.data() == b"m0"
    assert m.properties()["REAL_SUBSCRIPTION"] == "s"
    assert m.properties()["ORIGIN_MESSAGE_ID"] == str(ids[0])
    assert dlq_producer_re(FULL + "t", "s", "ex").match(m.producer_name), m.producer_name
    assert backlog(broker, "t", "s") == 1              # m1 is still there
    assert [r["messageId"] for r in broker.subscription("t", "s").pending()] == [str(ids[1])]


def test_dead_letter_initial_subscription_holds_the_dead_letter(broker, clock):
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", settings={"maxRedeliverCount": 1,
                                          "negativeAckRedeliveryDelayMs": DELAY,
                                          "initialSubscriptionName": "init-sub"})
    for _ in range(2):
        fetch(broker, "t", "s", "c1")
        broker.nack("t", "s", ids)
        clock.advance(DELAY)
    broker.chores.fire_due()
    dlq = FULL + "t-s-DLQ"
    assert broker.topics.subscriptions(dlq) == ["init-sub"]
    assert backlog(broker, dlq, "init-sub") == 1
    sub(broker, dlq, "init-sub", "reader", position="Latest")   # exists: Latest is not used
    got = fetch(broker, dlq, "init-sub", "reader")
    assert [m.data() for m in got] == [b"m0"]


def test_dead_letter_initial_subscription_created_when_dlq_topic_exists(broker, clock):
    """§6.5: when the DLQ producer is created, the broker creates the initial subscription on the
    DLQ topic if it is missing, so the dead letters are retained, also on a DLQ topic that
    already exists."""
    dlq = FULL + "t-s-DLQ"
    broker.topics.create(dlq)
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", settings={"maxRedeliverCount": 1,
                                          "negativeAckRedeliveryDelayMs": DELAY,
                                          "initialSubscriptionName": "init-sub"})
    for _ in range(2):
        fetch(broker, "t", "s", "c1")
        broker.nack("t", "s", ids)
        clock.advance(DELAY)
    broker.chores.fire_due()
    assert len(topic_messages(broker, dlq)) == 1
    assert "init-sub" in broker.topics.subscriptions(dlq)
    assert backlog(broker, dlq, "init-sub") == 1


def test_dead_letter_per_partition(broker, clock):
    broker.topics.create_partitioned("pt", 2)
    _, ids0 = broker.publish("pt-partition-0", [OutgoingMessage(b"p0", None, "k0")])
    _, ids1 = broker.publish("pt-partition-1", [OutgoingMessage(b"p1", None, "k1")])
    sub(broker, "pt", "s", "c1", settings={"maxRedeliverCount": 1,
                                           "negativeAckRedeliveryDelayMs": DELAY})
    for rc in range(2):
        got = fetch(broker, "pt", "s", "c1")
        assert sorted(str(i) for i in ids_of(got)) == sorted([str(ids0[0]), str(ids1[0])])
        assert counts_of(got) == [rc, rc]
        assert broker.nack("pt", "s", ids_of(got)) == 2
        clock.advance(DELAY)
    broker.chores.fire_due()
    assert fetch(broker, "pt", "s", "c1") == []
    for i, mid, data in ((0, ids0[0], b"p0"), (1, ids1[0], b"p1")):
        part = f"{FULL}pt-partition-{i}"
        dlq = f"{part}-s-DLQ"
        assert parse_topic(dlq).partition_index == -1
        [m] = topic_messages(broker, dlq)
        assert m.data() == data
        p = m.properties()
        assert p["REAL_TOPIC"] == FULL + "pt"                 # the partition suffix stripped
        assert p["ORIGIN_MESSAGE_ID"] == str(mid) and str(mid).endswith(f":{i}")
        assert p["ORIGIN_MESSAGE_IDY_TIME"] == str(mid)
        assert p["REAL_SUBSCRIPTION"] == "s"
        assert dlq_producer_re(part, "s", "c1").match(m.producer_name), m.producer_name
    assert not broker.topics.exists(FULL + "pt-s-DLQ")


def test_cli_dead_letter_topic_and_initial_subscription(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "hello", "-k", "the-key", "--ordering-key", "ok",
           "-p", "color=red", "--event-time", "2025-12-31T23:00:00Z"))
    flags = ("--nack-delay", "1s", "--max-redeliver-count", "1", "--dead-letter-topic", "my-dlq",
             "--initial-subscription-name", "init-sub")
    args = ("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-o", "ndjson",
            "--idle-timeout", "2s")
    for rc in range(2):
        [rec] = rows(ok(cli(*args, *flags)).stdout)
        assert rec["redeliveryCount"] == rc
        ok(cli("nack", "t", "-s", "s", rec["messageId"]))
        ok(cli("clock", "advance", "1s"))               # fires what became due
    desc = pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))
    assert desc["deadLetterTopic"] == FULL + "my-dlq"
    assert desc["msgBacklog"] == 0
    st = pjson(cli("topics", "stats", "my-dlq", "-o", "json"))
    assert st["subscriptions"]["init-sub"]["msgBacklog"] == 1
    assert pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]["msgBacklog"] == 0
    [dead] = rows(ok(cli("receive", "my-dlq", "-s", "init-sub", "-o", "ndjson",
                         "--idle-timeout", "2s")).stdout)
    assert dead["payload"] == "hello" and dead["key"] == "the-key"
    assert dead["orderingKey"] == "ok"
    assert dead["eventTime"] == "2025-12-31T23:00:00.000Z"
    assert dead["properties"] == {"color": "red", "REAL_TOPIC": FULL + "t",
                                  "ORIGIN_MESSAGE_ID": rec["messageId"],
                                  "ORIGIN_MESSAGE_IDY_TIME": rec["messageId"],
                                  "REAL_SUBSCRIPTION": "s"}
    assert dlq_producer_re(FULL + "t", "s", "cli").match(dead["producerName"])


# -- redelivery counts across processes -------------------------------------------------------------
def test_counts_persist_across_processes(run_proc):
    def run(*args):
        p = run_proc(*args)
        assert p.returncode == 0, f"{args}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        assert "Traceback" not in p.stderr
        return p.stdout

    run("clock", "simulate", "--at", ISO_START)
    run("produce", "t", "-m", "a", "-m", "b")
    recv = ("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-o", "ndjson",
            "--idle-timeout", "5s")
    [rec] = rows(run(*recv, "--nack-delay", "1s"))
    assert rec["payload"] == "a" and rec["redeliveryCount"] == 0
    run("nack", "t", "-s", "s", rec["messageId"])
    [p] = json.loads(run("subscriptions", "pending", "t", "s", "-o", "json"))
    assert p["messageId"] == rec["messageId"]
    assert p["redeliveryCount"] == 0
    assert p["nextRedelivery"] == "2026-01-01T00:00:00.768Z"
    run("clock", "advance", "1s")
    [again] = rows(run(*recv))
    assert again["messageId"] == rec["messageId"]
    assert again["payload"] == "a" and again["redeliveryCount"] == 1
    [p] = json.loads(run("subscriptions", "pending", "t", "s", "-o", "json"))
    assert p["redeliveryCount"] == 1 and p["nextRedelivery"] is None


# -- nack of what nobody holds, unknown ids, no ids ------------------------------------------------
def test_nack_of_a_message_never_received_is_a_noop(broker, clock):
    _, ids = broker.publish("t", n_msgs(2))
    sub(broker, "t", "s", "c1", settings={"maxRedeliverCount": 1,
                                          "negativeAckRedeliveryDelayMs": DELAY})
    for _ in range(4):
        assert broker.nack("t", "s", ids) == 0
        clock.advance(DELAY)
        assert broker.chores.fire_due() == 0
    assert broker.subscription("t", "s").describe()["timersScheduled"] == 0
    assert not broker.topics.exists(FULL + "t-s-DLQ")        # never received, never dead-lettered
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == ids and counts_of(got) == [0, 0]


def test_nack_of_an_acked_message_is_a_noop(broker, clock):
    _, ids = broker.publish("t", n_msgs(2))
    sub(broker, "t", "s", "c1", fetch=2, settings={"maxRedeliverCount": 1,
                                                   "negativeAckRedeliveryDelayMs": DELAY})
    broker.ack("t", "s", [ids[0]])
    assert broker.nack("t", "s", [ids[0]]) == 0
    assert broker.nack("t", "s", ids) == 1                  # only the held one counts
    clock.advance(DELAY)
    assert broker.chores.fire_due() == 1
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == [ids[1]] and counts_of(got) == [1]
    assert not broker.topics.exists(FULL + "t-s-DLQ")


def test_nack_of_an_unknown_id_changes_nothing(broker, clock):
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", fetch=1, settings={"negativeAckRedeliveryDelayMs": DELAY})
    bogus = MessageId(ids[0].ledger_id, 99)
    with pytest.raises(MessageNotFound) as ei:
        broker.nack("t", "s", [ids[0], bogus])
    assert ei.value.exit_code == 3
    assert broker.subscription("t", "s").describe()["timersScheduled"] == 0
    assert pending_by_id(broker, "t", "s")[str(ids[0])]["nextRedelivery"] is None


def test_cli_nack_exit_codes(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "a"))
    [rec] = rows(ok(cli("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest",
                        "-o", "ndjson", "--idle-timeout", "2s")).stdout)
    mid = parse_message_id(rec["messageId"])
    assert_error(cli("nack", "t", "-s", "s", rec["messageId"], f"{mid.ledger_id}:99"), 3)
    assert_error(cli("nack", "t", "-s", "s"), 2)
    assert_error(cli("nack", "t", "-s", "s", "not-an-id"), 2)
    assert_error(cli("nack", "t", "-s", "nosub", rec["messageId"]), 3)
    [p] = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
    assert p["nextRedelivery"] is None
    assert pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))["timersScheduled"] == 0
    # Ids from stdin, as message records: the timer is set.
    out = pjson(cli("nack", "t", "-s", "s", "-", "-o", "json", input=json.dumps(rec) + "\n"))
    assert out["nacked"] == 1
    [p] = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
    assert p["nextRedelivery"] is not None
    # A nack of an id nobody holds: exit 0, 0 nacked.
    ok(cli("ack", "t", "-s", "s", rec["messageId"]))
    out = pjson(cli("nack", "t", "-s", "s", rec["messageId"], "-o", "json"))
    assert out["nacked"] == 0


# -- a consumer that goes away ---------------------------------------------------------------------
@pytest.mark.parametrize("typ", ["Shared", "Exclusive"])
def test_consumer_going_away_does_not_count(broker, clock, typ):
    _, ids = broker.publish("t", n_msgs(2))
    sub(broker, "t", "s", "c1", typ, lease=60_000,
        settings={"negativeAckRedeliveryDelayMs": DELAY})
    assert ids_of(fetch(broker, "t", "s", "c1")) == ids
    broker.nack("t", "s", [ids[0]])
    clock.advance(DELAY)
    got = fetch(broker, "t", "s", "c1")
    assert counts_of(got) == ([1] if typ == "Shared" else [1, 0])
    clock.advance(120_000)                                  # c1's lease ends
    sub(broker, "t", "s", "c2", typ)
    got = fetch(broker, "t", "s", "c2")
    assert ids_of(got) == ids
    assert counts_of(got) == [1, 0]                         # given back, no increment


@pytest.mark.parametrize("typ", ["Shared", "Exclusive"])
@pytest.mark.parametrize("order", ["timer-then-sweep", "sweep-then-timer"])
def test_nack_of_a_consumer_that_went_away_still_counts(broker, clock, typ, order):
    """Issue 14: nack timers are durable. A consumer whose lease ends is disconnected and its
    merely pending messages come back uncounted, but a message it nacked stays held until its
    nack delay has passed, then comes back exactly once with its count raised by one, whoever
    fires the timer. (Before, the timer died with the consumer, as Pulsar's client-side one
    does, and the message came back at once with count 0.)"""
    _, ids = broker.publish("t", n_msgs(2))
    sub(broker, "t", "s", "c1", typ, lease=500,
        settings={"negativeAckRedeliveryDelayMs": 5000})
    assert ids_of(fetch(broker, "t", "s", "c1")) == ids
    broker.nack("t", "s", [ids[0]])                        # lease renewed: ends at +500
    if order == "timer-then-sweep":
        clock.advance(5000)                                # gone long before the timer fires
        broker.chores.fire_due()
        sub(broker, "t", "s", "c2", typ)
    else:
        clock.advance(1000)
        sub(broker, "t", "s", "c2", typ)                   # sweeps c1: ids[1] goes back
        got = fetch(broker, "t", "s", "c2")
        assert [(str(m.message_id()), m.redelivery_count()) for m in got] == [(str(ids[1]), 0)]
        broker.ack("t", "s", [ids[1]])
        clock.advance(5000)
        broker.chores.fire_due()
    got = fetch(broker, "t", "s", "c2")
    expect = [(ids[0], 1), (ids[1], 0)] if order == "timer-then-sweep" else [(ids[0], 1)]
    assert [(str(m.message_id()), m.redelivery_count()) for m in got] == \
        [(str(i), n) for i, n in expect]                    # each exactly once
    assert fetch(broker, "t", "s", "c2") == []


def test_python_nack_then_close_delivers_once(broker, clock):
    """receive, nack, close; a new consumer after the nack delay gets each message once (not the
    nacked one twice): the close gave the unreceived one back uncounted, and the nack, durable,
    brings the nacked one back counted."""
    client = pulsarctl.Client(broker=broker)
    producer = client.create_producer("t")
    producer.send(b"hello")
    producer.send(b"world")
    c = client.subscribe("t", "s", consumer_type=ConsumerType.Shared,
                         initial_position=InitialPosition.Earliest,
                         negative_ack_redelivery_delay_ms=1000)
    m = c.receive(timeout_millis=2000)
    c.negative_acknowledge(m)
    c.close()
    clock.advance(1000)
    c = client.subscribe("t", "s", consumer_type=ConsumerType.Shared)
    got = []
    with pytest.raises(Timeout):
        while len(got) < 10:
            got.append(c.receive(timeout_millis=50))
    assert [(x.data(), x.redelivery_count()) for x in got] == [(b"hello", 1), (b"world", 0)]
    client.close()


# -- reset-cursor and ack forget counts ------------------------------------------------------------
def test_reset_cursor_clears_counts_and_timers(broker, clock):
    _, ids = broker.publish("t", n_msgs(2))
    sub(broker, "t", "s", "c1", settings={"negativeAckRedeliveryDelayMs": DELAY})
    fetch(broker, "t", "s", "c1")
    broker.nack("t", "s", ids)
    clock.advance(DELAY)
    assert counts_of(fetch(broker, "t", "s", "c1")) == [1, 1]
    broker.nack("t", "s", [ids[0]])                           # a timer pending
    assert broker.subscription("t", "s").describe()["timersScheduled"] == 1
    broker.subscription("t", "s").reset_cursor(message_id=ids[0])
    assert broker.subscription("t", "s").describe()["timersScheduled"] == 0
    assert stored_count(broker, "t", "s", ids[0]) == 0
    assert stored_count(broker, "t", "s", ids[1]) == 0
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == ids and counts_of(got) == [0, 0]
    clock.advance(DELAY * 10)
    assert broker.chores.fire_due() == 0
    assert fetch(broker, "t", "s", "c1") == []


def test_ack_forgets_counts(broker, clock):
    _, ids = broker.publish("t", n_msgs(3))
    sub(broker, "t", "s", "c1", settings={"negativeAckRedeliveryDelayMs": DELAY})
    fetch(broker, "t", "s", "c1")
    broker.nack("t", "s", ids)
    clock.advance(DELAY)
    assert counts_of(fetch(broker, "t", "s", "c1")) == [1, 1, 1]
    broker.ack("t", "s", [ids[1]])
    assert stored_count(broker, "t", "s", ids[1]) == 0
    assert stored_count(broker, "t", "s", ids[0]) == 1
    assert [r["redeliveryCount"] for r in broker.subscription("t", "s").pending()] == [1, 1]


def test_cumulative_ack_forgets_counts(broker, clock):
    _, ids = broker.publish("t", n_msgs(3))
    sub(broker, "t", "s", "c1", "Exclusive", settings={"negativeAckRedeliveryDelayMs": DELAY})
    fetch(broker, "t", "s", "c1")
    broker.nack("t", "s", ids)
    clock.advance(DELAY)
    assert counts_of(fetch(broker, "t", "s", "c1")) == [1, 1, 1]
    broker.ack("t", "s", [ids[1]], cumulative=True)
    assert [stored_count(broker, "t", "s", i) for i in ids] == [0, 0, 1]


# -- the policy flags persist with the subscription ------------------------------------------------
def test_policy_flags_persist_and_merge(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    recv = ("receive", "t", "-s", "s", "-t", "Shared", "--idle-timeout", "50ms")

    def describe():
        return pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))

    ok(cli(*recv))
    d = describe()
    assert d["policy"]["negativeAckRedeliveryDelayMs"] == 60000       # the default
    assert "maxRedeliverCount" not in d["policy"]
    assert d["deadLetterTopic"] == FULL + "t-s-DLQ"
    assert d["retryLetterTopic"] == FULL + "t-s-RETRY"
    assert d["type"] == "Shared"

    ok(cli(*recv, "--nack-delay", "2s", "--max-redeliver-count", "3"))
    d = describe()
    assert d["policy"]["negativeAckRedeliveryDelayMs"] == 2000
    assert d["policy"]["maxRedeliverCount"] == 3

    ok(cli(*recv, "--nack-backoff", "1s:10s:3", "--dead-letter-topic", "other"))
    d = describe()
    assert d["policy"]["negativeAckRedeliveryDelayMs"] == 2000          # kept
    assert d["policy"]["maxRedeliverCount"] == 3                         # kept
    assert d["policy"]["negativeAckBackoff"] == [1000, 10000, 3.0]
    assert d["policy"]["deadLetterTopic"] == FULL + "other"
    assert d["deadLetterTopic"] == FULL + "other"

    ok(cli(*recv))                                                       # nothing given: all kept
    assert describe()["policy"] == d["policy"]

    ok(cli("consume", "t", "-s", "s", "-t", "Shared", "--idle-timeout", "50ms",
           "--max-redeliver-count", "5", "--nack-delay", "50ms",
           "--initial-subscription-name", "keep"))
    d2 = describe()
    assert d2["policy"]["maxRedeliverCount"] == 5
    assert d2["policy"]["negativeAckRedeliveryDelayMs"] == 100           # the 100 ms minimum
    assert d2["policy"]["initialSubscriptionName"] == "keep"
    assert d2["policy"]["negativeAckBackoff"] == [1000, 10000, 3.0]
    assert d2["deadLetterTopic"] == FULL + "other"

    # Invalid values: exit 2, nothing stored.
    assert_error(cli(*recv, "--max-redeliver-count", "0"), 2)
    assert_error(cli(*recv, "--max-redeliver-count", "-1"), 2)
    assert_error(cli(*recv, "--nack-backoff", "2s:1s"), 2)
    assert_error(cli(*recv, "--nack-backoff", "1s:2s:1"), 2)
    assert_error(cli(*recv, "--nack-backoff", "nope"), 2)
    assert_error(cli(*recv, "--nack-delay", "soon"), 2)
    assert describe()["policy"] == d2["policy"]


def test_max_redeliver_count_zero_creates_nothing(cli):
    ok(cli("produce", "t", "-m", "a"))
    assert_error(cli("receive", "t", "-s", "s", "--max-redeliver-count", "0",
                     "--idle-timeout", "50ms"), 2)
    assert pjson(cli("topics", "subscriptions", "t", "-o", "json")) == []


def test_policy_drives_the_nack_delay(cli):
    """The stored policy is what a later, flag-less nack uses."""
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "a"))
    base = ("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-o", "ndjson",
            "--idle-timeout", "2s")
    [rec] = rows(ok(cli(*base, "--nack-delay", "3s")).stdout)
    ok(cli("nack", "t", "-s", "s", rec["messageId"]))
    [p] = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
    assert p["nextRedelivery"] == iso_ms((START_MS + 3000) & ~255)
    ok(cli("clock", "advance", "3s"))
    [rec] = rows(ok(cli(*base)).stdout)
    assert rec["redeliveryCount"] == 1
    ok(cli("nack", "t", "-s", "s", rec["messageId"]))
    [p] = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
    assert p["nextRedelivery"] == iso_ms((START_MS + 6000) & ~255)


# -- the Python API --------------------------------------------------------------------------------
def test_python_redelivery_count(broker, clock):
    """[P] test_redelivery_count: Shared, 4 receives each followed by a nack; the 4th delivery
    has redelivery_count() == 3. With ConsumerDeadLetterPolicy(3) that is the last delivery:
    the next nack dead-letters it."""
    client = pulsarctl.Client(broker=broker)
    consumer = client.subscribe("t", "my-sub", consumer_type=ConsumerType.Shared,
                                initial_position=InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=1000,
                                dead_letter_policy=ConsumerDeadLetterPolicy(3))
    producer = client.create_producer("t")
    producer.send(b"hello")
    counts = []
    for _ in range(4):
        msg = consumer.receive(timeout_millis=2000)
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
        clock.advance(1000)
        broker.chores.fire_due()
    assert msg.data() == b"hello"
    assert counts == [0, 1, 2, 3]
    with pytest.raises(Timeout):
        consumer.receive(timeout_millis=50)
    [dead] = topic_messages(broker, FULL + "t-my-sub-DLQ")
    assert dead.data() == b"hello"
    assert dead.properties()["ORIGIN_MESSAGE_ID"] == str(msg.message_id())
    client.close()


def test_python_dead_letter_policy_2(broker, clock):
    client = pulsarctl.Client(broker=broker)
    consumer = client.subscribe("t", "my-sub", consumer_type=ConsumerType.Shared,
                                initial_position=InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=1000,
                                dead_letter_policy=ConsumerDeadLetterPolicy(2),
                                consumer_name="my-consumer")
    producer = client.create_producer("t")
    producer.send(b"hello")
    counts = []
    for _ in range(3):
        msg = consumer.receive(timeout_millis=2000)
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
        clock.advance(1000)
    assert counts == [0, 1, 2]                  # max_redeliver_count + 1 deliveries
    with pytest.raises(Timeout):
        consumer.receive(timeout_millis=50)      # the fetch fires the due timer: dead-lettered
    [dead] = topic_messages(broker, FULL + "t-my-sub-DLQ")
    assert dlq_producer_re(FULL + "t", "my-sub", "my-consumer").match(dead.producer_name)
    assert backlog(broker, "t", "my-sub") == 0
    client.close()


def test_python_nack_delay_minimum(broker, clock):
    client = pulsarctl.Client(broker=broker)
    consumer = client.subscribe("t", "s", consumer_type=ConsumerType.Shared,
                                initial_position=InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=10)
    assert broker.subscription("t", "s").describe()["policy"]["negativeAckRedeliveryDelayMs"] == 100
    client.create_producer("t").send(b"x")
    msg = consumer.receive(timeout_millis=2000)
    consumer.negative_acknowledge(msg)
    assert pending_by_id(broker, "t", "s")[str(msg.message_id())]["nextRedelivery"] == \
        iso_ms((START_MS + 100) & ~255)
    client.close()


@pytest.mark.parametrize("n", [0, -1])
def test_dead_letter_policy_must_be_positive(n):
    with pytest.raises(PulsarctlError) as ei:
        ConsumerDeadLetterPolicy(n)
    assert "greater than 0" in str(ei.value)
    assert ei.value.exit_code == 2
    p = ConsumerDeadLetterPolicy(10)
    assert p.max_redeliver_count == 10
