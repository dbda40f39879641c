"""Consumers across processes: admission by subscription type, leases and pids, sweeping dead
consumers (Exclusive/Failover rewind, Shared gives pending messages back), dispatch. Real LMDB
in tmp_path, a simulated clock instead of sleeping."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pulsarctl.broker import Broker
from pulsarctl.broker.consumers import process_start_time
from pulsarctl.clock import SimulatedClock
from pulsarctl.errors import ConsumerBusy, ConsumerNotFound, CumulativeAckNotAllowed
from pulsarctl.messages import OutgoingMessage

from simclock import START_MS

LEASE = 60_000


def n_msgs(n, prefix="m"):
    return [OutgoingMessage(f"{prefix}{i}".encode()) for i in range(n)]


def ids_of(messages):
    return [m.message_id() for m in messages]


def sub(broker, topic, sub_name, consumer, typ, *, fetch=0, lease=LEASE, position="Earliest",
        **kw):
    return broker.subscribe(topic, sub_name, consumer, typ, position, lease_ms=lease,
                            fetch=fetch, **kw)[1]


def sub_stats(broker, topic, s):
    return broker.topics.stats(topic)["subscriptions"][s]


def unacked_by_consumer(broker, topic, s):
    return {c["consumerName"]: c["unackedMessages"]
            for c in sub_stats(broker, topic, s)["consumers"]}


# -- Exclusive admission ---------------------------------------------------------------------
def test_exclusive_second_consumer_is_busy(broker):
    broker.publish("t", n_msgs(3))
    assert len(sub(broker, "t", "s", "c1", "Exclusive", fetch=1)) == 1
    with pytest.raises(ConsumerBusy) as ei:
        sub(broker, "t", "s", "c2", "Exclusive", fetch=1)
    assert ei.value.exit_code == 4
    # c2 was not recorded, and c1 lost nothing.
    assert [c["consumerName"] for c in broker.subscription("t", "s").consumers()] == ["c1"]
    assert sub_stats(broker, "t", "s")["unackedMessages"] == 1


def test_exclusive_same_name_reattaches(broker):
    _, ids = broker.publish("t", n_msgs(4))
    assert ids_of(sub(broker, "t", "s", "c1", "Exclusive", fetch=2)) == ids[:2]
    # The same consumer again (a new command of the same consumer): admitted, and it goes on
    # where it was.
    assert ids_of(sub(broker, "t", "s", "c1", "Exclusive", fetch=2)) == ids[2:]
    assert sub_stats(broker, "t", "s")["unackedMessages"] == 4


def test_other_type_cannot_join_while_consumers_are_connected(broker):
    sub(broker, "t", "s", "c1", "Exclusive")
    with pytest.raises(ConsumerBusy) as ei:
        sub(broker, "t", "s", "c2", "Shared")
    assert ei.value.exit_code == 4
    assert sub_stats(broker, "t", "s")["type"] == "Exclusive"


def test_type_can_change_once_consumers_are_gone(broker):
    _, ids = broker.publish("t", n_msgs(3))
    sub(broker, "t", "s", "c1", "Exclusive", fetch=2)
    broker.close_consumer("t", "s", "c1")
    got = sub(broker, "t", "s", "c2", "Shared", fetch=10)
    assert sub_stats(broker, "t", "s")["type"] == "Shared"
    assert ids_of(got) == ids                         # unacked ones come again


# -- leases ------------------------------------------------------------------------------------
def test_lease_ends_exactly_after_lease_ms(broker, clock):
    sub(broker, "t", "s", "c1", "Exclusive", lease=1_000)
    clock.advance(999)
    with pytest.raises(ConsumerBusy):
        sub(broker, "t", "s", "c2", "Exclusive")
    clock.advance(1)
    sub(broker, "t", "s", "c2", "Exclusive")           # c1 is dead and swept
    assert [c["consumerName"] for c in broker.subscription("t", "s").consumers()] == ["c2"]


def test_dead_exclusive_consumer_rewinds(broker, clock):
    _, ids = broker.publish("t", n_msgs(5))
    got = sub(broker, "t", "s", "c1", "Exclusive", fetch=3)
    assert ids_of(got) == ids[:3]
    broker.ack("t", "s", [ids[1]])
    clock.advance(LEASE)
    got = sub(broker, "t", "s", "c2", "Exclusive", fetch=10)
    # The unacked ones the dead consumer held come again, in order, then the rest.
    assert ids_of(got) == [ids[0], ids[2], ids[3], ids[4]]
    assert all(m.redelivery_count() == 0 for m in got)   # not tracked for Exclusive
    assert unacked_by_consumer(broker, "t", "s") == {"c2": 4}


def test_fetch_by_a_dead_consumer_is_refused(broker, clock):
    broker.publish("t", n_msgs(3))
    sub(broker, "t", "s", "c1", "Exclusive", fetch=1)
    clock.advance(LEASE)
    with pytest.raises(ConsumerNotFound) as ei:
        broker.fetch("t", "s", "c1", 1)
    assert ei.value.exit_code == 3
    # Re-subscribing reconnects; the message it held comes again.
    got = sub(broker, "t", "s", "c1", "Exclusive", fetch=10)
    assert [m.data() for m in got] == [b"m0", b"m1", b"m2"]


def test_ack_renews_the_holders_lease(broker, clock):
    _, ids = broker.publish("t", n_msgs(3))
    sub(broker, "t", "s", "c1", "Exclusive", fetch=3, lease=1_000)
    clock.advance(900)
    broker.ack("t", "s", [ids[0]])
    clock.advance(900)                                # 1800 after subscribe, 900 after the ack
    with pytest.raises(ConsumerBusy):
        sub(broker, "t", "s", "c2", "Exclusive")
    assert ids_of(broker.fetch("t", "s", "c1", 10, renew=True)) == []
    clock.advance(999)
    with pytest.raises(ConsumerBusy):
        sub(broker, "t", "s", "c2", "Exclusive")


def test_fetch_with_renew_extends_the_lease(broker, clock):
    broker.publish("t", n_msgs(2))
    sub(broker, "t", "s", "c1", "Exclusive", lease=1_000)
    clock.advance(800)
    broker.fetch("t", "s", "c1", 1, renew=True)
    clock.advance(800)
    with pytest.raises(ConsumerBusy):
        sub(broker, "t", "s", "c2", "Exclusive")
    clock.advance(200)
    sub(broker, "t", "s", "c2", "Exclusive")


# -- pids --------------------------------------------------------------------------------------
def test_consumer_with_a_live_pid_outlives_any_lease(broker, clock):
    pid = os.getpid()
    broker.subscribe("t", "s", "c1", "Exclusive", "Earliest", pid=pid,
                     pid_start=process_start_time(pid))
    clock.advance(10 * 24 * 3600 * 1000)
    with pytest.raises(ConsumerBusy):
        sub(broker, "t", "s", "c2", "Exclusive")


def test_consumer_of_an_ended_process_is_dead(broker):
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)
    try:
        broker.publish("t", n_msgs(2))
        broker.subscribe("t", "s", "c1", "Exclusive", "Earliest", pid=proc.pid,
                         pid_start=process_start_time(proc.pid))
        assert len(broker.fetch("t", "s", "c1", 2)) == 2
        with pytest.raises(ConsumerBusy):                 # its process is alive
            sub(broker, "t", "s", "c2", "Exclusive")
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    got = sub(broker, "t", "s", "c2", "Exclusive", fetch=10)
    assert [m.data() for m in got] == [b"m0", b"m1"]


def test_no_message_is_left_pending_for_a_consumer_that_is_not_connected(broker):
    """subscribe() with neither a pid nor a lease: whatever it delivers must be held by a
    connected consumer, or go to the next one. It must never be pending for nobody."""
    broker.publish("t", n_msgs(3))
    got = broker.subscribe("t", "s", "c1", "Exclusive", "Earliest", fetch=2)[1]
    assert len(got) == 2
    st_ = sub_stats(broker, "t", "s")
    assert sum(c["unackedMessages"] for c in st_["consumers"]) == st_["unackedMessages"]
    if "c1" not in [c["consumerName"] for c in st_["consumers"]]:
        got = sub(broker, "t", "s", "c2", "Exclusive", fetch=10)
        assert [m.data() for m in got] == [b"m0", b"m1", b"m2"]


def test_reused_pid_is_not_the_same_process(broker):
    """Same pid, different start time: another process has the pid now; the consumer is gone."""
    pid = os.getpid()
    start = process_start_time(pid)
    broker.subscribe("t", "s", "c1", "Exclusive", "Earliest", pid=pid, pid_start=start + 12345)
    sub(broker, "t", "s", "c2", "Exclusive")
    assert [c["consumerName"] for c in broker.subscription("t", "s").consumers()] == ["c2"]


# -- Shared ------------------------------------------------------------------------------------
def test_shared_spreads_and_never_duplicates(broker):
    _, ids = broker.publish("t", n_msgs(10))
    a = sub(broker, "t", "s", "a", "Shared", fetch=3)
    b = sub(broker, "t", "s", "b", "Shared", fetch=3)
    a += broker.fetch("t", "s", "a", 2)
    assert not set(ids_of(a)) & set(ids_of(b))
    assert ids_of(a) + ids_of(b) != []
    assert sorted(ids_of(a) + ids_of(b)) == sorted(set(ids_of(a) + ids_of(b)))
    assert unacked_by_consumer(broker, "t", "s") == {"a": 5, "b": 3}
    assert sub_stats(broker, "t", "s")["unackedMessages"] == 8
    rest = broker.fetch("t", "s", "b", 100)
    assert sorted(ids_of(a) + ids_of(b) + ids_of(rest)) == ids


def test_dead_shared_consumer_gives_its_messages_to_others(broker, clock):
    _, ids = broker.publish("t", n_msgs(8))
    a = sub(broker, "t", "s", "a", "Shared", fetch=3, lease=1_000)
    b = sub(broker, "t", "s", "b", "Shared", fetch=2, lease=LEASE)
    broker.ack("t", "s", [a[0].message_id()])
    clock.advance(1_000)                               # a's lease ends; b's does not
    got = broker.fetch("t", "s", "b", 10)
    got_ids = ids_of(got)
    # a's two unacked messages come to b, without a redelivery count increment.
    assert got_ids[:2] == ids_of(a[1:])
    assert all(m.redelivery_count() == 0 for m in got)
    assert not set(got_ids) & set(ids_of(b))
    assert sorted(got_ids + ids_of(b)) == sorted(set(ids) - {a[0].message_id()})
    assert unacked_by_consumer(broker, "t", "s") == {"b": 7}


def test_closing_a_shared_consumer_gives_back_its_messages(broker):
    _, ids = broker.publish("t", n_msgs(6))
    a = sub(broker, "t", "s", "a", "Shared", fetch=2)
    sub(broker, "t", "s", "b", "Shared", fetch=2)
    broker.close_consumer("t", "s", "a")
    got = broker.fetch("t", "s", "b", 10)
    assert ids_of(got)[:2] == ids_of(a)
    assert sub_stats(broker, "t", "s")["unackedMessages"] == 6


def test_last_shared_consumer_leaving_rewinds(broker):
    _, ids = broker.publish("t", n_msgs(5))
    got = sub(broker, "t", "s", "a", "Shared", fetch=4)
    broker.ack("t", "s", [got[1].message_id()])
    broker.close_consumer("t", "s", "a")
    assert sub_stats(broker, "t", "s")["unackedMessages"] == 0
    got = sub(broker, "t", "s", "b", "Shared", fetch=10)
    assert ids_of(got) == [ids[0], ids[2], ids[3], ids[4]]


def test_shared_ack_by_another_consumer_clears_the_holder(broker):
    sub(broker, "t", "s", "a", "Shared")
    broker.publish("t", n_msgs(2))
    got = broker.fetch("t", "s", "a", 2)
    sub(broker, "t", "s", "b", "Shared")
    broker.ack("t", "s", ids_of(got))
    assert unacked_by_consumer(broker, "t", "s") == {"a": 0, "b": 0}
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 0


def test_cumulative_ack_not_allowed_on_shared(broker):
    _, ids = broker.publish("t", n_msgs(3))
    sub(broker, "t", "s", "a", "Shared", fetch=3)
    with pytest.raises(CumulativeAckNotAllowed) as ei:
        broker.ack("t", "s", [ids[2]], cumulative=True)
    assert ei.value.exit_code == 4
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 3


def test_cumulative_ack_on_exclusive_and_failover(broker):
    for typ in ("Exclusive", "Failover"):
        s = f"s-{typ}"
        broker.subscription("t", s).create("Earliest")
    _, ids = broker.publish("t", n_msgs(5))
    for typ in ("Exclusive", "Failover"):
        s = f"s-{typ}"
        got = sub(broker, "t", s, "c", typ, fetch=5)
        assert ids_of(got) == ids
        assert broker.ack("t", s, [ids[2]], cumulative=True) == 3
        st = sub_stats(broker, "t", s)
        assert st["msgBacklog"] == 2 and st["unackedMessages"] == 2


# -- Failover ----------------------------------------------------------------------------------
def test_failover_one_active_consumer(broker):
    _, ids = broker.publish("t", n_msgs(4))
    sub(broker, "t", "s", "a", "Failover")
    sub(broker, "t", "s", "b", "Failover")
    # One of the two is active (which one is Pulsar's choice: by name, or its hash ring for
    # a non-partitioned topic); the other gets nothing.
    got_a = broker.fetch("t", "s", "a", 10)
    got_b = broker.fetch("t", "s", "b", 10)
    assert (got_a == []) != (got_b == [])
    active, standby = ("a", "b") if got_a else ("b", "a")
    assert ids_of(got_a or got_b) == ids
    assert broker.fetch("t", "s", standby, 10) == []
    # The active one leaves: the other takes over from the first unacked message.
    broker.ack("t", "s", [ids[0]])
    broker.close_consumer("t", "s", active)
    assert ids_of(broker.fetch("t", "s", standby, 10)) == ids[1:]


def test_failover_active_change_rewinds(broker, clock):
    """When the active consumer changes, the cursor rewinds (after
    activeConsumerFailoverDelayTimeMillis) and unacked messages go to the new active one."""
    _, ids = broker.publish("t", n_msgs(4))
    broker.subscribe("t", "s", "b", "Failover", "Earliest", priority=1, lease_ms=LEASE)
    assert ids_of(broker.fetch("t", "s", "b", 2)) == ids[:2]
    broker.ack("t", "s", [ids[0]])
    # A consumer of a higher priority joins: it becomes the active one.
    broker.subscribe("t", "s", "a", "Failover", "Earliest", priority=0, lease_ms=LEASE)
    clock.advance(1_000)
    assert broker.fetch("t", "s", "b", 10) == []
    assert ids_of(broker.fetch("t", "s", "a", 10)) == ids[1:]


def test_failover_priority_wins_over_name(broker):
    broker.publish("t", n_msgs(2))
    broker.subscribe("t", "s", "a", "Failover", "Earliest", priority=1, lease_ms=LEASE)
    broker.subscribe("t", "s", "b", "Failover", "Earliest", priority=0, lease_ms=LEASE)
    assert broker.fetch("t", "s", "a", 10) == []
    assert len(broker.fetch("t", "s", "b", 10)) == 2


# -- Shared dispatch against a model -----------------------------------------------------------
ops = st.lists(st.one_of(
    st.tuples(st.just("fetch"), st.integers(0, 2), st.integers(1, 7)),
    st.tuples(st.just("ack"), st.integers(0, 2), st.integers(1, 4)),
    st.tuples(st.just("close"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("publish"), st.just(0), st.integers(1, 6)),
), max_size=25)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=ops)
def test_shared_dispatch_model(tmp_path_factory, ops):
    """No message is ever pending for two consumers; acked messages never come again;
    closing a consumer gives its messages back; in the end every unacked message is there."""
    b = Broker(str(tmp_path_factory.mktemp("shared") / "store"), SimulatedClock(START_MS))
    try:
        names = ["c0", "c1", "c2"]
        attached = set()
        holder: dict = {}
        acked: set = set()
        published: list = []
        _, ids = b.publish("t", n_msgs(5))
        published += ids
        for op, i, n in ops:
            name = names[i]
            if op == "publish":
                published += b.publish("t", n_msgs(n))[1]
            elif op == "fetch":
                if name not in attached:
                    got = sub(b, "t", "s", name, "Shared", fetch=n)
                    attached.add(name)
                else:
                    got = b.fetch("t", "s", name, n)
                assert len(got) <= n
                for m in got:
                    mid = m.message_id()
                    assert mid not in holder, f"{mid} is pending for {holder.get(mid)}"
                    assert mid not in acked
                    holder[mid] = name
            elif op == "ack":
                mine = [mid for mid, h in holder.items() if h == name][:n]
                if mine:
                    b.ack("t", "s", mine)
                    acked.update(mine)
                    for mid in mine:
                        del holder[mid]
            elif op == "close" and name in attached:
                b.close_consumer("t", "s", name)
                attached.discard(name)
                for mid in [m for m, h in holder.items() if h == name]:
                    del holder[mid]
            if attached:
                st_ = sub_stats(b, "t", "s")
                assert st_["unackedMessages"] == len(holder)
                assert st_["msgBacklog"] == len(published) - len(acked)
                per = unacked_by_consumer(b, "t", "s")
                for c in attached:
                    assert per[c] == sum(1 for h in holder.values() if h == c)
        # Everyone leaves; one consumer then drains exactly the unacked messages, once each.
        for name in list(attached):
            b.close_consumer("t", "s", name)
        got = ids_of(sub(b, "t", "s", "last", "Shared", fetch=10_000))
        if b.topics.subscriptions("t"):
            assert len(got) == len(set(got))
            assert set(got) == set(published) - acked
    finally:
        b.close()
