"""`explain ID -t TOPIC` and the global `--explain` (issue 17 items 2 and 3; CLI.md "Watching and
teaching"): the text a person reads, the JSON shape, the lines on stderr, the errors."""
from __future__ import annotations

import json

from cli_helpers import assert_error, ok, pjson, rows

AT = "2026-01-01T10:00:00Z"


def _receive(cli, *extra, n=1):
    r = cli("receive", "t", "-s", "jobs", "-t", "Shared", "-p", "Earliest", "-n", str(n),
            "--idle-timeout", "10ms", "-o", "ndjson", *extra)
    assert r.exit_code in (0, 6), r.stderr
    return rows(r.stdout)


def _nacked_once(cli):
    ok(cli("clock", "simulate", "--at", AT))
    (mid,) = ok(cli("produce", "t", "-m", "hello", "--producer-name", "p1")).stdout.split()
    _receive(cli, "--nack-delay", "4s", "--consumer-name", "c1")
    ok(cli("clock", "advance", "5s"))
    ok(cli("nack", "t", "-s", "jobs", mid))
    ok(cli("clock", "advance", "5s"))
    return mid


def test_explain_text_tells_the_life_oldest_first(cli):
    mid = _nacked_once(cli)
    got = _receive(cli, "--nack-delay", "4s", "--consumer-name", "c1")
    assert got[0]["redeliveryCount"] == 1
    out = ok(cli("explain", mid, "-t", "t")).stdout
    assert out == (
        f"2026-01-01T10:00:00.000Z  {mid} published to t by producer p1 (sequence id 0)\n"
        f"2026-01-01T10:00:00.000Z  {mid} delivered to consumer c1 of Shared subscription jobs\n"
        f"2026-01-01T10:00:05.000Z  {mid} negatively acknowledged by consumer c1 of "
        "subscription jobs: redelivered after 4s, due 10:00:08.960 (pulsarctl: the broker "
        "keeps this nack timer; Pulsar's lives in the client)\n"
        f"2026-01-01T10:00:10.000Z  {mid} redelivered on subscription jobs, redelivery count 1 "
        "(nacked at 10:00:05, nack backoff 4s)\n"
        f"2026-01-01T10:00:10.000Z  {mid} delivered to consumer c1 of Shared subscription jobs "
        "(redelivery 1: nacked at 10:00:05, nack backoff 4s)\n")


def test_explain_json_shape(cli):
    mid = _nacked_once(cli)
    doc = pjson(cli("explain", mid, "-t", "t", "-s", "jobs", "-o", "json"))
    assert set(doc) == {"messageId", "topic", "events"}
    assert doc["messageId"] == mid and doc["topic"] == "persistent://public/default/t"
    for e in doc["events"]:
        assert {"at", "event", "subscription", "consumerName", "redeliveryCount",
                "reason"} <= set(e)
    assert [e["event"] for e in doc["events"]] == ["published", "delivered", "nacked",
                                                   "redelivered"]
    assert doc["events"][0]["at"] == "2026-01-01T10:00:00.000Z"
    assert doc["events"][3]["reason"] == "nacked at 10:00:05, nack backoff 4s"


def test_explain_flag_says_what_changed_on_stderr(cli):
    ok(cli("clock", "simulate", "--at", AT))
    (mid,) = ok(cli("produce", "t", "-m", "hello", "--producer-name", "p1")).stdout.split()
    _receive(cli, "--nack-delay", "4s", "--consumer-name", "c1")
    ok(cli("clock", "advance", "5s"))
    r = ok(cli("--explain", "nack", "t", "-s", "jobs", mid))
    assert r.stderr.endswith(f"{mid} negatively acknowledged by consumer c1 of subscription "
                             "jobs: redelivered after 4s, due 10:00:08.960 (pulsarctl: the "
                             "broker keeps this nack timer; Pulsar's lives in the client)\n")
    # clock advance fires the nack timer: says so by kind, and --explain says what it did.
    r = ok(cli("clock", "advance", "5s", "--explain"))
    assert "fired: 1 nack" in r.stdout
    assert (f"{mid} redelivered on subscription jobs, redelivery count 1 (nacked at "
            "10:00:05, nack backoff 4s)") in r.stderr
    r = cli("--explain", "receive", "t", "-s", "jobs", "-t", "Shared", "-p", "Earliest",
            "--nack-delay", "4s", "--consumer-name", "c1", "-n", "1", "--idle-timeout", "10ms")
    assert r.exit_code in (0, 6), r.stderr
    assert r.stderr == (f"{mid} delivered to consumer c1 of Shared subscription jobs "
                        "(redelivery 1: nacked at 10:00:05, nack backoff 4s)\n")
    # Written after the subcommand too, as the other global flags.
    r = ok(cli("produce", "t", "-m", "x", "--explain", "--producer-name", "p1"))
    (new,) = r.stdout.split()
    assert r.stderr == f"{new} published to t by producer p1 (sequence id 1)\n"


def test_explain_unknown_id_is_one_line_and_exit_3(cli):
    ok(cli("produce", "t", "-m", "hello"))
    r = cli("explain", "1:99", "-t", "t")
    assert r.exit_code == 3
    assert len(r.stderr.strip().splitlines()) == 1 and "not found" in r.stderr


def test_a_subscription_nothing_names_is_not_found(cli):
    """-s filters the life to one subscription's events; one that does not exist and no event
    names (a typo) is exit 3, not an empty life."""
    ok(cli("produce", "t", "-m", "x"))
    r = cli("explain", "1:0:-1", "-t", "t", "-s", "nosub")
    assert r.exit_code == 3 and "subscription 'nosub' not found" in r.stderr
    assert "pulsarctl topics subscriptions t" in r.stderr


