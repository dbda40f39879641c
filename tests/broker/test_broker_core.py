"""Broker core semantics on a real store in tmp_path with a simulated clock: topics, names,
publishing, sizes, initial positions, acks, peek, stats, trimming, admin, the persisted clock.
Consumers and dispatch are in test_broker_consumers.py."""
from __future__ import annotations

import re

import pytest

from pulsarctl.broker import Broker
from pulsarctl.clock import SimulatedClock
from pulsarctl.errors import (
    AlreadyExists, ConsumerBusy, CumulativeAckNotAllowed, InvalidTopicName, InvalidValue,
    MessageNotFound, MessageTooLarge, NamespaceNotFound, NotEmpty, SubscriptionNotFound,
    TenantNotFound, TopicNotFound,
)
from pulsarctl.messages import MessageId, OutgoingMessage

from simclock import START_MS

LEASE = 60_000
FULL = "persistent://public/default/t"


def msgs(*payloads, **kw):
    return [OutgoingMessage(p if isinstance(p, bytes) else p.encode(), **kw) for p in payloads]


def n_msgs(n, prefix="m"):
    return [OutgoingMessage(f"{prefix}{i}".encode()) for i in range(n)]


def sub_stats(broker, topic, sub):
    return broker.topics.stats(topic)["subscriptions"][sub]


def cursor_stats(broker, topic, sub):
    return broker.topics.internal_stats(topic)["cursors"][sub]


def drain(broker, topic, sub, n=1000, position="Earliest"):
    """Everything an Exclusive consumer gets, with a lease."""
    _, got = broker.subscribe(topic, sub, "drain", "Exclusive", position, lease_ms=LEASE,
                              fetch=n)
    return got


# -- topics and names ------------------------------------------------------------------------
def test_publish_auto_creates_topic_in_public_default(broker):
    assert broker.topics.list("public/default") == []
    assert not broker.topics.exists("t")
    broker.publish("t", msgs("a"))
    assert broker.topics.list("public/default") == [FULL]
    assert broker.topics.exists("t") and broker.topics.exists(FULL)
    assert broker.topics.stats("t")["msgInCounter"] == 1


def test_subscribe_auto_creates_topic(broker):
    name, got = broker.subscribe("fresh", "s", "c", "Shared", "Earliest", lease_ms=LEASE,
                                 fetch=10)
    assert name == "persistent://public/default/fresh" and got == []
    assert broker.topics.list("public/default") == [name]
    assert broker.topics.subscriptions("fresh") == ["s"]


def test_publish_refused_in_missing_tenant_or_namespace(broker):
    with pytest.raises(TenantNotFound) as ei:
        broker.publish("nobody/ns/t", msgs("a"))
    assert ei.value.exit_code == 3
    broker.tenants.create("acme")
    with pytest.raises(NamespaceNotFound) as ei:
        broker.publish("acme/ns/t", msgs("a"))
    assert ei.value.exit_code == 3
    with pytest.raises(NamespaceNotFound):
        broker.subscribe("acme/ns/t", "s", "c", "Shared", "Earliest", lease_ms=LEASE)
    with pytest.raises(NamespaceNotFound):
        broker.topics.create("acme/ns/t")
    broker.namespaces.create("acme/ns")
    assert broker.topics.list("acme/ns") == []          # the refusals created nothing
    broker.publish("acme/ns/t", msgs("a"))
    assert broker.topics.list("acme/ns") == ["persistent://acme/ns/t"]


def test_short_and_long_topic_names_are_one_topic(broker):
    _, a = broker.publish("t", msgs("a"))
    _, b = broker.publish("public/default/t", msgs("b"))
    _, c = broker.publish(FULL, msgs("c"))
    assert broker.topics.list("public/default") == [FULL]
    assert broker.topics.stats("t")["msgInCounter"] == 3
    assert a[0] < b[0] < c[0]
    assert [m.data() for m in drain(broker, "public/default/t", "s")] == [b"a", b"b", b"c"]
    assert all(m.topic_name() == FULL for m in drain(broker, FULL, "s2"))


