"""Every command of CLI.md that exists now, through the `cli` fixture (typer's CliRunner and the
one place errors become exit codes), plus the Definition of done for bad input: one line on
stderr starting with "error:", a documented exit code, never a traceback, never a half-applied
change."""
from __future__ import annotations

import base64
import json
from functools import partial
import os
import re
import shutil
import subprocess
import sys

import pytest

from cli_helpers import assert_error, ok, rows

ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ID_RE = re.compile(r"^\d+:\d+:-?\d+(:-?\d+)?$")
RECORD_KEYS = {"messageId", "topic", "payload", "key", "orderingKey", "properties",
               "publishTime", "eventTime", "producerName", "sequenceId", "redeliveryCount"}
CONSUME_KEYS = RECORD_KEYS | {"subscription", "consumerName"}
FULL = "persistent://public/default/"


# -- helpers ---------------------------------------------------------------------------------
# Every error of these commands leaves stdout empty.
assert_error = partial(assert_error, stdout_empty=True)


def produce(cli, topic, *msgs, extra=()):
    args = ["produce", topic]
    for m in msgs:
        args += ["-m", m]
    r = ok(cli(*args, *extra))
    ids = r.stdout.split()
    assert all(ID_RE.match(i) for i in ids), ids
    return ids


def read_all(cli, topic):
    return rows(ok(cli("read", topic, "-m", "earliest", "-n", "0", "--until-end",
                       "-o", "ndjson")).stdout)


def payloads(cli, topic):
    return [r["payload"] for r in read_all(cli, topic)]


def stats(cli, topic):
    return json.loads(ok(cli("topics", "stats", topic, "-o", "json")).stdout)


def sub_stats(cli, topic, sub):
    return stats(cli, topic)["subscriptions"][sub]


def subscriptions(cli, topic):
    return json.loads(ok(cli("topics", "subscriptions", topic, "-o", "json")).stdout)


def last_id(cli, topic):
    return ok(cli("topics", "last-message-id", topic)).stdout.strip()


# -- produce ---------------------------------------------------------------------------------
def test_produce_prints_one_id_per_line(cli):
    ids = produce(cli, "t", "a", "b", "c")
    assert len(ids) == len(set(ids)) == 3
    assert payloads(cli, "t") == ["a", "b", "c"]
    assert last_id(cli, "t") == ids[-1]


def test_produce_m_is_repeatable_and_not_split_on_commas(cli):
    produce(cli, "t", "a,b", "c")
    assert payloads(cli, "t") == ["a,b", "c"]


def test_produce_separator_splits(cli):
    ok(cli("produce", "t", "-m", "a,b,c", "-m", "d", "-s", ","))
    assert payloads(cli, "t") == ["a", "b", "c", "d"]
    ok(cli("produce", "t2", "-m", "x||y", "--separator", "||"))
    assert payloads(cli, "t2") == ["x", "y"]


def test_produce_files_repeatable_and_comma_separated(cli, tmp_path):
    for name, body in [("f1", b"one"), ("f2", b"two\nlines"), ("f3", b"\x00\xffbin")]:
        (tmp_path / name).write_bytes(body)
    f1, f2, f3 = (str(tmp_path / n) for n in ("f1", "f2", "f3"))
    r = ok(cli("produce", "t", "-f", f"{f1},{f2}", "--files", f3))
    assert len(r.stdout.split()) == 3
    recs = read_all(cli, "t")
    assert [r["payload"] for r in recs[:2]] == ["one", "two\nlines"]
    assert recs[2]["encoding"] == "base64"
    assert base64.b64decode(recs[2]["payload"]) == b"\x00\xffbin"


def test_produce_missing_file_writes_nothing(cli, tmp_path):
    (tmp_path / "ok").write_text("fine")
    produce(cli, "t", "before")
    r = cli("produce", "t", "-f", str(tmp_path / "ok"), "-f", str(tmp_path / "missing"))
    assert_error(r, 2)
    assert payloads(cli, "t") == ["before"]


@pytest.mark.parametrize("how", [("--stdin",), ("-f", "-")])
def test_produce_stdin_one_message_per_line(cli, how):
    r = ok(cli("produce", "t", *how, input="l1\nl2\nl 3\n"))
    assert len(r.stdout.split()) == 3
    assert payloads(cli, "t") == ["l1", "l2", "l 3"]


def test_produce_ndjson_records(cli):
    binary = b"\x00\x01\xfe\xffbinary"
    lines = [
        {"payload": "plain"},
        {"payload": base64.b64encode(binary).decode(), "encoding": "base64", "key": "k1",
         "orderingKey": "ok1", "properties": {"a": "b", "n": "1"},
         "eventTime": "2026-01-01T10:00:00Z", "deliverAt": "2026-01-01T00:00:00Z"},
        {"payload": "epoch", "eventTime": 1767225600123, "deliverAt": 1767225600000},
    ]
    r = ok(cli("produce", "t", "--stdin", "--ndjson",
               input="".join(json.dumps(x) + "\n" for x in lines)))
    assert len(r.stdout.split()) == 3
    recs = read_all(cli, "t")
    assert recs[0]["payload"] == "plain" and "encoding" not in recs[0]
    assert recs[0]["eventTime"] is None and recs[0]["key"] is None
    b = recs[1]
    assert b["encoding"] == "base64" and base64.b64decode(b["payload"]) == binary
    assert b["key"] == "k1" and b["orderingKey"] == "ok1"
    assert b["properties"] == {"a": "b", "n": "1"}
    assert b["eventTime"] == "2026-01-01T10:00:00.000Z"
    assert b["deliverAt"] == "2026-01-01T00:00:00.000Z"
    assert recs[2]["eventTime"] == "2026-01-01T00:00:00.123Z"
    assert recs[2]["deliverAt"] == "2026-01-01T00:00:00.000Z"


