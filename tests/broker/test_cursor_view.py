"""The cursor picture's states (broker/cursor_view.py, `topics cursor`): each entry acked,
pending for which consumer, awaiting redelivery and why, delayed until when, or backlog; runs
folded; a partitioned topic one view per partition; and a window costs what the window holds,
not what the topic holds. Real LMDB in tmp_path, the simulated clock: drawing never fires a
timer nor disconnects anyone, so what is due and not fired yet shows as such."""
from __future__ import annotations

import pytest

from pulsarctl.broker import batches
from pulsarctl.broker.cursor_view import View
from pulsarctl.errors import MessageNotFound, SubscriptionNotFound, TopicNotFound
from pulsarctl.messages import MessageId, OutgoingMessage, iso_ms

from simclock import START_MS

LEASE = 600_000


def msgs(n, prefix="m", **kw):
    return [OutgoingMessage(f"{prefix}{i}".encode(), **kw) for i in range(n)]


def publish(broker, topic, messages, **kw):
    return broker.publish(topic, messages, **kw)[1]


def sub(broker, topic, s, consumer, typ="Shared", settings=None, lease=LEASE):
    broker.subscribe(topic, s, consumer, typ, "Earliest", lease_ms=lease, settings=settings)


def view(broker, topic="t", s="s", around=None, n=40) -> View:
    (v,) = broker.subscription(topic, s).cursor_view(around, n).views
    return v


def states(v: View) -> list[tuple]:
    """(first entry id, state, count) of each row."""
    return [(f"{r.first_id.ledger_id}:{r.first_id.entry_id}", r.state, r.count) for r in v.rows]


def row_at(v: View, mid) -> object:
    for r in v.rows:
        if (r.first_id.ledger_id, r.first_id.entry_id) == (mid.ledger_id, mid.entry_id):
            return r
    raise AssertionError(f"no row starts at {mid}: {states(v)}")


# -- acked, individually acked, pending per consumer, backlog ------------------------------------
def test_acked_individually_acked_pending_per_consumer_and_backlog(broker):
    ids = publish(broker, "t", msgs(10))
    sub(broker, "t", "s", "c1")
    sub(broker, "t", "s", "c2")
    broker.fetch("t", "s", "c1", 3)              # 0..2 to c1
    broker.fetch("t", "s", "c2", 2)              # 3..4 to c2
    broker.ack("t", "s", [ids[0], ids[2]])       # 0 by mark-delete, 2 individually
    v = view(broker)
    assert states(v) == [("1:0", "acked", 1), ("1:1", "pending", 1), ("1:2", "acked", 1),
                         ("1:3", "pending", 2), ("1:5", "backlog", 5)]
    assert (v.mark_delete_position, v.read_position_text, v.backlog) == ("1:0", "1:5", 8)
    assert row_at(v, ids[1]).consumer == "c1" and row_at(v, ids[3]).consumer == "c2"
    assert row_at(v, ids[3]).since == START_MS and row_at(v, ids[3]).redelivery_count == 0
    doc = broker.subscription("t", "s").cursor_view().to_json()
    assert doc["markDeletePosition"] == "1:0" and doc["readPosition"] == "1:5"
    assert doc["entries"][1] == {"messageId": "1:1:-1", "state": "pending", "count": 1,
                                 "consumerName": "c1", "redeliveryCount": 0, "due": None,
                                 "since": iso_ms(START_MS),
                                 # c1 is held by a lease (no process): pulsarctl's
                                 "beyondPulsar": "a consumer held by a lease; Pulsar's lives "
                                                 "by its connection"}
    assert doc["entries"][-1] == {"messageId": "1:5:-1", "state": "backlog", "count": 5,
                                  "consumerName": None, "redeliveryCount": None, "due": None,
                                  "lastMessageId": "1:9:-1"}


# -- redeliver: nacked, ack timeout, consumer gone, in the replay set ---------------------------
def test_a_nacked_message_awaits_redelivery_with_its_due_time(broker, clock):
    ids = publish(broker, "t", msgs(3))
    sub(broker, "t", "s", "c1", settings={"negativeAckRedeliveryDelayMs": 5000})
    broker.fetch("t", "s", "c1", 3)
    clock.advance(1000)
    broker.nack("t", "s", [ids[1]])
    r = row_at(view(broker), ids[1])
    # Due 5 s after the nack, in the negative-acks tracker's 256 ms buckets.
    assert (r.state, r.reason, r.consumer, r.redelivery_count) == ("redeliver", "nacked", "c1", 0)
    assert r.due == (START_MS + 6000) & ~255
    clock.advance(10_000)                        # due, and not fired: drawing fires nothing
    assert row_at(view(broker), ids[1]).state == "redeliver"
    broker.chores.fire_due()                     # `clock advance` or the daemon fires it
    r = row_at(view(broker), ids[1])
    assert (r.state, r.reason, r.redelivery_count) == ("redeliver", "redelivered", 1)
    # Why, from the message history: when it was nacked and the delay it waited.
    assert r.why == "nacked at 00:00:01, nack backoff 5s"
    assert row_at(view(broker), ids[1]).to_json()["why"] == r.why
    broker.fetch("t", "s", "c1", 5)
    r = row_at(view(broker), ids[1])
    assert (r.state, r.consumer, r.redelivery_count) == ("pending", "c1", 1)


