"""Ack timeout, redeliver-unacked and consume --exec (pulsar-semantics.md §5, §6.2, §8.2, §8.3;
CLI.md consume/receive policy flags, redeliver-unacked, subscriptions describe/pending,
`consume --exec`). Real LMDB in tmp_path. Timers run on a simulated clock (clock.advance or
`clock advance`), never a sleep; only `consume --exec` waits in real time, with tiny delays."""
from __future__ import annotations

import json
import shlex
import sys
from datetime import datetime

import pytest

import pulsarctl
from pulsarctl.broker.backoff import backoff_next
from pulsarctl.broker.unacked import due as ack_due
from pulsarctl.client.client import ConsumerType, InitialPosition
from pulsarctl.errors import InvalidValue, Timeout
from pulsarctl.messages import MessageId, OutgoingMessage, iso_ms

from simclock import START_MS
from cli_helpers import ok, assert_error, rows, pjson

FULL = "persistent://public/default/"
LEASE = 600_000
TIMEOUT = 10_000
TICK = 1_000
AT = {"ackTimeoutMs": TIMEOUT, "ackTimeoutTickMs": TICK}


# -- helpers -------------------------------------------------------------------------------------
def n_msgs(n, prefix="m"):
    return [OutgoingMessage(f"{prefix}{i}".encode()) for i in range(n)]


def sub(broker, topic, s, consumer, typ="Shared", *, lease=LEASE, settings=None,
        position="Earliest"):
    return broker.subscribe(topic, s, consumer, typ, position, lease_ms=lease,
                            settings=settings)[1]


def fetch(broker, topic, s, consumer, n=100):
    return broker.fetch(topic, s, consumer, n)


def ids_of(msgs):
    return [m.message_id() for m in msgs]


def counts_of(msgs):
    return [m.redelivery_count() for m in msgs]


def backlog(broker, topic, s):
    return broker.topics.stats(topic)["subscriptions"][s]["msgBacklog"]


def pending_by_id(broker, topic, s):
    return {r["messageId"]: r for r in broker.subscription(topic, s).pending()}


def ms_of(iso):
    return int(round(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000))


def topic_messages(broker, topic):
    msgs, _nxt, _last = broker.read_entries(topic, None, 1000, after_id=MessageId.earliest)
    return msgs










def assert_quiet(broker, topic, s, consumer):
    """Nothing fires and nothing is delivered now."""
    assert broker.chores.fire_due() == 0
    assert fetch(broker, topic, s, consumer) == []


# -- §8.3 the window: [ackTimeout, ackTimeout + tick] after delivery ------------------------------
@pytest.mark.parametrize("typ", ["Shared", "Key_Shared", "Exclusive", "Failover"])
@pytest.mark.parametrize("offset", [0, 1, 300, 999])
def test_ack_timeout_window_tick_1s_timeout_10s(broker, clock, typ, offset):
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", typ, settings=AT)
    clock.advance(offset)                       # deliveries off the tick boundary too
    for round_ in range(3):
        t = clock.now_ms()
        got = fetch(broker, "t", "s", "c1")
        assert ids_of(got) == ids and counts_of(got) == [round_]
        nxt = ms_of(pending_by_id(broker, "t", "s")[str(ids[0])]["nextRedelivery"])
        assert t + TIMEOUT <= nxt <= t + TIMEOUT + TICK
        clock.advance(TIMEOUT - 1)              # never before the timeout
        assert_quiet(broker, "t", "s", "c1")
        [p] = broker.subscription("t", "s").pending()
        assert (p["consumerName"], p["redeliveryCount"]) == ("c1", round_)
        clock.advance(TICK + 1)                 # always by timeout + tick
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == ids and counts_of(got) == [3]
    assert backlog(broker, "t", "s") == 1


@pytest.mark.parametrize("offset", [0, 300, 1999])
def test_ack_timeout_tick_larger_than_timeout_uses_the_timeout(broker, clock, offset):
    """The effective tick is min(tick, ackTimeout): timeout 2 s with tick 5 s fires within
    [2 s, 4 s], never as late as a 5 s tick would make it."""
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", settings={"ackTimeoutMs": 2000, "ackTimeoutTickMs": 5000})
    clock.advance(offset)
    t = clock.now_ms()
    assert ids_of(fetch(broker, "t", "s", "c1")) == ids
    nxt = ms_of(pending_by_id(broker, "t", "s")[str(ids[0])]["nextRedelivery"])
    assert t + 2000 <= nxt <= t + 4000
    clock.advance(1999)
    assert_quiet(broker, "t", "s", "c1")
    clock.advance(2001)                          # t + 4000: timeout + effective tick
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == ids and counts_of(got) == [1]


def test_ack_timeout_due_function_window():
    """unacked.due directly: always within [timeout, timeout + min(tick, timeout)]."""
    for timeout, tick in [(10_000, 1_000), (1_000, 100), (2_000, 5_000), (1_500, 1_000)]:
        eff = min(tick, timeout)
        pol = {"ackTimeoutMs": timeout, "ackTimeoutTickMs": tick}
        for t in range(START_MS, START_MS + 2 * eff + 7, 13):
            d = ack_due(pol, t, 0)
            assert t + timeout <= d <= t + timeout + eff
    assert ack_due({}, START_MS, 0) is None
    assert ack_due({"ackTimeoutMs": 0}, START_MS, 0) is None