def test_produce_ndjson_through_f_dash(cli):
    ok(cli("produce", "t", "-f", "-", "--ndjson", input='{"payload": "x", "key": "k"}\n'))
    [rec] = read_all(cli, "t")
    assert (rec["payload"], rec["key"]) == ("x", "k")


def test_produce_ndjson_malformed_line_is_exit_2(cli):
    r = cli("produce", "t", "--stdin", "--ndjson", input="not json\n")
    assert_error(r, 2)
    r = cli("produce", "t", "--stdin", "--ndjson",
            input='{"payload": "!!", "encoding": "base64"}\n')
    assert_error(r, 2)


def test_produce_num_produce_repeats(cli):
    r = ok(cli("produce", "t", "-m", "a", "-m", "b", "-n", "3"))
    assert len(r.stdout.split()) == 6
    assert payloads(cli, "t") == ["a", "b"] * 3


def test_produce_metadata_flags(cli):
    ok(cli("produce", "t", "-m", "x", "-m", "y", "-k", "cust-7", "--ordering-key", "ord",
           "-p", "a=b=c", "-p", "source=web", "--event-time", "2026-01-01T00:00:00Z",
           "--producer-name", "my-prod", "--sequence-id", "100"))
    recs = read_all(cli, "t")
    assert [r["sequenceId"] for r in recs] == [100, 101]
    for r in recs:
        assert r["key"] == "cust-7"
        assert r["orderingKey"] == "ord"
        assert r["properties"] == {"a": "b=c", "source": "web"}
        assert r["eventTime"] == "2026-01-01T00:00:00.000Z"
        assert r["producerName"] == "my-prod"


def test_produce_event_time_epoch_ms(cli):
    ok(cli("produce", "t", "-m", "x", "--event-time", "1767225600123"))
    assert read_all(cli, "t")[0]["eventTime"] == "2026-01-01T00:00:00.123Z"


def test_sequence_ids_continue_per_producer_name(cli):
    ok(cli("produce", "t", "-m", "a", "--producer-name", "p1"))
    ok(cli("produce", "t", "-m", "b", "--producer-name", "p1"))
    assert [r["sequenceId"] for r in read_all(cli, "t")] == [0, 1]


def test_produce_empty_payload_is_allowed(cli):
    ids = produce(cli, "t", "")
    assert len(ids) == 1
    assert read_all(cli, "t")[0]["payload"] == ""


def test_produce_property_without_equals_is_exit_2(cli):
    assert_error(cli("produce", "t", "-m", "x", "-p", "novalue"), 2)
    assert_error(cli("topics", "stats", "t"), 3)  # nothing was created


def test_produce_nothing_to_produce_is_exit_2(cli):
    assert_error(cli("produce", "t"), 2)


def test_produce_output_json_and_ndjson(cli):
    doc = json.loads(ok(cli("produce", "t", "-m", "a", "-m", "b", "-o", "json")).stdout)
    assert len(doc["messageIds"]) == 2 and all(ID_RE.match(i) for i in doc["messageIds"])
    recs = rows(ok(cli("produce", "t", "-m", "c", "-o", "ndjson")).stdout)
    assert len(recs) == 1 and ID_RE.match(recs[0]["messageId"])


@pytest.mark.parametrize("how", [
    ("-m", "later", "--deliver-at", "2099-01-01T00:00:00Z"),
    ("-m", "later", "--deliver-after", "1d"),
    ("--stdin", "--ndjson"),
])
def test_delayed_message_is_not_delivered_early(cli, how):
    """CLI.md: --deliver-after / --deliver-at / deliverAt delay delivery (Shared). Until delayed
    delivery exists, refusing the flag with a clear error (as the README promises for features
    that are not there yet) is also correct; delivering the message at once is not."""
    ok(cli("consume", "d", "-s", "s", "-t", "Shared", "-p", "Earliest", "--idle-timeout", "10ms"))
    r = cli("produce", "d", *how, input='{"payload": "later", "deliverAt": "2099-01-01T00:00:00Z"}\n')
    if r.exit_code != 0:
        assert_error(r, r.exit_code)
        assert read_all(cli, "d") == []
        return
    r = ok(cli("consume", "d", "-s", "s", "-t", "Shared", "-n", "1", "--idle-timeout", "200ms",
               "-o", "ndjson"))
    assert r.stdout == "", "a message with a delivery time in 2099 was delivered now"


# -- consume ---------------------------------------------------------------------------------
def test_consume_acks_each_message(cli):
    produce(cli, "t", "a", "b", "c")
    r = ok(cli("consume", "t", "-s", "s", "-p", "Earliest", "-n", "2", "-o", "ndjson"))
    assert [x["payload"] for x in rows(r.stdout)] == ["a", "b"]
    s = sub_stats(cli, "t", "s")
    assert s["msgBacklog"] == 1 and s["unackedMessages"] == 0
    # -n defaults to 1; the next consume goes on where the acks left off
    r = ok(cli("consume", "t", "-s", "s", "-o", "ndjson"))
    assert [x["payload"] for x in rows(r.stdout)] == ["c"]
    assert sub_stats(cli, "t", "s")["msgBacklog"] == 0


def test_consume_text_output(cli):
    produce(cli, "t", "hello", extra=("-k", "kk", "-p", "a=b"))
    r = ok(cli("consume", "t", "-s", "s", "-p", "Earliest"))
    assert "----- got message -----" in r.stdout
    assert "content:hello" in r.stdout and "key:[kk]" in r.stdout and "a=b" in r.stdout


