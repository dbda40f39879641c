"""`dlq list|stats|peek|drain|replay|purge` (CLI.md "Dead letters"; pulsarctl/broker/dlq.py,
pulsarctl/cli/dlq_cmd.py), in process: real LMDB in tmp_path, the store's simulated clock for
ages (never a sleep), typer's CliRunner. Processes, locks and crashes: tests/processes/test_dlq_procs.py."""
from __future__ import annotations

import json
import os

import pytest

from pulsarctl.broker import Broker
from pulsarctl.broker.dlq import SUBSCRIPTION, lock_path
from pulsarctl.messages import OutgoingMessage

from cli_helpers import assert_error, ok, pjson, rows

FULL = "persistent://public/default/"
DLQ = "orders-billing-DLQ"
ISO0 = "2026-01-01T00:00:00Z"


@pytest.fixture
def store(store_path):
    """A broker on the CLI's store, on the store's own clock (as the commands see it)."""
    b = Broker(store_path)
    yield b
    b.close()


def letters(store, n, topic=DLQ, origin="orders", sub="billing", first=0, props=None, key=None,
            ordering_key=None, event_time=0):
    """n dead letters as deadletter.move writes them, published to topic. Returns their ids."""
    msgs = []
    for i in range(first, first + n):
        p = {"REAL_TOPIC": FULL + origin, "ORIGIN_MESSAGE_ID": f"9:{i}:-1",
             "ORIGIN_MESSAGE_IDY_TIME": f"9:{i}:-1", "REAL_SUBSCRIPTION": sub}
        p.update(props or {})
        msgs.append(OutgoingMessage(f"m{i}".encode(), p, key, ordering_key, event_time))
    return store.publish(topic, msgs, producer_name="test-dlq-producer")[1]


def waiting(cli, topic=DLQ):
    return rows(ok(cli("dlq", "peek", topic, "-n", "0", "-o", "ndjson")).stdout)


def topic_records(cli, topic):
    r = cli("read", topic, "-m", "earliest", "-n", "0", "--idle-timeout", "10ms", "-o", "ndjson")
    return rows(ok(r).stdout)


def subscriptions(store, topic):
    return store.topics.subscriptions(topic)


def summary(r) -> str:
    return r.stderr.strip().splitlines()[-1]


def dead_letter_the_real_way(cli, n=3):
    """Produce n messages to orders and nack them past --max-redeliver-count 1 on billing."""
    ok(cli("clock", "simulate", "--at", ISO0))
    for i in range(n):
        ok(cli("produce", "orders", "-m", f"order {i}", "-k", f"k{i}", "-p", f"n={i}"))
    for _ in range(2):
        got = ok(cli("receive", "orders", "-s", "billing", "-t", "Shared", "-p", "Earliest",
                     "--max-redeliver-count", "1", "--nack-delay", "1s", "-n", str(n),
                     "-o", "ndjson")).stdout
        ok(cli("nack", "orders", "-s", "billing", "-", input=got))
        ok(cli("clock", "advance", "2s"))


# -- list ----------------------------------------------------------------------------------------
def test_list_finds_a_real_dlq_with_its_origin_backlog_and_age(cli):
    dead_letter_the_real_way(cli)
    ok(cli("clock", "advance", "90s"))
    r = ok(cli("dlq", "list", "-o", "json"))
    [rec] = json.loads(r.stdout)
    assert rec["topic"] == FULL + DLQ
    assert rec["originTopic"] == FULL + "orders"
    assert rec["originSubscription"] == "billing"
    assert rec["backlog"] == 3
    assert rec["oldestPublishTime"] == "2026-01-01T00:00:04.000Z"
    assert rec["oldestAgeMs"] == 90_000
    assert rec["retained"] is False and rec["subscriptions"] == []
    # Pulsar's pitfall: nothing retains it; a warning per such DLQ, then the summary
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("warning: " + FULL + DLQ + " has no subscription and no retention")
    assert lines[-1] == "1 dead letter topic, 3 dead letters waiting"
    text = ok(cli("dlq", "list"))
    assert "orders-billing-DLQ" in text.stdout and "1m" in text.stdout


