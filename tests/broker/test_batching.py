"""Producer batching (issue 7, item 2; pulsar-semantics.md §1, §6.2, §9.1, §10, §11.1, §11.3,
§11.6): batch entries, batch indexes in message ids, backlog in entries, partial acks kept
durably (and acknowledgmentAtBatchIndexLevelEnabled), cumulative acks inside a batch, key-based
batching for Key_Shared, delayed messages never batched, deduplication by first/highest sequence
id, dead letters one per index, compression of the whole batch, the CLI's flags and errors.
Real LMDB in tmp_path; a simulated clock, never a sleep for a timer."""
from __future__ import annotations

import json

import pytest

import pulsarctl
from pulsarctl.broker import Broker, batches, unpack
from pulsarctl.client.client import BatchingType, ConsumerDeadLetterPolicy
from pulsarctl.errors import InvalidValue, MessageNotFound
from pulsarctl.entries import F_HIGHEST_SEQUENCE_ID, F_NUM_MESSAGES
from pulsarctl.messages import MessageId, OutgoingMessage, parse_message_id
from pulsarctl.names import parse_topic

from cli_helpers import assert_error, ok, pjson, rows

LEASE = 600_000
INDEX_LEVEL = "acknowledgmentAtBatchIndexLevelEnabled"


# -- helpers ---------------------------------------------------------------------------------
def msgs(n, prefix="m", **kw):
    return [OutgoingMessage(f"{prefix}{i}".encode(), **kw) for i in range(n)]


def publish(broker, topic, messages, max_messages=1000, key_based=False, **kw):
    return broker.publish(topic, messages, batching=batches.Spec(max_messages, 128 * 1024,
                                                                key_based), **kw)[1]


def sub(broker, topic, s, consumer, typ="Shared", fetch=0, settings=None):
    return broker.subscribe(topic, s, consumer, typ, "Earliest", lease_ms=LEASE, fetch=fetch,
                            settings=settings)[1]


def sub_stats(broker, topic, s):
    return broker.topics.stats(topic)["subscriptions"][s]


def ids(messages):
    return [str(m.message_id()) for m in messages]


def read_all(broker, topic):
    return broker.read_entries(topic, None, 10_000, after_id=MessageId.earliest)[0]


def entry(broker, topic, mid: MessageId) -> list:
    """The stored (decoded) entry of a message id."""
    from store import codec
    from pulsarctl.broker import subscriptions as subs, topics

    def run(ctx):
        info = topics.require(ctx, parse_topic(topic))
        return codec.decode(ctx.ledgers.read(ctx.txn, info, subs.offset_of(ctx, info, mid)))
    return broker._read(run)


# -- the entry and its ids -------------------------------------------------------------------
def test_a_batch_is_one_entry_and_its_messages_carry_batch_indexes(broker):
    out = [OutgoingMessage(f"m{i}".encode(), {"i": str(i)}, f"k{i}", f"o{i}".encode(), 1000 + i)
           for i in range(4)]
    got = publish(broker, "t", out)
    assert [str(i) for i in got] == ["1:0:-1:0", "1:0:-1:1", "1:0:-1:2", "1:0:-1:3"]
    rec = entry(broker, "t", got[0])
    # Entry-level metadata: first sequence id, the first message's key, the count, the highest.
    assert rec[2] == 0 and rec[5] == "k0" and rec[6] == b"o0"
    assert rec[F_NUM_MESSAGES] == 4 and rec[F_HIGHEST_SEQUENCE_ID] == 3
    read = read_all(broker, "t")
    assert ids(read) == [str(i) for i in got]
    assert [m.data() for m in read] == [b"m0", b"m1", b"m2", b"m3"]
    assert [m.properties() for m in read] == [{"i": str(i)} for i in range(4)]
    assert [m.partition_key() for m in read] == ["k0", "k1", "k2", "k3"]
    assert [m.ordering_key() for m in read] == [b"o0", b"o1", b"o2", b"o3"]
    assert [m.event_timestamp() for m in read] == [1000, 1001, 1002, 1003]
    assert [m.sequence_id for m in read] == [0, 1, 2, 3]
    assert len({m.publish_timestamp() for m in read}) == 1
    assert parse_message_id("1:0:-1:2").batch_index == 2


def test_unpack_records_gives_records_and_indexes_for_plain_and_batch_entries(broker):
    publish(broker, "t", msgs(3))
    broker.publish("t", msgs(1, "solo"))
    batch = entry(broker, "t", MessageId(1, 0))
    plain = entry(broker, "t", MessageId(1, 1))
    got = unpack.records(batch)
    assert [i for i, _r in got] == [0, 1, 2]
    assert [r[3] for _i, r in got] == [b"m0", b"m1", b"m2"]
    assert [r[2] for _i, r in got] == [0, 1, 2]  # each message's own sequence id
    assert unpack.records(plain) == [(-1, plain)]