def test_consume_record_keys_and_times(cli):
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    produce(cli, "t", "x", extra=("--event-time", "2026-01-01T10:00:00.5Z"))
    produce(cli, "t", "y")
    r = ok(cli("consume", "t", "-s", "sub1", "-p", "Earliest", "-n", "2", "-o", "ndjson",
               "--consumer-name", "c1"))
    recs = rows(r.stdout)
    assert len(recs) == 2
    for rec in recs:
        assert set(rec) == CONSUME_KEYS, set(rec) ^ CONSUME_KEYS
        assert rec["topic"] == FULL + "t"
        assert ID_RE.match(rec["messageId"])
        assert ISO_MS.match(rec["publishTime"]), rec["publishTime"]
        assert rec["publishTime"] == "2026-01-01T00:00:00.000Z"
        assert rec["subscription"] == "sub1" and rec["consumerName"] == "c1"
        assert rec["redeliveryCount"] == 0
        assert isinstance(rec["sequenceId"], int) and isinstance(rec["producerName"], str)
        assert rec["properties"] == {} and rec["key"] is None and rec["orderingKey"] is None
    assert recs[0]["eventTime"] == "2026-01-01T10:00:00.500Z"
    assert recs[1]["eventTime"] is None


def test_consume_position_latest_and_earliest(cli):
    produce(cli, "t", "old")
    r = ok(cli("consume", "t", "-s", "late", "-p", "Latest", "--idle-timeout", "200ms"))
    assert r.stdout == ""
    produce(cli, "t", "new")
    r = ok(cli("consume", "t", "-s", "late", "-o", "ndjson", "--idle-timeout", "2s"))
    assert [x["payload"] for x in rows(r.stdout)] == ["new"]
    r = ok(cli("consume", "t", "-s", "early", "-p", "Earliest", "-n", "2", "-o", "ndjson"))
    assert [x["payload"] for x in rows(r.stdout)] == ["old", "new"]


def test_consume_idle_timeout_and_fail_if_empty(cli):
    produce(cli, "t", "only")
    r = ok(cli("consume", "t", "-s", "s", "-p", "Earliest", "-n", "5", "--idle-timeout",
               "200ms", "-o", "ndjson"))
    assert [x["payload"] for x in rows(r.stdout)] == ["only"]  # prints what it got, exit 0
    r = cli("consume", "t", "-s", "s", "-n", "5", "--idle-timeout", "200ms", "--fail-if-empty")
    assert_error(r, 6)
    r = ok(cli("consume", "t", "-s", "s", "--idle-timeout", "0.2"))  # bare number = seconds
    assert r.stdout == ""


def test_consume_hide_content_and_hex(cli):
    produce(cli, "t", "AB")
    r = ok(cli("read", "t", "-m", "earliest", "--hex", "-o", "ndjson"))
    assert rows(r.stdout)[0]["payload"] == "4142"
    r = ok(cli("read", "t", "-m", "earliest", "--hide-content", "-o", "ndjson"))
    assert "payload" not in rows(r.stdout)[0]


def test_exclusive_subscription_refuses_a_second_consumer(cli):
    produce(cli, "t", "a", "b")
    ok(cli("receive", "t", "-s", "ex", "-p", "Earliest"))
    r = cli("consume", "t", "-s", "ex", "--idle-timeout", "200ms")
    assert_error(r, 4)


# -- receive and ack ---------------------------------------------------------------------------
def test_receive_leaves_messages_pending_until_ack(cli):
    ids = produce(cli, "t", "a", "b", "c")
    r = ok(cli("receive", "t", "-s", "w", "-p", "Earliest", "-n", "2", "-o", "ndjson"))
    recs = rows(r.stdout)
    assert [x["messageId"] for x in recs] == ids[:2]
    assert all(set(x) == CONSUME_KEYS for x in recs)
    assert all(x["consumerName"] == "cli" and x["subscription"] == "w" for x in recs)
    s = sub_stats(cli, "t", "w")
    assert s["msgBacklog"] == 3 and s["unackedMessages"] == 2
    # the pending messages belong to consumer cli: the next receive gets the third one
    r = ok(cli("receive", "t", "-s", "w", "-n", "5", "--idle-timeout", "200ms", "-o", "ndjson"))
    assert [x["messageId"] for x in rows(r.stdout)] == ids[2:]
    # ack from a separate invocation, ids as arguments
    ok(cli("ack", "t", "-s", "w", ids[0], ids[1]))
    s = sub_stats(cli, "t", "w")
    assert s["msgBacklog"] == 1 and s["unackedMessages"] == 1
    # the two-part form ledgerId:entryId is accepted too
    ledger, entry = ids[2].split(":")[:2]
    r = ok(cli("ack", "t", "-s", "w", f"{ledger}:{entry}", "-o", "json"))
    assert json.loads(r.stdout)["acked"] == 1
    assert sub_stats(cli, "t", "w")["msgBacklog"] == 0


def test_receive_text_prints_ids(cli):
    ids = produce(cli, "t", "a")
    r = ok(cli("receive", "t", "-s", "w", "-p", "Earliest"))
    assert ids[0] in r.stdout and "content:a" in r.stdout


def test_ack_reads_records_from_stdin(cli):
    produce(cli, "t", "a", "b")
    r = ok(cli("receive", "t", "-s", "w", "-p", "Earliest", "-n", "2", "-o", "ndjson"))
    ok(cli("ack", "t", "-s", "w", "-", input=r.stdout))
    s = sub_stats(cli, "t", "w")
    assert s["msgBacklog"] == 0 and s["unackedMessages"] == 0