def test_ack_before_the_timeout_cancels_it(broker, clock):
    _, ids = broker.publish("t", n_msgs(3))
    sub(broker, "t", "s", "c1", settings=AT)
    assert ids_of(fetch(broker, "t", "s", "c1")) == ids
    clock.advance(5000)
    broker.ack("t", "s", [ids[0], ids[2]])
    clock.advance(TIMEOUT + TICK)
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == [ids[1]] and counts_of(got) == [1]
    broker.ack("t", "s", [ids[1]])
    clock.advance(10 * TIMEOUT)
    assert_quiet(broker, "t", "s", "c1")
    assert backlog(broker, "t", "s") == 0
    assert broker.subscription("t", "s").pending() == []


def test_nack_cancels_the_ack_timeout_long_nack_delay(broker, clock):
    """A nack with a delay longer than the ack timeout: only the nack's redelivery happens."""
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", settings={**AT, "negativeAckRedeliveryDelayMs": 30_000})
    t = clock.now_ms()
    assert ids_of(fetch(broker, "t", "s", "c1")) == ids
    clock.advance(1000)
    assert broker.nack("t", "s", ids) == 1
    nack_due = (t + 1000 + 30_000) & ~255
    clock.advance(TIMEOUT + TICK)                # past the ack-timeout window
    assert_quiet(broker, "t", "s", "c1")
    [p] = broker.subscription("t", "s").pending()
    assert p["redeliveryCount"] == 0
    clock.advance(nack_due - clock.now_ms())
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == ids and counts_of(got) == [1]
    assert fetch(broker, "t", "s", "c1") == []


def test_nack_cancels_the_ack_timeout_short_nack_delay(broker, clock):
    """A nack with a short delay: redelivered once by the nack (count 1); the stale ack timeout of
    the first delivery does nothing; the new delivery has its own ack timeout."""
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", settings={**AT, "negativeAckRedeliveryDelayMs": 1000})
    assert ids_of(fetch(broker, "t", "s", "c1")) == ids
    assert broker.nack("t", "s", ids) == 1
    clock.advance(1000)
    t1 = clock.now_ms()
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == ids and counts_of(got) == [1]
    clock.advance(TIMEOUT - 1000)                # the first delivery's ack timeout would be due
    assert_quiet(broker, "t", "s", "c1")
    [p] = broker.subscription("t", "s").pending()
    assert p["redeliveryCount"] == 1
    clock.advance(t1 + TIMEOUT - 1 - clock.now_ms())
    assert_quiet(broker, "t", "s", "c1")
    clock.advance(TICK + 1)
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == ids and counts_of(got) == [2]


def test_pending_next_redelivery_after_a_nack_is_the_nack_deadline(broker, clock):
    """A nack cancels the ack timeout, so `subscriptions pending` must show the nack's deadline
    as the next redelivery, not the void ack-timeout one."""
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", settings={**AT, "negativeAckRedeliveryDelayMs": 2000})
    t = clock.now_ms()
    fetch(broker, "t", "s", "c1")
    [p] = broker.subscription("t", "s").pending()
    assert t + TIMEOUT <= ms_of(p["nextRedelivery"]) <= t + TIMEOUT + TICK
    broker.nack("t", "s", ids)
    [p] = broker.subscription("t", "s").pending()
    assert p["nextRedelivery"] == iso_ms((t + 2000) & ~255)


@pytest.mark.parametrize("typ", ["Exclusive", "Failover"])
def test_exclusive_ack_timeout_rewinds_all_unacked_in_order(broker, clock, typ):
    _, ids = broker.publish("t", n_msgs(4))
    sub(broker, "t", "s", "c1", typ, settings=AT)
    assert ids_of(fetch(broker, "t", "s", "c1", 1)) == ids[:1]          # m0 at t
    clock.advance(5000)
    assert ids_of(fetch(broker, "t", "s", "c1", 2)) == ids[1:3]         # m1, m2 at t+5s
    clock.advance(1000)
    broker.ack("t", "s", [ids[1]])
    clock.advance(TIMEOUT - 6000 - 1)
    assert broker.chores.fire_due() == 0                                       # not yet: no rewind
    assert sorted(pending_by_id(broker, "t", "s")) == sorted([str(ids[0]), str(ids[2])])
    clock.advance(TICK + 1)                                             # m0 timed out: rewind
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == [ids[0], ids[2], ids[3]]
    assert counts_of(got) == [1, 0, 0]
    t2 = clock.now_ms()
    # m2's first delivery (t+5s) is void now: nothing at t+15s..16s.
    clock.advance(5000 + TICK)
    assert_quiet(broker, "t", "s", "c1")
    clock.advance(t2 + TIMEOUT + TICK - clock.now_ms())
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == [ids[0], ids[2], ids[3]]
    assert counts_of(got) == [2, 1, 1]