def test_the_ack_timeout_shows_as_a_deadline_then_as_due(broker, clock):
    ids = publish(broker, "t", msgs(2))
    sub(broker, "t", "s", "c1", settings={"ackTimeoutMs": 2000})
    broker.fetch("t", "s", "c1", 2)
    r = row_at(view(broker), ids[0])
    assert (r.state, r.reason, r.due, r.count) == ("pending", "ackTimeout", START_MS + 2000, 2)
    clock.advance(2500)
    r = row_at(view(broker), ids[0])
    assert (r.state, r.reason, r.due) == ("redeliver", "ackTimeout", START_MS + 2000)


def test_a_gone_consumer_s_messages_await_redelivery(broker, clock):
    ids = publish(broker, "t", msgs(2))
    sub(broker, "t", "s", "short", lease=1000)
    sub(broker, "t", "s", "long")
    broker.fetch("t", "s", "short", 1)
    clock.advance(5000)                          # the lease is over; nobody noticed yet
    r = row_at(view(broker), ids[0])
    assert (r.state, r.reason, r.consumer, r.due) == ("redeliver", "consumerGone", "short",
                                                      START_MS + 5000)
    broker.chores.sweep_consumers()              # the daemon's sweep gives it back
    r = row_at(view(broker), ids[0])
    assert (r.state, r.reason, r.consumer) == ("redeliver", "returned", None)


def test_redeliver_unacked_puts_messages_in_the_replay_set(broker):
    ids = publish(broker, "t", msgs(3))
    sub(broker, "t", "s", "c1")
    broker.fetch("t", "s", "c1", 3)
    broker.redeliver_unacked("t", "s", "c1")
    assert states(view(broker)) == [("1:0", "redeliver", 3)]
    r = view(broker).rows[0]
    assert (r.reason, r.redelivery_count, r.last_id) == ("redelivered", 1, ids[2])


# -- delayed, backlog ------------------------------------------------------------------------
def test_delayed_messages_until_when(broker):
    at = START_MS + 60_000
    ids = publish(broker, "t", msgs(2) + msgs(2, "late", deliver_at=at) + msgs(1, "n"))
    sub(broker, "t", "s", "c1")
    v = view(broker)                 # not read yet: dispatch will hold them (Shared)
    assert states(v) == [("1:0", "backlog", 2), ("1:2", "delayed", 2), ("1:4", "backlog", 1)]
    assert row_at(v, ids[2]).due == at and row_at(v, ids[2]).reason == "deliverAt"
    broker.fetch("t", "s", "c1", 10)  # now in the delayed index
    v = view(broker)
    assert states(v) == [("1:0", "pending", 2), ("1:2", "delayed", 2), ("1:4", "pending", 1)]
    assert row_at(v, ids[2]).due == at
    # Exclusive delivers at once: the same entries are backlog there.
    sub(broker, "t", "x", "e1", "Exclusive")
    assert states(view(broker, s="x")) == [("1:0", "backlog", 5)]


# -- batches -----------------------------------------------------------------------------------
def test_a_batch_shows_its_acked_indexes(broker):
    publish(broker, "t", msgs(4), batching=batches.Spec(1000, 128 * 1024, False))
    publish(broker, "t", msgs(1, "plain"))
    sub(broker, "t", "s", "c1")
    broker.fetch("t", "s", "c1", 10)
    broker.ack("t", "s", [MessageId(1, 0, -1, 0), MessageId(1, 0, -1, 2)])
    v = view(broker)
    r = v.rows[0]
    assert (r.state, r.batch_size, r.batch_acked, r.count) == ("pending", 4, (0, 2), 1)
    assert v.rows[1].batch_size is None
    assert broker.subscription("t", "s").cursor_view().to_json()["entries"][0]["batch"] == {
        "size": 4, "acked": [0, 2]}


# -- Key_Shared and every subscription type -----------------------------------------------------
def test_key_shared_messages_waiting_for_their_key_s_consumer(broker):
    publish(broker, "t", [OutgoingMessage(b"x", key=f"k{i}") for i in range(20)])
    sub(broker, "t", "s", "c1", "Key_Shared")
    sub(broker, "t", "s", "c2", "Key_Shared")
    got = broker.fetch("t", "s", "c1", 20)
    v = view(broker)
    by_state = {}
    for r in v.rows:
        by_state[r.state] = by_state.get(r.state, 0) + r.count
    assert by_state.get("pending") == len(got) and 0 < len(got) < 20
    # Read for c2's keys and never delivered: waiting for its key's consumer, in the backlog,
    # not a redelivery (issue 27 item 7).
    assert by_state.get("redeliver", 0) == 0
    waiting = [r for r in v.rows if r.reason == "keyOrder"]
    assert waiting and all(r.state == "backlog" for r in waiting)
    assert sum(r.count for r in waiting) == 20 - len(got)
    # What c1 held goes back when it leaves: delivered before, so that is a redelivery.
    broker.close_consumer("t", "s", "c1")
    v = view(broker)
    assert {r.reason for r in v.rows if r.state == "redeliver"} == {"returned"}
    assert sum(r.count for r in v.rows if r.reason == "returned") == len(got)


