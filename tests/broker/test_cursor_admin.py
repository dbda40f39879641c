"""pulsar-admin's cursor administration (skip, clear-backlog, reset-cursor, expire-messages,
terminate, examine-message): the broker with a simulated clock, then the commands through the
`cli` fixture. Each operation's effect on backlog, markDeletePosition, what the next consume
gets, and the pending, replay and delayed state it leaves."""
from __future__ import annotations

import json
from functools import partial

import pytest

from pulsarctl.errors import (
    InvalidMessageId, InvalidValue, MessageNotFound, SubscriptionNotFound, TopicNotFound,
    TopicTerminated,
)
from pulsarctl.messages import MessageId, OutgoingMessage

from simclock import START_MS
from cli_helpers import assert_error, ok

LEASE = 7 * 24 * 3_600_000  # consumers outlive every clock advance here
MIN = 60_000


# -- helpers ---------------------------------------------------------------------------------
def publish_spaced(broker, clock, n, topic="t", step=MIN):
    """n messages m0..m{n-1}, published at START_MS + i*step; the clock ends one step after
    the last. Returns their ids."""
    ids = []
    for i in range(n):
        ids += broker.publish(topic, [OutgoingMessage(f"m{i}".encode())])[1]
        clock.advance(step)
    return ids


def sub(broker, typ="Exclusive", name="c1", fetch=0, topic="t", s="s"):
    return broker.subscribe(topic, s, name, typ, "Earliest", lease_ms=LEASE, fetch=fetch)[1]


def payloads(msgs):
    return [m.data().decode() for m in msgs]


def sstats(broker, topic="t", s="s"):
    return broker.topics.stats(topic)["subscriptions"][s]


def cursor(broker, topic="t", s="s"):
    return broker.topics.internal_stats(topic)["cursors"][s]


def md(broker, topic="t", s="s"):
    return cursor(broker, topic, s)["markDeletePosition"]


def pos(mid):
    return f"{mid.ledger_id}:{mid.entry_id}"


# -- skip ------------------------------------------------------------------------------------
def test_skip_acknowledges_the_next_n_and_the_next_consume_goes_on_after_them(broker, clock):
    ids = publish_spaced(broker, clock, 10)
    sub(broker)
    d = broker.subscription("t", "s").skip(3)
    assert d["skipped"] == 3 and d["msgBacklog"] == 7
    assert d["markDeletePosition"] == md(broker) == pos(ids[2])
    assert payloads(broker.fetch("t", "s", "c1", 1)) == ["m3"]


def test_skip_does_not_count_individually_acked_entries(broker, clock):
    ids = publish_spaced(broker, clock, 6)
    sub(broker)
    broker.ack("t", "s", [ids[1], ids[3]])
    d = broker.subscription("t", "s").skip(2)          # m0 and m2: m1 is acked already (Exclude)
    assert d["skipped"] == 2
    assert md(broker) == pos(ids[3])       # the hole at m3 folds into mark-delete
    assert cursor(broker)["individuallyDeletedMessages"] == "[]"
    assert sstats(broker)["msgBacklog"] == 2
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["m4", "m5"]


def test_skip_more_than_the_backlog_stops_at_the_last_entry(broker, clock):
    ids = publish_spaced(broker, clock, 4)
    sub(broker)
    d = broker.subscription("t", "s").skip(100)
    assert d["skipped"] == 4 and d["msgBacklog"] == 0 and md(broker) == pos(ids[-1])
    assert broker.fetch("t", "s", "c1", 10) == []


def test_skip_needs_a_positive_count(broker, clock):
    publish_spaced(broker, clock, 2)
    sub(broker)
    with pytest.raises(InvalidValue) as ei:
        broker.subscription("t", "s").skip(0)
    assert ei.value.exit_code == 2
    assert sstats(broker)["msgBacklog"] == 2


def test_skip_drops_pending_and_delayed_at_or_below_mark_delete_only(broker, clock):
    later = START_MS + 3_600_000
    _, ids = broker.publish("t", [OutgoingMessage(b"d0", deliver_at=later),
                                  OutgoingMessage(b"m1"), OutgoingMessage(b"m2"),
                                  OutgoingMessage(b"d3", deliver_at=later),
                                  OutgoingMessage(b"m4")])
    got = sub(broker, "Shared", fetch=10)
    assert payloads(got) == ["m1", "m2", "m4"]
    assert sstats(broker)["delayedMessages"] == 2
    broker.subscription("t", "s").skip(2)                                   # d0 and m1
    s = sstats(broker)
    assert md(broker) == pos(ids[1])
    assert s["delayedMessages"] == 1                           # d3 stays delayed
    assert s["unackedMessages"] == 2                           # m2 and m4 stay pending
    assert s["msgBacklog"] == 3
    clock.advance(3_600_000)
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["d3"]