def test_ack_timeout_backoff_adds_next_of_the_count(broker, clock):
    backoff = [1000, 60_000, 2.0]
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", settings={**AT, "ackTimeoutBackoff": backoff})
    clock.advance(123)
    for count in range(5):
        t = clock.now_ms()
        got = fetch(broker, "t", "s", "c1")
        assert ids_of(got) == ids and counts_of(got) == [count]
        extra = backoff_next(*backoff, count)
        assert extra == [1000, 2000, 4000, 8000, 16000][count]
        nxt = ms_of(broker.subscription("t", "s").pending()[0]["nextRedelivery"])
        assert t + TIMEOUT + extra <= nxt <= t + TIMEOUT + extra + TICK
        clock.advance(TIMEOUT + extra - 1)
        assert_quiet(broker, "t", "s", "c1")
        clock.advance(TICK + 1)


def test_cli_ack_timeout_backoff_persisted_and_applied(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "x"))
    base = ("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-o", "ndjson",
            "--idle-timeout", "50ms")
    [rec] = rows(ok(cli(*base, "--ack-timeout", "10s", "--ack-timeout-backoff", "1s:60s")).stdout)
    assert rec["redeliveryCount"] == 0
    d = pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))
    assert d["policy"]["ackTimeoutBackoff"] == [1000, 60000, 2.0]
    [p] = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
    assert START_MS + 11_000 <= ms_of(p["nextRedelivery"]) <= START_MS + 12_000
    ok(cli("clock", "advance", "10999ms"))
    assert rows(ok(cli(*base)).stdout) == []
    ok(cli("clock", "advance", "1001ms"))
    [rec2] = rows(ok(cli(*base)).stdout)
    assert (rec2["messageId"], rec2["redeliveryCount"]) == (rec["messageId"], 1)


@pytest.mark.parametrize("typ", ["Shared", "Key_Shared", "Exclusive"])
def test_ack_timeout_dead_letters_after_max_plus_one_deliveries(broker, clock, typ):
    n_max = 2
    _, ids = broker.publish("t", [OutgoingMessage(b"body", {"a": "1"}, "k")])
    sub(broker, "t", "s", "c1", typ,
        settings={"ackTimeoutMs": 2000, "ackTimeoutTickMs": 1000, "maxRedeliverCount": n_max})
    seen = []
    for _ in range(10):
        got = fetch(broker, "t", "s", "c1")
        seen.extend(counts_of(got))
        clock.advance(3000)
    assert seen == list(range(n_max + 1))                               # counts 0..max
    assert backlog(broker, "t", "s") == 0
    [dead] = topic_messages(broker, FULL + "t-s-DLQ")
    assert dead.data() == b"body" and dead.partition_key() == "k"
    props = dead.properties()
    assert props["a"] == "1"
    assert props["REAL_TOPIC"] == FULL + "t"
    assert props["ORIGIN_MESSAGE_ID"] == str(ids[0])


@pytest.mark.parametrize("typ", ["Shared", "Exclusive"])
@pytest.mark.parametrize("order", ["timer-then-sweep", "sweep-then-timer"])
def test_ack_timeout_of_a_consumer_that_went_away_does_not_count(broker, clock, typ, order):
    _, ids = broker.publish("t", n_msgs(2))
    sub(broker, "t", "s", "c1", typ, lease=500, settings=AT)
    assert ids_of(fetch(broker, "t", "s", "c1")) == ids
    if order == "timer-then-sweep":
        clock.advance(TIMEOUT + TICK)            # c1 gone long before its timers are due
        assert broker.chores.fire_due() == 0
        sub(broker, "t", "s", "c2", typ)
        got = fetch(broker, "t", "s", "c2")
        assert ids_of(got) == ids and counts_of(got) == [0, 0]
    else:
        clock.advance(1000)
        sub(broker, "t", "s", "c2", typ)         # sweeps c1: its messages go back uncounted
        t2 = clock.now_ms()
        got = fetch(broker, "t", "s", "c2")
        assert ids_of(got) == ids and counts_of(got) == [0, 0]
        clock.advance(TIMEOUT + TICK - 1000 - 1)   # c1's timers due; c2's not yet
        assert_quiet(broker, "t", "s", "c2")
        assert [p["redeliveryCount"] for p in broker.subscription("t", "s").pending()] == [0, 0]
        clock.advance(t2 + TIMEOUT + TICK - clock.now_ms())
        got = fetch(broker, "t", "s", "c2")
        assert ids_of(got) == ids and counts_of(got) == [1, 1]


def test_ack_timeout_off_by_default(broker, clock):
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1")
    fetch(broker, "t", "s", "c1")
    assert broker.subscription("t", "s").pending()[0]["nextRedelivery"] is None
    clock.advance(LEASE - 1000)                  # long, but within the consumer's lease
    assert_quiet(broker, "t", "s", "c1")
    assert broker.subscription("t", "s").pending()[0]["redeliveryCount"] == 0


