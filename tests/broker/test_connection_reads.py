"""The named reads a client's connection makes (issue 29 item 2): Broker.allowed and
last_sequence_id, broker.clock.now, a subscription's consumer_stats, mark_delete_position,
failover_active_name and reached_end, and a reader's positions on broker.topics. Each that
names a topic is answered by the Broker that holds it: run as a transaction body on the store's
own Broker (what serve did), a non-persistent consumer's stats were None and its mark-delete
position -1:-1:-1 (the tmpfs store's answers are its stats and 1:-1:-1)."""
from __future__ import annotations


import pytest

from pulsarctl.auth import authorization as authz
from pulsarctl.errors import TopicNotFound
from pulsarctl.messages import MessageId, OutgoingMessage

NP = "non-persistent://public/default/np"
T = "persistent://public/default/t"


pytestmark = pytest.mark.usefixtures("clean_np_tmpfs")


def _publish(broker, topic, *payloads, producer=None):
    return broker.publish(topic, [OutgoingMessage(p) for p in payloads], producer)[1]


def test_consumer_stats_of_a_non_persistent_consumer_are_its_own(broker):
    broker.subscribe(NP, "s", "c1", "Shared")
    _publish(broker, NP, b"a", b"b", b"c")
    assert len(broker.fetch(NP, "s", "c1", 10)) == 3
    st = broker.subscription(NP, "s").consumer_stats("c1")
    assert st is not None
    assert st["consumer"]["consumerName"] == "c1"
    assert st["consumer"]["unackedMessages"] == 3 and st["msgOutCounter"] == 3
    assert broker.subscription(NP, "nobody").consumer_stats("c1") is None


def test_consumer_stats_of_a_persistent_consumer(broker):
    broker.subscribe(T, "s", "c1", "Exclusive", position="Earliest")
    _publish(broker, T, b"a")
    broker.fetch(T, "s", "c1", 10)
    assert broker.subscription(T, "s").consumer_stats("c1")["consumer"]["unackedMessages"] == 1


def test_mark_delete_position_of_a_non_persistent_subscription(broker):
    broker.subscribe(NP, "s", "c1", "Exclusive")
    ids = _publish(broker, NP, b"a", b"b", b"c")
    # nothing acked: the position before the first entry of the tmpfs store's ledger
    assert broker.subscription(NP, "s").mark_delete_position() == \
        MessageId(ids[0].ledger_id, -1, -1)
    assert ids[0].ledger_id >= 0
    msgs = broker.fetch(NP, "s", "c1", 10)
    broker.ack(NP, "s", [msgs[1].message_id()], cumulative=True)
    assert broker.subscription(NP, "s").mark_delete_position() == ids[1]


def test_mark_delete_position_of_a_non_persistent_reader(broker):
    ids = _publish(broker, NP, b"a", b"b")
    assert broker.topics.reader_mark_delete_position(NP, start=MessageId.latest) == ids[1]
    assert broker.topics.reader_mark_delete_position(NP, start=MessageId.earliest) == \
        MessageId(ids[0].ledger_id, -1, -1)
    assert broker.topics.reader_mark_delete_position(NP, next_offset=1) == ids[0]
    assert broker.topics.reader_mark_delete_position(NP, start=ids[0], inclusive=True) == \
        MessageId(ids[0].ledger_id, -1, -1)


def test_mark_delete_position_of_a_persistent_subscription(broker):
    broker.subscribe(T, "s", "c1", "Exclusive", position="Earliest")
    ids = _publish(broker, T, b"a", b"b")
    msgs = broker.fetch(T, "s", "c1", 10)
    broker.ack(T, "s", [msgs[0].message_id()])
    assert broker.subscription(T, "s").mark_delete_position() == ids[0]


def test_failover_active_name_on_a_non_persistent_topic(broker):
    broker.subscribe(NP, "s", "c1", "Failover")
    broker.subscribe(NP, "s", "c2", "Failover")
    assert broker.subscription(NP, "s").failover_active_name() in ("c1", "c2")
    assert broker.subscription(NP, "missing").failover_active_name() is None


def test_offset_for_publish_time_on_a_non_persistent_topic(broker, clock):
    _publish(broker, NP, b"a")
    clock.advance(1000)
    t = clock.now_ms()
    _publish(broker, NP, b"b", b"c")
    assert broker.topics.offset_for_publish_time(NP, t) == 1
    assert broker.topics.offset_for_publish_time(NP, t + 1) == 3
    with pytest.raises(TopicNotFound):
        broker.topics.offset_for_publish_time("persistent://public/default/none", t)


def test_reached_end_of_a_terminated_topic(broker):
    broker.subscribe(T, "s", "c1", "Exclusive", position="Earliest")
    _publish(broker, T, b"a")
    broker.topics.terminate(T)
    assert not broker.subscription(T, "s").reached_end()
    broker.ack(T, "s", [m.message_id() for m in broker.fetch(T, "s", "c1", 10)])
    assert broker.subscription(T, "s").reached_end()
    assert broker.topics.reader_reached_end(T, 1)
    assert not broker.topics.reader_reached_end(T, 0)
    broker.subscribe(NP, "s", "c1", "Exclusive")
    # a non-persistent topic is never terminated
    assert not broker.subscription(NP, "s").reached_end()


def test_last_sequence_id_is_minus_one_without_deduplication(broker):
    broker.publish(T, [OutgoingMessage(b"a", sequence_id=7)], "p")
    assert broker.last_sequence_id(T, "p") == -1
    broker.publish(NP, [OutgoingMessage(b"a", sequence_id=7)], "p")
    assert broker.last_sequence_id(NP, "p") == -1


def test_now_is_the_store_clock(broker, clock):
    assert broker.clock.now() == clock.now_ms()
    clock.advance(5000)
    assert broker.clock.now() == clock.now_ms()


def test_allowed_reads_the_namespace_grants_for_both_kinds_of_topic(broker):
    settings = authz.Settings.of(super_user_roles=["root"])
    broker.tenants.create("acme")
    broker.namespaces.create("acme/orders")
    broker.namespaces.grant_permission("acme/orders", "app", ["consume"])
    for topic in ("persistent://acme/orders/x", "non-persistent://acme/orders/x"):
        assert broker.allowed("app", topic, "consume", settings)
        assert not broker.allowed("app", topic, "produce", settings)
        assert broker.allowed("root", topic, "produce", settings)
    # a namespace that does not exist: the answer given for it
    assert not broker.allowed("app", "acme/none/x", "consume", settings)
    assert broker.allowed("app", "acme/none/x", "consume", settings, True)