def test_batches_split_by_count_and_bytes_and_a_batch_of_one_is_plain(broker):
    got = publish(broker, "t", msgs(5), max_messages=2)
    assert [str(i) for i in got] == ["1:0:-1:0", "1:0:-1:1", "1:1:-1:0", "1:1:-1:1", "1:2:-1"]
    spec = batches.Spec(1000, 10, False)
    by_bytes = broker.publish("b", [OutgoingMessage(b"x" * 6) for _ in range(4)], batching=spec)[1]
    assert [str(i) for i in by_bytes] == ["2:0:-1", "2:1:-1", "2:2:-1", "2:3:-1"]
    spec = batches.Spec(1000, 12, False)
    by_bytes = broker.publish("c", [OutgoingMessage(b"x" * 6) for _ in range(4)], batching=spec)[1]
    assert [str(i) for i in by_bytes] == ["3:0:-1:0", "3:0:-1:1", "3:1:-1:0", "3:1:-1:1"]


def test_backlog_counts_entries_and_msg_in_counter_counts_messages(broker):
    sub(broker, "t", "s", "c")
    publish(broker, "t", msgs(10), max_messages=4)
    st = broker.topics.stats("t")
    assert st["subscriptions"]["s"]["msgBacklog"] == 3  # 4 + 4 + 2
    assert st["msgInCounter"] == 10
    assert broker.topics.internal_stats("t")["entriesAddedCounter"] == 3


def test_the_python_api_batches_send_async_and_send_goes_alone(store_path, clock):
    client = pulsarctl.Client(broker=Broker(store_path, clock))
    # A publish delay longer than the test: batches close by count, not by the flusher.
    p = client.create_producer("t", batching_enabled=True, batching_max_messages=3,
                               batching_max_publish_delay_ms=60_000)
    got = []
    for i in range(4):
        p.send_async(f"a{i}".encode(), lambda res, mid: got.append(str(mid)))
    p.flush()
    assert got == ["1:0:-1:0", "1:0:-1:1", "1:0:-1:2", "1:1:-1"]
    assert str(p.send(b"alone")) == "1:2:-1"
    plain = client.create_producer("t")  # batching is off by default, as in pulsar-client
    sent = []
    for i in range(3):
        plain.send_async(b"x", lambda res, mid: sent.append(str(mid)))
    plain.flush()  # sends what the flusher has not, and waits for every callback
    assert sent == ["1:3:-1", "1:4:-1", "1:5:-1"]
    client.close()


def _collector(n):
    """A send_async callback that records (result, id) and an Event set after n calls."""
    import threading

    got, done = [], threading.Event()

    def cb(res, mid):
        got.append((res, None if mid is None else str(mid), threading.current_thread().name))
        if len(got) >= n:
            done.set()
    return got, done, cb


def test_send_async_is_sent_when_the_publish_delay_runs_out_without_a_flush(store_path, clock):
    """As pulsar-client's batch timer: the callbacks come from the producer's own thread once
    the delay has passed; nobody calls flush()."""
    client = pulsarctl.Client(broker=Broker(store_path, clock))
    p = client.create_producer("t", batching_enabled=True, batching_max_publish_delay_ms=20)
    got, done, cb = _collector(3)
    for i in range(3):
        p.send_async(f"m{i}".encode(), cb)
    assert done.wait(10), "the batch was never sent"
    assert [g[:2] for g in got] == [("Ok", f"1:0:-1:{i}") for i in range(3)]
    assert all(g[2].startswith("pulsarctl-producer-") for g in got)
    assert [m.data() for m in read_all(client.broker, "t")] == [b"m0", b"m1", b"m2"]
    client.close()


def test_send_async_without_batching_goes_at_once(store_path, clock):
    client = pulsarctl.Client(broker=Broker(store_path, clock))
    p = client.create_producer("t")
    got, done, cb = _collector(1)
    p.send_async(b"x", cb)
    assert done.wait(10)
    assert got[0][:2] == ("Ok", "1:0:-1")
    client.close()


def test_a_failed_async_send_reaches_its_callback(store_path, clock):
    broker = Broker(store_path, clock)
    broker.policies.update_setting("maxMessageSize", "100")
    client = pulsarctl.Client(broker=broker)
    p = client.create_producer("t", batching_enabled=True, batching_max_publish_delay_ms=5)
    got, done, cb = _collector(1)
    p.send_async(b"x" * 500, cb)
    assert done.wait(10)
    assert got[0][:2] == ("MessageTooLarge", None)
    assert not broker.topics.exists("t") or read_all(broker, "t") == []
    p.send_async(b"fine", cb)  # the producer goes on
    p.flush()
    assert got[-1][:2] == ("Ok", "1:0:-1")
    client.close()


def test_async_sends_keep_their_order_while_the_flusher_runs(store_path, clock):
    client = pulsarctl.Client(broker=Broker(store_path, clock))
    p = client.create_producer("t", batching_enabled=True, batching_max_publish_delay_ms=1,
                               batching_max_messages=7)
    got, done, cb = _collector(300)
    for i in range(300):
        p.send_async(b"%d" % i, cb)
    assert done.wait(30)
    ids = [parse_message_id(g[1]) for g in got]
    assert ids == sorted(ids) and len(set(ids)) == 300
    assert [m.data() for m in read_all(client.broker, "t")] == [b"%d" % i for i in range(300)]
    client.close()


def test_close_sends_the_rest_and_stops_the_flusher(store_path, clock):
    import threading

    client = pulsarctl.Client(broker=Broker(store_path, clock))
    p = client.create_producer("t", batching_enabled=True, batching_max_publish_delay_ms=60_000)
    got, done, cb = _collector(2)
    p.send_async(b"a", cb)
    p.send_async(b"b", cb)
    flusher = p._flusher
    assert flusher is not None and flusher.is_alive() and not done.is_set()
    p.close()
    assert done.is_set() and [g[1] for g in got] == ["1:0:-1:0", "1:0:-1:1"]
    assert not flusher.is_alive()
    assert not any(t.name.startswith("pulsarctl-producer-") for t in threading.enumerate())
    client.close()