# -- the Python API ---------------------------------------------------------------------------------
def test_python_unacked_messages_timeout_ms(broker, clock):
    client = pulsarctl.Client(broker=broker)
    client.create_producer("t").send(b"hello")
    c = client.subscribe("t", "s", consumer_type=ConsumerType.Shared,
                         initial_position=InitialPosition.Earliest,
                         unacked_messages_timeout_ms=10_000)
    m = c.receive(timeout_millis=2000)
    assert (m.data(), m.redelivery_count()) == (b"hello", 0)
    clock.advance(TIMEOUT - 1)
    with pytest.raises(Timeout):
        c.receive(timeout_millis=50)
    clock.advance(TICK + 1)
    m2 = c.receive(timeout_millis=2000)
    assert (m2.message_id(), m2.redelivery_count()) == (m.message_id(), 1)
    c.acknowledge(m2)
    c.flush_acks()
    clock.advance(10 * TIMEOUT)
    with pytest.raises(Timeout):
        c.receive(timeout_millis=50)
    assert backlog(broker, "t", "s") == 0
    client.close()


@pytest.mark.parametrize("bad", [1, 500, 999])
def test_python_unacked_messages_timeout_below_1s_is_refused(broker, bad):
    client = pulsarctl.Client(broker=broker)
    client.create_producer("t").send(b"x")
    with pytest.raises(InvalidValue) as ei:
        client.subscribe("t", "s", unacked_messages_timeout_ms=bad)
    assert ei.value.exit_code == 2
    assert "greater than 1000 ms" in str(ei.value)
    assert broker.topics.subscriptions("t") == []
    # 0 (off) and 1000 (the minimum) are fine.
    client.subscribe("t", "s0", unacked_messages_timeout_ms=0).close()
    client.subscribe("t", "s1", unacked_messages_timeout_ms=1000).close()
    client.close()


def test_python_ack_timeout_starts_when_the_app_receives_not_on_prefetch(broker, clock):
    """§8.3: a message is added to the tracker when the app receives it, not when it is
    prefetched into the receiver queue. m1, received 5 s after m0, must not time out with m0;
    and m2, still in the receiver queue, must not reach the app twice."""
    client = pulsarctl.Client(broker=broker)
    p = client.create_producer("t")
    for x in (b"m0", b"m1", b"m2"):
        p.send(x)
    c = client.subscribe("t", "s", consumer_type=ConsumerType.Shared,
                         initial_position=InitialPosition.Earliest,
                         unacked_messages_timeout_ms=10_000)
    assert c.receive(timeout_millis=2000).data() == b"m0"               # at t
    clock.advance(5000)
    assert c.receive(timeout_millis=2000).data() == b"m1"               # at t+5s
    clock.advance(6000)                                                  # t+11s
    got = []
    with pytest.raises(Timeout):
        while len(got) < 10:
            m = c.receive(timeout_millis=50)
            got.append((m.data(), m.redelivery_count()))
    assert sorted(got) == [(b"m0", 1), (b"m2", 0)], got
    client.close()


# -- the command line: validation, persistence, pending --------------------------------------------
RECV = ("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "--idle-timeout", "50ms")


@pytest.mark.parametrize("flags,needle", [
    (("--ack-timeout", "500ms"), "greater than 1000 ms"),
    (("--ack-timeout", "999ms"), "greater than 1000 ms"),
    (("--ack-timeout", "1ms"), "greater than 1000 ms"),
    (("--ack-timeout-tick", "10ms"), "100 ms"),
    (("--ack-timeout-tick", "99ms"), "100 ms"),
    (("--ack-timeout-tick", "0"), "100 ms"),
    (("--ack-timeout", "10s", "--ack-timeout-tick", "10ms"), "100 ms"),
])
@pytest.mark.parametrize("cmd", ["receive", "consume"])
def test_cli_ack_timeout_validation(cli, flags, needle, cmd):
    ok(cli("produce", "t", "-m", "a"))
    line = assert_error(cli(cmd, *RECV[1:], *flags), 2)
    assert needle in line
    assert pjson(cli("topics", "subscriptions", "t", "-o", "json")) == []   # nothing created


@pytest.mark.parametrize("bad", ["soon", "-5s", "10x"])
def test_cli_ack_timeout_malformed(cli, bad):
    assert_error(cli(*RECV, "--ack-timeout", bad), 2)
    assert_error(cli(*RECV, "--ack-timeout-tick", bad), 2)
    assert_error(cli(*RECV, "--ack-timeout-backoff", bad), 2)


def test_cli_ack_timeout_policy_persisted_and_zero_turns_it_off(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))

    def describe():
        return pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))

    ok(cli(*RECV, "--ack-timeout", "1s", "--ack-timeout-tick", "100ms"))   # the minimums
    d = describe()
    assert d["policy"]["ackTimeoutMs"] == 1000
    assert d["policy"]["ackTimeoutTickMs"] == 100
    ok(cli(*RECV, "--ack-timeout", "10s", "--ack-timeout-tick", "500ms",
           "--ack-timeout-backoff", "1s:60s:3"))
    d = describe()
    assert d["policy"]["ackTimeoutMs"] == 10000
    assert d["policy"]["ackTimeoutTickMs"] == 500
    assert d["policy"]["ackTimeoutBackoff"] == [1000, 60000, 3.0]
    ok(cli(*RECV))                                                          # kept
    assert describe()["policy"] == d["policy"]
    ok(cli(*RECV, "--ack-timeout", "0"))                                    # off
    d = describe()
    assert not d["policy"]["ackTimeoutMs"]
    assert d["policy"]["ackTimeoutTickMs"] == 500
    ok(cli("produce", "t", "-m", "x"))
    [rec] = rows(ok(cli(*RECV, "-o", "ndjson")).stdout)
    [p] = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
    assert p["nextRedelivery"] is None
    ok(cli("clock", "advance", "4m"))           # long, but within receive's 5m lease
    assert rows(ok(cli(*RECV, "-o", "ndjson")).stdout) == []
    [p] = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
    assert (p["messageId"], p["redeliveryCount"]) == (rec["messageId"], 0)


