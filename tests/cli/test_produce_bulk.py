"""`produce --stdin` sends plain lines from their payloads alone (Producer.send_payloads): the
same ids printed, text or NDJSON, as when the messages are made one by one; a partitioned topic,
a line over maxMessageSize and a key still go the message-by-message way."""
from __future__ import annotations

import json

from cli_helpers import ok, pjson

LINES = "".join(f"line {i}\n" for i in range(2500))


def _lines(r) -> list[str]:
    return r.stdout.splitlines()


def test_plain_lines_print_their_ids_as_the_made_messages_do(cli):
    bulk = _lines(ok(cli("produce", "a", "--stdin", input=LINES)))
    # A property makes the messages one by one: the ids have the same shape.
    each = _lines(ok(cli("produce", "b", "--stdin", "-p", "k=v", input=LINES)))
    assert len(bulk) == len(each) == 2500
    assert [i.split(":", 1)[1] for i in bulk] == [i.split(":", 1)[1] for i in each]
    got = [json.loads(x) for x in ok(cli("read", "a", "-m", "earliest", "-n", "0",
                                         "--until-end", "-o", "ndjson")).stdout.splitlines()]
    assert [g["payload"] for g in got] == [f"line {i}" for i in range(2500)]
    assert [g["messageId"] for g in got] == bulk
    assert [g["sequenceId"] for g in got] == list(range(2500))


def test_ndjson_ids_of_the_bulk_path(cli):
    rows = [json.loads(x) for x in ok(cli("produce", "a", "--stdin", "-o", "ndjson",
                                          input="x\ny\nz\n")).stdout.splitlines()]
    assert rows == [{"messageId": f"{rows[0]['messageId'].rsplit(':', 1)[0]}:{i}",
                     "topic": "persistent://public/default/a"} for i in range(3)]
    doc = pjson(cli("produce", "a", "--stdin", "-o", "json", input="x\ny\n"))
    assert len(doc["messageIds"]) == 2


def test_a_partitioned_topic_and_a_large_line_go_the_other_way(cli):
    ok(cli("topics", "create-partitioned-topic", "p", "-p", "2"))
    ids = _lines(ok(cli("produce", "p", "--stdin", input=LINES)))
    assert len(ids) == 2500 and {i.split(":")[2] for i in ids} <= {"0", "1"}
    ok(cli("brokers", "update-dynamic-config", "--config", "maxMessageSize", "--value", "100"))
    r = cli("produce", "big", "--stdin", input="x" * 101 + "\n")
    assert r.exit_code != 0 and "maxMessageSize 100" in r.stderr
    assert "Traceback" not in r.stderr


def test_consume_prints_and_acks_what_its_queue_holds_together(cli):
    """consume -o ndjson takes what the receiver queue holds in runs (one write, then the
    acks): every message once, in order, acked; -n stops at exactly N, the rest stay for the
    next consume (here N ends a batch entry: one left in part comes back whole, as Pulsar's
    batches do without batch index acks)."""
    ok(cli("produce", "c", "--stdin", input=LINES))
    first = [json.loads(x) for x in ok(cli("consume", "c", "-s", "s", "-p", "Earliest", "-n",
                                           "2000", "-o", "ndjson")).stdout.splitlines()]
    assert [r["payload"] for r in first] == [f"line {i}" for i in range(2000)]
    rest = [json.loads(x) for x in ok(cli("consume", "c", "-s", "s", "-n", "0",
                                          "--idle-timeout", "50ms", "-o",
                                          "ndjson")).stdout.splitlines()]
    assert [r["payload"] for r in rest] == [f"line {i}" for i in range(2000, 2500)]
    assert all(r["redeliveryCount"] == 0 for r in first + rest)
    stats = pjson(cli("topics", "stats", "c", "-o", "json"))["subscriptions"]["s"]
    assert stats["msgBacklog"] == 0 and stats["unackedMessages"] == 0
