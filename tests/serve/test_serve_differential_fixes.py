"""What the differential tests (tests/oracle/test_differential.py: the same random operations
on real Apache Pulsar and on serve) found serve doing otherwise than Pulsar, each pinned here
with the real Python client against a real serve, so it stays fixed without the oracle lane."""
from __future__ import annotations

from datetime import timedelta

import uuid

import pulsar
import pytest
import requests
from pulsar import ConsumerType

from procs import PATIENCE_S, wait_for

pytestmark = pytest.mark.serve
TM = 10000


def _topic(name: str) -> str:
    return f"persistent://public/default/{name}-{uuid.uuid4().hex[:8]}"


def test_unsubscribe_while_another_consumer_is_connected_is_refused_and_keeps_the_consumer(
        client):
    # PersistentSubscription.doUnsubscribe: only the subscription's one consumer may
    # unsubscribe; otherwise ServerMetadataException ("Unconnected or shared consumer attempting
    # to unsubscribe"), the consumer stays connected and keeps receiving.
    topic = _topic("unsub-refused")
    first = client.subscribe(topic, "s", consumer_type=ConsumerType.Failover, consumer_name="a")
    second = client.subscribe(topic, "s", consumer_type=ConsumerType.Failover, consumer_name="b")
    with pytest.raises(pulsar.BrokerMetadataError):
        first.unsubscribe()
    second.close()
    client.create_producer(topic).send(b"still here")
    assert first.receive(TM).data() == b"still here"
    first.unsubscribe()     # alone now: allowed


def test_a_batch_of_one_message_stays_a_batch(client):
    # The C++ (Python) client sends a lone message of its batch container as a batch of one
    # (num_messages_in_batch 1); Pulsar's broker stores the entry as it came, so the consumer
    # gets it with batch index 0: the id the send returned.
    topic = _topic("batch-of-one")
    consumer = client.subscribe(topic, "s", consumer_type=ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=True,
                                      batching_max_publish_delay_ms=3_600_000)
    sent = []
    producer.send_async(b"alone", lambda res, mid: sent.append(mid), partition_key="k",
                        properties={"p": "v"})
    producer.flush()
    got = consumer.receive(TM)
    assert got.message_id().batch_index() == 0
    assert got.message_id() == sent[0]
    assert (got.data(), got.partition_key(), got.properties()) == (b"alone", "k", {"p": "v"})
    consumer.acknowledge(got)
    consumer.redeliver_unacknowledged_messages()
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)


def _sub_stats(served, topic: str, sub: str) -> dict:
    short = topic.split("://", 1)[1]
    r = requests.get(f"{served.http_url}/admin/v2/persistent/{short}/stats", timeout=PATIENCE_S)
    return r.json()["subscriptions"][sub]


@pytest.mark.parametrize("typ", [ConsumerType.Exclusive, ConsumerType.Failover])
def test_a_single_active_consumer_gets_as_many_entries_as_it_has_permits(served, client, typ):
    # PersistentDispatcherSingleActiveConsumer reads as many entries as the consumer has
    # permits and sends them all, a batch whole (calculateToRead; preciseDispatcherFlowControl
    # is off by default): with 2 permits, a batch of 2 and the plain message after it both go.
    topic = _topic("permits-entries")
    producer = client.create_producer(topic, batching_enabled=True,
                                      batching_max_publish_delay_ms=3_600_000)
    for tag in (b"b0", b"b1"):
        producer.send_async(tag, lambda res, mid: None)
    producer.flush()
    producer.send_async(b"p2", lambda res, mid: None)
    producer.flush()
    client.subscribe(topic, "s", consumer_type=typ, receiver_queue_size=2,
                     initial_position=pulsar.InitialPosition.Earliest)
    assert wait_for(lambda: _sub_stats(served, topic, "s")["msgOutCounter"] >= 3,
                    "three messages dispatched on two permits")