def test_ack_reads_plain_ids_from_stdin(cli):
    ids = produce(cli, "t", "a", "b", "c")
    ok(cli("receive", "t", "-s", "w", "-p", "Earliest", "-n", "3"))
    ok(cli("ack", "t", "-s", "w", "-", input="\n".join(ids[:2]) + "\n"))
    assert sub_stats(cli, "t", "w")["msgBacklog"] == 1


def test_ack_twice_is_a_no_op(cli):
    ids = produce(cli, "t", "a")
    ok(cli("receive", "t", "-s", "w", "-p", "Earliest"))
    ok(cli("ack", "t", "-s", "w", ids[0]))
    ok(cli("ack", "t", "-s", "w", ids[0]))
    assert sub_stats(cli, "t", "w")["msgBacklog"] == 0


def test_ack_with_an_unknown_id_acks_nothing(cli):
    ids = produce(cli, "t", "a", "b")
    ok(cli("receive", "t", "-s", "w", "-p", "Earliest", "-n", "2"))
    ledger = ids[0].split(":")[0]
    assert_error(cli("ack", "t", "-s", "w", ids[0], f"{ledger}:999:-1"), 3)
    assert sub_stats(cli, "t", "w")["msgBacklog"] == 2
    # a malformed id on stdin after a good one: nothing acked either
    assert_error(cli("ack", "t", "-s", "w", "-", input=f"{ids[0]}\nnot-an-id\n"), 2)
    assert sub_stats(cli, "t", "w")["msgBacklog"] == 2


def test_ack_cumulative_on_exclusive(cli):
    ids = produce(cli, "t", "a", "b", "c")
    ok(cli("receive", "t", "-s", "ex", "-t", "Exclusive", "-p", "Earliest", "-n", "3"))
    ok(cli("ack", "t", "-s", "ex", "--cumulative", ids[1]))
    s = sub_stats(cli, "t", "ex")
    assert s["msgBacklog"] == 1 and s["unackedMessages"] == 1


def test_ack_cumulative_on_shared_is_exit_4(cli):
    ids = produce(cli, "t", "a", "b")
    ok(cli("receive", "t", "-s", "sh", "-t", "Shared", "-p", "Earliest", "-n", "2"))
    assert_error(cli("ack", "t", "-s", "sh", "--cumulative", ids[1]), 4)
    assert sub_stats(cli, "t", "sh")["msgBacklog"] == 2


def test_ack_needs_ids(cli):
    produce(cli, "t", "a")
    ok(cli("topics", "create-subscription", "t", "-s", "s"))
    assert_error(cli("ack", "t", "-s", "s"), 2)
    assert_error(cli("ack", "t", "-s", "s", "1:0", "--cumulative", "1:0"), 2)


# -- read ------------------------------------------------------------------------------------
def test_read_positions_and_counts(cli):
    ids = produce(cli, "t", "m0", "m1", "m2", "m3", "m4")

    def got(*args):
        return [x["messageId"] for x in rows(ok(cli("read", "t", *args, "-o", "ndjson")).stdout)]

    assert got("-m", "earliest") == ids[:1]  # -n defaults to 1
    assert got("-m", "earliest", "-n", "2") == ids[:2]
    assert got("-m", ids[1], "-n", "2") == ids[2:4]
    assert got("-m", ids[1], "-i", "-n", "2") == ids[1:3]
    assert got("--start-message-id", ids[1], "--start-message-id-inclusive", "-n", "1") == ids[1:2]
    assert got("-m", ":".join(ids[3].split(":")[:2]), "-n", "0", "--until-end") == ids[4:]
    assert got("-m", "earliest", "-n", "0", "--until-end") == ids
    assert got("-m", "earliest", "-n", "3", "--until-end") == ids[:3]
    assert got("-m", "latest", "-n", "1", "--idle-timeout", "200ms") == []
    assert got("-m", "latest", "-n", "0", "--until-end") == []


def test_read_leaves_nothing_behind(cli):
    produce(cli, "t", "a", "b")
    before = json.loads(ok(cli("topics", "stats-internal", "t", "-o", "json")).stdout)
    ok(cli("read", "t", "-m", "earliest", "-n", "0", "--until-end"))
    ok(cli("read", "t", "-m", "latest", "-n", "1", "--idle-timeout", "100ms"))
    assert subscriptions(cli, "t") == []
    assert stats(cli, "t")["subscriptions"] == {}
    after = json.loads(ok(cli("topics", "stats-internal", "t", "-o", "json")).stdout)
    assert after == before


def test_read_fail_if_empty(cli):
    produce(cli, "t", "a")
    assert_error(cli("read", "t", "-m", "latest", "--idle-timeout", "100ms", "--fail-if-empty"), 6)


# -- topics ----------------------------------------------------------------------------------
def test_topics_list_formats(cli):
    produce(cli, "a", "x")
    produce(cli, "b", "x")
    names = [FULL + "a", FULL + "b"]
    assert sorted(json.loads(ok(cli("topics", "list", "public/default", "-o", "json")).stdout)) == names
    assert sorted(r["topic"] for r in rows(ok(cli("topics", "list", "public/default",
                                                   "-o", "ndjson")).stdout)) == names
    assert sorted(ok(cli("topics", "list", "public/default")).stdout.split()) == names
    assert sorted(ok(cli("topics", "list")).stdout.split()) == names  # public/default by default


@pytest.mark.parametrize("form", [
    ("-o", "json"), ("--output", "json"), ("--output=json",), ("-ojson",),
])
@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
def test_output_option_before_and_after_the_subcommand(cli, before, form):
    produce(cli, "a", "x")
    args = ["topics", "list", "public/default"]
    argv = [*form, *args] if before else [*args, *form]
    assert json.loads(ok(cli(*argv)).stdout) == [FULL + "a"]