def test_list_namespaces_custom_names_property_detection_and_emptied_dlqs(cli, store):
    ok(cli("tenants", "create", "acme"))
    ok(cli("namespaces", "create", "acme/prod"))
    letters(store, 2, "acme/prod/pay-charger-DLQ", origin="pay", sub="charger")
    # a custom --dead-letter-topic name is known from the subscription's policy
    ok(cli("topics", "create-subscription", "audit", "-s", "s1", "-m", "earliest"))
    ok(cli("receive", "audit", "-s", "s1", "-t", "Shared", "--max-redeliver-count", "2",
           "--dead-letter-topic", "parked", "-n", "1", "--idle-timeout", "10ms"))
    ok(cli("produce", "parked", "-m", "x"))
    # no suffix, no policy: found by its messages' REAL_TOPIC
    letters(store, 1, "graveyard", origin="other", sub="s2")
    # a retry topic and a topic replayed into carry REAL_TOPIC too, but are no DLQs
    letters(store, 1, "audit-s1-RETRY", origin="audit", sub="s1")
    letters(store, 1, "orders", origin="orders", sub="billing")
    ok(cli("produce", "plain", "-m", "x"))
    letters(store, 1)
    recs = {r["topic"]: r for r in rows(ok(cli("dlq", "list", "-o", "ndjson")).stdout)}
    assert set(recs) == {FULL + DLQ, FULL + "parked", FULL + "graveyard",
                         "persistent://acme/prod/pay-charger-DLQ"}
    assert recs[FULL + "parked"]["originTopic"] == FULL + "audit"
    assert recs[FULL + "parked"]["originSubscription"] == "s1"
    assert recs[FULL + "graveyard"]["originTopic"] == FULL + "other"
    only = rows(ok(cli("dlq", "list", "acme/prod", "-o", "ndjson")).stdout)
    assert [r["topic"] for r in only] == ["persistent://acme/prod/pay-charger-DLQ"]
    # emptied: still listed, backlog 0, retained by pulsarctl-dlq, no warning
    ok(cli("dlq", "purge", "acme/prod/pay-charger-DLQ"))
    r = ok(cli("dlq", "list", "acme/prod", "-o", "json"))
    [rec] = json.loads(r.stdout)
    assert rec["backlog"] == 0 and rec["oldestPublishTime"] is None and rec["oldestAgeMs"] is None
    assert rec["retained"] is True and rec["subscriptions"] == [SUBSCRIPTION]
    assert "warning" not in r.stderr
    assert_error(cli("dlq", "list", "acme/nope"), 3)
    ok(cli("namespaces", "create", "acme/empty"))
    assert_error(cli("dlq", "list", "acme/empty", "--fail-if-empty"), 6)


def test_list_no_warning_with_a_subscription_or_retention(cli, store):
    letters(store, 1)
    letters(store, 1, "other-s-DLQ")
    ok(cli("topics", "create-subscription", DLQ, "-s", "keeper", "-m", "earliest"))
    r = ok(cli("dlq", "list", "-o", "json"))
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("warning")] == [
        ln for ln in r.stderr.splitlines() if "other-s-DLQ" in ln]
    ok(cli("namespaces", "set-retention", "public/default", "-t", "-1", "-s", "-1"))
    r = ok(cli("dlq", "list", "-o", "json"))
    assert "warning" not in r.stderr
    recs = {x["topic"]: x for x in json.loads(r.stdout)}
    assert recs[FULL + DLQ]["retained"] is True
    assert recs[FULL + "other-s-DLQ"]["retained"] is False
    assert recs[FULL + "other-s-DLQ"]["retention"] is True