def test_skip_drops_replay_records_it_passes_and_keeps_the_rest(broker, clock):
    broker.publish("t", [OutgoingMessage(f"m{i}".encode()) for i in range(5)])
    sub(broker, "Shared", "a", fetch=3)
    sub(broker, "Shared", "b")
    broker.close_consumer("t", "s", "a")            # m0..m2 go to the replay set
    assert sstats(broker)["replayCount"] == 3
    broker.subscription("t", "s").skip(2)
    assert sstats(broker)["replayCount"] == 1
    assert payloads(broker.fetch("t", "s", "b", 10)) == ["m2", "m3", "m4"]


# -- clear-backlog ---------------------------------------------------------------------------
def test_clear_backlog_moves_mark_delete_to_the_last_entry(broker, clock):
    ids = publish_spaced(broker, clock, 5)
    sub(broker)
    broker.ack("t", "s", [ids[3]])
    d = broker.subscription("t", "s").clear_backlog()
    assert d["cleared"] == 4 and d["msgBacklog"] == 0
    assert md(broker) == pos(ids[-1]) and cursor(broker)["individuallyDeletedMessages"] == "[]"
    assert broker.fetch("t", "s", "c1", 10) == []
    broker.publish("t", [OutgoingMessage(b"new")])
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["new"]
    assert broker.subscription("t", "s").clear_backlog()["cleared"] == 1
    assert broker.subscription("t", "s").clear_backlog()["cleared"] == 0         # nothing left: fine


def test_clear_backlog_drops_pending_replay_and_delayed(broker, clock):
    later = START_MS + 3_600_000
    broker.publish("t", [OutgoingMessage(f"m{i}".encode()) for i in range(4)]
                   + [OutgoingMessage(b"d", deliver_at=later)])
    a = sub(broker, "Shared", "a", fetch=2)
    sub(broker, "Shared", "b", fetch=10)
    broker.close_consumer("t", "s", "a")            # a's two go to the replay set
    s = sstats(broker)
    assert (s["replayCount"], s["unackedMessages"], s["delayedMessages"]) == (2, 2, 1)
    assert len(a) == 2
    broker.subscription("t", "s").clear_backlog()
    s = sstats(broker)
    assert (s["replayCount"], s["unackedMessages"], s["delayedMessages"]) == (0, 0, 0)
    assert s["msgBacklog"] == 0
    clock.advance(3_600_000)
    assert broker.fetch("t", "s", "b", 10) == []


def test_clear_backlog_trims_ledgers_every_cursor_has_passed(broker, clock):
    broker.ledgers.rollover_entries = 3
    publish_spaced(broker, clock, 7)
    sub(broker)
    assert len(broker.topics.internal_stats("t")["ledgers"]) == 3
    broker.subscription("t", "s").clear_backlog()
    st = broker.topics.internal_stats("t")
    assert len(st["ledgers"]) == 1 and st["numberOfEntries"] == 1
    assert sstats(broker)["msgBacklog"] == 0


# -- reset-cursor by time ------------------------------------------------------------------------
def _consume_all(broker, n):
    got = sub(broker, fetch=n)
    broker.ack("t", "s", [m.message_id() for m in got])
    assert sstats(broker)["msgBacklog"] == 0


def test_reset_to_a_publish_time_redelivers_what_was_published_after_it(broker, clock):
    ids = publish_spaced(broker, clock, 5)
    _consume_all(broker, 5)
    # m2 was published at exactly START+2m: it is "at or before" T, so m3 comes next.
    d = broker.subscription("t", "s").reset_cursor(time_ms=START_MS + 2 * MIN)
    assert d["nextMessageId"] == str(ids[3]) and d["msgBacklog"] == 2
    assert md(broker) == pos(ids[2])
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["m3", "m4"]
    # Between two publish times: the same.
    broker.subscription("t", "s").reset_cursor(time_ms=START_MS + 2 * MIN + 1)
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["m3", "m4"]
    broker.subscription("t", "s").reset_cursor(time_ms=START_MS + 2 * MIN - 1)
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["m2", "m3", "m4"]