def test_the_python_api_checks_batching_settings(store_path, clock):
    client = pulsarctl.Client(broker=Broker(store_path, clock))
    for kw in ({"batching_max_messages": 1}, {"batching_max_messages": 0},
               {"batching_max_allowed_size_in_bytes": -1},
               {"batching_max_publish_delay_ms": -5}, {"batching_type": "bogus"},
               {"batching_max_messages": 10**9}):
        with pytest.raises(InvalidValue):
            client.create_producer("t", batching_enabled=True, **kw)
    with pytest.raises(InvalidValue, match="can't be enabled together"):
        client.create_producer("t", batching_enabled=True, chunking_enabled=True)
    client.close()


def test_the_python_api_key_based_batcher_and_a_consumer(store_path, clock):
    client = pulsarctl.Client(broker=Broker(store_path, clock))
    p = client.create_producer("t", batching_enabled=True, batching_max_publish_delay_ms=60_000,
                               batching_type=BatchingType.KeyBased)
    for i in range(6):
        p.send_async(f"m{i}".encode(), partition_key=f"k{i % 2}")
    got = p.flush()
    assert [(i.entry_id, i.batch_index) for i in got] == [(0, 0), (1, 0), (0, 1), (1, 1),
                                                          (0, 2), (1, 2)]
    policy = ConsumerDeadLetterPolicy(1)
    c = client.subscribe("t", "s", pulsarctl.ConsumerType.Shared,
                         pulsarctl.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=100,
                         dead_letter_policy=policy)
    first = [c.receive(1000) for _ in range(6)]
    assert [m.data() for m in first] == [b"m0", b"m2", b"m4", b"m1", b"m3", b"m5"]
    for m in first[:3]:
        c.acknowledge(m)
    c.negative_acknowledge(first[3])
    clock.advance(1000)
    again = [c.receive(1000) for _ in range(3)]
    assert [m.data() for m in again] == [b"m1", b"m3", b"m5"]
    assert [m.redelivery_count() for m in again] == [1, 1, 1]
    for m in again:
        c.acknowledge(m)
    c.close()
    assert sub_stats(client.broker, "t", "s")["msgBacklog"] == 0
    client.close()


# -- acknowledgement ---------------------------------------------------------------------------
def test_acking_some_indexes_keeps_the_entry_and_all_of_them_acks_it(broker):
    sub(broker, "t", "s", "c")
    got = publish(broker, "t", msgs(3))
    assert len(broker.fetch("t", "s", "c", 10)) == 3
    assert broker.ack("t", "s", got[:2]) == 2
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 1
    assert broker.ack("t", "s", got[:2]) == 0  # already acked: a no-op
    assert broker.ack("t", "s", got[2:]) == 1
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 0


def test_an_index_the_batch_does_not_have_names_no_message(broker):
    sub(broker, "t", "s", "c")
    publish(broker, "t", msgs(3))
    broker.publish("t", msgs(1))
    with pytest.raises(MessageNotFound):
        broker.ack("t", "s", [MessageId(1, 0, -1, 0), MessageId(1, 0, -1, 3)])
    with pytest.raises(MessageNotFound):
        broker.ack("t", "s", [MessageId(1, 1, -1, 1)])  # a plain entry has no index 1
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 2  # nothing was acked


def _partial_then_nack(store_path, clock, index_level: bool):
    """Receive a batch of 3, ack index 0, nack index 1 — each in its own Broker, as separate
    commands would — then let the nack delay run out and fetch again."""
    b = Broker(store_path, clock)
    if index_level:
        b.policies.update_setting(INDEX_LEVEL, "true")
    sub(b, "t", "s", "c", settings={"negativeAckRedeliveryDelayMs": 1000})
    got = publish(b, "t", msgs(3))
    assert ids(b.fetch("t", "s", "c", 10)) == [str(i) for i in got]
    b.close()
    b = Broker(store_path, clock)
    assert b.ack("t", "s", [got[0]]) == 1
    b.close()
    b = Broker(store_path, clock)
    assert b.nack("t", "s", [got[1]]) == 1
    b.close()
    clock.advance(1500)
    b = Broker(store_path, clock)
    again = b.fetch("t", "s", "c", 10)
    backlog = sub_stats(b, "t", "s")["msgBacklog"]
    b.close()
    return got, again, backlog


def test_a_nack_in_a_batch_redelivers_the_whole_batch(store_path, clock):
    got, again, backlog = _partial_then_nack(store_path, clock, index_level=False)
    assert ids(again) == [str(i) for i in got]  # index 0 too: its ack was for the old delivery
    assert [m.redelivery_count() for m in again] == [1, 1, 1]
    assert backlog == 1


def test_with_batch_index_acks_only_the_unacked_indexes_come_back(store_path, clock):
    got, again, backlog = _partial_then_nack(store_path, clock, index_level=True)
    assert ids(again) == [str(i) for i in got[1:]]
    assert backlog == 1
    b = Broker(store_path, clock)
    assert b.ack("t", "s", got[1:]) == 2
    assert sub_stats(b, "t", "s")["msgBacklog"] == 0
    b.close()