@pytest.mark.parametrize("bad", ["a/b", "a/b/c/d/e", "persistent://a/b", "", "nope://a/b/c"])
def test_invalid_topic_names(broker, bad):
    with pytest.raises(InvalidTopicName) as ei:
        broker.publish(bad, msgs("x"))
    assert ei.value.exit_code == 2


def test_topics_in_other_namespaces_are_not_listed(broker):
    broker.tenants.create("acme")
    broker.namespaces.create("acme/ns")
    broker.publish("acme/ns/x", msgs("a"))
    broker.publish("t", msgs("a"))
    assert broker.topics.list("public/default") == [FULL]
    assert broker.topics.list("acme/ns") == ["persistent://acme/ns/x"]
    with pytest.raises(NamespaceNotFound):
        broker.topics.list("acme/none")


def test_missing_topic_is_exit_3(broker):
    for call in (lambda: broker.topics.stats("nope"), lambda: broker.topics.internal_stats("nope"),
                 lambda: broker.subscription("nope", "s").peek(), lambda: broker.ack("nope", "s", []),
                 lambda: broker.topics.delete("nope"),
                 lambda: broker.fetch("nope", "s", "c", 1)):
        with pytest.raises(TopicNotFound) as ei:
            call()
        assert ei.value.exit_code == 3
    assert not broker.topics.exists("nope")


# -- publishing ------------------------------------------------------------------------------
def test_message_ids_are_ledger_entry_minus_one_and_increase(broker):
    seen = []
    for k in range(5):
        _, ids = broker.publish("t", n_msgs(k + 1))
        assert len(ids) == k + 1
        seen += ids
    for mid in seen:
        assert re.fullmatch(r"\d+:\d+:-1", str(mid)), str(mid)
        assert mid.partition == -1
    assert str(seen[0]) == "1:0:-1"                  # first ledger of a fresh store
    assert all(a < b for a, b in zip(seen, seen[1:]))
    assert [m.entry_id for m in seen] == list(range(15))
    got = drain(broker, "t", "s")
    assert [m.message_id() for m in got] == seen


def test_sequence_ids_per_producer(broker):
    p1, _ = broker.publish("t", n_msgs(3))
    p2, _ = broker.publish("t", n_msgs(2))
    assert p1 != p2                                   # each anonymous publish: a new producer
    broker.publish("t", n_msgs(3), producer_name="named")
    broker.publish("t", n_msgs(2), producer_name="named")   # continues: 3, 4
    broker.publish("t", msgs("x", sequence_id=10), producer_name="named")
    broker.publish("t", n_msgs(1), producer_name="named")   # after an explicit 10: 11
    broker.publish("t", n_msgs(2), producer_name="other")   # its own sequence
    got = [(m.producer_name, m.sequence_id) for m in drain(broker, "t", "s")]
    assert got == ([(p1, 0), (p1, 1), (p1, 2), (p2, 0), (p2, 1)]
                   + [("named", s) for s in (0, 1, 2, 3, 4, 10, 11)]
                   + [("other", 0), ("other", 1)])
    # The sequence is the producer's on this topic: on another topic it starts again.
    broker.publish("t2", n_msgs(1), producer_name="named")
    assert [m.sequence_id for m in drain(broker, "t2", "s")] == [0]


def test_anonymous_producer_names_look_like_standalone(broker):
    names = [broker.publish("t", n_msgs(1))[0] for _ in range(3)]
    assert names == ["standalone-0-0", "standalone-0-1", "standalone-0-2"]