def test_reset_before_every_message_goes_to_the_first_position(broker, clock):
    ids = publish_spaced(broker, clock, 3)
    _consume_all(broker, 3)
    d = broker.subscription("t", "s").reset_cursor(time_ms=START_MS - 1)
    assert d["nextMessageId"] == str(ids[0]) and d["msgBacklog"] == 3
    assert md(broker) == f"{ids[0].ledger_id}:-1"
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["m0", "m1", "m2"]


def test_reset_after_every_message_delivers_nothing_again(broker, clock):
    ids = publish_spaced(broker, clock, 3)
    sub(broker)
    d = broker.subscription("t", "s").reset_cursor(time_ms=START_MS + 10 * MIN)
    assert d["nextMessageId"] is None and d["msgBacklog"] == 0 and md(broker) == pos(ids[-1])
    assert broker.fetch("t", "s", "c1", 10) == []


@pytest.mark.parametrize("text, first", [
    ("3m", "m3"),                       # now is START+5m: T = START+2m
    ("180", "m3"),                      # a bare number is seconds
    ("150s", "m3"),
    (str(START_MS + MIN), "m2"),         # epoch milliseconds
    ("2026-01-01T00:01:00Z", "m2"),     # ISO 8601
    ("2026-01-01T00:00:30Z", "m1"),
    ("30d", "m0"),                      # before everything: the first position
])
def test_reset_time_text_is_a_duration_ago_or_a_time(broker, clock, text, first):
    publish_spaced(broker, clock, 5)
    _consume_all(broker, 5)
    broker.subscription("t", "s").reset_cursor(time_ms=text)
    assert payloads(broker.fetch("t", "s", "c1", 10))[0] == first


def test_reset_with_a_malformed_time_changes_nothing(broker, clock):
    publish_spaced(broker, clock, 3)
    sub(broker, fetch=2)
    before = cursor(broker)
    with pytest.raises(InvalidValue) as ei:
        broker.subscription("t", "s").reset_cursor(time_ms="yesterday-ish")
    assert ei.value.exit_code == 2
    assert cursor(broker) == before and sstats(broker)["unackedMessages"] == 2


def test_reset_needs_exactly_one_of_time_and_id(broker, clock):
    publish_spaced(broker, clock, 1)
    sub(broker)
    for kw in ({}, {"time_ms": START_MS, "message_id": "1:0"}):
        with pytest.raises(InvalidValue):
            broker.subscription("t", "s").reset_cursor(**kw)


# -- reset-cursor by message id ------------------------------------------------------------------
def test_reset_to_a_message_id_delivers_it_next_and_forgets_ack_holes(broker, clock):
    ids = publish_spaced(broker, clock, 5)
    sub(broker)
    broker.ack("t", "s", [ids[3]])
    d = broker.subscription("t", "s").reset_cursor(message_id=ids[1])
    assert d["nextMessageId"] == str(ids[1]) and md(broker) == pos(ids[0])
    # As ManagedCursorImpl.internalResetCursor: individually deleted ranges are cleared, so
    # the acked m3 comes again too.
    assert cursor(broker)["individuallyDeletedMessages"] == "[]"
    assert d["msgBacklog"] == 4
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["m1", "m2", "m3", "m4"]


def test_reset_forward_by_id_and_text_ids(broker, clock):
    ids = publish_spaced(broker, clock, 5)
    sub(broker)
    broker.subscription("t", "s").reset_cursor(message_id=f"{ids[3].ledger_id}:{ids[3].entry_id}")
    assert sstats(broker)["msgBacklog"] == 2 and md(broker) == pos(ids[2])
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["m3", "m4"]


def test_reset_to_earliest_latest_and_the_position_after_the_last(broker, clock):
    ids = publish_spaced(broker, clock, 3)
    sub(broker)
    broker.subscription("t", "s").reset_cursor(message_id=MessageId.latest)
    assert sstats(broker)["msgBacklog"] == 0
    broker.subscription("t", "s").reset_cursor(message_id="earliest")
    assert sstats(broker)["msgBacklog"] == 3
    after_last = MessageId(ids[-1].ledger_id, ids[-1].entry_id + 1)
    d = broker.subscription("t", "s").reset_cursor(message_id=after_last)
    assert d["nextMessageId"] is None and d["msgBacklog"] == 0 and md(broker) == pos(ids[-1])