def test_without_batch_index_acks_a_redelivery_needs_every_index_again(store_path, clock):
    got, again, _ = _partial_then_nack(store_path, clock, index_level=False)
    b = Broker(store_path, clock)
    b.ack("t", "s", got[1:])
    assert sub_stats(b, "t", "s")["msgBacklog"] == 1  # index 0 of this delivery is not acked
    b.ack("t", "s", got[:1])
    assert sub_stats(b, "t", "s")["msgBacklog"] == 0
    b.close()


def test_ack_timeout_redelivers_the_whole_batch(broker, clock):
    sub(broker, "t", "s", "c", settings={"ackTimeoutMs": 2000})
    got = publish(broker, "t", msgs(2))
    broker.fetch("t", "s", "c", 10)
    broker.ack("t", "s", got[:1])
    clock.advance(3500)
    assert broker.chores.fire_due() == 1  # one entry
    assert ids(broker.fetch("t", "s", "c", 10)) == [str(i) for i in got]


def test_cumulative_ack_inside_a_batch(broker):
    broker.subscribe("t", "s", "c", "Exclusive", "Earliest", lease_ms=LEASE)
    a = publish(broker, "t", msgs(3, "a"))
    b = publish(broker, "t", msgs(3, "b"))
    broker.fetch("t", "s", "c", 10)
    broker.ack("t", "s", [b[1]], cumulative=True)
    st = sub_stats(broker, "t", "s")
    assert st["msgBacklog"] == 1  # batch a acked, b acked up to index 1
    assert broker.topics.internal_stats("t")["cursors"]["s"]["markDeletePosition"] == "1:0"
    broker.ack("t", "s", [b[2]])
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 0


def test_cumulative_ack_of_a_batchs_last_index_acks_the_entry(broker):
    broker.subscribe("t", "s", "c", "Failover", "Earliest", lease_ms=LEASE)
    got = publish(broker, "t", msgs(3))
    broker.publish("t", msgs(1, "after"))
    broker.fetch("t", "s", "c", 10)
    broker.ack("t", "s", [got[2]], cumulative=True)
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 1


# -- the unacked-message limits count messages ------------------------------------------------
def _limits(broker, per_consumer=0, per_subscription=0):
    from pulsarctl.broker import policies as P

    if per_consumer:
        broker.policies.set("topic", "t", P.MAX_UNACKED_CONSUMER, per_consumer)
    if per_subscription:
        broker.policies.set("topic", "t", P.MAX_UNACKED_SUBSCRIPTION, per_subscription)


def test_max_unacked_per_consumer_counts_the_messages_of_batches(broker):
    """As Pulsar's Consumer.addAndGetUnAckedMsgs: a batch adds its message count. Ten batches of
    four with a limit of 10: the fetch that reaches 10 (three whole batches) blocks the
    consumer; acking two batches brings it to 4, at most half, and unblocks it."""
    sub(broker, "t", "s", "c1")
    sub(broker, "t", "s", "c2")
    for i in range(10):
        publish(broker, "t", msgs(4, prefix=f"b{i}-"))
    _limits(broker, per_consumer=10)
    got = broker.fetch("t", "s", "c1", 100)
    assert len(got) == 12
    assert sub_stats(broker, "t", "s")["unackedMessages"] == 12
    assert broker.fetch("t", "s", "c1", 100) == []         # blocked: 12 >= 10
    assert len(broker.fetch("t", "s", "c2", 4)) == 4       # its own count
    assert broker.ack("t", "s", [m.message_id() for m in got[:8]]) == 8  # 4 left
    again = broker.fetch("t", "s", "c1", 100)
    assert 0 < len(again) and len(again) % 4 == 0
    assert broker.fetch("t", "s", "c1", 100) == []


def test_max_unacked_per_subscription_counts_the_messages_of_batches(broker):
    sub(broker, "t", "s", "c1")
    sub(broker, "t", "s", "c2")
    for i in range(5):
        publish(broker, "t", msgs(4, prefix=f"b{i}-"))
    _limits(broker, per_subscription=8)
    assert len(broker.fetch("t", "s", "c1", 8)) == 8
    assert broker.fetch("t", "s", "c2", 100) == []         # the subscription holds 8


def test_index_acks_lower_the_count_only_at_index_level(store_path, clock):
    for level in (False, True):
        b = Broker(store_path + ("-on" if level else "-off"), clock)
        if level:
            b.policies.update_setting(INDEX_LEVEL, "true")
        sub(b, "t", "s", "c1")
        got = publish(b, "t", msgs(4, prefix="a")) + publish(b, "t", msgs(4, prefix="b"))
        _limits(b, per_consumer=8)
        assert len(b.fetch("t", "s", "c1", 100)) == 8      # blocked at 8
        publish(b, "t", msgs(4, prefix="c"))
        b.ack("t", "s", got[:2] + got[4:6])                 # two indexes of each batch
        # Index level: 4 left, at most half of 8: unblocked. Otherwise the batches still
        # count whole until all their indexes are acked, as the client's acker sends nothing.
        assert len(b.fetch("t", "s", "c1", 100)) == (4 if level else 0)
        b.close()


