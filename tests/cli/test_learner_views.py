"""What a learner reads must be right (issue 14, item 8): get-message-by-id shows the redelivery
count of each subscription; timersScheduled and timersDue count what they say; `clock advance`
says what it fired, by kind (nack, ack timeout, delayed, retry, TTL, lease)."""
from __future__ import annotations

import io
import json
import os

from rich.console import Console

from cli_helpers import ok, pjson, rows
from pulsarctl.broker import Broker
from pulsarctl.cli.top_cmd import detail_renderable

T = "persistent://public/default/t"
AT = "2026-01-01T00:00:00Z"
NOTHING = {"nack": 0, "ackTimeout": 0, "delayed": 0, "retry": 0, "ttl": 0, "lease": 0}


def _simulate(cli):
    ok(cli("clock", "simulate", "--at", AT))


def _receive(cli, sub, *extra, n=1, topic="t"):
    """Receive up to n messages (returns their records); never waits for more than is there."""
    r = cli("receive", topic, "-s", sub, "-p", "Earliest", "-n", str(n), "--idle-timeout",
            "10ms", "-o", "ndjson", *extra)
    assert r.exit_code in (0, 6), r.stderr
    return rows(r.stdout)


def _advance(cli, duration) -> dict:
    return pjson(cli("clock", "advance", duration, "-o", "json"))["fired"]


# -- get-message-by-id ----------------------------------------------------------------------------
def test_get_message_by_id_shows_the_redelivery_count_of_each_subscription(cli):
    _simulate(cli)
    ok(cli("topics", "create-subscription", "t", "-s", "sub-b"))
    (mid,) = ok(cli("produce", "t", "-m", "hello")).stdout.split()
    for _ in range(2):
        (m,) = _receive(cli, "sub-a", "-t", "Shared", "--nack-delay", "1s")
        assert m["messageId"] == mid
        ok(cli("nack", "t", "-s", "sub-a", mid))
        ok(cli("clock", "advance", "1s"))
    (m,) = _receive(cli, "sub-a", "-t", "Shared")
    assert m["redeliveryCount"] == 2                       # what the consumer sees
    ledger, entry = mid.split(":")[:2]
    doc = pjson(cli("topics", "get-message-by-id", "t", "-l", ledger, "-e", entry, "-o", "json"))
    assert doc["redeliveryCount"] == {"sub-a": 2, "sub-b": 0}
    assert doc["payload"] == "hello" and doc["messageId"] == mid
    text = ok(cli("topics", "get-message-by-id", "t", "-l", ledger, "-e", entry)).stdout
    assert 'redeliveryCount:[{"sub-a": 2, "sub-b": 0}]' in text
    assert "redeliveryCount:[0]" not in text


def test_get_message_by_id_on_a_topic_without_subscriptions(cli):
    (mid,) = ok(cli("produce", "t", "-m", "x")).stdout.split()
    ledger, entry = mid.split(":")[:2]
    doc = pjson(cli("topics", "get-message-by-id", "t", "-l", ledger, "-e", entry, "-o", "json"))
    assert doc["redeliveryCount"] == {}


# -- timersScheduled and timersDue ----------------------------------------------------------------
def test_describe_counts_scheduled_timers_apart_from_due_ones(cli):
    _simulate(cli)
    (mid,) = ok(cli("produce", "t", "-m", "a")).stdout.split()
    _receive(cli, "s", "-t", "Shared", "--nack-delay", "1m")
    ok(cli("nack", "t", "-s", "s", mid))
    d = pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))
    assert (d["timersScheduled"], d["timersDue"]) == (1, 0)  # waiting, not due
    # Move the clock past the delay without firing (clock simulate does not fire).
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:02:00Z"))
    d = pjson(cli("subscriptions", "describe", "t", "s", "-o", "json"))
    assert (d["timersScheduled"], d["timersDue"]) == (1, 1)


def test_run_once_reports_scheduled_and_due_timers_and_what_fired_by_kind(cli):
    _simulate(cli)
    ids = ok(cli("produce", "t", "-m", "a", "-m", "b")).stdout.split()
    _receive(cli, "s", "-t", "Shared", "--nack-delay", "1m", n=2)
    ok(cli("nack", "t", "-s", "s", ids[0]))
    ok(cli("nack", "t", "-s", "s", ids[1]))
    doc = pjson(cli("daemon", "run-once", "-o", "json"))
    assert doc["fired"] == 0 and doc["firedByKind"] == {"nack": 0, "ackTimeout": 0}
    assert (doc["timersScheduled"], doc["timersDue"]) == (2, 0)
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:02:00Z"))
    doc = pjson(cli("daemon", "run-once", "-o", "json"))
    assert doc["fired"] == 2 and doc["firedByKind"] == {"nack": 2, "ackTimeout": 0}
    assert (doc["timersScheduled"], doc["timersDue"]) == (0, 0)
    r = ok(cli("daemon", "run-once"))
    assert "fired 0 timer(s) (none)" in r.stderr and "0 timer(s) still scheduled" in r.stderr