# -- stats ---------------------------------------------------------------------------------------
def test_stats_counts_by_origin_subscription_property_and_age(cli, store):
    ok(cli("clock", "simulate", "--at", ISO0))
    letters(store, 2, origin="orders", sub="billing", props={"reason": "timeout"})
    ok(cli("clock", "advance", "2d"))
    letters(store, 1, origin="orders", sub="audit", first=2, props={"reason": "parse"})
    ok(cli("clock", "advance", "2h"))
    letters(store, 3, origin="payments", sub="billing", first=3)
    ok(cli("clock", "advance", "30s"))
    d = pjson(cli("dlq", "stats", DLQ, "--by-property", "reason", "-o", "json"))
    assert d["topic"] == FULL + DLQ and d["total"] == 6
    assert d["byRealTopic"] == {FULL + "payments": 3, FULL + "orders": 3}
    assert d["byRealSubscription"] == {"billing": 5, "audit": 1}
    assert d["byProperty"] == {"name": "reason", "counts": {"(none)": 3, "timeout": 2,
                                                             "parse": 1}}
    assert d["byAge"] == {"<1m": 3, "<1h": 0, "<1d": 1, "<7d": 2, ">=7d": 0}
    assert d["oldestPublishTime"] == "2026-01-01T00:00:00.000Z"
    text = ok(cli("dlq", "stats", DLQ))
    assert "REAL_SUBSCRIPTION" in text.stdout and "<7d" in text.stdout
    assert summary(text) == f"6 dead letters waiting in {FULL + DLQ}"
    # stats reads only: no subscription was created
    assert subscriptions(store, DLQ) == []
    ok(cli("dlq", "purge", DLQ, "--older-than", "1d"))
    assert pjson(cli("dlq", "stats", DLQ, "-o", "json"))["total"] == 4
    ok(cli("dlq", "purge", DLQ))
    assert_error(cli("dlq", "stats", DLQ, "--fail-if-empty"), 6)


# -- peek ----------------------------------------------------------------------------------------
def test_peek_shows_records_with_properties_and_changes_nothing(cli, store):
    ids = letters(store, 12, key="k", props={"team": "a"})
    letters(store, 2, first=12, props={"team": "b"})
    recs = rows(ok(cli("dlq", "peek", DLQ, "-o", "ndjson")).stdout)
    assert len(recs) == 10  # the default
    assert recs[0]["messageId"] == str(ids[0]) and recs[0]["payload"] == "m0"
    assert recs[0]["properties"]["REAL_TOPIC"] == FULL + "orders"
    assert recs[0]["key"] == "k" and recs[0]["topic"] == FULL + DLQ
    assert len(rows(ok(cli("dlq", "peek", DLQ, "-n", "3", "-o", "ndjson")).stdout)) == 3
    b = rows(ok(cli("dlq", "peek", DLQ, "-n", "0", "--filter", "team=b", "-o", "ndjson")).stdout)
    assert [x["payload"] for x in b] == ["m12", "m13"]
    none = cli("dlq", "peek", DLQ, "--filter", "team=b", "--filter", "REAL_SUBSCRIPTION=x")
    assert ok(none).stdout == "" and summary(none) == "showed 0 of 0 dead letters waiting"
    j = pjson(cli("dlq", "peek", DLQ, "-n", "2", "-o", "json"))
    assert [x["payload"] for x in j] == ["m0", "m1"]
    t = ok(cli("dlq", "peek", DLQ, "-n", "1"))
    assert "REAL_SUBSCRIPTION=billing" in t.stdout and "content:m0" in t.stdout
    assert summary(t) == "showed 1 of 14 dead letters waiting"
    # never a subscription, never a cursor moved
    assert subscriptions(store, DLQ) == []
    assert len(waiting(cli)) == 14
    # once some are handled, peek shows only what waits
    ok(cli("dlq", "drain", DLQ, "--max", "5", "--out", os.devnull))
    assert [x["payload"] for x in waiting(cli)][:2] == ["m5", "m6"]
    assert_error(cli("dlq", "peek", DLQ, "--filter", "nope"), 2)
    assert_error(cli("dlq", "peek", "no-such-DLQ"), 3)
    assert_error(cli("dlq", "peek", DLQ, "--filter", "team=z", "--fail-if-empty"), 6)