def test_max_unacked_on_key_shared_counts_batch_messages(broker):
    sub(broker, "t", "s", "c1", typ="Key_Shared")
    sub(broker, "t", "s", "c2", typ="Key_Shared")
    for i in range(6):
        publish(broker, "t", msgs(3, prefix=f"b{i}-", key="k"), key_based=True)
    _limits(broker, per_consumer=5)
    got = broker.fetch("t", "s", "c1", 100) or broker.fetch("t", "s", "c2", 100)
    assert len(got) == 6                                   # two batches of three: 6 >= 5
    assert broker.fetch("t", "s", "c1", 100) == [] and broker.fetch("t", "s", "c2", 100) == []


def test_a_nack_keeps_the_batch_size_in_the_pending_record(broker):
    """A nack rewrites the pending record (marked nacked); the batch must still count its
    four messages until it is redelivered, or the consumer would be let through early."""
    sub(broker, "t", "s", "c1", settings={"negativeAckRedeliveryDelayMs": 60_000})
    a = publish(broker, "t", msgs(4))
    b = publish(broker, "t", msgs(4, prefix="x"))
    _limits(broker, per_consumer=8)
    assert len(broker.fetch("t", "s", "c1", 100)) == 8     # blocked at 8
    assert broker.nack("t", "s", a[:1] + b[:1]) == 2
    assert sub_stats(broker, "t", "s")["unackedMessages"] == 8
    publish(broker, "t", msgs(4, prefix="y"))
    assert broker.fetch("t", "s", "c1", 100) == []         # still 8 unacked, not 2


# -- Key_Shared, delayed messages, deduplication -------------------------------------------
def _key_shared_owners(broker, topic, key_based):
    sub(broker, topic, "ks", "c1", "Key_Shared")
    sub(broker, topic, "ks", "c2", "Key_Shared")
    keys = [f"key-{i % 6}" for i in range(24)]
    publish(broker, topic, [OutgoingMessage(f"m{i}".encode(), key=k) for i, k in enumerate(keys)],
            key_based=key_based)
    seen: dict = {}
    for name in ("c1", "c2"):
        for m in broker.fetch(topic, "ks", name, 1000):
            seen.setdefault(m.partition_key(), set()).add(name)
    return seen


def test_key_based_batching_keeps_each_key_on_one_key_shared_consumer(broker):
    seen = _key_shared_owners(broker, "kb", key_based=True)
    assert len(seen) == 6 and all(len(v) == 1 for v in seen.values())
    assert len({next(iter(v)) for v in seen.values()}) == 2  # both consumers got keys
    for m in read_all(broker, "kb"):  # every entry holds one key
        assert entry(broker, "kb", m.message_id())[5] == m.partition_key()


def test_the_default_batcher_dispatches_a_batch_by_its_first_key(broker):
    seen = _key_shared_owners(broker, "db", key_based=False)
    # One entry, keyed by its first message: one consumer gets every key.
    assert {frozenset(v) for v in seen.values()} in ({frozenset({"c1"})}, {frozenset({"c2"})})
    assert entry(broker, "db", MessageId(1, 0))[5] == "key-0"


def test_delayed_messages_are_never_batched(broker, clock):
    out = msgs(2, "now") + [OutgoingMessage(b"later", deliver_at=clock.now_ms() + 60_000)] + \
        msgs(2, "again")
    got = publish(broker, "t", out)
    assert [str(i) for i in got] == ["1:0:-1:0", "1:0:-1:1", "1:1:-1", "1:2:-1:0", "1:2:-1:1"]
    sub(broker, "t", "s", "c")
    assert [m.data() for m in broker.fetch("t", "s", "c", 10)] == [b"now0", b"now1", b"again0",
                                                                    b"again1"]


def test_deduplication_judges_a_batch_by_its_first_sequence_id(broker):
    from pulsarctl.broker import policies

    broker.topics.create("t")
    broker.policies.set("topic", "t", policies.DEDUP, True)
    first = [OutgoingMessage(b"x", sequence_id=s) for s in range(5)]
    assert all(i.batch_index >= 0 for i in publish(broker, "t", first, producer_name="p"))
    # First sequence id 3 <= highest stored 4: the whole batch is a duplicate.
    dup = publish(broker, "t", [OutgoingMessage(b"y", sequence_id=s) for s in range(3, 8)],
                  producer_name="p")
    assert [str(i) for i in dup] == ["-1:-1:-1"] * 5
    # First 5 > 4: stored whole, even if it repeated some; the highest (9) is recorded.
    new = publish(broker, "t", [OutgoingMessage(b"z", sequence_id=s) for s in range(5, 10)],
                  producer_name="p")
    assert all(i.ledger_id >= 0 for i in new)
    again = publish(broker, "t", [OutgoingMessage(b"w", sequence_id=s) for s in (9, 10)],
                    producer_name="p")
    assert [str(i) for i in again] == ["-1:-1:-1"] * 2
    assert broker.topics.stats("t")["msgInCounter"] == 10