def test_cli_ack_timeout_end_to_end_with_pending(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS + 400)))
    ok(cli("produce", "t", "-m", "a", "-m", "b"))
    base = ("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-o", "ndjson",
            "--idle-timeout", "50ms", "-n", "5")
    recs = rows(ok(cli(*base, "--ack-timeout", "10s", "--ack-timeout-tick", "1s")).stdout)
    assert [r["redeliveryCount"] for r in recs] == [0, 0]
    t = START_MS + 400
    pend = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
    assert len(pend) == 2
    for p in pend:
        assert p["consumerName"] == "cli"
        assert t + 10_000 <= ms_of(p["nextRedelivery"]) <= t + 11_000
    ok(cli("ack", "t", "-s", "s", recs[1]["messageId"]))
    ok(cli("clock", "advance", "9999ms"))
    assert rows(ok(cli(*base)).stdout) == []
    ok(cli("clock", "advance", "1001ms"))       # fires what became due
    [again] = rows(ok(cli(*base)).stdout)
    assert (again["messageId"], again["redeliveryCount"]) == (recs[0]["messageId"], 1)
    [p] = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
    t2 = START_MS + 400 + 11_000
    assert t2 + 10_000 <= ms_of(p["nextRedelivery"]) <= t2 + 11_000
    assert p["redeliveryCount"] == 1


# -- redeliver-unacked ---------------------------------------------------------------------------
def test_redeliver_unacked_shared_named_consumer_only(broker, clock):
    _, ids = broker.publish("t", n_msgs(4))
    sub(broker, "t", "s", "c1")
    sub(broker, "t", "s", "c2")
    assert ids_of(fetch(broker, "t", "s", "c1", 2)) == ids[:2]
    assert ids_of(fetch(broker, "t", "s", "c2", 1)) == ids[2:3]
    assert broker.redeliver_unacked("t", "s", "c1") == 2
    pend = pending_by_id(broker, "t", "s")
    assert set(pend) == {str(ids[2])}
    assert (pend[str(ids[2])]["consumerName"], pend[str(ids[2])]["redeliveryCount"]) == ("c2", 0)
    # Back to replay, for any consumer, at once (no clock advance), counted.
    got = fetch(broker, "t", "s", "c2")
    assert ids_of(got) == [ids[0], ids[1], ids[3]]
    assert counts_of(got) == [1, 1, 0]
    pend = pending_by_id(broker, "t", "s")
    assert pend[str(ids[2])]["redeliveryCount"] == 0
    # Without a consumer name: everyone's.
    assert broker.redeliver_unacked("t", "s") == 4
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == ids
    assert counts_of(got) == [2, 2, 1, 1]
    assert broker.redeliver_unacked("t", "s", "nobody") == 0


@pytest.mark.parametrize("typ", ["Exclusive", "Failover"])
def test_redeliver_unacked_exclusive_rewinds(broker, clock, typ):
    _, ids = broker.publish("t", n_msgs(5))
    sub(broker, "t", "s", "c1", typ)
    assert ids_of(fetch(broker, "t", "s", "c1", 4)) == ids[:4]
    broker.ack("t", "s", [ids[1]])
    assert broker.redeliver_unacked("t", "s", "c1") == 3
    got = fetch(broker, "t", "s", "c1")
    assert ids_of(got) == [ids[0], ids[2], ids[3], ids[4]]
    assert counts_of(got) == [1, 1, 1, 0]


def test_redeliver_unacked_clears_the_ack_timeout(broker, clock):
    _, ids = broker.publish("t", n_msgs(1))
    sub(broker, "t", "s", "c1", settings=AT)
    fetch(broker, "t", "s", "c1")
    clock.advance(5000)
    assert broker.redeliver_unacked("t", "s", "c1") == 1
    t1 = clock.now_ms()
    assert counts_of(fetch(broker, "t", "s", "c1")) == [1]
    clock.advance(TIMEOUT - 5000 + TICK)        # the first delivery's window has passed
    assert_quiet(broker, "t", "s", "c1")
    clock.advance(t1 + TIMEOUT + TICK - clock.now_ms())
    assert counts_of(fetch(broker, "t", "s", "c1")) == [2]