# -- drain ---------------------------------------------------------------------------------------
def test_drain_writes_consume_records_then_acks(cli, store, tmp_path):
    dead_letter_the_real_way(cli)
    out = tmp_path / "dead.ndjson"
    r = ok(cli("dlq", "drain", DLQ, "--out", str(out)))
    assert r.stdout == "" and summary(r) == "drained 3, failed 0"
    drained = out.read_text().splitlines()
    # exactly the lines `consume -o ndjson` prints, bar the subscription and consumer names
    consumed = ok(cli("consume", DLQ, "-s", "look", "-p", "Earliest", "-n", "3",
                      "--consumer-name", "pulsarctl-dlq", "-o", "ndjson")).stdout.splitlines()
    assert drained == [ln.replace('"subscription":"look"', '"subscription":"pulsarctl-dlq"')
                       for ln in consumed]
    rec = json.loads(drained[0])
    assert rec["payload"] == "order 0" and rec["key"] == "k0"
    assert rec["properties"]["REAL_SUBSCRIPTION"] == "billing"
    assert rec["properties"]["n"] == "0"
    assert waiting(cli) == []
    assert [x["backlog"] for x in rows(ok(cli("dlq", "list", "-o", "ndjson")).stdout)] == [0]
    # nothing left: appends nothing; --fail-if-empty says so in one line
    assert_error(cli("dlq", "drain", DLQ, "--out", str(out), "--fail-if-empty"), 6)
    assert len(out.read_text().splitlines()) == 3


def test_drain_to_stdout_max_and_append(cli, store, tmp_path):
    letters(store, 5)
    r = ok(cli("dlq", "drain", DLQ, "--max", "2", "--batch", "1"))
    assert [x["payload"] for x in rows(r.stdout)] == ["m0", "m1"]
    assert rows(r.stdout)[0]["subscription"] == SUBSCRIPTION
    out = tmp_path / "o.ndjson"
    out.write_bytes(b'{"messageId":"1:0:-1","topic":"x"}\n{"messageId":"7:7:-1","pay')  # torn
    d = pjson(cli("dlq", "drain", DLQ, "--out", str(out), "-o", "json"))
    assert d == {"topic": FULL + DLQ, "drained": 3, "failed": 0, "out": str(out)}
    lines = out.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(ln) for ln in lines)  # torn tail cut off
    assert [json.loads(ln)["payload"] for ln in lines[1:]] == ["m2", "m3", "m4"]
    other = tmp_path / "other.txt"
    other.write_text("not ours")
    letters(store, 1, first=5)
    ok(cli("dlq", "drain", DLQ, "--out", str(other)))
    assert other.read_text().splitlines()[0] == "not ours"  # someone else's line is kept
    assert json.loads(other.read_text().splitlines()[1])["payload"] == "m5"


def test_drain_exec_acks_on_zero_and_leaves_the_rest(cli, store, tmp_path):
    letters(store, 2, props={"ok": "yes"})
    letters(store, 2, first=2, props={"ok": "no"})
    log = tmp_path / "log"
    cmd = (f'printf "%s %s %s\\n" "$PULSAR_SUBSCRIPTION" "$PULSAR_PROP_REAL_SUBSCRIPTION" '
           f'"$(cat)" >> {log}; test "$PULSAR_PROP_OK" = yes')
    r = cli("dlq", "drain", DLQ, "--exec", cmd)
    # some failed: exit 7, the summary is its one error line (tests/cli/test_dlq_cron.py)
    line = assert_error(r, 7)
    assert line.startswith(f"error: drained 2, failed 2 on {FULL + DLQ}; ") and r.stdout == ""
    calls = log.read_text().splitlines()
    assert calls == [f"{SUBSCRIPTION} billing m{i}" for i in range(4)]
    assert [x["payload"] for x in waiting(cli)] == ["m2", "m3"]
    # the failed ones are tried again by the next drain
    r = cli("dlq", "drain", DLQ, "--exec", "exit 3", "-o", "json")
    assert r.exit_code == 7, r.stderr
    assert json.loads(r.stdout)["failed"] == 2 and len(waiting(cli)) == 2