# -- dead letters, retry, compression ----------------------------------------------------------
def test_a_dead_lettered_batch_is_one_dead_letter_per_index(broker, clock):
    settings = {"negativeAckRedeliveryDelayMs": 1000, "maxRedeliverCount": 1}
    sub(broker, "t", "s", "c", settings=settings)
    got = publish(broker, "t", [OutgoingMessage(f"m{i}".encode(), {"p": str(i)}, f"k{i}")
                                for i in range(3)])
    for _ in range(2):
        fetched = broker.fetch("t", "s", "c", 10)
        assert ids(fetched) == [str(i) for i in got]
        broker.nack("t", "s", [fetched[1].message_id()])
        clock.advance(1500)
        broker.chores.fire_due()
    assert broker.fetch("t", "s", "c", 10) == []
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 0
    dead = read_all(broker, "t-s-DLQ")
    assert [m.data() for m in dead] == [b"m0", b"m1", b"m2"]
    assert [m.properties()["ORIGIN_MESSAGE_ID"] for m in dead] == [str(i) for i in got]
    assert [m.partition_key() for m in dead] == ["k0", "k1", "k2"]
    assert [m.properties()["p"] for m in dead] == ["0", "1", "2"]
    assert all(m.message_id().batch_index == -1 for m in dead)  # the DLQ producer never batches


def test_reconsume_later_moves_one_message_of_a_batch(broker):
    full = "persistent://public/default/"
    sub(broker, "t", "s", "c", settings={"enableRetry": True, "maxRedeliverCount": 3,
                                          "retryLetterTopic": full + "t-s-RETRY",
                                          "deadLetterTopic": full + "t-s-DLQ"})
    got = publish(broker, "t", msgs(3))
    broker.fetch("t", "s", "c", 10)
    assert broker.reconsume_later("t", "s", [got[1]], 0) == {"retry": 1, "dlq": 0}
    retried = read_all(broker, "t-s-RETRY")
    assert [m.data() for m in retried] == [b"m1"]
    assert retried[0].properties()["ORIGIN_MESSAGE_ID"] == str(got[1])
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 1
    broker.ack("t", "s", [got[0], got[2]])
    assert sub_stats(broker, "t", "s")["msgBacklog"] == 0


@pytest.mark.parametrize("codec", ["lz4", "zlib", "zstd", "snappy"])
def test_a_compressed_batch_round_trips(store_path, clock, codec):
    from pulsarctl.compression import CODES

    client = pulsarctl.Client(broker=Broker(store_path, clock))
    # The publish delay is long: flush() sends the one batch, however slow the machine is
    # (with the default 10 ms a busy machine let the delay split it in two).
    p = client.create_producer("t", batching_enabled=True, compression_type=codec,
                               batching_max_publish_delay_ms=60_000)
    body = [(json.dumps({"order": i, "status": "paid"}) * 5).encode() for i in range(50)]
    for b in body:
        p.send_async(b)
    got = p.flush()
    assert {i.entry_id for i in got} == {0} and got[-1].batch_index == 49
    rec = entry(client.broker, "t", got[0])
    assert rec[9] == CODES[codec] and len(rec[3]) < rec[10] < sum(map(len, body)) + 2000
    r = client.create_reader("t", MessageId.earliest)
    assert [r.read_next(1000).data() for _ in body] == body
    st = client.broker.topics.internal_stats("t")
    assert st["totalSize"] < sum(map(len, body)) / 4
    client.close()


def test_a_batch_over_max_message_size_is_split(broker):
    broker.policies.update_setting("maxMessageSize", "1000")
    # 5 payloads of 199 bytes fill a batch (995 <= 1000), but serialized they are over 1000.
    got = broker.publish("t", [OutgoingMessage(b"x" * 199) for _ in range(10)],
                         batching=batches.Spec(1000, 0, False))[1]
    assert len({i.entry_id for i in got}) == 4
    assert all(len(entry(broker, "t", i)[3]) <= 1000 for i in got)
    assert [m.data() for m in read_all(broker, "t")] == [b"x" * 199] * 10


def test_partitioned_topics_batch_per_partition(broker):
    broker.topics.create_partitioned("pt", 3)
    out = [OutgoingMessage(f"m{i}".encode(), key=f"k{i % 3}") for i in range(9)]
    got = publish(broker, "pt", out)
    by_part: dict = {}
    for mid in got:
        by_part.setdefault(mid.partition, set()).add((mid.ledger_id, mid.entry_id))
    assert all(len(e) == 1 for e in by_part.values())  # one batch entry per partition
    assert all(mid.batch_index >= 0 for mid in got)


# -- readers, peek, admin views -----------------------------------------------------------------
def test_a_reader_starts_inside_a_batch(broker):
    got = publish(broker, "t", msgs(4))
    r, _n, _l = broker.read_entries("t", None, 10, after_id=got[1])
    assert ids(r) == [str(i) for i in got[2:]]
    r, _n, _l = broker.read_entries("t", None, 10, after_id=got[1], inclusive=True)
    assert ids(r) == [str(i) for i in got[1:]]


def test_peek_shows_batch_indexes_and_skips_acked_ones(broker):
    sub(broker, "t", "s", "c")
    got = publish(broker, "t", msgs(3))
    assert ids(broker.subscription("t", "s").peek(2)) == [str(i) for i in got[:2]]
    broker.ack("t", "s", [got[0]])
    assert ids(broker.subscription("t", "s").peek(10)) == [str(i) for i in got[1:]]


def test_admin_views_of_a_batch_show_its_first_message(broker):
    got = publish(broker, "t", msgs(3))
    assert str(broker.topics.get_message_by_id("t", 1, 0).message_id()) == str(got[0])
    assert broker.topics.examine_message("t", "earliest", 1).data() == b"m0"