@pytest.mark.parametrize("sticky", [False, True], ids=["alone", "sticky"])
def test_a_key_shared_consumer_gets_as_many_entries_as_it_has_permits(served, client, sticky):
    # PersistentStickyKeyDispatcherMultipleConsumers.filterAndGroupEntriesForDispatching:
    # "permits are for entries/batches", one taken per entry dispatched (and its replay filter
    # the same): with 2 permits, a batch of 3 and the plain message after it both go.
    topic = _topic("ks-permits-entries")
    producer = client.create_producer(topic, batching_enabled=True,
                                      batching_max_publish_delay_ms=3_600_000)
    for tag in (b"b0", b"b1", b"b2"):
        producer.send_async(tag, lambda res, mid: None)
    producer.flush()
    producer.send_async(b"p3", lambda res, mid: None)
    producer.flush()
    kw = {"key_shared_policy": pulsar.ConsumerKeySharedPolicy(
        pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 65535)])} if sticky else {}
    client.subscribe(topic, "s", consumer_type=ConsumerType.KeyShared, receiver_queue_size=2,
                     initial_position=pulsar.InitialPosition.Earliest, **kw)
    assert wait_for(lambda: _sub_stats(served, topic, "s")["msgOutCounter"] >= 4,
                    "four messages (two entries) dispatched on two permits")



def test_a_delayed_entry_uses_up_a_key_shared_read_slot(served, client):
    # Found by the differential tests in CI (seed 28): Pulsar's Key_Shared dispatcher reads as
    # many entries as the consumer has permits, then drops the delayed ones it read, so 5
    # permits over [batch of 3, delayed, batch of 2, plain, delayed, ...] send 3 entries (6
    # messages) and stop; serve read on past the delayed entries and sent 5.
    topic = _topic("ks-delayed-slots")
    batched = client.create_producer(topic, batching_enabled=True,
                                     batching_max_publish_delay_ms=3_600_000)
    plain = client.create_producer(topic, batching_enabled=False)

    def batch(*tags):
        for tag in tags:
            batched.send_async(tag, lambda res, mid: None)
        batched.flush()
    batch(b"m0", b"m1", b"m2")
    plain.send(b"d0", deliver_after=timedelta(minutes=10))
    batch(b"m3", b"m4")
    plain.send(b"m5")
    plain.send(b"d1", deliver_after=timedelta(minutes=10))
    batch(b"m6", b"m7", b"m8")
    batch(b"m9", b"m10")
    client.subscribe(topic, "s", consumer_type=ConsumerType.KeyShared, receiver_queue_size=5,
                     initial_position=pulsar.InitialPosition.Earliest,
                     key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                         pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 65535)]))
    assert wait_for(lambda: _sub_stats(served, topic, "s")["msgOutCounter"] >= 6,
                    "the first read's messages dispatched")
    # one fetch, one transaction: the permits (5, now -1) allow no second one
    assert _sub_stats(served, topic, "s")["msgOutCounter"] == 6


def test_a_key_shared_read_of_only_delayed_entries_reads_again(client):
    # Found by the differential tests in CI: 5 permits over [m0, eight delayed, m1]: the first
    # read sends m0 (4 permits left), the second reads four delayed entries and sends nothing.
    # Pulsar reads again while permits remain; serve waited for a wake with 4 permits in hand,
    # and the client, having used one of its 5, sends no FLOW before half, so m1 never came.
    topic = _topic("ks-delayed-reread")
    plain = client.create_producer(topic, batching_enabled=False)
    plain.send(b"m0")
    for i in range(8):
        plain.send(b"d%d" % i, deliver_after=timedelta(minutes=10))
    plain.send(b"m1")
    consumer = client.subscribe(
        topic, "s", consumer_type=ConsumerType.KeyShared, receiver_queue_size=5,
        initial_position=pulsar.InitialPosition.Earliest,
        key_shared_policy=pulsar.ConsumerKeySharedPolicy(
            pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 65535)]))
    assert consumer.receive(TM).data() == b"m0"
    assert consumer.receive(TM).data() == b"m1"