# -- replay --------------------------------------------------------------------------------------
def test_replay_to_origin_keeps_everything_and_adds_replay_count(cli, store):
    ok(cli("clock", "simulate", "--at", ISO0))
    letters(store, 2, key="k7", ordering_key=b"ok", event_time=1_700_000_000_000,
            props={"custom": "v"})
    letters(store, 1, first=2, props={"REPLAY_COUNT": "2"})
    before = waiting(cli)
    r = ok(cli("dlq", "replay", DLQ, "--to-origin", "-o", "ndjson"))
    results = rows(r.stdout)
    assert [x["action"] for x in results] == ["replayed"] * 3
    assert summary(r) == "replayed 3, skipped 0, failed 0"
    got = topic_records(cli, "orders")
    assert [g["messageId"] for g in got] == [x["newMessageId"] for x in results]
    for old, new in zip(before, got):
        assert new["payload"] == old["payload"] and new["key"] == old["key"]
        assert new["orderingKey"] == old["orderingKey"] and new["eventTime"] == old["eventTime"]
        expected = dict(old["properties"])
        expected["REPLAY_COUNT"] = str(int(expected.get("REPLAY_COUNT", "0")) + 1)
        assert new["properties"] == expected
    assert got[0]["orderingKey"] == "ok" and got[0]["eventTime"] == "2023-11-14T22:13:20.000Z"
    assert got[2]["properties"]["REPLAY_COUNT"] == "3"
    assert waiting(cli) == []
    assert_error(cli("dlq", "replay", DLQ, "--fail-if-empty"), 6)


def test_replay_count_limit_skips_and_leaves_them(cli, store):
    letters(store, 1, props={"REPLAY_COUNT": "3"})
    letters(store, 1, first=1, props={"REPLAY_COUNT": "1"})
    letters(store, 1, first=2, props={"REPLAY_COUNT": "junk"})
    r = ok(cli("dlq", "replay", DLQ))  # --to-origin is the default; text lists each
    assert summary(r) == "replayed 2, skipped 1, failed 0"
    assert "skipped" in r.stdout.splitlines()[0] and "REPLAY_COUNT 3" in r.stdout
    assert [x["payload"] for x in waiting(cli)] == ["m0"]
    assert [x["properties"]["REPLAY_COUNT"] for x in topic_records(cli, "orders")] == ["2", "1"]
    # only skipped ones left: nothing to do
    assert_error(cli("dlq", "replay", DLQ, "--fail-if-empty"), 6)
    r = ok(cli("dlq", "replay", DLQ, "--max-replays", "5", "-o", "json"))
    assert json.loads(r.stdout)["replayed"] == 1
    assert topic_records(cli, "orders")[-1]["properties"]["REPLAY_COUNT"] == "4"


def test_replay_to_topic_filters_ids_and_max(cli, store):
    ids = letters(store, 6, props={"team": "a"})
    letters(store, 2, first=6, props={"team": "b"})
    r = ok(cli("dlq", "replay", DLQ, "--to", "fixed", "--filter", "team=b"))
    assert summary(r) == "replayed 2, skipped 0, failed 0"
    assert [x["payload"] for x in topic_records(cli, "fixed")] == ["m6", "m7"]
    picked = "\n".join(json.dumps({"messageId": str(i)}) for i in (ids[4], ids[1])) + "\n"
    r = ok(cli("dlq", "replay", DLQ, "--to", "fixed", "--ids", "-", input=picked))
    assert summary(r) == "replayed 2, skipped 0, failed 0"
    assert [x["payload"] for x in topic_records(cli, "fixed")][2:] == ["m1", "m4"]
    # plain ids work too; an id already replayed is left out
    r = ok(cli("dlq", "replay", DLQ, "--to", "fixed", "--ids", "-",
               input=f"{ids[1]}\n{ids[2]}\n"))
    assert summary(r) == "replayed 1, skipped 0, failed 0"
    r = ok(cli("dlq", "replay", DLQ, "--to", "fixed", "--max", "1"))
    assert summary(r) == "replayed 1, skipped 0, failed 0"
    assert [x["payload"] for x in waiting(cli)] == ["m3", "m5"]
    assert not store.topics.exists("orders")
    assert_error(cli("dlq", "replay", DLQ, "--ids", "-", input="77:1:-1\n"), 3)
    assert_error(cli("dlq", "replay", DLQ, "--ids", "-", input="not-an-id\n"), 2)