def test_publish_stamps_time_and_keeps_fields(broker, clock):
    clock.advance(1234)
    broker.publish("t", [OutgoingMessage(b"v", properties={"a": "1"}, key="k", event_time=77)])
    (m,) = drain(broker, "t", "s")
    assert m.publish_timestamp() == START_MS + 1234
    assert m.properties() == {"a": "1"} and m.partition_key() == "k"
    assert m.event_timestamp() == 77 and m.data() == b"v"


def test_max_message_size_default_5mib(broker):
    limit = 5 * 1024 * 1024
    _, ids = broker.publish("t", [OutgoingMessage(b"x" * limit)])
    assert len(ids) == 1
    with pytest.raises(MessageTooLarge) as ei:
        broker.publish("t", [OutgoingMessage(b"x" * (limit + 1))])
    assert ei.value.exit_code == 1
    assert broker.topics.stats("t")["msgInCounter"] == 1


def test_oversized_message_in_a_batch_writes_nothing(broker):
    broker.publish("t", msgs("before"), producer_name="p")
    broker.policies.update_setting("maxMessageSize", "10")
    before = broker.topics.internal_stats("t")
    with pytest.raises(MessageTooLarge):
        broker.publish("t", msgs("ok", "x" * 11, "ok2"), producer_name="p")
    assert broker.topics.internal_stats("t") == before
    # Nothing of the batch was stored, not even the sequence ids it would have used.
    broker.publish("t", msgs("0123456789"), producer_name="p")       # exactly 10 is fine
    got = drain(broker, "t", "s")
    assert [m.data() for m in got] == [b"before", b"0123456789"]
    assert [m.sequence_id for m in got] == [0, 1]
    # A refused publish to a new topic does not create it.
    with pytest.raises(MessageTooLarge):
        broker.publish("new", msgs("x" * 11))
    assert not broker.topics.exists("new")
    assert broker.topics.list("public/default") == [FULL]


def test_update_setting_validates(broker):
    with pytest.raises(InvalidValue) as ei:
        broker.policies.update_setting("maxMessageSize", "ten")
    assert ei.value.exit_code == 2
    with pytest.raises(InvalidValue):
        broker.policies.update_setting("noSuchSetting", "1")
    assert broker.policies.update_setting("maxMessageSize", "10") == 10
    assert broker.policies.settings()["maxMessageSize"] == 10


# -- subscriptions: initial position ---------------------------------------------------------
def test_initial_position_latest_vs_earliest(broker):
    broker.publish("t", msgs("old1", "old2"))
    _, got = broker.subscribe("t", "late", "c1", "Exclusive", "Latest", lease_ms=LEASE, fetch=10)
    assert got == []
    _, got = broker.subscribe("t", "early", "c2", "Exclusive", "Earliest", lease_ms=LEASE,
                              fetch=10)
    assert [m.data() for m in got] == [b"old1", b"old2"]
    broker.publish("t", msgs("new"))
    assert [m.data() for m in broker.fetch("t", "late", "c1", 10)] == [b"new"]
    assert [m.data() for m in broker.fetch("t", "early", "c2", 10)] == [b"new"]
    assert sub_stats(broker, "t", "late")["msgBacklog"] == 1
    assert sub_stats(broker, "t", "early")["msgBacklog"] == 3


def test_create_subscription_defaults_to_latest(broker):
    broker.publish("t", msgs("a", "b"))
    broker.subscription("t", "s").create()
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 0
    assert cursor_stats(broker, "t", "s")["markDeletePosition"] == "1:1"
    broker.subscription("t", "e").create("Earliest")
    assert sub_stats(broker, "t", "e")["msgBacklog"] == 2
    assert cursor_stats(broker, "t", "e")["markDeletePosition"] == "1:-1"
    with pytest.raises(AlreadyExists) as ei:
        broker.subscription("t", "s").create()
    assert ei.value.exit_code == 4


def test_latest_on_an_empty_topic_gets_everything_after(broker):
    broker.subscription("t", "s").create()
    broker.publish("t", msgs("a", "b"))
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 2