def test_an_ack_sent_as_the_failover_consumer_changes_lands_before_the_rewind(client):
    # PersistentDispatcherSingleActiveConsumer.scheduleReadOnActiveConsumer: when a Failover
    # subscription's active consumer changes, the cursor is rewound and read only
    # activeConsumerFailoverDelayTimeMillis (1 s) later, "to prevent message duplication": an
    # ack the old active consumer sends meanwhile (the client groups acks for 100 ms) lands
    # first, and the new active consumer does not get that message again.
    from pulsarctl.broker.dispatch.failover import failover_active

    topic = _topic("failover-delay")
    first = client.subscribe(topic, "s", consumer_type=ConsumerType.Failover, consumer_name="a",
                             initial_position=pulsar.InitialPosition.Earliest)
    client.create_producer(topic).send(b"once")
    msg = first.receive(TM)
    # a name the hash ring makes active in place of "a"
    name = next(n for n in (f"b{i}" for i in range(100))
                if failover_active(sorted(["a", n]), topic, -1) == sorted(["a", n]).index(n))
    second = client.subscribe(topic, "s", consumer_type=ConsumerType.Failover,
                              consumer_name=name)
    first.acknowledge(msg)
    with pytest.raises(pulsar.Timeout):
        second.receive(1500)


def _drain_keys(consumer) -> list:
    keys = []
    while True:
        try:
            m = consumer.receive(1000)
        except pulsar.Timeout:
            return keys
        keys.append(m.partition_key())
        consumer.acknowledge(m)


def test_auto_split_key_shared_consumers_split_the_keys_by_consistent_hashing(client):
    # ServiceConfiguration.subscriptionKeySharedUseConsistentHashing is true by default (3.x,
    # 4.x): an AUTO_SPLIT consumer gets ConsistentHashingStickyKeyConsumerSelector. Which keys
    # real Pulsar 4.2.4 gave c0 and c1 (tests/oracle, the differential tests):
    topic = _topic("ks-consistent")
    consumers = [client.subscribe(topic, "s", consumer_type=ConsumerType.KeyShared,
                                  consumer_name=name,
                                  initial_position=pulsar.InitialPosition.Earliest)
                 for name in ("c0", "c1")]
    producer = client.create_producer(topic)
    for i in range(20):
        producer.send(b"m%d" % i, partition_key=f"k{i % 10}")
    assert sorted(set(_drain_keys(consumers[0]))) == ["k0", "k1", "k3", "k4", "k6", "k9"]
    assert sorted(set(_drain_keys(consumers[1]))) == ["k2", "k5", "k7", "k8"]


def _key_shared(client, topic, name, out_of_order):
    return client.subscribe(
        topic, "s", consumer_type=ConsumerType.KeyShared, consumer_name=name,
        initial_position=pulsar.InitialPosition.Earliest,
        key_shared_policy=pulsar.ConsumerKeySharedPolicy(
            allow_out_of_order_delivery=out_of_order))


@pytest.mark.parametrize("first", [True, False])
def test_key_shared_consumers_must_agree_on_out_of_order_delivery(client, first):
    # AbstractSubscription.checkForConsumerCompatibilityErrorWithDispatcher: "Subscription is
    # of different type. Active subscription (does not) allow(s) out of order delivery ..."
    topic = _topic("ks-ooo-agree")
    _key_shared(client, topic, "a", first)
    with pytest.raises(pulsar.ConsumerBusy):
        _key_shared(client, topic, "b", not first)
    _key_shared(client, topic, "b", first)


def test_out_of_order_delivery_gives_a_joining_consumer_its_keys_at_once(client):
    # PersistentStickyKeyDispatcherMultipleConsumers: draining hashes (PIP-379) only for
    # AUTO_SPLIT without allowOutOfOrderDelivery; with it, a consumer that joins gets the keys
    # that are now its own at once, though the other consumer still holds unacked messages of
    # them.
    from pulsarctl.broker.dispatch.selectors import ConsistentHashingSelector, sticky_key_hash

    sel = ConsistentHashingSelector()
    sel.add_consumer("a")
    sel.add_consumer("b")
    keys = [f"k{i}" for i in range(10)]
    moved = [k for k in keys if sel.select(sticky_key_hash(k, 1, 65535)) == "b"]
    assert moved
    topic = _topic("ks-ooo")
    a = _key_shared(client, topic, "a", True)
    producer = client.create_producer(topic)
    for k in keys:
        producer.send(f"{k}-old".encode(), partition_key=k)
    held = [a.receive(TM) for _ in keys]                     # a holds all of them, unacked
    b = _key_shared(client, topic, "b", True)
    for k in keys:
        producer.send(f"{k}-new".encode(), partition_key=k)
    got = sorted(b.receive(TM).data().decode() for _ in moved)
    assert got == sorted(f"{k}-new" for k in moved)
    assert len(held) == len(keys)
