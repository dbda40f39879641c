"""Namespace and topic policies (pulsar-admin namespaces/topics set-/get-/remove-<policy>;
pulsar-semantics.md §10, §11; CLI.md): where a value comes from (topic over namespace over
broker default, a partitioned topic's covering its partitions), and what each policy does:
message TTL, retention, deduplication, backlog quotas, delayed delivery, the default dead
letter policy and the unacked-message limits. Real LMDB in tmp_path and a simulated clock
(never a sleep), through the broker API and through the CLI with the `cli` fixture."""
from __future__ import annotations

import pytest

import pulsarctl.clock
from pulsarctl.broker import Broker, backlog_quota, policies as P
from pulsarctl.broker.backlog_quota import BacklogQuotaExceeded, BacklogQuotaHold
from pulsarctl.client.producer import Producer
from pulsarctl.errors import InvalidValue, MessageNotFound, NotFound, TopicNotFound, UsageError
from pulsarctl.messages import MessageId, OutgoingMessage
from pulsarctl.names import parse_topic

from simclock import START_MS
from cli_helpers import assert_error, ok, pjson

NS = "public/default"
FULL = "persistent://public/default/"
LEASE = 7 * 24 * 3_600_000  # consumers outlive every clock advance here
SEC, MIN = 1_000, 60_000
DUP = MessageId(-1, -1, -1)

DEFAULTS = {
    P.TTL: 0,
    P.RETENTION: {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0},
    P.DEDUP: False,
    P.BACKLOG_QUOTA: {},
    P.DELAYED: {"tickTime": 1000, "active": True, "maxDeliveryDelayInMillis": 0},
    P.DEAD_LETTER: None,
    P.MAX_UNACKED_CONSUMER: 50_000,
    P.MAX_UNACKED_SUBSCRIPTION: 200_000,
}


# -- helpers ---------------------------------------------------------------------------------
def msgs(n, prefix="m", size=0):
    return [OutgoingMessage((f"{prefix}{i}".encode() + b"." * size)) for i in range(n)]


def publish(broker, topic="t", n=1, prefix="m", **kw):
    return broker.publish(topic, msgs(n, prefix, **kw))[1]


def sub(broker, topic="t", s="s", consumer="c1", typ="Shared", *, fetch=0, settings=None,
        position="Earliest"):
    return broker.subscribe(topic, s, consumer, typ, position, lease_ms=LEASE, fetch=fetch,
                            settings=settings)[1]


def data(got):
    return [m.data().decode().rstrip(".") for m in got]


def ids_of(got):
    return [m.message_id() for m in got]


def sstats(broker, topic="t", s="s"):
    return broker.topics.stats(topic)["subscriptions"][s]


def backlog(broker, topic="t", s="s"):
    return sstats(broker, topic, s)["msgBacklog"]


def md(broker, topic="t", s="s"):
    return broker.topics.internal_stats(topic)["cursors"][s]["markDeletePosition"]


def ledgers(broker, topic="t"):
    return broker.topics.internal_stats(topic)["ledgers"]


def pos(mid):
    return f"{mid.ledger_id}:{mid.entry_id}"


def set_ns(broker, field, value, ns=NS):
    return broker.policies.set("namespace", ns, field, value)


def set_topic(broker, field, value, topic="t"):
    return broker.policies.set("topic", topic, field, value)


def applied(broker, field, topic="t"):
    return broker.policies.get("topic", topic, field, applied=True)


def reopen_with_small_ledgers(store_path, clock, n=3) -> Broker:
    """managedLedgerMaxEntriesPerLedger=n (brokers update-dynamic-config); a Broker reads it
    when it opens the store."""
    b = Broker(store_path, clock)
    b.policies.update_setting("managedLedgerMaxEntriesPerLedger", str(n))
    b.close()
    return Broker(store_path, clock)


@pytest.fixture
def small(store_path, clock):
    b = reopen_with_small_ledgers(store_path, clock, 3)
    yield b
    b.close()


def estimated_backlog(broker, topic="t", s="s"):
    """The estimated backlog bytes a destination_storage quota measures."""
    from pulsarctl.broker import subscriptions as subs, topics

    def run(ctx):
        info = topics.require(ctx, parse_topic(topic))
        c = subs.get(ctx, info, s)
        return backlog_quota.backlog_bytes(info, c.mark_delete + 1)
    return broker._read(run)


def entry_size(broker, topic="t"):
    ls = ledgers(broker, topic)
    return ls[0]["size"] // ls[0]["entries"]


# == where a value comes from =================================================================
def test_broker_defaults_apply_when_nothing_is_set(broker):
    publish(broker)
    for field, value in DEFAULTS.items():
        assert broker.policies.get("topic", "t", field) is None
        assert broker.policies.get("namespace", NS, field) is None
        assert applied(broker, field) == value, field
    assert broker.policies.applied("t") == DEFAULTS
    assert broker.namespaces.policies(NS) == {f: None for f in DEFAULTS}


def test_topic_overrides_namespace_overrides_broker_default(broker):
    publish(broker)
    publish(broker, "other")
    broker.policies.update_setting("ttlDurationDefaultInSeconds", "30")
    assert applied(broker, P.TTL) == 30                               # broker default
    assert set_ns(broker, P.TTL, 60) == 60
    assert applied(broker, P.TTL) == 60                               # namespace
    assert broker.policies.get("topic", "t", P.TTL) is None             # not the topic's own
    assert set_topic(broker, P.TTL, 0) == 0
    assert applied(broker, P.TTL) == 0                                # topic, even when 0
    assert broker.policies.get("topic", "t", P.TTL) == 0
    assert applied(broker, P.TTL, "other") == 60                      # other topic: namespace
    assert broker.policies.get("namespace", NS, P.TTL) == 60
    broker.policies.remove("topic", "t", P.TTL)
    assert applied(broker, P.TTL) == 60
    broker.policies.remove("namespace", NS, P.TTL)
    assert applied(broker, P.TTL) == 30
    assert broker.policies.get("namespace", NS, P.TTL) is None


def test_each_policy_round_trips_at_both_levels_and_shows_in_policies(broker):
    publish(broker)
    values = {
        P.TTL: 120,
        P.RETENTION: {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1},
        P.DEDUP: True,
        P.BACKLOG_QUOTA: {"destination_storage": {"limitSize": 1024, "limitTime": -1,
                                                  "policy": "producer_exception"}},
        P.DELAYED: {"tickTime": 500, "active": False, "maxDeliveryDelayInMillis": 10_000},
        P.DEAD_LETTER: {"maxRedeliverCount": 3, "deadLetterTopic": FULL + "dead"},
        P.MAX_UNACKED_CONSUMER: 10,
        P.MAX_UNACKED_SUBSCRIPTION: 20,
    }
    for field, v in values.items():
        assert set_ns(broker, field, v) == v
        assert broker.policies.get("namespace", NS, field) == v
    assert broker.namespaces.policies(NS) == values
    assert broker.policies.applied("t") == values
    for field, v in values.items():
        broker.policies.remove("namespace", NS, field)
        assert set_topic(broker, field, v) == v
        assert broker.policies.get("topic", "t", field) == v
        assert broker.policies.get("namespace", NS, field) is None
    assert broker.policies.applied("t") == values
    assert broker.namespaces.policies(NS) == {f: None for f in values}
    for field in values:
        broker.policies.remove("topic", "t", field)
    assert broker.policies.applied("t") == DEFAULTS