# -- acknowledgement ---------------------------------------------------------------------------
def test_ack_unknown_id_is_not_found_and_acks_nothing(broker):
    _, ids = broker.publish("t", n_msgs(5))
    broker.subscription("t", "s").create("Earliest")
    lid = ids[0].ledger_id
    unknown = [MessageId(lid + 100, 0), MessageId(lid, 5), MessageId(lid, -1),
               MessageId(lid, 99)]
    for bad in unknown:
        before = broker.topics.internal_stats("t")
        with pytest.raises(MessageNotFound) as ei:
            broker.ack("t", "s", [ids[0], ids[3], bad])       # valid ones mixed in
        assert ei.value.exit_code == 3
        assert broker.topics.internal_stats("t") == before
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 5
    assert cursor_stats(broker, "t", "s")["individuallyDeletedMessages"] == "[]"
    assert cursor_stats(broker, "t", "s")["markDeletePosition"] == f"{lid}:-1"


def test_ack_id_of_another_topic_is_not_found(broker):
    _, ids_a = broker.publish("a", n_msgs(2))
    _, ids_b = broker.publish("b", n_msgs(2))
    broker.subscription("a", "s").create("Earliest")
    assert ids_a[0].ledger_id != ids_b[0].ledger_id
    with pytest.raises(MessageNotFound):
        broker.ack("a", "s", [ids_b[0]])
    assert sub_stats(broker, "a", "s")["msgBacklog"] == 2


def test_ack_twice_is_a_no_op(broker):
    _, ids = broker.publish("t", n_msgs(4))
    broker.subscription("t", "s").create("Earliest")
    assert broker.ack("t", "s", [ids[1], ids[2]]) == 2
    before = broker.topics.internal_stats("t")
    assert broker.ack("t", "s", [ids[1]]) == 0
    assert broker.ack("t", "s", [ids[2], ids[1], ids[2]]) == 0
    assert broker.topics.internal_stats("t") == before
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 2
    assert broker.ack("t", "s", [ids[0], ids[0]]) == 1


def test_individually_deleted_messages_format(broker):
    _, ids = broker.publish("t", n_msgs(8))
    broker.subscription("t", "s").create("Earliest")
    lid = ids[0].ledger_id
    broker.ack("t", "s", [ids[3], ids[4]])
    cs = cursor_stats(broker, "t", "s")
    assert cs["individuallyDeletedMessages"] == f"[({lid}:2..{lid}:4]]"
    assert cs["markDeletePosition"] == f"{lid}:-1"
    assert cs["totalNonContiguousDeletedMessagesRange"] == 1
    broker.ack("t", "s", [ids[6]])
    assert cursor_stats(broker, "t", "s")["individuallyDeletedMessages"] == (
        f"[({lid}:2..{lid}:4], ({lid}:5..{lid}:6]]")
    broker.ack("t", "s", [ids[0], ids[1], ids[2]])     # 0..4 contiguous: mark-delete moves
    cs = cursor_stats(broker, "t", "s")
    assert cs["markDeletePosition"] == f"{lid}:4"
    assert cs["individuallyDeletedMessages"] == f"[({lid}:5..{lid}:6]]"
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 2


def test_cumulative_ack_on_exclusive(broker):
    _, ids = broker.publish("t", n_msgs(6))
    broker.subscribe("t", "s", "c", "Exclusive", "Earliest", lease_ms=LEASE, fetch=6)
    assert broker.ack("t", "s", [ids[3]], cumulative=True) == 4
    st = sub_stats(broker, "t", "s")
    assert st["msgBacklog"] == 2 and st["unackedMessages"] == 2
    assert cursor_stats(broker, "t", "s")["markDeletePosition"] == str(ids[3])[:-3]