def test_daemon_status_reports_scheduled_and_due_timers(cli, store_path):
    """A tick of the daemon (in-process, holding the lock as `daemon run` does) writes what
    `daemon status` reads: the nack waiting is scheduled, none is due."""
    from pulsarctl.broker import Broker
    from pulsarctl.daemon import Daemon, try_lock

    _simulate(cli)
    (mid,) = ok(cli("produce", "t", "-m", "a")).stdout.split()
    _receive(cli, "s", "-t", "Shared", "--nack-delay", "1m")
    ok(cli("nack", "t", "-s", "s", mid))
    fd = try_lock(store_path)
    assert fd is not None
    b = Broker(store_path)
    try:
        Daemon(b, store_path).tick()
        st = pjson(cli("daemon", "status", "-o", "json"))
        assert (st["timersScheduled"], st["timersDue"]) == (1, 0)
        text = ok(cli("daemon", "status")).stdout
        assert "1 timer(s) scheduled, 0 due" in text
    finally:
        b.close()
        os.close(fd)


# -- clock advance: what fired, by kind -----------------------------------------------------------
def test_clock_advance_says_nothing_fired(cli):
    _simulate(cli)
    assert _advance(cli, "10s") == NOTHING
    assert ok(cli("clock", "advance", "1s")).stdout == \
        "simulated 2026-01-01T00:00:11.000Z; fired: nothing\n"


def test_clock_advance_counts_nacks(cli):
    _simulate(cli)
    ids = ok(cli("produce", "t", "-m", "a", "-m", "b")).stdout.split()
    _receive(cli, "s", "-t", "Shared", "--nack-delay", "1s", n=2)
    ok(cli("nack", "t", "-s", "s", *ids))
    assert _advance(cli, "500ms") == NOTHING                # not due yet
    assert ok(cli("clock", "advance", "500ms")).stdout == \
        "simulated 2026-01-01T00:00:01.000Z; fired: 2 nack\n"
    assert [m["redeliveryCount"] for m in _receive(cli, "s", "-t", "Shared", n=2)] == [1, 1]


def test_clock_advance_counts_ack_timeouts(cli):
    _simulate(cli)
    ok(cli("produce", "t", "-m", "a"))
    _receive(cli, "s", "-t", "Shared", "--ack-timeout", "10s")
    assert _advance(cli, "11s") == {**NOTHING, "ackTimeout": 1}
    (m,) = _receive(cli, "s", "-t", "Shared")
    assert m["redeliveryCount"] == 1


def test_clock_advance_counts_delayed_messages_whose_time_came(cli):
    _simulate(cli)
    ok(cli("produce", "t", "-m", "later", "--deliver-after", "30s"))
    ok(cli("produce", "t", "-m", "much-later", "--deliver-after", "1h"))
    assert _receive(cli, "s", "-t", "Shared", n=2) == []      # both held back
    assert _advance(cli, "30s") == {**NOTHING, "delayed": 1}
    assert [m["payload"] for m in _receive(cli, "s", "-t", "Shared", n=2)] == ["later"]
    # An hour on, the other one came, and the receiving consumer's lease (5m) ended.
    assert _advance(cli, "1h") == {**NOTHING, "delayed": 1, "lease": 1}


def test_clock_advance_counts_retries(cli):
    _simulate(cli)
    (mid,) = ok(cli("produce", "t", "-m", "again")).stdout.split()
    retry = ("-t", "Shared", "--enable-retry")
    (m,) = _receive(cli, "s", *retry)
    ok(cli("reconsume-later", "t", "-s", "s", "--delay", "10s", mid))
    assert _receive(cli, "s", *retry) == []                    # held on the retry topic
    assert _advance(cli, "10s") == {**NOTHING, "retry": 1}
    (m,) = _receive(cli, "s", *retry)
    assert m["payload"] == "again" and m["topic"].endswith("t-s-RETRY")


def test_clock_advance_counts_messages_expired_by_ttl(cli):
    _simulate(cli)
    ok(cli("topics", "create-subscription", "t", "-s", "s1"))
    ok(cli("topics", "create-subscription", "t", "-s", "s2"))
    ok(cli("produce", "t", "-m", "a", "-m", "b"))
    ok(cli("topics", "set-message-ttl", "t", "--ttl", "60"))
    assert _advance(cli, "61s") == {**NOTHING, "ttl": 4}      # 2 messages on 2 subscriptions
    assert ok(cli("clock", "advance", "1s")).stdout.endswith("; fired: nothing\n")


