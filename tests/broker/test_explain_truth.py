"""`explain` tells the truth about what real clients do (issue 27 item 5), in-process: a dead
letter or retry copy a client publishes (REAL_TOPIC, ORIGIN_MESSAGE_ID) and the ack of its
original that follows are linked as the broker's own moves are; a client's nack (a redelivery
request with ids) is told as the client's; an id alone finds its message. Real LMDB, a
simulated clock."""
from __future__ import annotations

import pytest

from pulsarctl.broker import batches as batching
from pulsarctl.errors import MessageNotFound, UsageError
from pulsarctl.messages import MessageId, OutgoingMessage

LEASE = 600_000
FULL = "persistent://public/default/"


def sub(broker, topic, s, consumer, typ="Shared", settings=None):
    broker.subscribe(topic, s, consumer, typ, "Earliest", lease_ms=LEASE, settings=settings)


def kinds(broker, topic, mid, s=None):
    return [e["event"] for e in broker.explain(topic, mid, s)["events"]]


def test_a_java_clients_dead_letter_on_a_partitioned_topic_links_both_ways(broker, clock):
    broker.topics.create_partitioned("orders", 2)
    _p, (mid,) = broker.publish("orders-partition-1", [OutgoingMessage(b"poison")])
    sub(broker, "orders-partition-1", "billing", "w1")
    (m,) = broker.fetch("orders-partition-1", "billing", "w1", 1)
    # What Java's ConsumerImpl.processPossibleToDLQ sends: REAL_TOPIC without the partition,
    # the partition in ORIGIN_MESSAGE_ID, REAL_SUBSCRIPTION (3.2+); then it acks the original.
    clock.advance(1000)
    _p, (copy,) = broker.publish("orders-partition-1-billing-DLQ", [OutgoingMessage(b"poison", {
        "REAL_TOPIC": FULL + "orders", "ORIGIN_MESSAGE_ID": str(m.id),
        "REAL_SUBSCRIPTION": "billing"})], producer_name="java-dlq")
    broker.ack("orders-partition-1", "billing", [m.id])
    life = broker.explain("orders-partition-1", mid)["events"]
    assert [e["event"] for e in life] == ["published", "delivered", "deadLettered", "acked"]
    dead = life[2]
    assert (dead["subscription"], dead["consumerName"], dead["byClient"]) == \
        ("billing", "w1", True)
    assert dead["toTopic"] == FULL + "orders-partition-1-billing-DLQ"
    assert dead["toMessageId"] == str(copy) and dead["producer"] == "java-dlq"
    back = broker.explain("orders-partition-1-billing-DLQ", copy)["events"]
    assert [(e["topic"].rsplit("/", 1)[1], e["event"]) for e in back] == [
        ("orders-partition-1", "published"), ("orders-partition-1", "delivered"),
        ("orders-partition-1", "deadLettered"), ("orders-partition-1", "acked"),
        ("orders-partition-1-billing-DLQ", "published")]
    assert back[-1]["fromTopic"] == FULL + "orders-partition-1"
    assert back[-1]["fromMessageId"] == str(m.id)


def test_a_cpp_clients_dead_letter_names_its_subscription_by_what_holds_it(broker):
    """The C++ (and Python) client writes (l,e,p,b) and no REAL_SUBSCRIPTION: the subscription
    is the one holding the original, delivered and not acked; a batch's message keeps its
    index."""
    _p, ids = broker.publish("t", [OutgoingMessage(b"a"), OutgoingMessage(b"b")],
                             batching=batching.Spec(10, 1 << 20))
    sub(broker, "t", "other", "o1")   # holds nothing: not the one
    sub(broker, "t", "s", "c1")
    got = broker.fetch("t", "s", "c1", 10)
    b = got[1].id
    _p, (copy,) = broker.publish("t-s-DLQ", [OutgoingMessage(b"b", {
        "REAL_TOPIC": FULL + "t",
        "ORIGIN_MESSAGE_ID": f"({b.ledger_id},{b.entry_id},-1,{b.batch_index})"})])
    life = broker.explain("t", ids[1])["events"]
    dead = [e for e in life if e["event"] == "deadLettered"]
    assert len(dead) == 1 and (dead[0]["subscription"], dead[0]["consumerName"]) == ("s", "c1")
    assert dead[0]["batchIndexes"] == [1]
    assert "deadLettered" not in kinds(broker, "t", ids[0])   # the other index of the batch
    assert broker.explain("t-s-DLQ", copy)["events"][0]["topic"] == FULL + "t"