def test_cumulative_ack_refused_on_shared(broker):
    _, ids = broker.publish("t", n_msgs(3))
    broker.subscribe("t", "s", "c", "Shared", "Earliest", lease_ms=LEASE, fetch=3)
    before = broker.topics.internal_stats("t")
    with pytest.raises(CumulativeAckNotAllowed) as ei:
        broker.ack("t", "s", [ids[2]], cumulative=True)
    assert ei.value.exit_code == 4
    assert broker.topics.internal_stats("t") == before
    assert sub_stats(broker, "t", "s")["unackedMessages"] == 3


def test_unknown_subscription_is_exit_3(broker):
    _, ids = broker.publish("t", n_msgs(1))
    for call in (lambda: broker.ack("t", "nope", ids), lambda: broker.fetch("t", "nope", "c", 1),
                 lambda: broker.subscription("t", "nope").peek(), lambda: broker.subscription("t", "nope").unsubscribe(),
                 lambda: broker.subscription("t", "nope").consumers()):
        with pytest.raises(SubscriptionNotFound) as ei:
            call()
        assert ei.value.exit_code == 3
    assert broker.topics.subscriptions("t") == []


# -- peek ------------------------------------------------------------------------------------
def test_peek_has_no_side_effects(broker, clock):
    _, ids = broker.publish("t", n_msgs(6))
    broker.subscribe("t", "s", "c", "Shared", "Earliest", lease_ms=LEASE, fetch=2)
    broker.ack("t", "s", [ids[1], ids[3]])
    before = (broker.topics.stats("t"), broker.topics.internal_stats("t"))
    clock.advance(10)
    got = broker.subscription("t", "s").peek(3)
    assert [m.message_id() for m in got] == [ids[0], ids[2], ids[4]]   # skips acked ones
    assert [m.message_id() for m in broker.subscription("t", "s").peek(100)] == [ids[0], ids[2], ids[4],
                                                                     ids[5]]
    assert (broker.topics.stats("t"), broker.topics.internal_stats("t")) == before
    # The consumer still gets what it would have got.
    assert [m.message_id() for m in broker.fetch("t", "s", "c", 10)] == [ids[2], ids[4], ids[5]]


def test_peek_missing_subscription_creates_nothing(broker):
    broker.publish("t", n_msgs(2))
    with pytest.raises(SubscriptionNotFound) as ei:
        broker.subscription("t", "ghost").peek(1)
    assert ei.value.exit_code == 3
    assert broker.topics.subscriptions("t") == []
    assert broker.topics.stats("t")["subscriptions"] == {}


# -- stats -----------------------------------------------------------------------------------
def test_topic_stats_keys_and_values(broker):
    _, ids = broker.publish("t", msgs("aa", "bbb", "c", "dddd"))
    broker.subscribe("t", "s", "c1", "Shared", "Earliest", lease_ms=LEASE, fetch=3)
    broker.ack("t", "s", [ids[0]])
    st = broker.topics.stats("t")
    for key in ("msgInCounter", "bytesInCounter", "msgOutCounter", "subscriptions",
                "storageSize", "publishers"):
        assert key in st
    assert st["msgInCounter"] == 4
    assert st["bytesInCounter"] >= 10                # payloads, plus metadata as in Pulsar
    assert st["averageMsgSize"] == st["bytesInCounter"] / 4
    assert st["msgOutCounter"] == 3
    s = st["subscriptions"]["s"]
    assert s["msgBacklog"] == 3
    assert s["unackedMessages"] == 2
    assert s["type"] == "Shared"
    (c,) = s["consumers"]
    assert c["consumerName"] == "c1" and c["unackedMessages"] == 2