def test_reset_to_an_unknown_or_malformed_id(broker, clock):
    ids = publish_spaced(broker, clock, 3)
    sub(broker)
    broker.subscription("t", "s").skip(1)
    for bad in (MessageId(ids[0].ledger_id, 99), MessageId(999, 0)):
        with pytest.raises(MessageNotFound) as ei:
            broker.subscription("t", "s").reset_cursor(message_id=bad)
        assert ei.value.exit_code == 3
    with pytest.raises(InvalidMessageId) as ei:
        broker.subscription("t", "s").reset_cursor(message_id="1:x")
    assert ei.value.exit_code == 2
    assert md(broker) == pos(ids[0])                       # nothing changed


def test_reset_clears_pending_replay_and_delayed_and_keeps_consumers(broker, clock):
    later = START_MS + 3_600_000
    broker.publish("t", [OutgoingMessage(f"m{i}".encode()) for i in range(4)]
                   + [OutgoingMessage(b"d4", deliver_at=later), OutgoingMessage(b"m5")])
    sub(broker, "Shared", "a", fetch=2)
    sub(broker, "Shared", "b", fetch=10)
    sub(broker, "Shared", "a")
    broker.close_consumer("t", "s", "b")     # b's messages go to replay; a stays connected
    s = sstats(broker)
    assert s["replayCount"] > 0 and s["unackedMessages"] == 2 and s["delayedMessages"] == 1
    d = broker.subscription("t", "s").reset_cursor(message_id="earliest")
    s = sstats(broker)
    assert (s["replayCount"], s["unackedMessages"], s["delayedMessages"]) == (0, 0, 0)
    assert d["msgBacklog"] == 6
    assert [c["consumerName"] for c in s["consumers"]] == ["a"]
    # Everything comes again from the ledger in order; the delayed one is held back again.
    assert payloads(broker.fetch("t", "s", "a", 10)) == ["m0", "m1", "m2", "m3", "m5"]
    assert sstats(broker)["delayedMessages"] == 1
    clock.advance(3_600_000)
    assert payloads(broker.fetch("t", "s", "a", 10)) == ["d4"]


def test_ack_at_or_below_mark_delete_after_a_reset_is_a_noop(broker, clock):
    ids = publish_spaced(broker, clock, 5)
    got = sub(broker, fetch=5)                                 # all five pending
    broker.subscription("t", "s").reset_cursor(message_id=ids[3])
    assert sstats(broker)["unackedMessages"] == 0
    assert broker.ack("t", "s", [got[1].message_id(), got[2].message_id()]) == 0
    assert sstats(broker)["msgBacklog"] == 2 and md(broker) == pos(ids[2])
    assert broker.ack("t", "s", [got[3].message_id()]) == 1    # above mark-delete: a real ack
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["m4"]


def test_exclusive_consumer_after_reset_reads_from_the_new_position(broker, clock):
    ids = publish_spaced(broker, clock, 4)
    assert payloads(sub(broker, fetch=4)) == ["m0", "m1", "m2", "m3"]
    broker.ack("t", "s", ids)
    broker.subscription("t", "s").reset_cursor(message_id=ids[2])
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["m2", "m3"]


# -- expire-messages ----------------------------------------------------------------------------
def test_expire_acknowledges_messages_older_than_the_ttl(broker, clock):
    ids = publish_spaced(broker, clock, 5)                 # now = START+5m
    sub(broker)
    # expired when now > publishTime + ttl: m0, m1, m2 (m2 at START+2m < START+3m); m3 at
    # exactly now - ttl is not expired yet.
    d = broker.subscription("t", "s").expire_messages(2 * MIN)
    assert d["expired"] == 3 and d["msgBacklog"] == 2 and md(broker) == pos(ids[2])
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["m3", "m4"]
    clock.advance(1)
    assert broker.subscription("t", "s").expire_messages(2 * MIN)["expired"] == 1
    assert md(broker) == pos(ids[3])


def test_expire_counts_only_what_was_not_acked_and_never_moves_back(broker, clock):
    ids = publish_spaced(broker, clock, 5)
    sub(broker)
    broker.ack("t", "s", [ids[1]])
    assert broker.subscription("t", "s").expire_messages(2 * MIN)["expired"] == 2
    broker.subscription("t", "s").skip(2)
    assert broker.subscription("t", "s").expire_messages(2 * MIN)["expired"] == 0
    assert md(broker) == pos(ids[4])