def test_a_namespace_policy_stays_in_its_namespace(broker):
    broker.tenants.create("acme")
    broker.namespaces.create("acme/ns")
    publish(broker, "acme/ns/t")
    publish(broker)
    set_ns(broker, P.TTL, 5, "acme/ns")
    assert applied(broker, P.TTL, "acme/ns/t") == 5
    assert applied(broker, P.TTL) == 0
    assert broker.namespaces.policies("acme/ns")[P.TTL] == 5
    assert broker.namespaces.policies(NS)[P.TTL] is None


def test_policies_of_a_partitioned_topic_cover_its_partitions(broker):
    broker.topics.create_partitioned("pt", 3)
    set_ns(broker, P.TTL, 10)
    set_topic(broker, P.TTL, 30, "pt")
    set_topic(broker, P.MAX_UNACKED_CONSUMER, 7, "pt")
    for i in range(3):
        p = f"pt-partition-{i}"
        assert applied(broker, P.TTL, p) == 30
        assert broker.policies.get("topic", p, P.TTL) == 30   # one record, the partitioned topic's
        assert broker.policies.applied(p)[P.MAX_UNACKED_CONSUMER] == 7
    assert broker.policies.applied("pt")[P.TTL] == 30
    # The policy works on every partition: TTL expires the messages of all of them.
    sub(broker, "pt")
    publish(broker, "pt", 6)
    assert broker.topics.stats("pt")["subscriptions"]["s"]["msgBacklog"] == 6
    broker._clock.advance(30 * SEC + 1)
    assert broker.chores.enforce_policies()["expired"] == 6
    assert broker.topics.stats("pt")["subscriptions"]["s"]["msgBacklog"] == 0
    # Deleting the partitioned topic drops its policies: a new one starts from the namespace.
    broker.topics.delete("pt", force=True)
    broker.topics.create_partitioned("pt", 2)
    assert broker.policies.get("topic", "pt", P.TTL) is None
    assert applied(broker, P.TTL, "pt-partition-1") == 10


def test_deleting_a_topic_drops_its_policies(broker):
    publish(broker)
    set_topic(broker, P.TTL, 99)
    broker.topics.delete("t")
    with pytest.raises(TopicNotFound):
        broker.policies.get("topic", "t", P.TTL)
    publish(broker)
    assert broker.policies.get("topic", "t", P.TTL) is None


def test_topic_policies_need_an_existing_topic(broker):
    for call in (lambda: set_topic(broker, P.TTL, 5, "nope"),
                 lambda: broker.policies.get("topic", "nope", P.TTL),
                 lambda: applied(broker, P.TTL, "nope"),
                 lambda: broker.policies.remove("topic", "nope", P.TTL),
                 lambda: broker.policies.applied("nope")):
        with pytest.raises(TopicNotFound) as ei:
            call()
        assert ei.value.exit_code == 3
    assert not broker.topics.exists("nope")      # asking did not create it


def test_namespace_policies_need_an_existing_namespace(broker):
    with pytest.raises(NotFound) as ei:
        set_ns(broker, P.TTL, 5, "public/nope")
    assert ei.value.exit_code == 3
    with pytest.raises(NotFound):
        broker.policies.get("namespace", "nosuch/ns", P.TTL)


@pytest.mark.parametrize("field,value", [
    (P.TTL, -1), (P.TTL, True), (P.TTL, 1.5), (P.TTL, "10"),
    (P.MAX_UNACKED_CONSUMER, -1), (P.MAX_UNACKED_SUBSCRIPTION, -5),
    (P.RETENTION, {"retentionTimeInMinutes": -2, "retentionSizeInMB": 0}),
    (P.RETENTION, {"retentionTimeInMinutes": 10}),
    (P.RETENTION, {"retentionTimeInMinutes": 60, "retentionSizeInMB": 0}),   # Pulsar refuses
    (P.RETENTION, {"retentionTimeInMinutes": 0, "retentionSizeInMB": -1}),   # a lone 0
    (P.DELAYED, {"tickTime": 0, "active": True}),
    (P.DELAYED, {"tickTime": 1000, "active": True, "maxDeliveryDelayInMillis": -1}),
    (P.DEAD_LETTER, {"maxRedeliverCount": 0}),
    (P.DEAD_LETTER, {"maxRedeliverCount": 2, "deadLetterTopic": "bad//name"}),
    (P.BACKLOG_QUOTA, {"bogus": {"limitSize": 10, "policy": "producer_exception"}}),
    (P.BACKLOG_QUOTA, {"destination_storage": {"limitSize": 10, "policy": "nope"}}),
    (P.BACKLOG_QUOTA, {"destination_storage": {"policy": "producer_exception"}}),
    (P.BACKLOG_QUOTA, {"message_age": {"limitSize": 10, "policy": "producer_exception"}}),
])
def test_invalid_values_are_refused_and_nothing_is_stored(broker, field, value):
    publish(broker)
    for call in (lambda: set_ns(broker, field, value), lambda: set_topic(broker, field, value)):
        with pytest.raises(UsageError) as ei:     # InvalidValue, InvalidTopicName
            call()
        assert ei.value.exit_code == 2
    assert broker.policies.get("namespace", NS, field) is None
    assert broker.policies.get("topic", "t", field) is None


def test_backlog_quotas_of_both_types_live_side_by_side(broker):
    publish(broker)
    size = {"limitSize": 2048, "limitTime": -1, "policy": "producer_exception"}
    age = {"limitSize": -1, "limitTime": 60, "policy": "consumer_backlog_eviction"}
    set_topic(broker, P.BACKLOG_QUOTA, {"destination_storage": size})
    set_topic(broker, P.BACKLOG_QUOTA, {"message_age": age})
    assert broker.policies.get("topic", "t", P.BACKLOG_QUOTA) == {
        "destination_storage": size, "message_age": age}
    broker.policies.remove("topic", "t", P.BACKLOG_QUOTA, "destination_storage")
    assert broker.policies.get("topic", "t", P.BACKLOG_QUOTA) == {"message_age": age}
    broker.policies.remove("topic", "t", P.BACKLOG_QUOTA, "message_age")
    assert broker.policies.get("topic", "t", P.BACKLOG_QUOTA) is None
    # Same at the namespace.
    set_ns(broker, P.BACKLOG_QUOTA, {"destination_storage": size})
    set_ns(broker, P.BACKLOG_QUOTA, {"message_age": age})
    broker.policies.remove("namespace", NS, P.BACKLOG_QUOTA, "message_age")
    assert broker.policies.get("namespace", NS, P.BACKLOG_QUOTA) == {"destination_storage": size}
    assert applied(broker, P.BACKLOG_QUOTA) == {"destination_storage": size}


# == message TTL ==============================================================================
def test_ttl_expires_only_after_publish_time_plus_ttl_on_every_subscription(broker, clock):
    sub(broker, s="a")
    sub(broker, s="b")
    ids = publish(broker, n=2)
    clock.advance(30 * SEC)
    late = publish(broker, n=1, prefix="late")
    set_ns(broker, P.TTL, 60)
    clock.advance(30 * SEC)                             # now == first publish + ttl: not yet
    assert broker.chores.enforce_policies()["expired"] == 0
    assert backlog(broker, s="a") == backlog(broker, s="b") == 3
    clock.advance(1)                                    # now > publish + ttl
    assert broker.chores.enforce_policies() == {"expired": 4, "trimmedLedgers": 0}
    for s in ("a", "b"):
        assert backlog(broker, s=s) == 1
        assert md(broker, s=s) == pos(ids[-1])
    assert broker.subscription("t", "a").peek(5)[0].message_id() == late[0]
    clock.advance(30 * SEC)
    assert broker.chores.enforce_policies()["expired"] == 2
    assert backlog(broker, s="a") == backlog(broker, s="b") == 0