def test_internal_stats_keys_and_values(broker):
    _, ids = broker.publish("t", n_msgs(5))
    broker.subscribe("t", "s", "c", "Exclusive", "Earliest", lease_ms=LEASE, fetch=3)
    ist = broker.topics.internal_stats("t")
    lid = ids[0].ledger_id
    assert ist["entriesAddedCounter"] == 5
    assert ist["numberOfEntries"] == 5
    assert ist["lastConfirmedEntry"] == f"{lid}:4"
    assert [(l["ledgerId"], l["entries"]) for l in ist["ledgers"]] == [(lid, 5)]
    cs = ist["cursors"]["s"]
    assert cs["markDeletePosition"] == f"{lid}:-1"
    assert cs["readPosition"] == f"{lid}:3"
    assert cs["individuallyDeletedMessages"] == "[]"


def test_read_position_is_after_mark_delete(broker):
    """Pulsar's cursor never has readPosition at or before markDeletePosition: acking past the
    read position moves it to markDelete.next."""
    _, ids = broker.publish("t", n_msgs(4))
    broker.subscription("t", "s").create("Earliest")
    broker.ack("t", "s", ids[:3])
    cs = cursor_stats(broker, "t", "s")
    lid = ids[0].ledger_id
    assert cs["markDeletePosition"] == f"{lid}:2"
    assert cs["readPosition"] == f"{lid}:3"


# -- ledger trimming -------------------------------------------------------------------------
def small_ledgers(store_path, clock, n=10) -> Broker:
    b = Broker(store_path, clock)
    b.policies.update_setting("managedLedgerMaxEntriesPerLedger", str(n))
    b.close()
    return Broker(store_path, clock)