def test_replay_dry_run_changes_nothing(cli, store):
    letters(store, 2)
    letters(store, 1, first=2, props={"REPLAY_COUNT": "3"})
    r = ok(cli("dlq", "replay", DLQ, "--dry-run"))
    lines = r.stdout.splitlines()
    assert lines[0].startswith("would replay ") and lines[0].endswith(
        f"-> {FULL}orders (1 replay(s))")
    assert lines[2].startswith("would skip ")
    assert summary(r) == "would replay 2, would skip 1, failed 0 (dry run: nothing changed)"
    d = pjson(cli("dlq", "replay", DLQ, "--to", "elsewhere", "--dry-run", "-o", "json"))
    assert d["dryRun"] is True and d["replayed"] == 2 and d["skipped"] == 1
    assert [m["action"] for m in d["messages"]] == ["would-replay", "would-replay", "would-skip"]
    assert all(m["newMessageId"] is None for m in d["messages"])
    assert not store.topics.exists("orders") and not store.topics.exists("elsewhere")
    assert subscriptions(store, DLQ) == [] and len(waiting(cli)) == 3


def test_replay_failures_and_errors(cli, store):
    store.publish(DLQ, [OutgoingMessage(b"orphan", {"x": "1"})])
    letters(store, 1, props={"REAL_TOPIC": "bad name/with/too/many/parts"})
    r = cli("dlq", "replay", DLQ, "-o", "ndjson")
    assert [x["action"] for x in rows(r.stdout)] == ["failed", "failed"]
    assert "no REAL_TOPIC property" in rows(r.stdout)[0]["reason"]
    # some failed: exit 7, the summary is its one error line
    line = assert_error(r, 7)
    assert line.startswith(f"error: replayed 0, skipped 0, failed 2 on {FULL + DLQ}; ")
    assert len(waiting(cli)) == 2
    assert_error(cli("dlq", "replay", DLQ, "--to", "x", "--to-origin"), 2)
    assert_error(cli("dlq", "replay", DLQ, "--to", DLQ), 2)
    assert_error(cli("dlq", "replay", DLQ, "--rate", "0"), 2)
    assert_error(cli("dlq", "replay", DLQ, "--to", "a/b"), 2)
    assert_error(cli("dlq", "replay", "missing-DLQ"), 3)
    ok(cli("topics", "create-partitioned-topic", "parted-DLQ", "-p", "2"))
    line = assert_error(cli("dlq", "peek", "parted-DLQ"), 2)
    assert "parted-DLQ-partition-0" in line


def test_replay_to_a_partitioned_origin_goes_back_to_its_partition(cli, store):
    ok(cli("topics", "create-partitioned-topic", "parts", "-p", "3"))
    letters(store, 1, "parts-partition-2-s-DLQ", origin="parts", sub="s",
            props={"ORIGIN_MESSAGE_ID": "4:0:2"})
    letters(store, 1, "parts-partition-2-s-DLQ", origin="parts", sub="s", first=1,
            props={"ORIGIN_MESSAGE_ID": "4:1:2"})
    r = ok(cli("dlq", "replay", "parts-partition-2-s-DLQ", "-o", "ndjson"))
    assert {x["target"] for x in rows(r.stdout)} == {FULL + "parts-partition-2"}
    assert [x["payload"] for x in topic_records(cli, "parts-partition-2")] == ["m0", "m1"]


def test_replay_to_one_subscription_through_its_retry_topic(cli, store):
    ok(cli("topics", "create-subscription", "orders", "-s", "other", "-m", "latest"))
    ok(cli("receive", "orders", "-s", "billing", "-t", "Shared", "--enable-retry",
           "-p", "Latest", "-n", "1", "--idle-timeout", "10ms"))
    ok(cli("topics", "create-subscription", "orders", "-s", "plain", "-m", "latest"))
    letters(store, 2, props={"RECONSUMETIMES": "17"})
    assert_error(cli("dlq", "replay", DLQ, "--subscription", "nobody"), 3)
    line = assert_error(cli("dlq", "replay", DLQ, "--subscription", "plain"), 4)
    assert "--enable-retry" in line
    r = ok(cli("dlq", "replay", DLQ, "--subscription", "billing", "-o", "ndjson"))
    assert {x["target"] for x in rows(r.stdout)} == {FULL + "orders-billing-RETRY"}
    [m0, m1] = topic_records(cli, "orders-billing-RETRY")
    assert m0["payload"] == "m0" and m0["properties"]["REAL_TOPIC"] == FULL + "orders"
    assert m0["properties"]["ORIGIN_MESSAGE_ID"] == "9:0:-1"
    assert m0["properties"]["RECONSUMETIMES"] == "0" and m0["properties"]["DELAY_TIME"] == "0"
    assert m0["properties"]["REPLAY_COUNT"] == "1"
    # only billing sees them, through its retry topic; the origin itself got nothing
    assert not store.topics.exists("orders") or topic_records(cli, "orders") == []
    got = rows(ok(cli("consume", "orders", "-s", "billing", "-t", "Shared", "--enable-retry",
                      "-n", "2", "-o", "ndjson")).stdout)
    assert [g["payload"] for g in got] == ["m0", "m1"]
    assert_error(cli("consume", "orders", "-s", "other", "-n", "1", "--idle-timeout", "10ms",
                     "--fail-if-empty"), 6)