def test_clock_advance_counts_consumers_whose_lease_ended(cli):
    _simulate(cli)
    ok(cli("produce", "t", "-m", "a"))
    _receive(cli, "s", "-t", "Shared", "--lease", "30s")
    assert _advance(cli, "29s") == NOTHING
    assert _advance(cli, "1s") == {**NOTHING, "lease": 1}
    assert pjson(cli("subscriptions", "consumers", "t", "s", "-o", "json")) == []
    (m,) = _receive(cli, "s", "-t", "Shared")                 # given back, uncounted
    assert m["payload"] == "a" and m["redeliveryCount"] == 0


def test_clock_advance_text_lists_every_kind_that_fired(cli):
    _simulate(cli)
    ids = ok(cli("produce", "t", "-m", "a", "-m", "b")).stdout.split()
    ok(cli("produce", "t", "-m", "c", "--deliver-after", "5s"))
    _receive(cli, "s", "-t", "Shared", "--nack-delay", "1s", "--ack-timeout", "5s", n=3)
    ok(cli("nack", "t", "-s", "s", ids[0]))
    out = ok(cli("clock", "advance", "6s")).stdout
    assert out == "simulated 2026-01-01T00:00:06.000Z; fired: 1 nack, 1 ack timeout, 1 delayed\n"
    doc = json.loads(ok(cli("clock", "show", "-o", "json")).stdout)
    assert "fired" not in doc


# -- issue 27 item 7: what a learner sees is right -----------------------------------------------
def test_a_subscription_no_consumer_ever_had_reports_type_none_as_pulsar_does(cli, monkeypatch):
    """PersistentSubscription.getTypeString: "None" while the subscription has no dispatcher
    (made by create-subscription, no consumer yet); its consumers' type once one attaches."""
    ok(cli("produce", "t", "-m", "a"))
    ok(cli("topics", "create-subscription", "t", "-s", "fresh"))
    assert pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["fresh"][
        "type"] == "None"
    assert pjson(cli("subscriptions", "describe", "t", "fresh", "-o", "json"))["type"] == "None"
    monkeypatch.setenv("COLUMNS", "80")
    assert "subscription fresh (None)" in ok(cli("topics", "cursor", "t", "-s", "fresh")).stdout
    _receive(cli, "fresh", "-t", "Shared")
    assert pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["fresh"][
        "type"] == "Shared"
    assert "subscription fresh (Shared)" in ok(cli("topics", "cursor", "t", "-s", "fresh")).stdout


def test_a_due_time_reads_the_same_in_the_picture_explain_pending_and_top(cli, store_path,
                                                                           monkeypatch):
    """One rule (pulsarctl/timetext.py): exact to the millisecond, never rounded. A 10 s nack at
    09:00:00 is due at 09:00:09.856 (the NegativeAcksTracker's 256 ms buckets): the cursor
    picture, explain, subscriptions pending and top's detail pane all say 09:00:09.856, and
    the time left as 9.856s (not 9.86s)."""
    ok(cli("clock", "simulate", "--at", "2026-03-01T09:00:00Z"))
    (mid,) = ok(cli("produce", "tasks", "-m", "t1")).stdout.split()
    _receive(cli, "crew", "-t", "Shared", "--nack-delay", "10s", topic="tasks")
    ok(cli("nack", "tasks", "-s", "crew", mid))
    monkeypatch.setenv("COLUMNS", "80")
    picture = ok(cli("topics", "cursor", "tasks", "-s", "crew")).stdout
    assert "nacked, due 09:00:09.856 (in 9.856s)" in picture
    assert "redelivered after 10s, due 09:00:09.856" in ok(cli("explain", mid)).stdout
    (p,) = pjson(cli("subscriptions", "pending", "tasks", "crew", "-o", "json"))
    assert p["nextRedelivery"] == "2026-03-01T09:00:09.856Z"
    b = Broker(store_path)
    try:
        console = Console(file=io.StringIO(), width=100, color_system=None)
        console.print(detail_renderable(b, "persistent://public/default/tasks"))
        pane = console.file.getvalue()
    finally:
        b.close()
    assert "nacked, due 09:00:09.856 (in 9.856s)" in pane
    # A minute and a half left reads 1m30.5s in the same rule, not 1m30s.
    ok(cli("clock", "simulate", "--at", "2026-03-01T08:58:39.356Z"))
    picture = ok(cli("topics", "cursor", "tasks", "-s", "crew")).stdout
    assert "(in 1m30.5s)" in picture