def test_a_key_no_consumer_s_range_covers_waits_for_one(broker):
    publish(broker, "t", [OutgoingMessage(b"x", key=f"k{i}") for i in range(30)])
    broker.subscribe("t", "s", "c1", "Key_Shared", "Earliest", lease_ms=600_000,
                     policy={"keySharedPolicy": "sticky", "ranges": [[0, 9999]]})
    got = broker.fetch("t", "s", "c1", 30)
    v = view(broker)
    uncovered = [r for r in v.rows if r.reason == "keyUncovered"]
    assert uncovered and all(r.state == "backlog" for r in uncovered)
    assert sum(r.count for r in uncovered) == 30 - len(got) > 0


@pytest.mark.parametrize("typ", ["Exclusive", "Failover", "Shared", "Key_Shared"])
def test_every_subscription_type(broker, typ):
    ids = publish(broker, "t", [OutgoingMessage(b"x", key="k") for _ in range(5)])
    sub(broker, "t", "s", "c1", typ)
    broker.fetch("t", "s", "c1", 2)
    broker.ack("t", "s", [ids[0]])
    v = view(broker)
    assert v.type == typ
    assert states(v) == [("1:0", "acked", 1), ("1:1", "pending", 1), ("1:2", "backlog", 3)]


# -- partitioned topics -------------------------------------------------------------------------
def test_a_partitioned_topic_gives_one_view_per_partition(broker):
    broker.topics.create_partitioned("pt", 2)
    publish(broker, "pt", msgs(6))
    sub(broker, "pt", "s", "c1")
    got = broker.fetch("pt", "s", "c1", 2)
    pic = broker.subscription("pt", "s").cursor_view()
    assert pic.partitioned and [v.topic for v in pic.views] == [
        "persistent://public/default/pt-partition-0", "persistent://public/default/pt-partition-1"]
    assert sum(v.backlog for v in pic.views) == 6
    doc = pic.to_json()
    assert set(doc) == {"topic", "subscription", "partitions"}
    assert [p["topic"] for p in doc["partitions"]] == [v.topic for v in pic.views]
    assert all("entries" in p and "markDeletePosition" in p for p in doc["partitions"])
    # --around on a partitioned topic draws the partition the id is on.
    mid = got[0].message_id()
    (only,) = broker.subscription("pt", "s").cursor_view(mid).views
    assert only.topic.endswith(f"-partition-{mid.partition}")


# -- errors ------------------------------------------------------------------------------------
def test_unknown_topic_subscription_or_message(broker):
    publish(broker, "t", msgs(1))
    sub(broker, "t", "s", "c1")
    with pytest.raises(TopicNotFound):
        broker.subscription("nope", "s").cursor_view()
    with pytest.raises(SubscriptionNotFound) as e:
        broker.subscription("t", "nope").cursor_view()
    assert "topics subscriptions" in e.value.hint
    with pytest.raises(MessageNotFound):
        broker.subscription("t", "s").cursor_view(MessageId(1, 99))


# -- folding and cost -------------------------------------------------------------------------
def test_runs_fold_and_a_window_reads_only_the_window(broker):
    """200,000 entries, the first 199,950 acked: the picture is a handful of rows, and drawing
    it reads the window's entries and nothing else."""
    total = 200_000
    ids = []
    for i in range(0, total, 50_000):
        ids += publish(broker, "t", msgs(50_000, f"b{i}-"))
    sub(broker, "t", "s", "c1", settings={"negativeAckRedeliveryDelayMs": 5000})
    broker.subscription("t", "s").reset_cursor(message_id=ids[total - 50])
    broker.fetch("t", "s", "c1", 10)
    broker.nack("t", "s", [ids[total - 48]])
    v = view(broker, n=40)
    assert v.reads == {"entries": 40, "timerKeys": 1}
    assert [r.state for r in v.rows] == ["acked", "pending", "redeliver", "pending", "backlog"]
    # The three ledgers of 50,000 that every cursor has passed are trimmed: 49,950 acked left.
    assert [r.count for r in v.rows] == [49_950, 2, 1, 7, 25] and v.not_drawn_after == 15
    assert sum(r.count for r in v.rows) + v.not_drawn_after == 50_000
    # Centred on an id in the middle: n entries read, the rest counted.
    v = view(broker, around=ids[175_000], n=10)
    assert v.reads["entries"] == 10
    assert [r.state for r in v.rows] == ["acked"] and v.rows[0].count == 25_005
    assert (v.not_drawn_before, v.not_drawn_after) == (0, total - 175_005)