# -- purge ---------------------------------------------------------------------------------------
def test_purge_older_than_and_all(cli, store):
    ok(cli("clock", "simulate", "--at", ISO0))
    letters(store, 3)
    ok(cli("clock", "advance", "3h"))
    letters(store, 2, first=3)
    ok(cli("clock", "advance", "30m"))
    d = pjson(cli("dlq", "purge", DLQ, "--older-than", "1h", "-o", "json"))
    assert d == {"topic": FULL + DLQ, "purged": 3, "olderThanMs": 3_600_000}
    assert [x["payload"] for x in waiting(cli)] == ["m3", "m4"]
    assert_error(cli("dlq", "purge", DLQ, "--older-than", "1h", "--fail-if-empty"), 6)
    assert_error(cli("dlq", "purge", DLQ, "--older-than", "soon"), 2)
    r = ok(cli("dlq", "purge", DLQ))
    assert summary(r) == "purged 2" and waiting(cli) == []
    assert subscriptions(store, DLQ) == [SUBSCRIPTION]


# -- confirmation, rate, lock --------------------------------------------------------------------
def test_destructive_commands_ask_on_a_terminal(cli, store, monkeypatch):
    from pulsarctl.cli import dlq_cmd

    letters(store, 2)
    monkeypatch.setattr(dlq_cmd, "_interactive", lambda: True)
    r = cli("dlq", "purge", DLQ, input="n\n")
    question, line = r.stderr.splitlines()
    # A "no" has an exit code of its own (9, declined), documented with the others.
    assert r.exit_code == 9 and question == (f"purge 2 dead letters of {FULL + DLQ}? They are "
                                             f"gone for good. [y/N]")
    assert line.startswith("error: cancelled; nothing was changed") and len(waiting(cli)) == 2
    r = cli("dlq", "replay", DLQ, input="\n")
    assert r.exit_code == 9 and "Traceback" not in r.stderr
    assert len(waiting(cli)) == 2 and subscriptions(store, DLQ) == []
    ok(cli("dlq", "replay", DLQ, "--dry-run"))  # changes nothing: no question
    r = ok(cli("dlq", "drain", DLQ, "--max", "1", input="y\n"))
    assert "drain 1 dead letter of " in r.stderr and len(waiting(cli)) == 1
    ok(cli("dlq", "purge", DLQ, "-y"))
    assert waiting(cli) == []


def test_rate_is_real_time_even_on_a_simulated_clock(cli, store, fake_time):
    # Real-time pacing (pulsarctl.clock's monotonic/sleep), timed on the fake_time stand-in.
    ok(cli("clock", "simulate", "--at", ISO0))
    letters(store, 6)
    t0 = fake_time.monotonic()
    r = ok(cli("dlq", "replay", DLQ, "--to", "slow", "--rate", "5"))
    elapsed = fake_time.monotonic() - t0
    assert summary(r) == "replayed 6, skipped 0, failed 0"
    assert 0.9 <= elapsed < 5, elapsed  # 5 at once, the sixth a second later