def test_output_after_the_subcommand_wins(cli):
    produce(cli, "a", "x")
    r = ok(cli("-o", "json", "topics", "list", "-o", "ndjson"))
    assert rows(r.stdout) == [{"topic": FULL + "a"}]


def test_topics_create_and_delete(cli):
    ok(cli("topics", "create", "t"))
    assert FULL + "t" in ok(cli("topics", "list")).stdout.split()
    assert_error(cli("topics", "create", "t"), 4)
    ok(cli("topics", "delete", "t"))
    assert ok(cli("topics", "list")).stdout.split() == []
    assert_error(cli("topics", "delete", "t"), 3)


def test_topics_delete_refused_with_subscriptions_unless_force(cli):
    produce(cli, "t", "a")
    ok(cli("topics", "create-subscription", "t", "-s", "s"))
    assert_error(cli("topics", "delete", "t"), 4)
    assert subscriptions(cli, "t") == ["s"]
    assert payloads(cli, "t") == ["a"]
    ok(cli("topics", "delete", "t", "--force"))
    assert_error(cli("topics", "stats", "t"), 3)
    # a new topic of the same name starts empty
    produce(cli, "t", "b")
    assert payloads(cli, "t") == ["b"] and subscriptions(cli, "t") == []


def test_topics_stats_keys(cli):
    produce(cli, "t", "a", "b")
    ok(cli("receive", "t", "-s", "s", "-p", "Earliest"))
    s = stats(cli, "t")
    assert s["msgInCounter"] == 2
    sub = s["subscriptions"]["s"]
    for k in ("msgBacklog", "unackedMessages", "consumers", "type", "msgOutCounter"):
        assert k in sub
    assert sub["msgBacklog"] == 2 and sub["unackedMessages"] == 1 and sub["type"] == "Exclusive"
    assert [c["consumerName"] for c in sub["consumers"]] == ["cli"]
    assert "msgInCounter" in ok(cli("topics", "stats", "t")).stdout  # text renders too


def test_topics_stats_internal_keys(cli):
    ids = produce(cli, "t", "a", "b", "c")
    ok(cli("receive", "t", "-s", "s", "-p", "Earliest", "-n", "3"))
    ok(cli("ack", "t", "-s", "s", ids[0], ids[2]))
    s = json.loads(ok(cli("topics", "stats-internal", "t", "-o", "json")).stdout)
    assert s["entriesAddedCounter"] == 3
    assert s["ledgers"] and all("ledgerId" in x for x in s["ledgers"])
    c = s["cursors"]["s"]
    assert c["markDeletePosition"] == ":".join(ids[0].split(":")[:2])
    assert "readPosition" in c
    assert c["individuallyDeletedMessages"] != "[]"
    ok(cli("topics", "stats-internal", "t"))  # text renders too


def test_topics_subscriptions_formats(cli):
    produce(cli, "t", "a")
    ok(cli("topics", "create-subscription", "t", "-s", "s1"))
    ok(cli("topics", "create-subscription", "t", "-s", "s2"))
    assert sorted(subscriptions(cli, "t")) == ["s1", "s2"]
    assert sorted(r["subscription"] for r in rows(ok(cli("topics", "subscriptions", "t",
                                                          "-o", "ndjson")).stdout)) == ["s1", "s2"]
    assert sorted(ok(cli("topics", "subscriptions", "t")).stdout.split()) == ["s1", "s2"]


def test_create_subscription_positions(cli):
    ids = produce(cli, "t", "a", "b", "c")
    ok(cli("topics", "create-subscription", "t", "-s", "e", "-m", "earliest"))
    ok(cli("topics", "create-subscription", "t", "-s", "l"))  # latest by default
    ok(cli("topics", "create-subscription", "t", "-s", "i", "-m", ids[1]))
    assert sub_stats(cli, "t", "e")["msgBacklog"] == 3
    assert sub_stats(cli, "t", "l")["msgBacklog"] == 0
    r = ok(cli("consume", "t", "-s", "i", "-o", "ndjson"))
    assert rows(r.stdout)[0]["messageId"] == ids[1]
    assert_error(cli("topics", "create-subscription", "t", "-s", "e"), 4)


def test_unsubscribe(cli):
    produce(cli, "t", "a")
    ok(cli("topics", "create-subscription", "t", "-s", "s"))
    ok(cli("topics", "unsubscribe", "t", "-s", "s"))
    assert subscriptions(cli, "t") == []
    assert_error(cli("topics", "unsubscribe", "t", "-s", "s"), 3)


def test_peek_messages_changes_nothing(cli):
    ids = produce(cli, "t", "a", "b", "c")
    ok(cli("topics", "create-subscription", "t", "-s", "s", "-m", "earliest"))
    before = (stats(cli, "t"), ok(cli("topics", "stats-internal", "t", "-o", "json")).stdout)
    r = ok(cli("topics", "peek-messages", "t", "-s", "s", "-n", "2", "-o", "ndjson"))
    assert [x["messageId"] for x in rows(r.stdout)] == ids[:2]
    r = ok(cli("topics", "peek-messages", "t", "-s", "s", "-o", "json"))
    assert [x["payload"] for x in json.loads(r.stdout)] == ["a"]
    assert "content:a" in ok(cli("topics", "peek-messages", "t", "-s", "s")).stdout
    after = (stats(cli, "t"), ok(cli("topics", "stats-internal", "t", "-o", "json")).stdout)
    assert after == before
    r = ok(cli("consume", "t", "-s", "s", "-o", "ndjson"))  # still first in line
    assert rows(r.stdout)[0]["messageId"] == ids[0]