def test_ledgers_roll_over_and_are_trimmed_when_all_subscriptions_pass(store_path, clock):
    b = small_ledgers(store_path, clock)
    try:
        b.subscription("t", "s1").create("Earliest")
        b.subscription("t", "s2").create("Earliest")
        _, ids = b.publish("t", n_msgs(25))
        ledgers = [l["ledgerId"] for l in b.topics.internal_stats("t")["ledgers"]]
        assert [l["entries"] for l in b.topics.internal_stats("t")["ledgers"]] == [10, 10, 5]
        assert [m.ledger_id for m in ids] == [ledgers[i // 10] for i in range(25)]
        assert [m.entry_id for m in ids] == [i % 10 for i in range(25)]
        # One subscription past everything: nothing is trimmed, the other still needs it.
        b.ack("t", "s1", ids)
        assert len(b.topics.internal_stats("t")["ledgers"]) == 3
        # The second one passes the first ledger: that ledger goes.
        b.ack("t", "s2", ids[:15])
        ist = b.topics.internal_stats("t")
        assert [l["ledgerId"] for l in ist["ledgers"]] == ledgers[1:]
        assert ist["numberOfEntries"] == 15
        assert ist["entriesAddedCounter"] == 25
        assert b.topics.stats("t")["subscriptions"]["s2"]["msgBacklog"] == 10
        with pytest.raises(MessageNotFound):
            b.topics.get_message_by_id("t", ids[0].ledger_id, ids[0].entry_id)
        assert b.subscription("t", "s2").peek(1)[0].message_id() == ids[15]
        # Past everything: only the current ledger is left.
        b.ack("t", "s2", ids[15:])
        ist = b.topics.internal_stats("t")
        assert [l["ledgerId"] for l in ist["ledgers"]] == [ledgers[2]]
        assert b.topics.stats("t")["subscriptions"]["s2"]["msgBacklog"] == 0
        # A new subscription from Earliest starts at the first entry that is still there.
        b.subscription("t", "late").create("Earliest")
        assert b.topics.stats("t")["subscriptions"]["late"]["msgBacklog"] == 5
        assert b.topics.internal_stats("t")["cursors"]["late"]["markDeletePosition"] == (
            f"{ledgers[2]}:-1")
        assert b.subscription("t", "late").peek(1)[0].message_id() == ids[20]
        b.subscription("t", "late").unsubscribe()
        # Publishing goes on after the trim.
        _, more = b.publish("t", n_msgs(6))
        assert more[0].ledger_id == ledgers[2] and more[0].entry_id == 5
        assert b.topics.stats("t")["subscriptions"]["s1"]["msgBacklog"] == 6
    finally:
        b.close()


def test_ack_again_after_trim_is_a_no_op(store_path, clock):
    """Acknowledging a message that is already acknowledged does nothing, also after its
    ledger was trimmed (Pulsar ignores acks at or below mark-delete)."""
    b = small_ledgers(store_path, clock, 3)
    try:
        b.subscription("t", "s").create("Earliest")
        _, ids = b.publish("t", n_msgs(7))
        b.ack("t", "s", ids[:3])
        assert len(b.topics.internal_stats("t")["ledgers"]) == 2
        assert b.ack("t", "s", [ids[0]]) == 0
        assert b.topics.stats("t")["subscriptions"]["s"]["msgBacklog"] == 4
    finally:
        b.close()


def test_messages_of_interleaved_topics_are_all_kept(broker):
    """Two topics appending in turn: each keeps exactly its own messages."""
    for i in range(3):
        broker.publish("a", msgs(f"a{i}"))
        broker.publish("b", msgs(f"b{i}"))
    assert [m.data() for m in drain(broker, "a", "s")] == [b"a0", b"a1", b"a2"]
    assert [m.data() for m in drain(broker, "b", "s")] == [b"b0", b"b1", b"b2"]
    msgs_a, _, last = broker.read_entries("a", 0, 10)
    assert [m.data() for m in msgs_a] == [b"a0", b"a1", b"a2"]


# -- unsubscribe, delete ---------------------------------------------------------------------
def test_unsubscribe_refused_with_live_consumers(broker, clock):
    broker.publish("t", n_msgs(2))
    broker.subscribe("t", "s", "c", "Shared", "Earliest", lease_ms=LEASE, fetch=1)
    with pytest.raises(ConsumerBusy) as ei:
        broker.subscription("t", "s").unsubscribe()
    assert ei.value.exit_code == 4
    assert broker.topics.subscriptions("t") == ["s"]
    broker.subscription("t", "s").unsubscribe(force=True)
    assert broker.topics.subscriptions("t") == []
    # Without force, once the consumer's lease has ended.
    broker.subscribe("t", "s2", "c", "Shared", "Earliest", lease_ms=LEASE)
    clock.advance(LEASE)
    broker.subscription("t", "s2").unsubscribe()
    assert broker.topics.subscriptions("t") == []
    # A fresh subscription of the same name starts over.
    broker.subscription("t", "s").create("Earliest")
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 2


def test_delete_topic_refused_with_subscriptions(broker):
    _, ids = broker.publish("t", n_msgs(3))
    broker.subscription("t", "s").create()
    with pytest.raises(NotEmpty) as ei:
        broker.topics.delete("t")
    assert ei.value.exit_code == 4
    assert broker.topics.exists("t")
    broker.topics.delete("t", force=True)
    assert not broker.topics.exists("t")
    assert broker.topics.list("public/default") == []
    # Used again, the name is a new, empty topic with new ledger ids and new sequences.
    _, again = broker.publish("t", n_msgs(1), producer_name="p")
    assert again[0].ledger_id > ids[0].ledger_id
    assert broker.topics.stats("t")["msgInCounter"] == 1
    assert broker.topics.subscriptions("t") == []


def test_delete_topic_without_subscriptions(broker):
    broker.publish("t", n_msgs(3))
    broker.topics.delete("t")
    assert not broker.topics.exists("t")


# -- tenants and namespaces ------------------------------------------------------------------
def test_tenants_and_namespaces(broker):
    assert "public" in broker.tenants.list()
    assert "public/default" in broker.namespaces.list("public")
    broker.tenants.create("acme")
    assert "acme" in broker.tenants.list()
    with pytest.raises(AlreadyExists) as ei:
        broker.tenants.create("acme")
    assert ei.value.exit_code == 4
    assert broker.namespaces.list("acme") == []
    broker.namespaces.create("acme/ns1")
    broker.namespaces.create("acme/ns2")
    assert broker.namespaces.list("acme") == ["acme/ns1", "acme/ns2"]
    with pytest.raises(AlreadyExists):
        broker.namespaces.create("acme/ns1")
    with pytest.raises(TenantNotFound) as ei:
        broker.namespaces.create("nobody/ns")
    assert ei.value.exit_code == 3
    with pytest.raises(TenantNotFound):
        broker.namespaces.list("nobody")
    with pytest.raises(TenantNotFound):
        broker.tenants.get("nobody")


def test_non_empty_namespace_and_tenant_refused_unless_force(broker):
    broker.tenants.create("acme")
    broker.namespaces.create("acme/ns")
    broker.namespaces.create("acme/empty")
    broker.publish("acme/ns/t", n_msgs(2))
    broker.subscription("acme/ns/t", "s").create()
    with pytest.raises(NotEmpty) as ei:
        broker.namespaces.delete("acme/ns")
    assert ei.value.exit_code == 4
    assert broker.topics.exists("acme/ns/t")
    broker.namespaces.delete("acme/empty")
    with pytest.raises(NotEmpty):
        broker.tenants.delete("acme")
    assert broker.namespaces.list("acme") == ["acme/ns"]
    broker.namespaces.delete("acme/ns", force=True)
    assert not broker.topics.exists("acme/ns/t")
    assert broker.namespaces.list("acme") == []
    broker.namespaces.create("acme/ns")
    broker.publish("acme/ns/t2", n_msgs(1))
    broker.tenants.delete("acme", force=True)
    assert "acme" not in broker.tenants.list()
    with pytest.raises(TenantNotFound):
        broker.namespaces.list("acme")
    assert not broker.topics.exists("acme/ns/t2")
    with pytest.raises(NamespaceNotFound):
        broker.namespaces.delete("public/none")


# -- the clock -------------------------------------------------------------------------------
def test_simulated_clock_is_persisted_in_the_store(store_path):
    b1 = Broker(store_path)                           # no injected clock: the store's
    try:
        assert b1.clock.state()["mode"] == "real"
        assert b1.clock.simulate(START_MS) == START_MS
        assert b1.clock.advance(5_000) == START_MS + 5_000
        b2 = Broker(store_path)
        try:
            assert b2.clock.state() == {"mode": "simulated", "now": START_MS + 5_000}
            b2.publish("t", msgs("x"))
            (m,) = drain(b2, "t", "s")
            assert m.publish_timestamp() == START_MS + 5_000
        finally:
            b2.close()
        with pytest.raises(InvalidValue) as ei:
            b1.clock.advance(-1)
        assert ei.value.exit_code == 2
        b1.clock.real()
        assert b1.clock.state()["mode"] == "real"
        assert b1.clock.state()["now"] > START_MS + 10 ** 9     # now is the real time
        with pytest.raises(InvalidValue):
            b1.clock.advance(10)                               # only a simulated clock moves
    finally:
        b1.close()


def test_simulated_clock_drives_leases(store_path):
    b = Broker(store_path)
    try:
        b.clock.simulate(START_MS)
        b.subscribe("t", "s", "c1", "Exclusive", "Earliest", lease_ms=LEASE)
        with pytest.raises(ConsumerBusy):
            b.subscribe("t", "s", "c2", "Exclusive", "Earliest", lease_ms=LEASE)
        b.clock.advance(LEASE)
        other = Broker(store_path)                    # another "process" sees the same time
        try:
            other.subscribe("t", "s", "c2", "Exclusive", "Earliest", lease_ms=LEASE)
        finally:
            other.close()
    finally:
        b.close()


def test_injected_clock_is_used_by_the_broker(broker, clock):
    clock.advance(42)
    assert broker.clock.state()["now"] == START_MS + 42