# -- the command line --------------------------------------------------------------------------
def test_cli_stdin_batches_by_default_and_db_disables_it(cli):
    r = ok(cli("produce", "t", "--stdin", input="a\nb\nc\n"))
    assert r.stdout.split() == ["1:0:-1:0", "1:0:-1:1", "1:0:-1:2"]
    r = ok(cli("produce", "t", "--stdin", "-db", input="d\ne\n"))
    assert r.stdout.split() == ["1:1:-1", "1:2:-1"]
    r = ok(cli("produce", "t", "-m", "f", "-m", "g"))  # sent one by one, as pulsar-client does
    assert r.stdout.split() == ["1:3:-1", "1:4:-1"]
    r = ok(cli("produce", "t", "-m", "h", "-m", "i", "-m", "j", "--batching-max-messages", "2"))
    assert r.stdout.split() == ["1:5:-1:0", "1:5:-1:1", "1:6:-1"]
    st = pjson(cli("topics", "stats", "t", "-o", "json"))
    assert st["msgInCounter"] == 10
    assert pjson(cli("topics", "stats-internal", "t", "-o", "json"))["entriesAddedCounter"] == 7


def test_cli_batching_flags(cli):
    r = ok(cli("produce", "t", "--stdin", "--batching-max-bytes", "4", input="aa\nbb\ncc\n"))
    assert r.stdout.split() == ["1:0:-1:0", "1:0:-1:1", "1:1:-1"]
    r = ok(cli("produce", "k", "--stdin", "--ndjson", "--batching-type", "key-based",
               input="".join(json.dumps({"payload": f"p{i}", "key": f"k{i % 2}"}) + "\n"
                             for i in range(4))))
    assert r.stdout.split() == ["2:0:-1:0", "2:1:-1:0", "2:0:-1:1", "2:1:-1:1"]
    r = ok(cli("produce", "t", "--stdin", "--batching-max-publish-delay", "0", input="x\ny\n"))
    assert r.stdout.split() == ["1:2:-1:0", "1:2:-1:1"]  # arrived together


@pytest.mark.parametrize("args", [
    ("--batching-max-messages", "0"), ("--batching-max-messages", "1"),
    ("--batching-max-messages", "-3"), ("--batching-max-messages", "99999999999"),
    ("--batching-max-bytes", "-1"), ("--batching-max-bytes", "lots"),
    ("--batching-max-bytes", "3T"), ("--batching-max-publish-delay", "-1s"),
    ("--batching-max-publish-delay", "2d"), ("--batching-max-publish-delay", "soon"),
    ("--batching-type", "by-color"),
    ("-c", "--batching-max-messages", "10"),
])
def test_cli_batching_errors_are_one_line_exit_2(cli, args):
    line = assert_error(cli("produce", "t", "--stdin", *args, input="a\n"), 2)
    assert "batch" in line.lower()


def test_cli_chunking_turns_batching_off(cli):
    r = ok(cli("produce", "t", "--stdin", "-c", input="a\nb\n"))
    assert r.stdout.split() == ["1:0:-1", "1:1:-1"]


def test_cli_read_peek_and_consume_show_batch_indexes(cli):
    ok(cli("topics", "create-subscription", "t", "-s", "s", "-m", "earliest"))
    ok(cli("produce", "t", "--stdin", input="a\nb\nc\n"))
    got = rows(ok(cli("read", "t", "-m", "earliest", "-n", "3", "-o", "ndjson")).stdout)
    assert [r["messageId"] for r in got] == ["1:0:-1:0", "1:0:-1:1", "1:0:-1:2"]
    got = rows(ok(cli("read", "t", "-m", "1:0:-1:0", "-n", "2", "-o", "ndjson")).stdout)
    assert [r["payload"] for r in got] == ["b", "c"]
    peek = pjson(cli("topics", "peek-messages", "t", "-s", "s", "-n", "2", "-o", "json"))
    assert [r["messageId"] for r in peek] == ["1:0:-1:0", "1:0:-1:1"]
    st = pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]
    assert st["msgBacklog"] == 1
    got = rows(ok(cli("consume", "t", "-s", "s", "-n", "3", "-o", "ndjson")).stdout)
    assert [r["payload"] for r in got] == ["a", "b", "c"]
    st = pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]
    assert st["msgBacklog"] == 0


@pytest.mark.parametrize("typ", ["Shared", "Exclusive", "Key_Shared"])
def test_cli_receive_continues_a_batch_and_acks_in_another_command(cli, typ):
    ok(cli("topics", "create-subscription", "t", "-s", "s", "-m", "earliest"))
    ok(cli("produce", "t", "--stdin", input="a\nb\nc\n"))
    seen = []
    for _ in range(3):
        r = rows(ok(cli("receive", "t", "-s", "s", "-t", typ, "-o", "ndjson")).stdout)
        seen += [x["messageId"] for x in r]
    assert seen == ["1:0:-1:0", "1:0:-1:1", "1:0:-1:2"]
    ok(cli("ack", "t", "-s", "s", "1:0:-1:0", "1:0:-1:2"))
    assert pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]["msgBacklog"] == 1
    r = ok(cli("ack", "t", "-s", "s", "1:0:-1:1"))
    assert "acked 1 message" in r.stderr
    assert pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]["msgBacklog"] == 0
    assert_error(cli("ack", "t", "-s", "s", "1:0:-1:7"), 3)