def test_ttl_expires_lazily_when_a_consumer_fetches(broker, clock):
    set_ns(broker, P.TTL, 60)
    sub(broker)
    publish(broker, n=3, prefix="old")
    clock.advance(45 * SEC)
    publish(broker, n=2, prefix="new")
    clock.advance(15 * SEC + 1)                         # "old" expired, "new" 15 s old
    assert data(broker.fetch("t", "s", "c1", 10)) == ["new0", "new1"]
    assert backlog(broker) == 2
    assert sstats(broker)["unackedMessages"] == 2


def test_ttl_expires_delivered_unacked_messages_too(broker, clock):
    set_ns(broker, P.TTL, 10)
    got = sub(broker, fetch=10) or []
    publish(broker, n=3)
    got = broker.fetch("t", "s", "c1", 10)
    assert len(got) == 3 and sstats(broker)["unackedMessages"] == 3
    clock.advance(10 * SEC + 1)
    assert broker.chores.enforce_policies()["expired"] == 3
    s = sstats(broker)
    assert s["msgBacklog"] == 0 and s["unackedMessages"] == 0


def test_topic_ttl_zero_switches_off_a_namespace_ttl(broker, clock):
    sub(broker)
    publish(broker, n=2)
    set_ns(broker, P.TTL, 1)
    set_topic(broker, P.TTL, 0)
    clock.advance(3_600 * SEC)
    assert broker.chores.enforce_policies()["expired"] == 0
    assert len(broker.fetch("t", "s", "c1", 10)) == 2


def test_broker_default_ttl_applies_without_policies(broker, clock):
    sub(broker)
    publish(broker, n=2)
    broker.policies.update_setting("ttlDurationDefaultInSeconds", "5")
    clock.advance(5 * SEC + 1)
    assert broker.chores.enforce_policies()["expired"] == 2
    assert backlog(broker) == 0


def test_ttl_expiry_then_retention_trims_the_expired_ledgers(small, clock):
    sub(small)
    publish(small, n=7)                                 # ledgers of 3, 3, 1
    set_ns(small, P.TTL, 60)
    clock.advance(60 * SEC + 1)
    assert small.chores.enforce_policies()["expired"] == 7
    # The expiry moved mark-delete past two closed ledgers: retention (0/0) dropped them.
    assert [l["entries"] for l in ledgers(small)] == [1]


# == retention ================================================================================
def test_small_ledgers_setting_rolls_ledgers_over(small):
    publish(small, n=10)
    assert [l["entries"] for l in ledgers(small)] == [3, 3, 3, 1]
    assert small.policies.settings()["managedLedgerMaxEntriesPerLedger"] == 3


def test_default_retention_trims_acknowledged_closed_ledgers_at_once(small):
    sub(small)
    ids = publish(small, n=10)
    first = [l["ledgerId"] for l in ledgers(small)]
    small.ack("t", "s", ids[:5])                        # first ledger fully acked
    assert [l["ledgerId"] for l in ledgers(small)] == first[1:]
    with pytest.raises(MessageNotFound):
        small.topics.get_message_by_id("t", ids[0].ledger_id, ids[0].entry_id)
    small.ack("t", "s", ids[5:])
    assert [l["ledgerId"] for l in ledgers(small)] == first[-1:]   # the current one stays
    assert small.topics.internal_stats("t")["numberOfEntries"] == 1
    assert small.topics.stats("t")["msgInCounter"] == 10


def test_retention_trims_only_what_every_subscription_acknowledged(small):
    sub(small, s="fast")
    sub(small, s="slow")
    ids = publish(small, n=10)
    small.ack("t", "fast", ids)
    assert len(ledgers(small)) == 4
    small.ack("t", "slow", ids[:4])                     # past the first ledger only
    assert [l["entries"] for l in ledgers(small)] == [3, 3, 1]
    assert small.chores.enforce_policies()["trimmedLedgers"] == 0


def test_time_retention_keeps_acknowledged_ledgers_until_it_passes(small, clock):
    set_ns(small, P.RETENTION, {"retentionTimeInMinutes": 10, "retentionSizeInMB": -1})
    sub(small)
    ids = publish(small, n=10)
    small.ack("t", "s", ids)
    assert len(ledgers(small)) == 4
    clock.advance(10 * MIN)                             # closed exactly 10 min ago: kept
    assert small.chores.enforce_policies()["trimmedLedgers"] == 0
    assert small.topics.get_message_by_id("t", ids[0].ledger_id, ids[0].entry_id).data() == b"m0"
    clock.advance(1)
    assert small.chores.enforce_policies()["trimmedLedgers"] == 3
    assert [l["entries"] for l in ledgers(small)] == [1]


def test_time_retention_is_counted_from_when_each_ledger_closed(small, clock):
    set_ns(small, P.RETENTION, {"retentionTimeInMinutes": 10, "retentionSizeInMB": -1})
    sub(small)
    ids = publish(small, n=4)                           # ledger 1 closes when m3 opens ledger 2
    clock.advance(5 * MIN)
    ids += publish(small, n=3, prefix="x")              # ledger 2 closes now (ledger 3 opens)
    small.ack("t", "s", ids)
    clock.advance(5 * MIN + 1)
    assert small.chores.enforce_policies()["trimmedLedgers"] == 1
    assert [l["entries"] for l in ledgers(small)] == [3, 1]
    clock.advance(5 * MIN)
    assert small.chores.enforce_policies()["trimmedLedgers"] == 1
    assert [l["entries"] for l in ledgers(small)] == [1]


def test_size_retention_trims_down_to_the_size(store_path, clock):
    b = reopen_with_small_ledgers(store_path, clock, 2)
    try:
        set_ns(b, P.RETENTION, {"retentionTimeInMinutes": -1, "retentionSizeInMB": 1})
        sub(b)
        ids = b.publish("t", msgs(12, size=200_000))[1]      # 6 ledgers of ~400 KB
        sizes = [l["size"] for l in ledgers(b)]
        assert len(sizes) == 6
        b.ack("t", "s", ids)
        left = [l["size"] for l in ledgers(b)]
        mb = 1024 * 1024
        # Oldest first, while the topic is over 1 MB: the rest fits, one more would not.
        assert sum(left) <= mb < sum(left) + sizes[len(sizes) - len(left) - 1]
        assert left == sizes[-len(left):] and len(left) == 2
        # Time never passes the limit (-1): nothing else goes later.
        clock.advance(365 * 24 * 60 * MIN)
        assert b.chores.enforce_policies()["trimmedLedgers"] == 0
    finally:
        b.close()