def test_expire_with_ttl_zero_expires_every_message_published_until_now(broker, clock):
    # As the real Pulsar 4.2.4 does (tests/oracle/test_admin_compare.py): its expiry monitor
    # looks for messages published at or before now - 0; the message published this very
    # millisecond goes too. (A TTL policy of 0 is no TTL: expiry.apply never asks for 0.)
    publish_spaced(broker, clock, 3)
    sub(broker)
    broker.publish("t", [OutgoingMessage(b"now")])
    assert broker.subscription("t", "s").expire_messages(0)["expired"] == 4
    assert sstats(broker)["msgBacklog"] == 0


def test_expire_drops_pending_and_delayed_it_passes(broker, clock):
    later = START_MS + 3_600_000
    broker.publish("t", [OutgoingMessage(b"d0", deliver_at=later), OutgoingMessage(b"m1")])
    clock.advance(10 * MIN)
    broker.publish("t", [OutgoingMessage(b"m2")])
    assert payloads(sub(broker, "Shared", fetch=10)) == ["m1", "m2"]
    broker.subscription("t", "s").expire_messages(5 * MIN)
    s = sstats(broker)
    assert (s["msgBacklog"], s["unackedMessages"], s["delayedMessages"]) == (1, 1, 0)


# -- terminate -----------------------------------------------------------------------------------
def test_terminate_refuses_produce_and_returns_the_last_id(broker, clock):
    ids = publish_spaced(broker, clock, 3)
    sub(broker)
    assert broker.topics.terminate("t") == ids[-1]
    assert broker.topics.terminate("t") == ids[-1]                    # twice is fine
    with pytest.raises(TopicTerminated) as ei:
        broker.publish("t", [OutgoingMessage(b"x")])
    assert ei.value.exit_code == 4
    assert broker.topics.internal_stats("t")["entriesAddedCounter"] == 3
    # What is there can still be consumed.
    assert payloads(broker.fetch("t", "s", "c1", 10)) == ["m0", "m1", "m2"]


def test_terminate_an_empty_and_a_missing_topic(broker):
    broker.topics.create("empty")
    mid = broker.topics.terminate("empty")
    assert mid.entry_id == -1 and str(mid) == broker.topics.internal_stats("empty")[
        "lastConfirmedEntry"] + ":-1"
    with pytest.raises(TopicNotFound) as ei:
        broker.topics.terminate("nope")
    assert ei.value.exit_code == 3


# -- examine-message ------------------------------------------------------------------------------
def test_examine_counts_from_the_latest_or_the_earliest(broker, clock):
    ids = publish_spaced(broker, clock, 4)
    m = broker.topics.examine_message("t")                          # latest, 1: the last message
    assert m.data() == b"m3" and m.message_id() == ids[3]
    assert broker.topics.examine_message("t", "latest", 2).data() == b"m2"
    assert broker.topics.examine_message("t", "earliest", 1).data() == b"m0"
    assert broker.topics.examine_message("t", "Earliest", 4).data() == b"m3"
    assert broker.topics.examine_message("t", "earliest", 2).publish_timestamp() == START_MS + MIN


def test_examine_errors(broker, clock):
    publish_spaced(broker, clock, 2)
    with pytest.raises(MessageNotFound):
        broker.topics.examine_message("t", "earliest", 3)
    with pytest.raises(InvalidValue):
        broker.topics.examine_message("t", "middle", 1)
    with pytest.raises(InvalidValue):
        broker.topics.examine_message("t", "latest", 0)
    with pytest.raises(TopicNotFound):
        broker.topics.examine_message("nope")
    broker.topics.create("empty")
    with pytest.raises(MessageNotFound):
        broker.topics.examine_message("empty")


# -- unknown topic or subscription ---------------------------------------------------------------
@pytest.mark.parametrize("op", [
    lambda b, t, s: b.subscription(t, s).skip(1),
    lambda b, t, s: b.subscription(t, s).clear_backlog(),
    lambda b, t, s: b.subscription(t, s).reset_cursor(time_ms=START_MS),
    lambda b, t, s: b.subscription(t, s).reset_cursor(message_id="earliest"),
    lambda b, t, s: b.subscription(t, s).expire_messages(MIN),
])
def test_unknown_topic_or_subscription_is_not_found(broker, clock, op):
    publish_spaced(broker, clock, 1)
    with pytest.raises(SubscriptionNotFound) as ei:
        op(broker, "t", "nope")
    assert ei.value.exit_code == 3
    with pytest.raises(TopicNotFound) as ei:
        op(broker, "missing", "s")
    assert ei.value.exit_code == 3
    assert broker.topics.subscriptions("t") == [] and not broker.topics.exists("missing")