def test_the_json_of_a_nack_has_its_due_time_and_says_whose_timer_it_is(cli):
    mid = _nacked_once(cli)
    doc = pjson(cli("explain", mid, "-o", "json"))   # no -t: the id's ledger names the topic
    (nack,) = [e for e in doc["events"] if e["event"] == "nacked"]
    assert nack["due"] == "2026-01-01T10:00:08.960Z" and nack["delay"] == 4000
    assert nack["beyondPulsar"] == "the broker keeps this nack timer; Pulsar's lives in the client"


def test_an_id_alone_is_enough_and_says_when_it_is_not(cli):
    """README: ledger ids are unique in a store, so an id alone finds its message; no topic
    holds it: exit 3; the non-persistent topics' store holds that ledger too: exit 2; a batch
    index on an entry that is not a batch: exit 3. Each one line."""
    (mid,) = ok(cli("produce", "t", "-m", "hello", "--producer-name", "p1")).stdout.split()
    out = ok(cli("explain", mid)).stdout
    assert out.endswith(f"{mid} published to t by producer p1 (sequence id 0)\n")
    line = assert_error(cli("explain", "9:0"), 3, stdout_empty=True)
    assert "no topic of this store has ledger 9" in line and "-t TOPIC" in line
    line = assert_error(cli("explain", f"{mid}:5", "-t", "t"), 3, stdout_empty=True)
    assert f"{mid} is not a batch, so it has no batch index 5" in line
    ok(cli("produce", "non-persistent://public/default/np", "-m", "x"))
    line = assert_error(cli("explain", mid), 2, stdout_empty=True)
    assert "ambiguous" in line and "-t TOPIC" in line
    assert ok(cli("explain", mid, "-t", "t")).stdout == out


def test_what_pulsar_does_not_do_is_marked_as_pulsarctls(cli):
    """Counts and dead letters on an Exclusive subscription and a consumer's lease are
    pulsarctl's: each line that shows one says so."""
    ok(cli("clock", "simulate", "--at", AT))
    (mid,) = ok(cli("produce", "t", "-m", "x")).stdout.split()
    ex = ("receive", "t", "-s", "ex", "-t", "Exclusive", "-p", "Earliest", "-n", "1",
          "--idle-timeout", "10ms", "--nack-delay", "1s", "--max-redeliver-count", "1",
          "--lease", "30s", "-o", "ndjson")
    for _ in range(2):
        r = cli(*ex)
        assert r.exit_code == 0, r.stderr
        ok(cli("nack", "t", "-s", "ex", mid))
        ok(cli("clock", "advance", "2s"))
    lines = ok(cli("explain", mid, "-s", "ex")).stdout.splitlines()
    count = "(pulsarctl: Pulsar keeps no count on Exclusive and Failover subscriptions)"
    assert [ln for ln in lines if "redelivered on" in ln][0].endswith(count)
    assert [ln for ln in lines if "(redelivery 1" in ln][0].endswith(count)
    assert [ln for ln in lines if "dead-lettered" in ln][0].endswith(
        "(pulsarctl: Pulsar dead-letters only on Shared and Key_Shared subscriptions)")
    # A receive's consumer lives by its lease: when it ends, what it held goes back.
    (other,) = ok(cli("produce", "t", "-m", "y")).stdout.split()
    r = cli("receive", "t", "-s", "sh", "-t", "Shared", "-p", "Earliest", "-n", "5",
            "--idle-timeout", "10ms", "--lease", "30s", "--consumer-name", "ann")
    assert r.exit_code == 0, r.stderr
    ok(cli("clock", "advance", "31s"))
    r = cli("receive", "t", "-s", "sh", "-t", "Shared", "-n", "5", "--idle-timeout", "10ms")
    assert r.exit_code in (0, 6), r.stderr
    gone = [ln for ln in ok(cli("explain", other, "-s", "sh")).stdout.splitlines()
            if "given back" in ln]
    assert gone == [gone[0]] and gone[0].endswith(
        "given back to subscription sh for dispatch: consumer ann's lease ended (pulsarctl: a "
        "consumer held by a lease; Pulsar's lives by its connection)")


def test_why_nothing_happened_reads_in_explain(cli):
    """A delayed message a fetch passed over, and a consumer refused while it waited: one line
    each, however often the consumers tried."""
    ok(cli("clock", "simulate", "--at", AT))
    (mid,) = ok(cli("produce", "t", "-m", "later", "--deliver-after", "1m")).stdout.split()
    for _ in range(2):
        assert _receive(cli, "--consumer-name", "c1") == []
    for _ in range(2):
        r = cli("receive", "t", "-s", "jobs", "-t", "Exclusive", "--consumer-name", "c2",
                "-n", "1", "--idle-timeout", "10ms")
        assert r.exit_code == 4
    lines = ok(cli("explain", mid)).stdout.splitlines()
    assert [ln.split("  ", 1)[1] for ln in lines[1:]] == [
        f"{mid} held back by delayed delivery until 2026-01-01T10:01:00.000Z",
        f"{mid} not delivered on subscription jobs to consumer c1: its delivery time has not "
        "come (delayed delivery holds it until then)",
        f"{mid} waited: subscription jobs refused consumer c2 (ConsumerBusy: subscription "
        "'jobs' is Shared with 1 connected consumer(s); an Exclusive consumer cannot join it)"]