def test_python_redeliver_unacknowledged_messages(broker, clock):
    client = pulsarctl.Client(broker=broker)
    p = client.create_producer("t")
    for i in range(4):
        p.send(f"m{i}".encode())
    kw = dict(consumer_type=ConsumerType.Shared, initial_position=InitialPosition.Earliest,
              receiver_queue_size=2)
    c1 = client.subscribe("t", "s", consumer_name="c1", **kw)
    c2 = client.subscribe("t", "s", consumer_name="c2", **kw)
    assert c1.receive(timeout_millis=2000).data() == b"m0"     # c1 holds m0, m1
    assert c2.receive(timeout_millis=2000).data() == b"m2"     # c2 holds m2, m3
    c1.redeliver_unacknowledged_messages()
    got = [c1.receive(timeout_millis=2000) for _ in range(2)]
    assert [(m.data(), m.redelivery_count()) for m in got] == [(b"m0", 1), (b"m1", 1)]
    pend = broker.subscription("t", "s").pending()
    assert sorted((r["consumerName"], r["redeliveryCount"]) for r in pend) == [
        ("c1", 1), ("c1", 1), ("c2", 0), ("c2", 0)]
    m3 = c2.receive(timeout_millis=2000)
    assert (m3.data(), m3.redelivery_count()) == (b"m3", 0)
    client.close()


def test_cli_redeliver_unacked(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "a", "-m", "b", "-m", "c"))
    base = ("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-o", "ndjson",
            "--idle-timeout", "50ms")
    ra = rows(ok(cli(*base, "-n", "2", "--consumer-name", "A")).stdout)
    [rb] = rows(ok(cli(*base, "-n", "1", "--consumer-name", "B")).stdout)
    assert [r["payload"] for r in ra] == ["a", "b"] and rb["payload"] == "c"
    out = pjson(cli("redeliver-unacked", "t", "-s", "s", "--consumer-name", "A", "-o", "json"))
    assert out == {"redelivered": 2}
    [p] = pjson(cli("subscriptions", "pending", "t", "s", "-o", "json"))
    assert (p["messageId"], p["consumerName"], p["redeliveryCount"]) == (rb["messageId"], "B", 0)
    got = rows(ok(cli(*base, "-n", "5", "--consumer-name", "B")).stdout)
    assert [(r["messageId"], r["redeliveryCount"]) for r in got] == [
        (ra[0]["messageId"], 1), (ra[1]["messageId"], 1)]
    # Text mode; all consumers (B holds all three now).
    r = ok(cli("redeliver-unacked", "t", "-s", "s"))
    assert "3" in r.stderr and r.stdout == ""
    got = rows(ok(cli(*base, "-n", "5", "--consumer-name", "A")).stdout)
    assert sorted((r["payload"], r["redeliveryCount"]) for r in got) == [
        ("a", 2), ("b", 2), ("c", 1)]


def test_cli_redeliver_unacked_exclusive(cli):
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "a", "-m", "b", "-m", "c"))
    base = ("receive", "t", "-s", "s", "-p", "Earliest", "-o", "ndjson", "--idle-timeout", "50ms")
    recs = rows(ok(cli(*base, "-n", "2")).stdout)
    ok(cli("ack", "t", "-s", "s", recs[0]["messageId"]))
    assert pjson(cli("redeliver-unacked", "t", "-s", "s", "-o", "json")) == {"redelivered": 1}
    got = rows(ok(cli(*base, "-n", "5")).stdout)
    assert [(r["payload"], r["redeliveryCount"]) for r in got] == [("b", 1), ("c", 0)]


def test_cli_redeliver_unacked_not_found(cli):
    ok(cli("produce", "t", "-m", "a"))
    assert_error(cli("redeliver-unacked", "t", "-s", "nosub"), 3)
    assert_error(cli("redeliver-unacked", "no-such-topic", "-s", "s"), 3)
    assert_error(cli("redeliver-unacked", "t"), 2)                     # -s is required
    assert pjson(cli("topics", "subscriptions", "t", "-o", "json")) == []


# -- consume --exec --------------------------------------------------------------------------------
RECORDER = r'''
import json, os, sys
data = sys.stdin.buffer.read()
env = {k: v for k, v in os.environ.items() if k.startswith("PULSAR_")}
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"env": env, "stdin": data.hex()}) + "\n")
code = int(sys.argv[2])
if len(sys.argv) > 3:   # fail only the first delivery
    code = code if env["PULSAR_REDELIVERY_COUNT"] == "0" else 0
sys.exit(code)
'''


@pytest.fixture
def recorder(tmp_path):
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    log = tmp_path / "calls.jsonl"

    def cmd(code=0, first_only=False):
        parts = [sys.executable, str(script), str(log), str(code)] + (["first"] if first_only else [])
        return " ".join(shlex.quote(p) for p in parts)

    def calls():
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines() if line]

    cmd.calls = calls
    return cmd


def summary(stderr):
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert lines, "no summary line on stderr"
    return lines[-1]