def test_cli_batch_index_acks_setting_across_commands(cli):
    ok(cli("brokers", "update-dynamic-config", "--config", INDEX_LEVEL, "--value", "true"))
    ok(cli("topics", "create-subscription", "t", "-s", "s", "-m", "earliest"))
    ok(cli("produce", "t", "--stdin", input="a\nb\nc\n"))
    r = rows(ok(cli("receive", "t", "-s", "s", "-t", "Shared", "-n", "3", "-o", "ndjson")).stdout)
    assert len(r) == 3
    ok(cli("ack", "t", "-s", "s", "1:0:-1:0"))
    ok(cli("redeliver-unacked", "t", "-s", "s"))
    r = rows(ok(cli("receive", "t", "-s", "s", "-t", "Shared", "-n", "3", "--idle-timeout",
                    "200ms", "-o", "ndjson")).stdout)
    assert [x["messageId"] for x in r] == ["1:0:-1:1", "1:0:-1:2"]


def test_dlq_commands_handle_a_batched_dead_letter_topic_message_by_message(cli, tmp_path):
    ok(cli("produce", "d-s-DLQ", "--stdin", "-p", "REAL_TOPIC=persistent://public/default/d",
           input="x\ny\nz\n"))
    peek = rows(ok(cli("dlq", "peek", "d-s-DLQ", "-o", "ndjson")).stdout)
    assert [r["messageId"] for r in peek] == ["1:0:-1:0", "1:0:-1:1", "1:0:-1:2"]
    out = tmp_path / "drained.ndjson"
    ok(cli("dlq", "drain", "d-s-DLQ", "--max", "2", "--out", str(out), "-y"))
    assert [r["payload"] for r in rows(out.read_text())] == ["x", "y"]
    peek = rows(ok(cli("dlq", "peek", "d-s-DLQ", "-o", "ndjson")).stdout)
    assert [r["payload"] for r in peek] == ["z"]
    ok(cli("dlq", "replay", "d-s-DLQ", "--to-origin", "-y"))
    got = rows(ok(cli("read", "d", "-m", "earliest", "-n", "1", "-o", "ndjson")).stdout)
    assert got[0]["payload"] == "z"
    assert rows(ok(cli("dlq", "peek", "d-s-DLQ", "-o", "ndjson")).stdout) == []


def test_perf_produce_reports_with_and_without_batching(cli):
    on = pjson(cli("perf", "produce", "on", "-n", "3000", "-s", "100", "-o", "json"))
    off = pjson(cli("perf", "produce", "off", "-n", "3000", "-s", "100", "-db", "-o", "json"))
    assert on["batching"] is True and off["batching"] is False
    assert on["messages"] == off["messages"] == 3000
    assert on["storedBytesPerMessage"] < off["storedBytesPerMessage"]
    st = pjson(cli("topics", "stats-internal", "on", "-o", "json"))
    assert st["entriesAddedCounter"] == 3  # 1000 messages per batch


def test_processes_receive_a_batch_in_one_and_ack_it_in_others(run_proc):
    def run(*args, input=None):
        r = run_proc(*args, input=input)
        assert r.returncode == 0, r.stderr
        return r.stdout

    run("topics", "create-subscription", "p", "-s", "s", "-m", "earliest")
    assert run("produce", "p", "--stdin", input="a\nb\n").split() == ["1:0:-1:0", "1:0:-1:1"]
    got = rows(run("receive", "p", "-s", "s", "-t", "Shared", "-n", "2", "-o", "ndjson"))
    assert [r["payload"] for r in got] == ["a", "b"]
    run("ack", "p", "-s", "s", "1:0:-1:1")
    st = json.loads(run("topics", "stats", "p", "-o", "json"))["subscriptions"]["s"]
    # The entry waits; both its messages count as unacked until the whole batch is acked
    # (index-level acks are off).
    assert st["msgBacklog"] == 1 and st["unackedMessages"] == 2
    run("ack", "p", "-s", "s", "-", input=got[0]["messageId"] + "\n")
    st = json.loads(run("topics", "stats", "p", "-o", "json"))["subscriptions"]["s"]
    assert st["msgBacklog"] == 0 and st["unackedMessages"] == 0


@pytest.mark.parametrize("index_level", [False, True])
def test_unacked_messages_count_a_batch_s_messages(broker, index_level):
    """As Pulsar's stats: a delivered batch of 3 is 3 unacked messages; acking one by index
    leaves 2 with index-level acks on, and still 3 with them off (the client holds such acks
    until the whole batch is acked, so the broker still counts the batch)."""
    if index_level:
        broker.policies.update_setting(batches.INDEX_LEVEL, "true")
    sub(broker, "t", "s", "c")
    got = publish(broker, "t", msgs(3))
    publish(broker, "t", msgs(1, prefix="plain"))
    assert len(broker.fetch("t", "s", "c", 10)) == 4
    st = sub_stats(broker, "t", "s")
    assert st["unackedMessages"] == 4 and st["consumers"][0]["unackedMessages"] == 4
    assert st["msgBacklog"] == 2  # entries, as Pulsar's backlog
    broker.ack("t", "s", got[:1])
    assert sub_stats(broker, "t", "s")["unackedMessages"] == (3 if index_level else 4)
    broker.ack("t", "s", got[1:])
    assert sub_stats(broker, "t", "s")["unackedMessages"] == 1