def test_peek_messages_missing_subscription_or_topic(cli):
    produce(cli, "t", "a")
    assert_error(cli("topics", "peek-messages", "t", "-s", "nope"), 3)
    assert subscriptions(cli, "t") == []
    assert_error(cli("topics", "peek-messages", "nosuch", "-s", "nope"), 3)
    assert FULL + "nosuch" not in ok(cli("topics", "list")).stdout


def test_get_message_by_id(cli):
    ids = produce(cli, "t", "a", "bee")
    ledger, entry = ids[1].split(":")[:2]
    doc = json.loads(ok(cli("topics", "get-message-by-id", "t", "-l", ledger, "-e", entry,
                            "-o", "json")).stdout)
    assert doc["payload"] == "bee" and doc["messageId"] == ids[1]
    r = ok(cli("topics", "get-message-by-id", "t", "--ledger-id", ledger, "--entry-id", entry))
    assert "content:bee" in r.stdout
    assert_error(cli("topics", "get-message-by-id", "t", "-l", ledger, "-e", "999"), 3)


def test_last_message_id(cli):
    ids = produce(cli, "t", "a", "b")
    assert last_id(cli, "t") == ids[-1]
    doc = json.loads(ok(cli("topics", "last-message-id", "t", "-o", "json")).stdout)
    assert doc["messageId"] == ids[-1]
    assert f"{doc['ledgerId']}:{doc['entryId']}:{doc['partitionIndex']}" == ids[-1]
    assert_error(cli("topics", "last-message-id", "nosuch"), 3)


def test_short_and_full_topic_names_are_the_same_topic(cli):
    produce(cli, "t", "a")
    produce(cli, "public/default/t", "b")
    produce(cli, FULL + "t", "c")
    assert payloads(cli, "t") == ["a", "b", "c"]


# -- subscriptions ----------------------------------------------------------------------------
def test_subscriptions_consumers(cli):
    produce(cli, "t", "a", "b")
    ok(cli("receive", "t", "-s", "sh", "-t", "Shared", "-p", "Earliest", "--consumer-name", "a"))
    ok(cli("receive", "t", "-s", "sh", "-t", "Shared", "--consumer-name", "b"))
    doc = json.loads(ok(cli("subscriptions", "consumers", "t", "sh", "-o", "json")).stdout)
    assert sorted(c["consumerName"] for c in doc) == ["a", "b"]
    assert all(c["unackedMessages"] == 1 for c in doc)
    ok(cli("subscriptions", "consumers", "t", "sh"))
    assert_error(cli("subscriptions", "consumers", "t", "nope"), 3)


# -- tenants and namespaces -------------------------------------------------------------------
def test_tenants(cli):
    assert json.loads(ok(cli("tenants", "list", "-o", "json")).stdout) == ["public"]
    ok(cli("tenants", "create", "acme"))
    assert_error(cli("tenants", "create", "acme"), 4)
    assert sorted(ok(cli("tenants", "list")).stdout.split()) == ["acme", "public"]
    assert sorted(r["tenant"] for r in rows(ok(cli("tenants", "list", "-o", "ndjson")).stdout)) \
        == ["acme", "public"]
    assert "allowedClusters" in json.loads(ok(cli("tenants", "get", "acme", "-o", "json")).stdout)
    assert_error(cli("tenants", "get", "nope"), 3)
    ok(cli("tenants", "delete", "acme"))
    assert_error(cli("tenants", "delete", "acme"), 3)
    assert_error(cli("tenants", "create", "bad/name"), 2)


def test_namespaces(cli):
    assert json.loads(ok(cli("namespaces", "list", "public", "-o", "json")).stdout) == ["public/default"]
    ok(cli("tenants", "create", "acme"))
    ok(cli("namespaces", "create", "acme/ns"))
    assert_error(cli("namespaces", "create", "acme/ns"), 4)
    assert ok(cli("namespaces", "list", "acme")).stdout.split() == ["acme/ns"]
    assert rows(ok(cli("namespaces", "list", "acme", "-o", "ndjson")).stdout) == [{"namespace": "acme/ns"}]
    assert isinstance(json.loads(ok(cli("namespaces", "policies", "acme/ns", "-o", "json")).stdout), dict)
    produce(cli, "acme/ns/t", "x")
    assert ok(cli("topics", "list", "acme/ns")).stdout.split() == ["persistent://acme/ns/t"]
    assert_error(cli("namespaces", "delete", "acme/ns"), 4)
    assert_error(cli("tenants", "delete", "acme"), 4)
    assert payloads(cli, "acme/ns/t") == ["x"]
    ok(cli("namespaces", "delete", "acme/ns", "--force"))
    assert_error(cli("topics", "stats", "acme/ns/t"), 3)
    ok(cli("tenants", "delete", "acme"))
    assert_error(cli("namespaces", "list", "nope"), 3)
    assert_error(cli("namespaces", "create", "nope/ns"), 3)
    assert_error(cli("namespaces", "create", "no-slash"), 2)
    assert_error(cli("produce", "nope/ns/t", "-m", "x"), 3)


# -- brokers, clock, version, doctor, completion ---------------------------------------------
def test_brokers_dynamic_config(cli):
    doc = json.loads(ok(cli("brokers", "get-all-dynamic-config", "-o", "json")).stdout)
    assert doc["maxMessageSize"] == 5 * 1024 * 1024
    ok(cli("brokers", "update-dynamic-config", "--config", "maxMessageSize", "--value", "1000"))
    doc = json.loads(ok(cli("brokers", "get-all-dynamic-config", "-o", "json")).stdout)
    assert doc["maxMessageSize"] == 1000
    assert "maxMessageSize" in ok(cli("brokers", "get-all-dynamic-config")).stdout
    assert_error(cli("brokers", "update-dynamic-config", "--config", "noSuchSetting",
                     "--value", "1"), 2)
    assert_error(cli("brokers", "update-dynamic-config", "--config", "maxMessageSize",
                     "--value", "big"), 2)
    doc = json.loads(ok(cli("brokers", "get-all-dynamic-config", "-o", "json")).stdout)
    assert doc["maxMessageSize"] == 1000