def test_unlimited_retention_never_trims(small, clock):
    set_ns(small, P.RETENTION, {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
    sub(small)
    ids = publish(small, n=10)
    small.ack("t", "s", ids)
    clock.advance(365 * 24 * 60 * MIN)
    assert small.chores.enforce_policies()["trimmedLedgers"] == 0
    assert len(ledgers(small)) == 4
    assert small.topics.get_message_by_id("t", ids[0].ledger_id, ids[0].entry_id).data() == b"m0"


def test_topic_retention_overrides_the_namespace(small):
    set_ns(small, P.RETENTION, {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
    small.topics.create("keep")
    small.topics.create("t")
    set_topic(small, P.RETENTION, {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})
    for topic in ("t", "keep"):
        sub(small, topic)
        small.ack(topic, "s", publish(small, topic, n=9))
    assert len(ledgers(small, "t")) == 1
    assert len(ledgers(small, "keep")) == 3


def test_a_topic_without_subscriptions_keeps_everything(small, clock):
    publish(small, n=10)
    clock.advance(365 * 24 * 60 * MIN)
    assert small.chores.enforce_policies()["trimmedLedgers"] == 0
    assert small.topics.internal_stats("t")["numberOfEntries"] == 10
    assert len(ledgers(small)) == 4


# == deduplication ============================================================================
def test_dedup_drops_a_sequence_id_the_producer_already_stored(broker):
    set_ns(broker, P.DEDUP, True)
    _, [a] = broker.publish("t", [OutgoingMessage(b"a", sequence_id=5)], "p1")
    assert a != DUP
    name, ids = broker.publish("t", [OutgoingMessage(b"again", sequence_id=5),
                                     OutgoingMessage(b"older", sequence_id=3),
                                     OutgoingMessage(b"b", sequence_id=6)], "p1")
    assert name == "p1"
    assert ids[:2] == [DUP, DUP] and str(ids[0]) == "-1:-1:-1"
    assert ids[2].ledger_id == a.ledger_id and ids[2].entry_id == a.entry_id + 1
    # Per producer name: another producer may use the same sequence id.
    _, [c] = broker.publish("t", [OutgoingMessage(b"c", sequence_id=5)], "p2")
    assert c != DUP
    stored, _, _ = broker.read_entries("t", None, 100, after_id=MessageId.earliest)
    assert [(m.data(), m.producer_name, m.sequence_id) for m in stored] == [
        (b"a", "p1", 5), (b"b", "p1", 6), (b"c", "p2", 5)]
    assert broker.topics.stats("t")["msgInCounter"] == 3


def test_dedup_leaves_automatic_sequence_ids_alone(broker):
    set_ns(broker, P.DEDUP, True)
    for _ in range(2):
        _, ids = broker.publish("t", msgs(3), "auto")
        assert DUP not in ids
    _, ids = broker.publish("t", msgs(2))               # a generated producer name each time
    assert DUP not in ids
    stored, _, _ = broker.read_entries("t", None, 100, after_id=MessageId.earliest)
    assert [m.sequence_id for m in stored if m.producer_name == "auto"] == list(range(6))
    assert broker.topics.stats("t")["msgInCounter"] == 8
    # An automatic id continues after the highest explicit one, so it is never a duplicate.
    _, ids = broker.publish("t", [OutgoingMessage(b"x", sequence_id=100), OutgoingMessage(b"y")],
                            "auto")
    assert DUP not in ids
    _, ids = broker.publish("t", [OutgoingMessage(b"z", sequence_id=101)], "auto")
    assert ids == [DUP]


def test_without_dedup_a_repeated_sequence_id_is_stored(broker):
    for _ in range(2):
        _, ids = broker.publish("t", [OutgoingMessage(b"a", sequence_id=1)], "p")
        assert ids != [DUP]
    assert broker.topics.stats("t")["msgInCounter"] == 2


def test_dedup_topic_setting_overrides_namespace_and_broker_default(broker):
    broker.policies.update_setting("brokerDeduplicationEnabled", "true")
    publish(broker)
    assert broker.publish("t", [OutgoingMessage(b"a", sequence_id=1)], "p")[1] != [DUP]
    assert broker.publish("t", [OutgoingMessage(b"a", sequence_id=1)], "p")[1] == [DUP]
    set_ns(broker, P.DEDUP, False)
    assert broker.publish("t", [OutgoingMessage(b"a", sequence_id=1)], "p")[1] != [DUP]
    set_topic(broker, P.DEDUP, True)
    assert broker.publish("t", [OutgoingMessage(b"a", sequence_id=1)], "p")[1] == [DUP]
    assert broker.topics.stats("t")["msgInCounter"] == 3


def test_topic_stats_show_the_deduplication_in_force(broker):
    publish(broker)
    set_topic(broker, P.DEDUP, True)
    assert broker.topics.stats("t")["deduplicationStatus"] == "Enabled"


def test_dedup_on_a_partitioned_topic(broker):
    broker.topics.create_partitioned("pt", 2)
    set_topic(broker, P.DEDUP, True, "pt")
    p0 = "pt-partition-0"
    assert broker.publish(p0, [OutgoingMessage(b"a", sequence_id=1)], "p")[1] != [DUP]
    assert broker.publish(p0, [OutgoingMessage(b"a", sequence_id=1)], "p")[1] == [DUP]


# == backlog quotas ===========================================================================
def quota(typ, policy, size=-1, secs=-1):
    return {typ: {"limitSize": size, "limitTime": secs, "policy": policy}}


_uniform = {"n": 0}


def uni(broker, topic="t", n=1):
    """n messages of the same entry size (one producer name, 104-byte payloads f0000...)."""
    out = []
    for _ in range(n):
        i = _uniform["n"] = _uniform["n"] + 1
        out += broker.publish(topic, [OutgoingMessage(b"f%03d" % (i % 1000) + b"." * 100)],
                              "uniform")[1]
    return out


def fill_over(broker, limit, topic="t", s="s"):
    """Publish one message at a time until the subscription's backlog is over limit bytes."""
    n = 0
    while estimated_backlog(broker, topic, s) <= limit:
        uni(broker, topic)
        n += 1
    return n


def test_destination_storage_producer_exception_fails_the_publish(broker):
    sub(broker)
    uni(broker)
    limit = 5 * entry_size(broker)
    set_topic(broker, P.BACKLOG_QUOTA, quota("destination_storage", "producer_exception", limit))
    n = fill_over(broker, limit)
    assert n == 5                                        # 6 entries of `limit/5` > limit
    assert backlog(broker) == 6
    before = broker.topics.stats("t")["msgInCounter"]
    with pytest.raises(BacklogQuotaExceeded) as ei:
        publish(broker, prefix="refused")
    assert ei.value.exit_code == 1
    assert not isinstance(ei.value, BacklogQuotaHold)
    assert "destination_storage" in str(ei.value) and "'s'" in str(ei.value)
    assert broker.topics.stats("t")["msgInCounter"] == before
    # Consuming makes room again.
    got = broker.fetch("t", "s", "c1", 100)
    broker.ack("t", "s", ids_of(got))
    publish(broker, prefix="ok")
    assert backlog(broker) == 1


def test_the_slowest_subscription_decides_and_no_subscription_means_no_backlog(broker):
    uni(broker, "free")
    limit = 2 * entry_size(broker, "free")
    set_ns(broker, P.BACKLOG_QUOTA, quota("destination_storage", "producer_exception", limit))
    broker.publish("free", msgs(20, size=100))           # no subscription: no backlog
    sub(broker, s="fast")
    sub(broker, s="slow")
    fill_over(broker, limit, s="slow")
    with pytest.raises(BacklogQuotaExceeded) as ei:
        publish(broker)
    assert "'slow'" in str(ei.value) or "'fast'" in str(ei.value)
    got = broker.fetch("t", "fast", "c1", 100)
    broker.ack("t", "fast", ids_of(got))
    with pytest.raises(BacklogQuotaExceeded) as ei:
        publish(broker)
    assert "'slow'" in str(ei.value)
    broker.subscription("t", "slow").clear_backlog()
    publish(broker)


def test_message_age_producer_exception(broker, clock):
    set_ns(broker, P.BACKLOG_QUOTA, quota("message_age", "producer_exception", secs=60))
    sub(broker)
    ids = publish(broker, n=2)
    clock.advance(60 * SEC)                              # exactly the limit: still fine
    ids += publish(broker)
    clock.advance(1)
    with pytest.raises(BacklogQuotaExceeded) as ei:
        publish(broker, prefix="refused")
    assert "message_age" in str(ei.value)
    broker.ack("t", "s", ids[:2])                        # the oldest is now 1 ms old
    publish(broker)
    assert backlog(broker) == 2


def test_destination_storage_eviction_acks_the_oldest_down_to_90_percent(broker):
    sub(broker, s="behind")
    sub(broker, s="uptodate")
    uni(broker)
    e = entry_size(broker)
    limit = 10 * e
    broker.ack("t", "uptodate", [broker.subscription("t", "uptodate").peek(1)[0].message_id()])
    broker.ack("t", "behind", [broker.subscription("t", "behind").peek(1)[0].message_id()])
    set_topic(broker, P.BACKLOG_QUOTA,
              quota("destination_storage", "consumer_backlog_eviction", limit))
    fill_over(broker, limit, s="behind")                 # 11 entries behind
    got = broker.fetch("t", "uptodate", "c1", 100)
    broker.ack("t", "uptodate", ids_of(got))
    assert backlog(broker, s="behind") == 11
    [new] = uni(broker)
    assert new != DUP
    # Evicted to <= 90% of the limit (9 entries), then the new message was stored.
    assert backlog(broker, s="behind") == 10
    assert estimated_backlog(broker, s="behind") == 10 * e
    evicted_past = broker.subscription("t", "behind").peek(1)[0].message_id()
    assert evicted_past.entry_id == 3                   # entries 1, 2 were evicted
    assert backlog(broker, s="uptodate") == 1            # under the limit: untouched


def test_message_age_eviction_acks_what_is_older_than_the_limit(broker, clock):
    set_ns(broker, P.BACKLOG_QUOTA, quota("message_age", "consumer_backlog_eviction", secs=60))
    sub(broker)
    publish(broker, n=2, prefix="old")
    clock.advance(30 * SEC)
    publish(broker, n=1, prefix="mid")
    clock.advance(30 * SEC + 1)
    publish(broker, n=1, prefix="new")
    assert data(broker.fetch("t", "s", "c1", 10)) == ["mid0", "new0"]
    assert backlog(broker) == 2


def test_producer_request_hold_fails_after_the_send_timeout(broker, fake_time):
    sub(broker)
    set_ns(broker, P.BACKLOG_QUOTA, quota("destination_storage", "producer_request_hold", 0))
    publish(broker)                                      # backlog 0: fine
    with pytest.raises(BacklogQuotaHold) as ei:          # the broker says: hold
        publish(broker)
    assert ei.value.exit_code == 1 and "producer_request_hold" in str(ei.value)
    before = broker.topics.stats("t")["msgInCounter"]
    producer = Producer(broker, "t", "held", send_timeout_ms=200)
    start = fake_time.now  # the producer's real-time wait, on a clock that moves as it sleeps
    with pytest.raises(BacklogQuotaHold):
        producer.send(b"x")
    elapsed = fake_time.now - start
    assert 0.2 - 1e-9 <= elapsed < 2.0
    assert fake_time.slept, "the producer gave up without waiting"
    assert broker.topics.stats("t")["msgInCounter"] == before


def test_producer_request_hold_goes_through_once_the_backlog_drains(broker, monkeypatch):
    sub(broker)
    set_ns(broker, P.BACKLOG_QUOTA, quota("destination_storage", "producer_request_hold", 0))
    publish(broker, n=2)
    waits = []

    def drain_while_waiting(seconds):                   # a consumer catches up meanwhile
        waits.append(seconds)
        broker.subscription("t", "s").clear_backlog()
    monkeypatch.setattr(pulsarctl.clock, "sleep", drain_while_waiting)
    producer = Producer(broker, "t", "held", send_timeout_ms=60_000)
    mid = producer.send(b"x")
    assert mid != DUP and len(waits) == 1
    assert data(broker.fetch("t", "s", "c1", 10)) == ["x"]


def test_a_backlog_quota_does_not_stop_dead_letter_moves(broker, clock):
    """A quota on the DLQ topic does not block moving a message there."""
    set_ns(broker, P.BACKLOG_QUOTA, quota("destination_storage", "producer_exception", 0))
    dlq = FULL + "t-s-DLQ"
    broker.topics.create(dlq)
    broker.subscription(dlq, "keep").create("Earliest")
    publish(broker, dlq)                                 # the DLQ has a backlog over 0
    with pytest.raises(BacklogQuotaExceeded):
        publish(broker, dlq)
    ids = publish(broker)                                # t has no subscription yet
    sub(broker, settings={"maxRedeliverCount": 1, "negativeAckRedeliveryDelayMs": SEC})
    for _ in range(2):
        assert ids_of(broker.fetch("t", "s", "c1", 10)) == ids
        broker.nack("t", "s", ids)
        clock.advance(SEC)
    broker.chores.fire_due()
    assert backlog(broker, dlq, "keep") == 2


# == delayed delivery =========================================================================
def test_delayed_delivery_switched_off_at_the_namespace_and_on_again(broker, clock):
    sub(broker)
    later = START_MS + 60 * SEC
    broker.publish("t", [OutgoingMessage(b"d0", deliver_at=later)])
    assert broker.fetch("t", "s", "c1", 10) == []        # held
    assert sstats(broker)["delayedMessages"] == 1
    set_ns(broker, P.DELAYED, {"tickTime": 1000, "active": False})
    assert data(broker.fetch("t", "s", "c1", 10)) == ["d0"]   # the held one goes now
    broker.publish("t", [OutgoingMessage(b"d1", deliver_at=later)])
    assert data(broker.fetch("t", "s", "c1", 10)) == ["d1"]   # new ones are not held
    set_ns(broker, P.DELAYED, {"tickTime": 1000, "active": True})
    broker.publish("t", [OutgoingMessage(b"d2", deliver_at=later)])
    assert broker.fetch("t", "s", "c1", 10) == []
    clock.advance(60 * SEC)
    assert data(broker.fetch("t", "s", "c1", 10)) == ["d2"]


def test_delayed_delivery_topic_setting_overrides_the_namespace(broker, clock):
    sub(broker)
    sub(broker, s="ks", typ="Key_Shared")
    later = START_MS + 60 * SEC
    set_ns(broker, P.DELAYED, {"tickTime": 1000, "active": True})
    set_topic(broker, P.DELAYED, {"tickTime": 1000, "active": False})
    broker.publish("t", [OutgoingMessage(b"d0", deliver_at=later)])
    assert data(broker.fetch("t", "s", "c1", 10)) == ["d0"]
    assert data(broker.fetch("t", "ks", "c1", 10)) == ["d0"]
    # Topic on, namespace off: the topic's wins, messages are held.
    set_ns(broker, P.DELAYED, {"tickTime": 1000, "active": False})
    set_topic(broker, P.DELAYED, {"tickTime": 1000, "active": True})
    broker.publish("t", [OutgoingMessage(b"d1", deliver_at=later)])
    assert broker.fetch("t", "s", "c1", 10) == []
    assert broker.fetch("t", "ks", "c1", 10) == []
    broker.policies.remove("topic", "t", P.DELAYED)       # namespace: off
    assert data(broker.fetch("t", "s", "c1", 10)) == ["d1"]
    assert data(broker.fetch("t", "ks", "c1", 10)) == ["d1"]


def test_delayed_delivery_tick_time_from_the_policy(broker, clock):
    sub(broker)
    in_4s = START_MS + 4 * SEC
    set_topic(broker, P.DELAYED, {"tickTime": 5000, "active": True})
    broker.publish("t", [OutgoingMessage(b"d0", deliver_at=in_4s)])
    assert data(broker.fetch("t", "s", "c1", 10)) == ["d0"]   # due within one tick: at once
    set_topic(broker, P.DELAYED, {"tickTime": 1000, "active": True})
    broker.publish("t", [OutgoingMessage(b"d1", deliver_at=in_4s)])
    assert broker.fetch("t", "s", "c1", 10) == []


def test_max_delivery_delay_rejects_longer_delays(broker, clock):
    sub(broker)
    set_ns(broker, P.DELAYED, {"tickTime": 1000, "active": True,
                               "maxDeliveryDelayInMillis": 10_000})
    broker.publish("t", [OutgoingMessage(b"ok", deliver_at=START_MS + 10_000)])
    with pytest.raises(InvalidValue) as ei:
        broker.publish("t", [OutgoingMessage(b"fine"),
                             OutgoingMessage(b"late", deliver_at=START_MS + 10_001)])
    assert ei.value.exit_code == 2 and "10000" in str(ei.value)
    assert broker.topics.stats("t")["msgInCounter"] == 1     # the whole publish was refused
    broker.publish("t", [OutgoingMessage(b"now")])            # no delay: no limit
    set_topic(broker, P.DELAYED, {"tickTime": 1000, "active": True})   # 0: no maximum
    broker.publish("t", [OutgoingMessage(b"late", deliver_at=START_MS + 3_600_000)])
    assert broker.topics.stats("t")["msgInCounter"] == 3


# == default dead letter policy ===============================================================
def dead_letters(broker, topic):
    got, _, _ = broker.read_entries(topic, None, 100, after_id=MessageId.earliest)
    return [m.data() for m in got]


def nack_until_gone(broker, clock, topic="t", s="s", consumer="c1", limit=10):
    """Fetch and nack until nothing comes; the number of deliveries."""
    n = 0
    for _ in range(limit):
        got = broker.fetch(topic, s, consumer, 10)
        if not got:
            return n
        n += 1
        broker.nack(topic, s, ids_of(got))
        clock.advance(SEC)
        broker.chores.fire_due()
    return n


def test_a_namespace_dead_letter_policy_applies_to_a_new_subscription(broker, clock):
    publish(broker, prefix="early")
    sub(broker, s="before", settings={"negativeAckRedeliveryDelayMs": SEC})
    set_ns(broker, P.DEAD_LETTER, {"maxRedeliverCount": 2})
    sub(broker, settings={"negativeAckRedeliveryDelayMs": SEC})
    assert broker.subscription("t", "s").policy()["maxRedeliverCount"] == 2
    assert broker.subscription("t", "s").describe()["deadLetterTopic"] == FULL + "t-s-DLQ"
    assert nack_until_gone(broker, clock) == 3           # maxRedeliverCount + 1 deliveries
    assert dead_letters(broker, FULL + "t-s-DLQ") == [b"early0"]
    assert backlog(broker) == 0
    # A subscription made before the policy does not get it.
    assert "maxRedeliverCount" not in broker.subscription("t", "before").policy()
    assert nack_until_gone(broker, clock, s="before", limit=5) == 5


def test_topic_dead_letter_policy_with_its_topic_and_initial_subscription(broker, clock):
    publish(broker)
    set_ns(broker, P.DEAD_LETTER, {"maxRedeliverCount": 5})
    set_topic(broker, P.DEAD_LETTER, {"maxRedeliverCount": 1, "deadLetterTopic": "dead",
                                      "initialSubscriptionName": "keep"})
    assert broker.policies.get("topic", "t", P.DEAD_LETTER)["deadLetterTopic"] == FULL + "dead"
    sub(broker, settings={"negativeAckRedeliveryDelayMs": SEC})
    assert nack_until_gone(broker, clock) == 2
    assert dead_letters(broker, FULL + "dead") == [b"m0"]
    assert broker.topics.subscriptions(FULL + "dead") == ["keep"]


def test_consumer_flags_override_the_default_dead_letter_policy(broker, clock):
    publish(broker)
    set_ns(broker, P.DEAD_LETTER, {"maxRedeliverCount": 1, "deadLetterTopic": "ns-dead"})
    # The consumer gives its own count; the namespace's topic stays (a flag left out is kept).
    sub(broker, settings={"negativeAckRedeliveryDelayMs": SEC, "maxRedeliverCount": 3})
    policy = broker.subscription("t", "s").policy()
    assert policy["maxRedeliverCount"] == 3 and policy["deadLetterTopic"] == FULL + "ns-dead"
    assert nack_until_gone(broker, clock) == 4
    assert dead_letters(broker, FULL + "ns-dead") == [b"m0"]
    # Another consumer of the same subscription without flags does not bring the default back.
    sub(broker, consumer="c2", settings={"negativeAckRedeliveryDelayMs": SEC})
    assert broker.subscription("t", "s").policy()["maxRedeliverCount"] == 3


def test_a_partitioned_topic_dead_letter_policy_reaches_each_partition(broker, clock):
    broker.topics.create_partitioned("pt", 2)
    set_topic(broker, P.DEAD_LETTER, {"maxRedeliverCount": 1}, "pt")
    sub(broker, "pt", settings={"negativeAckRedeliveryDelayMs": SEC})
    for i in range(2):
        assert broker.subscription(f"pt-partition-{i}", "s").policy()["maxRedeliverCount"] == 1


# == unacked-message limits ===================================================================
def test_max_unacked_per_consumer_blocks_at_the_limit_and_unblocks_at_half(broker):
    sub(broker)
    sub(broker, consumer="c2")
    publish(broker, n=20)
    set_topic(broker, P.MAX_UNACKED_CONSUMER, 4)
    got = broker.fetch("t", "s", "c1", 10)
    assert len(got) == 4
    assert broker.fetch("t", "s", "c1", 10) == []        # blocked at 4
    assert len(broker.fetch("t", "s", "c2", 10)) == 4     # the other consumer has its own limit
    broker.ack("t", "s", ids_of(got[:1]))                # 3 unacked: still blocked
    assert broker.fetch("t", "s", "c1", 10) == []
    broker.ack("t", "s", ids_of(got[1:2]))               # 2 = half: unblocked
    again = broker.fetch("t", "s", "c1", 10)
    assert len(again) == 2                               # up to the limit again
    assert broker.fetch("t", "s", "c1", 10) == []
    assert sstats(broker)["unackedMessages"] == 8


def test_max_unacked_blocks_as_soon_as_a_fetch_reaches_the_limit(broker):
    sub(broker)
    sub(broker, s="s2")
    publish(broker, n=20)
    set_topic(broker, P.MAX_UNACKED_CONSUMER, 4)
    got = broker.fetch("t", "s", "c1", 10)
    assert len(got) == 4                                 # at the limit: blocked now
    broker.ack("t", "s", ids_of(got[:1]))                # 3 > half: still blocked
    assert broker.fetch("t", "s", "c1", 10) == []


def test_max_unacked_per_subscription_blocks_every_consumer(broker):
    sub(broker)
    sub(broker, consumer="c2")
    publish(broker, n=20)
    set_ns(broker, P.MAX_UNACKED_SUBSCRIPTION, 6)
    a = broker.fetch("t", "s", "c1", 4)
    b = broker.fetch("t", "s", "c2", 10)
    assert (len(a), len(b)) == (4, 2)
    assert broker.fetch("t", "s", "c1", 10) == broker.fetch("t", "s", "c2", 10) == []
    broker.ack("t", "s", ids_of(a[:2]))                  # 4 unacked > 3: blocked
    assert broker.fetch("t", "s", "c2", 10) == []
    broker.ack("t", "s", ids_of(a[2:3]))                 # 3 = half: unblocked
    assert len(broker.fetch("t", "s", "c2", 10)) == 3
    assert sstats(broker)["unackedMessages"] == 6


def test_max_unacked_does_not_limit_exclusive_or_failover(broker):
    set_ns(broker, P.MAX_UNACKED_CONSUMER, 2)
    set_ns(broker, P.MAX_UNACKED_SUBSCRIPTION, 3)
    publish(broker, n=10)
    for typ in ("Exclusive", "Failover"):
        assert len(sub(broker, s=typ, typ=typ, fetch=10)) == 10


def test_max_unacked_zero_means_no_limit_and_topic_overrides_namespace(broker):
    sub(broker)
    publish(broker, n=10)
    set_ns(broker, P.MAX_UNACKED_CONSUMER, 2)
    set_topic(broker, P.MAX_UNACKED_CONSUMER, 0)
    assert len(broker.fetch("t", "s", "c1", 10)) == 10


def test_max_unacked_per_consumer_on_key_shared(broker):
    sub(broker, typ="Key_Shared")
    broker.publish("t", [OutgoingMessage(b"k", key=f"k{i}") for i in range(10)])
    set_ns(broker, P.MAX_UNACKED_CONSUMER, 3)
    got = broker.fetch("t", "s", "c1", 10)
    assert len(got) == 3
    assert broker.fetch("t", "s", "c1", 10) == []
    broker.ack("t", "s", ids_of(got[:2]))
    assert len(broker.fetch("t", "s", "c1", 10)) == 2


# == through the CLI ==========================================================================
def test_cli_get_of_an_unset_policy_is_null_and_set_get_remove_round_trip(cli):
    ok(cli("produce", "t", "-m", "x"))
    r = ok(cli("namespaces", "get-message-ttl", NS))
    assert r.stdout.strip() == "null"
    r = ok(cli("topics", "get-message-ttl", "t"))
    assert r.stdout.strip() == "null"
    r = ok(cli("namespaces", "set-message-ttl", NS, "--messageTTL", "1h"))
    assert r.stdout == "" and "3600 s" in r.stderr
    assert ok(cli("namespaces", "get-message-ttl", NS)).stdout.strip() == "3600"
    assert ok(cli("topics", "get-message-ttl", "t")).stdout.strip() == "null"
    assert ok(cli("topics", "get-message-ttl", "t", "--applied")).stdout.strip() == "3600"
    assert pjson(cli("topics", "set-message-ttl", "t", "-t", "90", "-o", "json")) == {
        "topic": "t", P.TTL: 90}
    assert ok(cli("topics", "get-message-ttl", "t", "-ap")).stdout.strip() == "90"
    assert pjson(cli("topics", "policies", "t", "-o", "json"))[P.TTL] == 90
    assert pjson(cli("namespaces", "policies", NS, "-o", "json"))[P.TTL] == 3600
    ok(cli("topics", "remove-message-ttl", "t"))
    assert ok(cli("topics", "get-message-ttl", "t", "--applied")).stdout.strip() == "3600"
    ok(cli("namespaces", "remove-message-ttl", NS))
    assert ok(cli("topics", "get-message-ttl", "t", "--applied")).stdout.strip() == "0"
    assert ok(cli("namespaces", "get-message-ttl", NS)).stdout.strip() == "null"


def test_cli_policy_values_in_json(cli):
    ok(cli("produce", "t", "-m", "x"))
    ok(cli("namespaces", "set-retention", NS, "-t", "3h", "-s", "-1"))
    assert pjson(cli("namespaces", "get-retention", NS, "-o", "json")) == {
        "retentionTimeInMinutes": 180, "retentionSizeInMB": -1}
    ok(cli("topics", "set-retention", "t", "-t", "-1", "-s", "2G"))
    assert pjson(cli("topics", "get-retention", "t", "-o", "json")) == {
        "retentionTimeInMinutes": -1, "retentionSizeInMB": 2048}
    ok(cli("topics", "set-deduplication", "t", "--enable"))
    assert pjson(cli("topics", "get-deduplication", "t", "-o", "json")) is True
    ok(cli("namespaces", "set-backlog-quota", NS, "-p", "producer_exception", "-l", "10M"))
    ok(cli("namespaces", "set-backlog-quota", NS, "-p", "consumer_backlog_eviction",
           "-lt", "1h", "-t", "message_age"))
    assert pjson(cli("namespaces", "get-backlog-quotas", NS, "-o", "json")) == {
        "destination_storage": {"limitSize": 10 * 1024 * 1024, "limitTime": -1,
                                "policy": "producer_exception"},
        "message_age": {"limitSize": -1, "limitTime": 3600,
                        "policy": "consumer_backlog_eviction"}}
    ok(cli("namespaces", "remove-backlog-quota", NS, "-t", "message_age"))
    assert list(pjson(cli("topics", "get-backlog-quotas", "t", "-ap", "-o", "json"))) == [
        "destination_storage"]
    ok(cli("topics", "set-delayed-delivery", "t", "-d", "-t", "2s", "-md", "1m"))
    assert pjson(cli("topics", "get-delayed-delivery", "t", "-o", "json")) == {
        "tickTime": 2000, "active": False, "maxDeliveryDelayInMillis": 60_000}
    ok(cli("namespaces", "set-dead-letter-policy", NS, "-m", "3",
           "--dead-letter-topic", "dead", "--initial-subscription-name", "keep"))
    assert pjson(cli("topics", "get-dead-letter-policy", "t", "--applied", "-o", "json")) == {
        "maxRedeliverCount": 3, "deadLetterTopic": FULL + "dead",
        "initialSubscriptionName": "keep"}
    ok(cli("topics", "set-max-unacked-messages-per-consumer", "t", "-m", "7"))
    ok(cli("topics", "set-max-unacked-messages-on-subscription", "t", "-m", "9"))  # alias
    pol = pjson(cli("topics", "policies", "t", "-o", "json"))
    assert pol[P.MAX_UNACKED_CONSUMER] == 7 and pol[P.MAX_UNACKED_SUBSCRIPTION] == 9
    assert pol[P.DEDUP] is True


@pytest.mark.parametrize("args", [
    ("namespaces", "set-message-ttl", NS, "--messageTTL", "abc"),
    ("topics", "set-message-ttl", "t", "-t", "-5"),
    ("topics", "set-message-ttl", "t", "-t", "500ms"),           # would be 0: TTL off
    ("topics", "set-message-ttl", "t", "-t", "1500ms"),          # TTLs are whole seconds
    ("topics", "set-backlog-quota", "t", "-p", "producer_exception", "-t", "message_age",
     "-lt", "2500ms"),
    ("topics", "set-retention", "t", "-t", "2x", "-s", "1M"),
    ("topics", "set-retention", "t", "-t", "1h", "-s", "lots"),
    ("topics", "set-retention", "t", "-t", "1h", "-s", "0"),
    ("topics", "set-retention", "t", "-t", "1h", "-s", "10K"),     # 0 whole MB
    ("topics", "set-deduplication", "t"),
    ("topics", "set-deduplication", "t", "-e", "-d"),
    ("topics", "set-backlog-quota", "t", "-p", "bogus", "-l", "1M"),
    ("topics", "set-backlog-quota", "t", "-p", "producer_exception"),
    ("topics", "set-backlog-quota", "t", "-p", "producer_exception", "-t", "message_age"),
    ("topics", "set-backlog-quota", "t", "-p", "producer_exception", "-t", "bogus", "-l", "1M"),
    ("topics", "set-delayed-delivery", "t", "-e", "-t", "0"),
    ("topics", "set-dead-letter-policy", "t", "-m", "0"),
    ("topics", "set-max-unacked-messages-per-consumer", "t", "-m", "-1"),
    ("namespaces", "set-max-unacked-messages-per-subscription", NS, "-m", "-1"),
])
def test_cli_invalid_values_exit_2_with_one_error_line(cli, args):
    ok(cli("produce", "t", "-m", "x"))
    assert_error(cli(*args), 2)
    assert pjson(cli("topics", "policies", "t", "-o", "json")) == DEFAULTS


@pytest.mark.parametrize("args", [
    ("topics", "get-message-ttl", "nope"),
    ("topics", "get-message-ttl", "nope", "--applied"),
    ("topics", "set-message-ttl", "nope", "-t", "5"),
    ("topics", "remove-retention", "nope"),
    ("topics", "policies", "nope"),
    ("namespaces", "get-message-ttl", "public/nope"),
    ("namespaces", "set-deduplication", "nosuch/ns", "-e"),
    ("namespaces", "policies", "public/nope"),
])
def test_cli_missing_topic_or_namespace_exits_3(cli, args):
    ok(cli("produce", "t", "-m", "x"))
    assert_error(cli(*args), 3)


def test_cli_produce_a_duplicate_prints_its_id_and_a_note(cli):
    ok(cli("namespaces", "set-deduplication", NS, "--enable"))
    r = ok(cli("produce", "t", "-m", "a", "--producer-name", "p", "--sequence-id", "7"))
    assert r.stdout.strip() != "-1:-1:-1" and r.stderr == ""
    r = ok(cli("produce", "t", "-m", "a", "-m", "b", "--producer-name", "p",
               "--sequence-id", "7"))
    lines = r.stdout.split()
    assert lines[0] == "-1:-1:-1" and lines[1] != "-1:-1:-1"
    assert "1 message(s) not stored" in r.stderr and "producer p" in r.stderr
    assert pjson(cli("topics", "stats", "t", "-o", "json"))["msgInCounter"] == 2


def test_cli_backlog_quota_exceeded_exits_1(cli):
    ok(cli("topics", "create", "t"))
    ok(cli("topics", "create-subscription", "t", "-s", "s", "-m", "earliest"))
    ok(cli("topics", "set-backlog-quota", "t", "-p", "producer_exception", "-l", "1"))
    ok(cli("produce", "t", "-m", "first"))
    line = assert_error(cli("produce", "t", "-m", "second"), 1)
    assert "backlog quota" in line
    assert pjson(cli("topics", "stats", "t", "-o", "json"))["msgInCounter"] == 1


def test_cli_ttl_and_retention_run_on_clock_advance_and_daemon_run_once(cli):
    ok(cli("brokers", "update-dynamic-config", "--config", "managedLedgerMaxEntriesPerLedger",
           "--value", "2"))
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    ok(cli("topics", "create-subscription", "t", "-s", "s", "-m", "earliest"))
    ok(cli("produce", "t", "-m", "a", "-m", "b", "-m", "c", "-m", "d", "-m", "e"))
    ok(cli("topics", "set-message-ttl", "t", "-t", "1m"))
    ok(cli("clock", "advance", "1m"))                    # now == publish + ttl: nothing yet
    st = pjson(cli("topics", "stats", "t", "-o", "json"))
    assert st["subscriptions"]["s"]["msgBacklog"] == 5
    ok(cli("clock", "advance", "1ms"))
    st = pjson(cli("topics", "stats", "t", "-o", "json"))
    assert st["subscriptions"]["s"]["msgBacklog"] == 0
    ist = pjson(cli("topics", "stats-internal", "t", "-o", "json"))
    assert [l["entries"] for l in ist["ledgers"]] == [1]      # default 0/0 retention
    # daemon run-once applies the TTL in force too (here one shortened after the fact).
    ok(cli("topics", "set-message-ttl", "t", "-t", "1h"))
    ok(cli("produce", "t", "-m", "f", "-m", "g"))
    ok(cli("clock", "advance", "2m"))
    assert pjson(cli("daemon", "run-once", "-o", "json"))["expired"] == 0
    ok(cli("topics", "set-message-ttl", "t", "-t", "1m"))
    r = pjson(cli("daemon", "run-once", "-o", "json"))
    assert r["expired"] == 2
    st = pjson(cli("topics", "stats", "t", "-o", "json"))
    assert st["subscriptions"]["s"]["msgBacklog"] == 0


def test_cli_delayed_delivery_off_gives_delayed_messages_at_once(cli):
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    ok(cli("topics", "create-subscription", "t", "-s", "s", "-m", "earliest"))
    ok(cli("produce", "t", "-m", "later", "--deliver-after", "1h"))
    r = cli("consume", "t", "-s", "s", "-t", "Shared", "-n", "1", "--idle-timeout", "50ms",
            "--fail-if-empty")
    assert r.exit_code == 6
    ok(cli("namespaces", "set-delayed-delivery", NS, "--disable"))
    assert pjson(cli("topics", "get-delayed-delivery", "t", "--applied", "-o", "json"))[
        "active"] is False
    r = ok(cli("consume", "t", "-s", "s", "-t", "Shared", "-n", "1", "--idle-timeout", "1s"))
    assert "later" in r.stdout
    ok(cli("topics", "set-delayed-delivery", "t", "--enable", "--maxDelay", "10m"))
    line = assert_error(cli("produce", "t", "-m", "x", "--deliver-after", "11m"), 2)
    assert "600000" in line
    ok(cli("produce", "t", "-m", "x", "--deliver-after", "9m"))


def test_cli_policy_commands_take_only_their_documented_options(cli):
    """The field a generated command works on is not an option of it (no `---field`)."""
    import typer.main

    from pulsarctl.cli.app import app

    root = typer.main.get_command(app)
    checked = 0
    for group in ("namespaces", "topics"):
        for name, cmd in root.commands[group].commands.items():
            if name.split("-")[0] in ("get", "set", "remove") or name == "policies":
                flags = [f for p in cmd.params for f in getattr(p, "opts", ())]
                assert not any(f.startswith("---") or f.startswith("--_") for f in flags), (
                    group, name, flags)
                checked += 1
    assert checked >= 2 * (2 * len(P.NAMES) + 1)
    ok(cli("produce", "t", "-m", "x"))
    ok(cli("topics", "set-deduplication", "t", "-e"))
    assert_error(cli("topics", "remove-message-ttl", "t", "---field", P.DEDUP), 2)
    assert pjson(cli("topics", "get-deduplication", "t", "-o", "json")) is True