def test_a_java_retry_copy_is_a_retry_and_a_replay_or_a_plain_message_is_no_copy(broker, clock):
    _p, ids = broker.publish("t", [OutgoingMessage(b"x"), OutgoingMessage(b"y")])
    sub(broker, "t", "s", "c1")
    got = broker.fetch("t", "s", "c1", 10)
    later = clock.now_ms() + 5000
    broker.publish("t-s-RETRY", [OutgoingMessage(b"x", {
        "REAL_TOPIC": FULL + "t", "ORIGIN_MESSAGE_ID": str(got[0].id), "RECONSUMETIMES": "1",
        "DELAY_TIME": "5000"}, deliver_at=later)])
    broker.ack("t", "s", [got[0].id])
    life = broker.explain("t", ids[0])["events"]
    assert [e["event"] for e in life][-2:] == ["retried", "acked"]
    assert (life[-2]["delay"], life[-2]["reconsumeTimes"]) == (5000, 1)
    # `dlq replay`'s copy (REPLAY_COUNT), a copy back to its own topic, and a message that
    # only names its topic are no client's dead letter.
    broker.publish("t-s-DLQ", [OutgoingMessage(b"y", {
        "REAL_TOPIC": FULL + "t", "ORIGIN_MESSAGE_ID": str(got[1].id), "REPLAY_COUNT": "1"})])
    broker.publish("t", [OutgoingMessage(b"y", {
        "REAL_TOPIC": FULL + "t", "ORIGIN_MESSAGE_ID": str(got[1].id)})])
    broker.publish("t-s-DLQ", [OutgoingMessage(b"y", {"REAL_TOPIC": FULL + "t"})])
    assert kinds(broker, "t", ids[1]) == ["published", "delivered"]


def test_a_clients_nack_is_the_clients_and_comes_back_at_once(broker, clock):
    """A redelivery request with ids (CommandRedeliverUnacknowledgedMessages): the client held
    the message for its own nack delay; the broker redelivers it now, counted, with no timer
    of its own (and so no 'pulsarctl' note); a message the consumer no longer holds is passed
    over, as Pulsar passes it over."""
    _p, ids = broker.publish("t", [OutgoingMessage(b"x"), OutgoingMessage(b"y")])
    sub(broker, "t", "s", "w1")
    got = broker.fetch("t", "s", "w1", 10)
    broker.ack("t", "s", [got[1].id])
    clock.advance(1500)
    assert broker.redeliver_unacked("t", "s", "w1", [m.id for m in got]) == 1
    (again,) = broker.fetch("t", "s", "w1", 10)
    assert (again.id, again.redelivery_count()) == (ids[0], 1)
    life = broker.explain("t", ids[0])["events"]
    assert [e["event"] for e in life] == ["published", "delivered", "nacked", "redelivered",
                                          "delivered"]
    nack = life[2]
    assert (nack["byClient"], nack["held"], nack.get("delay")) == (True, 1500, None)
    assert "beyondPulsar" not in nack
    assert life[4]["reason"] == "nacked at 00:00:01.500 by its client, after holding it 1.5s"
    # A stale request (an id it no longer holds, an id of no topic) is no error.
    assert broker.redeliver_unacked("t", "s", "w1", [ids[1], MessageId(99, 0, -1)]) == 0


def test_an_id_alone_finds_its_message_and_says_when_it_cannot(broker):
    _p, (mid,) = broker.publish("t", [OutgoingMessage(b"x")])
    _p, (other,) = broker.publish("u", [OutgoingMessage(b"y")])
    assert broker.explain(None, mid)["topic"] == FULL + "t"
    assert broker.explain(None, other)["topic"] == FULL + "u"
    with pytest.raises(MessageNotFound) as ei:
        broker.explain(None, MessageId(77, 0, -1))
    assert ei.value.exit_code == 3 and "-t TOPIC" in ei.value.hint
    with pytest.raises(MessageNotFound):
        broker.explain(None, MessageId(mid.ledger_id, mid.entry_id, 3))  # not a partition
    # The non-persistent topics' store counts its own ledgers: ledger 1 there too.
    broker.publish("non-persistent://public/default/np", [OutgoingMessage(b"z")])
    with pytest.raises(UsageError) as ei:
        broker.explain(None, mid)
    assert ei.value.exit_code == 2 and "ambiguous" in str(ei.value)
    assert broker.explain("t", mid)["topic"] == FULL + "t"   # with its topic it is not


def test_a_batch_index_must_name_a_message_of_a_batch(broker):
    _p, (plain,) = broker.publish("t", [OutgoingMessage(b"x")])
    _p, pair = broker.publish("t", [OutgoingMessage(b"a"), OutgoingMessage(b"b")],
                              batching=batching.Spec(10, 1 << 20))
    with pytest.raises(MessageNotFound) as ei:
        broker.explain("t", MessageId(plain.ledger_id, plain.entry_id, -1, 5))
    assert "is not a batch" in str(ei.value) and ei.value.exit_code == 3
    with pytest.raises(MessageNotFound) as ei:
        broker.explain("t", MessageId(pair[0].ledger_id, pair[0].entry_id, -1, 2))
    assert "a batch of 2 messages" in str(ei.value)
    assert broker.explain("t", pair[1])["events"][0]["event"] == "published"