def test_clock(cli):
    doc = json.loads(ok(cli("clock", "show", "-o", "json")).stdout)
    assert doc["mode"] == "real" and ISO_MS.match(doc["now"])
    doc = json.loads(ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z", "-o", "json")).stdout)
    assert doc["mode"] == "simulated" and doc["now"] == "2026-01-01T00:00:00.000Z"
    ok(cli("clock", "advance", "10m"))
    doc = json.loads(ok(cli("clock", "show", "-o", "json")).stdout)
    assert doc["now"] == "2026-01-01T00:10:00.000Z"
    produce(cli, "t", "x")
    assert read_all(cli, "t")[0]["publishTime"] == "2026-01-01T00:10:00.000Z"
    assert "simulated" in ok(cli("clock", "show")).stdout
    assert_error(cli("clock", "advance", "soon"), 2)
    ok(cli("clock", "simulate", "--at", "1767225600000"))
    assert json.loads(ok(cli("clock", "show", "-o", "json")).stdout)["now"] == "2026-01-01T00:00:00.000Z"
    ok(cli("clock", "real"))
    assert json.loads(ok(cli("clock", "show", "-o", "json")).stdout)["mode"] == "real"
    r = cli("clock", "advance", "1m")  # on the real clock: refused with one line
    assert r.exit_code != 0
    assert_error(r, r.exit_code)


def test_version(cli):
    from pulsarctl import __version__

    assert ok(cli("version")).stdout.strip() == f"pulsarctl {__version__}"
    assert json.loads(ok(cli("version", "-o", "json")).stdout)["pulsarctl"] == __version__
    assert json.loads(ok(cli("-o", "json", "version")).stdout)["pulsarctl"] == __version__


def test_doctor(cli):
    results = json.loads(ok(cli("doctor", "-o", "json")).stdout)
    assert results and all(r["ok"] for r in results)
    assert {"check", "ok", "detail"} <= set(results[0])


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script(cli, shell):
    r = ok(cli("completion", shell))
    assert "pulsarctl" in r.stdout, f"`completion {shell}` printed no completion script"


def test_completion_unknown_shell(cli):
    assert_error(cli("completion", "tcsh"), 2)


# -- bad input: one line, a documented code, no traceback, nothing half-applied ----------------
def test_huge_payload_is_exit_1_and_writes_nothing(cli, tmp_path):
    ids = produce(cli, "t", "small")
    big = tmp_path / "big"
    big.write_bytes(b"x" * (5 * 1024 * 1024 + 1))
    line = assert_error(cli("produce", "t", "-m", "ok", "-f", str(big)), 1)
    assert "maxMessageSize" in line
    assert last_id(cli, "t") == ids[-1]
    ok(cli("brokers", "update-dynamic-config", "--config", "maxMessageSize", "--value", "10"))
    assert_error(cli("produce", "t", "-m", "fits", "-m", "far too long", "-n", "2"), 1)
    assert_error(cli("produce", "t", "--stdin", input="fits\nfar too long\n"), 1)
    assert last_id(cli, "t") == ids[-1]
    assert payloads(cli, "t") == ["small"]
    ok(cli("produce", "t", "-m", "0123456789"))  # exactly the limit is fine


def test_binary_payload_round_trips_through_ndjson(cli):
    binary = bytes(range(256))
    rec = {"payload": base64.b64encode(binary).decode(), "encoding": "base64"}
    ids = ok(cli("produce", "t", "--stdin", "--ndjson", input=json.dumps(rec) + "\n")).stdout.split()
    [got] = read_all(cli, "t")
    assert got["encoding"] == "base64" and base64.b64decode(got["payload"]) == binary
    r = ok(cli("consume", "t", "-s", "s", "-p", "Earliest", "-o", "json"))
    doc = json.loads(r.stdout)
    assert doc["encoding"] == "base64" and base64.b64decode(doc["payload"]) == binary
    # what read prints can be produced again, byte for byte
    ok(cli("produce", "copy", "--stdin", "--ndjson", input=json.dumps(got) + "\n"))
    [copy] = read_all(cli, "copy")
    assert copy["payload"] == got["payload"] and copy["encoding"] == "base64"
    assert ids == [got["messageId"]]


@pytest.mark.parametrize("args", [
    ("ack", "t", "-s", "s", "bogus"),
    ("ack", "t", "-s", "s", "1:"),
    ("ack", "t", "-s", "s", "--cumulative", "one:two"),
    ("read", "t", "-m", "1-2"),
    ("read", "t", "-m", "1:2:3:4:5"),
    ("topics", "create-subscription", "t", "-s", "new", "-m", "x:y"),
])
def test_malformed_message_ids_are_exit_2(cli, args):
    produce(cli, "t", "a")
    ok(cli("topics", "create-subscription", "t", "-s", "s"))
    line = assert_error(cli(*args), 2)
    assert "message id" in line
    assert sorted(subscriptions(cli, "t")) == ["s"]


@pytest.mark.parametrize("name", ["a/b", "persistent://", "a/b/c/d/e", "bogus://a/b/c",
                                  "persistent://a/b", "public/default/"])
@pytest.mark.parametrize("cmd", [
    ("produce", "{}", "-m", "x"),
    ("consume", "{}", "-s", "s"),
    ("read", "{}"),
    ("topics", "stats", "{}"),
    ("topics", "create", "{}"),
])
def test_malformed_topic_names_are_exit_2(cli, name, cmd):
    args = [name if a == "{}" else a for a in cmd]
    assert_error(cli(*args), 2)
    assert ok(cli("topics", "list")).stdout == ""


@pytest.mark.parametrize("args", [
    ("ack", "t", "-s", "nope", "1:0"),
    ("topics", "peek-messages", "t", "-s", "nope"),
    ("topics", "unsubscribe", "t", "-s", "nope"),
    ("subscriptions", "consumers", "t", "nope"),
])
def test_unknown_subscription_is_exit_3(cli, args):
    produce(cli, "t", "a")
    line = assert_error(cli(*args), 3)
    assert "nope" in line
    assert subscriptions(cli, "t") == []


@pytest.mark.parametrize("args", [
    ("topics", "stats", "nosuch"),
    ("topics", "stats-internal", "nosuch"),
    ("topics", "subscriptions", "nosuch"),
    ("topics", "last-message-id", "nosuch"),
    ("topics", "delete", "nosuch"),
    ("topics", "get-message-by-id", "nosuch", "-l", "1", "-e", "0"),
])
def test_unknown_topic_is_exit_3(cli, args):
    line = assert_error(cli(*args), 3)
    assert "nosuch" in line
    assert ok(cli("topics", "list")).stdout == ""


def test_store_under_a_file_is_exit_1(cli, tmp_path):
    f = tmp_path / "afile"
    f.write_text("not a directory")
    assert_error(cli("--store", str(f / "store"), "produce", "t", "-m", "x"), 1)
    assert_error(cli("--store", str(f), "topics", "list"), 1)
    assert f.read_text() == "not a directory"


def test_directory_that_is_not_a_store_is_exit_1(cli, tmp_path):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "cat.jpg").write_bytes(b"meow")
    for args in (("produce", "t", "-m", "x"), ("topics", "list")):
        assert_error(cli("--store", str(d), *args), 1)
    assert sorted(os.listdir(d)) == ["cat.jpg"]