def test_exec_env_and_stdin_exact(run_proc, recorder, tmp_path):
    payload = b"\x00\x01\xfe\xff first line\nsecond\r\n\n$(echo not-run) `x`\n\xc3\xa9\x80"
    body = tmp_path / "body.bin"
    body.write_bytes(payload)
    p = run_proc("produce", "t", "-f", str(body), "-k", "the key",
                 "-p", "x-y.z=v1", "-p", "camelCase=v 2", "-p", "a b=three=3",
                 "-p", "9lives=nine", "-p", "ok_NAME=\n\n", "-p", "é=e")
    assert p.returncode == 0, p.stderr
    mid = p.stdout.strip()
    p = run_proc("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "1",
                 "--exec", recorder(0), "--idle-timeout", "5s")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    [call] = recorder.calls()
    assert bytes.fromhex(call["stdin"]) == payload
    env = call["env"]
    assert env["PULSAR_MESSAGE_ID"] == mid
    assert env["PULSAR_TOPIC"] == FULL + "t"
    assert env["PULSAR_KEY"] == "the key"
    assert env["PULSAR_REDELIVERY_COUNT"] == "0"
    props = {k: v for k, v in env.items() if k.startswith("PULSAR_PROP_")}
    assert props == {"PULSAR_PROP_X_Y_Z": "v1", "PULSAR_PROP_CAMELCASE": "v 2",
                     "PULSAR_PROP_A_B": "three=3", "PULSAR_PROP_9LIVES": "nine",
                     "PULSAR_PROP_OK_NAME": "\n\n", "PULSAR_PROP__": "e"}
    line = summary(p.stderr)
    assert "1 message" in line and "1 acked" in line and "0 nacked" in line
    st = json.loads(run_proc("topics", "stats", "t", "-o", "json").stdout)
    assert st["subscriptions"]["s"]["msgBacklog"] == 0


def test_exec_topic_is_the_full_name_in_another_namespace(cli, recorder):
    ok(cli("tenants", "create", "acme"))
    ok(cli("namespaces", "create", "acme/prod"))
    ok(cli("produce", "acme/prod/orders", "-m", "x"))
    ok(cli("consume", "acme/prod/orders", "-s", "s", "-p", "Earliest", "-n", "1",
           "--exec", recorder(0), "--idle-timeout", "5s"))
    [call] = recorder.calls()
    assert call["env"]["PULSAR_TOPIC"] == "persistent://acme/prod/orders"
    assert bytes.fromhex(call["stdin"]) == b"x"


def test_exec_exit_0_acks_every_message(cli, recorder):
    ok(cli("produce", "t", "-m", "a", "-m", "b\nb", "-m", ""))
    r = ok(cli("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "3",
               "--exec", recorder(0), "--idle-timeout", "5s"))
    calls = recorder.calls()
    assert [bytes.fromhex(c["stdin"]) for c in calls] == [b"a", b"b\nb", b""]
    assert [c["env"]["PULSAR_REDELIVERY_COUNT"] for c in calls] == ["0", "0", "0"]
    assert len({c["env"]["PULSAR_MESSAGE_ID"] for c in calls}) == 3
    line = summary(r.stderr)
    assert "3 message" in line and "3 acked" in line and "0 nacked" in line
    st = pjson(cli("topics", "stats", "t", "-o", "json"))
    assert st["subscriptions"]["s"]["msgBacklog"] == 0
    r = ok(cli("consume", "t", "-s", "s", "-t", "Shared", "-n", "1", "--exec", recorder(0),
               "--idle-timeout", "200ms"))
    assert len(recorder.calls()) == 3


@pytest.mark.parametrize("typ,code", [("Shared", 1), ("Shared", 75), ("Shared", 2),
                                      ("Shared", 255), ("Exclusive", 1), ("Exclusive", 75)])
def test_exec_failure_nacks_and_comes_back_in_the_same_run(cli, recorder, code, typ):
    ok(cli("produce", "t", "-m", "payload"))
    r = ok(cli("consume", "t", "-s", "s", "-t", typ, "-p", "Earliest", "-n", "2",
               "--nack-delay", "100ms", "--exec", recorder(code, first_only=True),
               "--idle-timeout", "60s"))  # a bound only: -n 2 ends it once the redelivery came
    calls = recorder.calls()
    assert len(calls) == 2
    assert calls[0]["env"]["PULSAR_MESSAGE_ID"] == calls[1]["env"]["PULSAR_MESSAGE_ID"]
    assert [c["env"]["PULSAR_REDELIVERY_COUNT"] for c in calls] == ["0", "1"]
    assert [bytes.fromhex(c["stdin"]) for c in calls] == [b"payload", b"payload"]
    line = summary(r.stderr)
    assert "2 message" in line and "1 acked" in line and "1 nacked" in line
    st = pjson(cli("topics", "stats", "t", "-o", "json"))
    assert st["subscriptions"]["s"]["msgBacklog"] == 0


def test_exec_exit_75_without_retry_is_a_nack_not_a_retry(cli, recorder):
    ok(cli("produce", "t", "-m", "p"))
    ok(cli("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "1",
           "--nack-delay", "100ms", "--exec", recorder(75), "--idle-timeout", "3s"))
    topics = pjson(cli("topics", "list", "public/default", "-o", "json"))
    assert not any(t.endswith("-RETRY") or t.endswith("-DLQ") for t in topics)
    st = pjson(cli("topics", "stats", "t", "-o", "json"))
    assert st["subscriptions"]["s"]["msgBacklog"] == 1


