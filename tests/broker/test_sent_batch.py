"""A batch a wire client sent of plain messages (issue 29, item 6): published from a SentBatch, it
stores exactly what publish stores for the same messages as OutgoingMessages, gives the same ids,
counts and producer state; what that path cannot do (a delivery time, a duplicate, a message or
the batch over maxMessageSize, a partitioned topic's name) publish does, with the same result.
Real LMDB in tmp_path, a simulated clock."""
from __future__ import annotations

import pytest

from pulsarctl.broker import Broker, batches, policies
from pulsarctl.messages import BatchIds, MessageId, OutgoingMessage, SentBatch
from tests.broker.test_bulk_publish import _entries

AS_SENT = batches.Spec(1000, 0, as_sent=True)


def _publish(b, topic, msgs, **kw):
    kwargs = {"batching": AS_SENT, "compression": 0, "publisher": None, **kw}
    (got,) = b.publish_many([(topic, msgs, "prod", kwargs)])
    if isinstance(got, Exception):
        raise got
    return got


def _both(b, sent: SentBatch, **kw):
    """The batch published both ways, on topics "sent" and "each": (their results)."""
    return _publish(b, "sent", sent, **kw), _publish(b, "each", sent.outgoing(), **kw)


def _same_ids(a, b):
    assert [(i.entry_id, i.partition, i.batch_index) for i in a] == \
        [(i.entry_id, i.partition, i.batch_index) for i in b]


@pytest.mark.parametrize("code", [0, 1])          # none, lz4
@pytest.mark.parametrize("sv", [None, 3])
def test_a_sent_batch_stores_what_publish_stores(store_path, clock, code, sv):
    b = Broker(store_path, clock)
    for k in range(3):
        sent = SentBatch([b"m%d" % i * (i % 5 + 1) for i in range(k * 200 + 1)], 10 + k * 1000,
                         schema_version=sv)
        (n1, ids1), (n2, ids2) = _both(b, sent, compression=code)
        assert n1 == n2 == "prod"
        assert type(ids1) is BatchIds and len(ids1) == len(ids2)
        _same_ids(ids1, ids2)
    assert _entries(b, "sent") == _entries(b, "each")
    for t in ("sent", "each"):
        st = b.topics.stats(t)
        assert st["msgInCounter"] == 1 + 201 + 401
    assert b.topics.stats("sent")["bytesInCounter"] == b.topics.stats("each")["bytesInCounter"]
    b.close()


def test_batch_ids_are_the_ids_publish_gives():
    ids = BatchIds(7, 3, 2, 4)
    want = [MessageId(7, 3, 2, i) for i in range(4)]
    assert list(ids) == want and ids[0] == want[0] and ids[-1] == want[-1]
    assert ids[1:3] == want[1:3] and ids[::-1] == want[::-1] and ids == want
    with pytest.raises(IndexError):
        ids[4]


def test_a_duplicate_under_deduplication_is_answered_as_publish_answers_it(store_path, clock):
    b = Broker(store_path, clock)
    for t in ("sent", "each"):
        b.topics.create(t)
        b.policies.set("topic", t, policies.DEDUP, True)
    first = SentBatch([b"a", b"b", b"c"], 5)
    _both(b, first)
    (_, again_sent), (_, again_each) = _both(b, SentBatch([b"a", b"b", b"c"], 5))
    assert [str(i) for i in again_sent] == [str(i) for i in again_each] == ["-1:-1:-1"] * 3
    assert _entries(b, "sent") == _entries(b, "each") and len(_entries(b, "sent")) == 1
    b.close()


def test_what_the_sent_path_leaves_to_publish_comes_out_the_same(store_path, clock):
    b = Broker(store_path, clock)
    b.policies.update_setting("maxMessageSize", "2000")
    # a delivery time, and a batch over maxMessageSize (publish halves it)
    delayed = SentBatch([b"d1", b"d2"], 0, deliver_at=clock.now_ms() + 60_000)
    big = SentBatch([bytes([i]) * 300 for i in range(12)], 10)
    for sent in (delayed, big):
        (_, a), (_, e) = _both(b, sent)
        _same_ids(a, e)
    assert _entries(b, "sent") == _entries(b, "each") and len(_entries(b, "sent")) >= 3
    # a message over maxMessageSize: the same refusal, and nothing written by either
    before = len(_entries(b, "sent"))
    huge = SentBatch([b"x" * 2500, b"y"], 50)
    for topic, msgs in (("sent", huge), ("each", huge.outgoing())):
        (got,) = b.publish_many([(topic, msgs, "prod", {"batching": AS_SENT})])
        assert type(got).__name__ == "MessageTooLarge"
    assert len(_entries(b, "sent")) == before
    b.close()


def test_a_partitioned_topics_name_routes_a_sent_batch_message_by_message(store_path, clock):
    b = Broker(store_path, clock)
    b.topics.create_partitioned("parted", 3)
    name, ids = _publish(b, "parted", SentBatch([b"k%d" % i for i in range(9)], 0))
    assert name == "prod" and len(ids) == 9
    assert sum(b.topics.stats(f"parted-partition-{i}")["msgInCounter"] for i in range(3)) == 9
    b.close()