def _drop_dac_prefix():
    """As root, permission bits do not apply (CAP_DAC_OVERRIDE). Run the child as root without
    the DAC capabilities, so a 0500 directory is read-only for it exactly as for its owner
    without privileges. None if that is not possible here."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def test_read_only_store_directory_is_exit_1(cli, store_path, tmp_path):
    ids = produce(cli, "t", "first")
    files = sorted(os.listdir(store_path))
    prefix = _drop_dac_prefix()
    if prefix is None:
        pytest.skip("running as root without setpriv: cannot make a directory read-only honestly")
    os.chmod(store_path, 0o500)
    try:
        probe = subprocess.run(
            [*prefix, sys.executable, "-c",
             "import os, sys; open(os.path.join(sys.argv[1], 'probe'), 'w')", store_path],
            capture_output=True, text=True)
        if probe.returncode == 0:
            os.unlink(os.path.join(store_path, "probe"))
            pytest.skip("could not drop the privilege to write to a 0500 directory")
        env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
        r = subprocess.run([*prefix, sys.executable, "-m", "pulsarctl", "produce", "t", "-m",
                            "second"], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
        assert "read-only" in lines[0] or "permission" in lines[0].lower()
        assert r.stdout == ""
    finally:
        os.chmod(store_path, 0o700)
    assert sorted(os.listdir(store_path)) == files  # nothing new: not even a wake-up
    assert last_id(cli, "t") == ids[-1]
    assert payloads(cli, "t") == ["first"]


@pytest.mark.parametrize("args", [
    ("consume", "t", "-s", "new", "--idle-timeout", "abc"),
    ("receive", "t", "-s", "new", "--idle-timeout", "10x"),
    ("receive", "t", "-s", "new", "--lease", "forever"),
    ("read", "t", "--idle-timeout", "-1s"),
    ("clock", "advance", "abc"),
])
def test_bad_durations_are_exit_2(cli, args):
    produce(cli, "t", "a")
    line = assert_error(cli(*args), 2)
    assert "duration" in line or "invalid" in line
    assert subscriptions(cli, "t") == []


@pytest.mark.parametrize("args", [
    ("-o", "yaml", "topics", "list"),
    ("topics", "list", "-o", "yaml"),
    ("--output=xml", "version"),
    ("produce", "t", "-m", "x", "-o", "csv"),
    ("consume", "t", "-s", "s", "-o", "table"),
])
def test_bad_output_format_is_exit_2(cli, args):
    assert_error(cli(*args), 2)
    assert_error(cli("topics", "stats", "t"), 3)  # nothing produced, nothing subscribed


@pytest.mark.parametrize("args", [
    ("--bogus", "topics", "list"),
    ("topics", "list", "--bogus"),
    ("produce", "t", "-m", "x", "--bogus"),
    ("produce", "t", "-m", "x", "-Z"),
    ("consume", "t", "-s", "s", "--nope", "1"),
    ("topics", "no-such-command"),
    ("no-such-command",),
    ("consume", "t"),  # missing -s
    ("produce", "t", "-n", "many", "-m", "x"),
])
def test_usage_errors_are_exit_2(cli, args):
    assert_error(cli(*args), 2)
    assert_error(cli("topics", "stats", "t"), 3)


def test_error_line_is_never_wrapped(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")
    long_name = "x" * 150
    line = assert_error(cli("topics", "stats", long_name), 3)
    assert long_name in line
    line = assert_error(cli("consume", "t", "-s", "s", "--idle-timeout", "y" * 120), 2)
    assert "y" * 120 in line