# -- the commands -------------------------------------------------------------------------------
fails = partial(assert_error, stdout_empty=True)  # these commands' errors leave stdout empty


@pytest.fixture
def spaced(cli):
    """Topic t with m0..m4 published a minute apart on a simulated clock (now = 00:05), and
    subscription s at earliest. Returns the ids."""
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    ids = []
    for i in range(5):
        ids += ok(cli("produce", "t", "-m", f"m{i}")).stdout.split()
        ok(cli("clock", "advance", "1m"))
    ok(cli("topics", "create-subscription", "t", "-s", "s", "-m", "earliest"))
    return ids


def cli_cursor(cli, topic="t", s="s"):
    doc = json.loads(ok(cli("topics", "stats-internal", topic, "-o", "json")).stdout)
    return doc["cursors"][s]


def cli_backlog(cli, topic="t", s="s"):
    doc = json.loads(ok(cli("topics", "stats", topic, "-o", "json")).stdout)
    return doc["subscriptions"][s]["msgBacklog"]


def consume(cli, n=10, topic="t", s="s"):
    r = ok(cli("consume", topic, "-s", s, "-n", str(n), "--idle-timeout", "200ms",
               "-o", "ndjson"))
    return [json.loads(x)["payload"] for x in r.stdout.splitlines() if x.strip()]


def short(mid):
    return ":".join(mid.split(":")[:2])


def test_cli_skip(cli, spaced):
    r = ok(cli("topics", "skip", "t", "-s", "s", "-n", "2"))
    assert r.stdout == "" and r.stderr.strip() == "skipped 2 messages on s; backlog now 3"
    doc = json.loads(ok(cli("topics", "skip", "t", "-s", "s", "-n", "1", "-o", "json")).stdout)
    assert doc["skipped"] == 1 and doc["msgBacklog"] == 2 and doc["subscription"] == "s"
    assert doc["topic"] == "persistent://public/default/t"
    assert doc["markDeletePosition"] == cli_cursor(cli)["markDeletePosition"] == short(spaced[2])
    assert consume(cli) == ["m3", "m4"]
    fails(cli("topics", "skip", "t", "-s", "s", "-n", "0"), 2)
    fails(cli("topics", "skip", "t", "-s", "s", "-n", "many"), 2)


def test_cli_clear_backlog(cli, spaced):
    r = ok(cli("topics", "clear-backlog", "t", "-s", "s"))
    assert r.stderr.strip() == "cleared 5 messages on s; backlog now 0"
    assert cli_cursor(cli)["markDeletePosition"] == short(spaced[-1])
    doc = json.loads(ok(cli("topics", "clear-backlog", "t", "-s", "s", "-o", "json")).stdout)
    assert doc["cleared"] == 0 and doc["msgBacklog"] == 0
    assert consume(cli) == []


def test_cli_reset_cursor_by_time(cli, spaced):
    ok(cli("topics", "clear-backlog", "t", "-s", "s"))
    r = ok(cli("topics", "reset-cursor", "t", "-s", "s", "-t", "3m"))   # T = 00:02
    assert r.stderr.strip() == f"reset s to {spaced[3]}; backlog now 2"
    assert cli_cursor(cli)["markDeletePosition"] == short(spaced[2])
    assert consume(cli) == ["m3", "m4"]
    doc = json.loads(ok(cli("topics", "reset-cursor", "t", "-s", "s",
                            "--time", "2026-01-01T00:00:30Z", "-o", "json")).stdout)
    assert doc["nextMessageId"] == spaced[1] and doc["msgBacklog"] == 4
    assert doc["timestamp"] == START_MS + 30_000
    assert consume(cli) == ["m1", "m2", "m3", "m4"]
    ok(cli("topics", "reset-cursor", "t", "-s", "s", "-t", str(START_MS + 60_000)))
    assert consume(cli) == ["m2", "m3", "m4"]