def test_no_wait_exits_5_while_the_lock_is_held(cli, store, store_path):
    letters(store, 1)
    with store.dlq(DLQ).lock():
        assert os.path.exists(lock_path(store.path, DLQ))
        for cmd in (["drain", DLQ, "--out", os.devnull], ["replay", DLQ], ["purge", DLQ]):
            line = assert_error(cli("dlq", *cmd, "--no-wait"), 5)
            assert f"another dlq command is working on {FULL + DLQ} (pid {os.getpid()})" in line
        # read-only commands do not take the lock
        ok(cli("dlq", "peek", DLQ))
        ok(cli("dlq", "replay", DLQ, "--dry-run", "--no-wait"))
    assert len(waiting(cli)) == 1
    ok(cli("dlq", "purge", DLQ, "--no-wait"))
    assert os.path.basename(lock_path(store.path, FULL + DLQ)).startswith("dlq-")
    assert lock_path(store.path, DLQ) == lock_path(store.path, FULL + DLQ)


def test_replay_count_survives_another_trip_through_the_dlq(cli):
    """Replayed, failed again, dead-lettered again: REPLAY_COUNT travels with the message (the
    dead letter move keeps properties), so --max-replays ends the loop."""
    dead_letter_the_real_way(cli, n=1)
    r = ok(cli("dlq", "replay", DLQ, "--max-replays", "1", "-o", "ndjson"))
    assert [x["action"] for x in rows(r.stdout)] == ["replayed"]
    for _ in range(2):
        got = ok(cli("receive", "orders", "-s", "billing", "-t", "Shared", "-n", "1",
                     "-o", "ndjson")).stdout
        assert json.loads(got)["properties"]["REPLAY_COUNT"] == "1"
        ok(cli("nack", "orders", "-s", "billing", "-", input=got))
        ok(cli("clock", "advance", "2s"))
    [again] = waiting(cli)
    assert again["properties"]["REPLAY_COUNT"] == "1"
    assert again["properties"]["ORIGIN_MESSAGE_ID"].startswith("1:0")  # the first origin
    r = ok(cli("dlq", "replay", DLQ, "--max-replays", "1"))
    assert summary(r) == "replayed 0, skipped 1, failed 0" and len(waiting(cli)) == 1


def test_a_chunked_dead_letter_is_peeked_drained_and_acked_as_one(cli, store, tmp_path):
    """A chunked message dead-lettered stays in chunks on the DLQ (as Pulsar's chunking DLQ
    producer sends it); peek and drain show it once, joined and decompressed, at its last
    chunk's id, and handling it acks every chunk."""
    import pulsarctl
    from pulsarctl.client import CompressionType

    body = bytes(range(256)) * 3
    store.policies.update_setting("maxMessageSize", "100")
    c = pulsarctl.Client(broker=store)
    c.create_producer("orders", chunking_enabled=True,
                      compression_type=CompressionType.ZLib).send(body)
    c.create_producer("orders").send(b"small")
    con = c.subscribe("orders", "billing", consumer_type=pulsarctl.ConsumerType.Shared,
                      initial_position=pulsarctl.InitialPosition.Earliest,
                      dead_letter_policy=pulsarctl.ConsumerDeadLetterPolicy(
                          max_redeliver_count=1))
    for _ in range(4):
        m = con.receive(timeout_millis=0)
        con.negative_acknowledge(m)
        store.redeliver_unacked("orders", "billing", con.consumer_name())
    c.close()
    peeked = rows(ok(cli("dlq", "peek", DLQ, "-o", "ndjson")).stdout)
    assert len(peeked) == 2
    assert peeked[1]["payload"] == "small"
    out = tmp_path / "d.ndjson"
    ok(cli("dlq", "drain", DLQ, "--out", str(out)))
    drained = rows(out.read_text())
    assert [d["messageId"] for d in drained] == [p["messageId"] for p in peeked]
    assert drained[0]["properties"]["REAL_TOPIC"] == FULL + "orders"
    r = pulsarctl.Client(broker=store).create_reader(DLQ, pulsarctl.MessageId.earliest)
    first = r.read_next(timeout_millis=0)  # what the drained record holds, as a reader has it
    assert first.data() == body and str(first.message_id()) == drained[0]["messageId"]
    assert [x["backlog"] for x in rows(ok(cli("dlq", "list", "-o", "ndjson")).stdout)] == [0]
