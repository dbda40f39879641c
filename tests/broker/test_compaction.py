"""Topic compaction (broker/compaction.py): the latest message per key up to the horizon,
tombstones, messages without keys, batches, readers and durable consumers that read compacted,
retention leaving the copy alone, recompaction, and deletion."""
import pytest

from pulsarctl.broker.batches import Spec
from pulsarctl.client import Client
from pulsarctl.errors import InvalidValue
from pulsarctl.messages import MessageId, OutgoingMessage

T = "persistent://public/default/ticker"


def send(broker, *pairs, batching=None):
    msgs = [OutgoingMessage(v, key=k) for k, v in pairs]
    return broker.publish(T, msgs, batching=batching)[1]


def read_all(broker, compacted=True, start=MessageId.earliest):
    msgs, nxt, _ = broker.read_entries(T, None, 1000, after_id=start, compacted=compacted)
    return [(m.partition_key(), m.data()) for m in msgs]


def test_latest_value_per_key_tombstones_and_unkeyed_messages(broker):
    send(broker, ("a", b"a1"), ("b", b"b1"), (None, b"plain"), ("a", b"a2"), ("c", b"c1"),
         ("c", b""), ("b", b"b2"))
    st = broker.topics.compact(T)
    assert st["status"] == "SUCCESS" and st["compactedMessages"] == 3
    assert read_all(broker) == [(None, b"plain"), ("a", b"a2"), ("b", b"b2")]
    # not compacted: everything, as before
    assert len(read_all(broker, compacted=False)) == 7


def test_messages_after_the_horizon_come_from_the_topic(broker):
    send(broker, ("a", b"a1"), ("a", b"a2"))
    broker.topics.compact(T)
    send(broker, ("a", b"a3"), ("b", b"b1"))
    assert read_all(broker) == [("a", b"a2"), ("a", b"a3"), ("b", b"b1")]
    broker.topics.compact(T)  # again: from the previous copy and what came after
    assert read_all(broker) == [("a", b"a3"), ("b", b"b1")]
    assert broker.topics.compaction_status(T)["compactedEntries"] == 2


def test_a_batch_keeps_its_surviving_messages_with_their_ids(broker):
    ids = send(broker, ("a", b"a1"), ("b", b"b1"), ("a", b"a2"), batching=Spec())
    assert all(i.batch_index >= 0 for i in ids)
    broker.topics.compact(T)
    msgs, _, _ = broker.read_entries(T, None, 100, after_id=MessageId.earliest, compacted=True)
    assert [(str(m.message_id()), m.data()) for m in msgs] == [
        (str(ids[1]), b"b1"), (str(ids[2]), b"a2")]


def test_the_copy_outlives_the_topic_ledgers_retention_trims(broker):
    send(broker, ("a", b"a1"), ("a", b"a2"), ("b", b"b1"))
    broker.topics.compact(T)
    sub = broker.subscription(T, "s")
    sub.create("Earliest")
    sub.clear_backlog()
    broker.policies.update_setting("managedLedgerMaxEntriesPerLedger", "1")
    send(broker, ("c", b"c1"))
    broker.chores.enforce_policies()  # retention: the acked ledgers go
    assert read_all(broker, compacted=False) == [("c", b"c1")]  # the old ledgers are gone
    assert read_all(broker) == [("a", b"a2"), ("b", b"b1"), ("c", b"c1")]


def test_a_compacted_durable_subscription_skips_what_compaction_left_out(broker, store_path,
                                                                            clock):
    client = Client(store_path, clock=clock)
    try:
        c = client.subscribe(T, "tv", is_read_compacted=True)
        c.close()
        send(broker, ("k", b"v0"), ("k", b"v1"), ("j", b"w0"))
        broker.topics.compact(T)
        c = client.subscribe(T, "tv", is_read_compacted=True)
        got = [c.receive(1000).data() for _ in range(2)]
        assert got == [b"v1", b"w0"]
        with pytest.raises(InvalidValue, match="exclusive or failover"):
            client.subscribe(T, "shared", consumer_type=__import__("pulsarctl").client.ConsumerType.Shared,
                             is_read_compacted=True)
        r = client.create_reader(T, MessageId.earliest, is_read_compacted=True)
        assert [r.read_next(1000).data() for _ in range(2)] == [b"v1", b"w0"]
    finally:
        client.close()


def test_deleting_the_topic_deletes_its_copy(broker):
    send(broker, ("a", b"a1"))
    broker.topics.compact(T)
    broker.topics.delete(T, force=True)
    send(broker, ("z", b"z1"))
    assert broker.topics.compaction_status(T) == {"status": "NOT_RUN", "lastError": ""}
    assert read_all(broker) == [("z", b"z1")]


def test_partitioned_and_non_persistent_topics_are_refused(broker):
    broker.topics.create_partitioned("persistent://public/default/pt", 2)
    with pytest.raises(InvalidValue):
        broker.topics.compact("persistent://public/default/pt")