def test_cli_reset_cursor_by_message_id(cli, spaced):
    ok(cli("topics", "skip", "t", "-s", "s", "-n", "4"))
    r = ok(cli("topics", "reset-cursor", "t", "-s", "s", "-m", short(spaced[1])))
    assert r.stderr.strip() == f"reset s to {spaced[1]}; backlog now 4"
    assert cli_backlog(cli) == 4
    assert consume(cli) == ["m1", "m2", "m3", "m4"]
    for flag in ("--messageId", "--message-id"):
        ok(cli("topics", "reset-cursor", "t", "-s", "s", flag, spaced[3]))
        assert cli_backlog(cli) == 2
    r = ok(cli("topics", "reset-cursor", "t", "-s", "s", "-m", "latest"))
    assert r.stderr.strip() == "reset s past the last message; backlog now 0"


def test_cli_reset_cursor_errors(cli, spaced):
    before = cli_cursor(cli)
    assert "message id" in fails(cli("topics", "reset-cursor", "t", "-s", "s", "-m", "7:x"), 2)
    assert "duration ago" in fails(cli("topics", "reset-cursor", "t", "-s", "s", "-t", "soonish"), 2)
    fails(cli("topics", "reset-cursor", "t", "-s", "s"), 2)
    fails(cli("topics", "reset-cursor", "t", "-s", "s", "-t", "1m", "-m", spaced[0]), 2)
    fails(cli("topics", "reset-cursor", "t", "-s", "s", "-m", "999:0"), 3)
    fails(cli("topics", "reset-cursor", "t", "-s", "nope", "-t", "1m"), 3)
    fails(cli("topics", "reset-cursor", "nope", "-s", "s", "-t", "1m"), 3)
    # a malformed time is a usage error before the topic is looked up
    fails(cli("topics", "reset-cursor", "nope", "-s", "s", "-t", "soonish"), 2)
    assert cli_cursor(cli) == before


def test_cli_expire_messages(cli, spaced):
    r = ok(cli("topics", "expire-messages", "t", "-s", "s", "-t", "2m"))
    assert r.stderr.strip() == "expired 3 messages on s; backlog now 2"
    assert cli_cursor(cli)["markDeletePosition"] == short(spaced[2])
    doc = json.loads(ok(cli("topics", "expire-messages", "t", "-s", "s", "--expireTime", "60",
                            "-o", "json")).stdout)
    assert doc["expired"] == 1 and doc["msgBacklog"] == 1 and doc["expireTimeMs"] == 60_000
    assert consume(cli) == ["m4"]
    fails(cli("topics", "expire-messages", "t", "-s", "s", "-t", "old"), 2)
    fails(cli("topics", "expire-messages", "t", "-s", "s", "-t", "-5"), 2)
    fails(cli("topics", "expire-messages", "t", "-s", "nope", "-t", "1m"), 3)
    fails(cli("topics", "expire-messages", "nope", "-s", "s", "-t", "1m"), 3)


def test_cli_terminate(cli, spaced):
    r = ok(cli("topics", "terminate", "t"))
    assert r.stdout.strip() == spaced[-1]
    assert "terminated persistent://public/default/t" in r.stderr
    doc = json.loads(ok(cli("topics", "terminate", "t", "-o", "json")).stdout)
    assert doc == {"topic": "persistent://public/default/t", "terminated": True,
                   "lastMessageId": spaced[-1]}
    assert "terminated" in fails(cli("produce", "t", "-m", "late"), 4)
    assert consume(cli) == ["m0", "m1", "m2", "m3", "m4"]
    fails(cli("topics", "terminate", "nope"), 3)


def test_cli_examine_message(cli, spaced):
    r = ok(cli("topics", "examine-message", "t"))
    assert f"messageId:{spaced[-1]}" in r.stdout and "content:m4" in r.stdout
    doc = json.loads(ok(cli("topics", "examine-message", "t", "-i", "earliest", "-m", "2",
                            "-o", "json")).stdout)
    assert doc["payload"] == "m1" and doc["messageId"] == spaced[1]
    assert doc["publishTime"] == "2026-01-01T00:01:00.000Z"
    doc = json.loads(ok(cli("topics", "examine-message", "t", "--initialPosition", "latest",
                            "--messagePosition", "5", "-o", "json")).stdout)
    assert doc["payload"] == "m0"
    fails(cli("topics", "examine-message", "t", "-i", "middle"), 2)
    fails(cli("topics", "examine-message", "t", "-m", "0"), 2)
    fails(cli("topics", "examine-message", "t", "-m", "6"), 3)
    fails(cli("topics", "examine-message", "nope"), 3)
    assert cli_backlog(cli) == 5                                  # changed nothing