def test_exec_command_not_found_nacks(cli, recorder):
    ok(cli("produce", "t", "-m", "p"))
    r = ok(cli("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "1",
               "--exec", "pulsarctl-no-such-command-xyz", "--idle-timeout", "3s"))
    line = summary(r.stderr)
    assert "0 acked" in line and "1 nacked" in line
    st = pjson(cli("topics", "stats", "t", "-o", "json"))
    assert st["subscriptions"]["s"]["msgBacklog"] == 1
    # Exit 127 each time: nacked, redelivered with count 1 within the run, nacked again.
    r = ok(cli("consume", "t", "-s", "s2", "-t", "Shared", "-p", "Earliest", "-n", "2",
               "--nack-delay", "100ms", "--idle-timeout", "60s",  # a bound: -n 2 ends it
               "--exec", recorder(0) + "; pulsarctl-no-such-command-xyz"))
    calls = recorder.calls()
    assert [c["env"]["PULSAR_REDELIVERY_COUNT"] for c in calls] == ["0", "1"]
    line = summary(r.stderr)
    assert "2 message" in line and "0 acked" in line and "2 nacked" in line
    st = pjson(cli("topics", "stats", "t", "-o", "json"))
    assert st["subscriptions"]["s2"]["msgBacklog"] == 1


def test_exec_never_interpolates_message_content(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = [tmp_path / f"PWNED{i}" for i in range(6)]
    payloads = [f"$(touch {files[0]})", f"`touch {files[1]}`", f"x; touch {files[2]}",
                "$(touch PWNED_REL)"]
    args = []
    for pl in payloads:
        args += ["-m", pl]
    ok(cli("produce", "t", *args))
    ok(cli("produce", "t", "-m", "k", "-k", f"$(touch {files[3]})",
           "-p", f"p=`touch {files[4]}`", "-p", f"q=$(touch {files[5]})"))
    out = tmp_path / "seen"
    # Even unquoted expansions in the user's own command must not run the content.
    cmd = (f"cat >> {shlex.quote(str(out))}; echo >> {shlex.quote(str(out))}; "
           "echo $PULSAR_KEY $PULSAR_PROP_P $PULSAR_PROP_Q > /dev/null")
    r = ok(cli("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "5",
               "--exec", cmd, "--idle-timeout", "3s"))
    assert "5 acked" in summary(r.stderr)
    for f in files:
        assert not f.exists(), f"{f} was created: message content was executed"
    assert not (tmp_path / "PWNED_REL").exists()
    assert out.read_text() == "".join(p + "\n" for p in payloads + ["k"])


def test_exec_summary_with_real_process_nacks(run_proc, recorder):
    assert run_proc("produce", "t", "-m", "a", "-m", "b").returncode == 0
    p = run_proc("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "2",
                 "--exec", recorder(1), "--idle-timeout", "1s")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    line = summary(p.stderr)
    assert "2 message" in line and "0 acked" in line and "2 nacked" in line
    assert p.stdout == ""
    st = json.loads(run_proc("topics", "stats", "t", "-o", "json").stdout)
    assert st["subscriptions"]["s"]["msgBacklog"] == 2


@pytest.mark.parametrize("typ", ["Shared", "Exclusive"])
def test_one_shot_exec_runs_from_cron_count_their_nacks_and_reach_the_dlq(cli, recorder, typ):
    """Each run nacks and exits long before the 1 m nack delay. Pulsar would give the message
    back uncounted every time (its nack timer dies with the client) and it would never reach
    the DLQ. Nack timers are durable here (issue 14): the message stays held after the run,
    a run inside the delay does not see it, and the first run after it sees it counted.
    (Before, `consume --exec` settled its nacks at exit: the message came back at once.)"""
    ok(cli("clock", "simulate", "--at", str(START_MS)))
    ok(cli("produce", "t", "-m", "poison"))
    run = ["consume", "t", "-s", "s", "-t", typ, "-p", "Earliest", "-n", "1",
           "--max-redeliver-count", "2", "--nack-delay", "1m", "--idle-timeout", "300ms",
           "--exec", recorder(1)]
    for i in range(3):  # delivered N+1 = 3 times: counts 0, 1, 2
        ok(cli(*run))
        assert len(recorder.calls()) == i + 1
        ok(cli("clock", "advance", "30s"))
        assert cli(*run, "--fail-if-empty").exit_code == 6     # inside the delay: held
        ok(cli("clock", "advance", "30s"))
    assert [c["env"]["PULSAR_REDELIVERY_COUNT"] for c in recorder.calls()] == ["0", "1", "2"]
    st = pjson(cli("topics", "stats", "t", "-o", "json"))
    assert st["subscriptions"]["s"]["msgBacklog"] == 0
    dlq = rows(ok(cli("read", "t-s-DLQ", "-m", "earliest", "-n", "0", "--until-end", "-o",
                      "ndjson")).stdout)
    assert [m["payload"] for m in dlq] == ["poison"]
    r = cli(*run, "--fail-if-empty")
    assert r.exit_code == 6 and len(recorder.calls()) == 3
