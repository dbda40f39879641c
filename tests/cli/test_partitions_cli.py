"""Partitioned topics, multi-topic and pattern consumers through the command line
(pulsar-semantics.md §3, §11.5). A pattern consumer picking up a topic created while it runs:
tests/processes/test_consumers_procs.py."""
from __future__ import annotations

import json

import pytest

from cli_helpers import ok, one_error_line, rows
from consumer_helpers import ack_records, ids, part, payloads, sub_stats

PREFIX = "persistent://public/default/"


# == 3. Partitioned topics through the CLI ====================================================
def test_partitioned_topic_admin(cli):
    ok(cli("topics", "create-partitioned-topic", "pt", "-p", "3"))
    r = ok(cli("topics", "get-partitioned-topic-metadata", "pt", "-o", "json"))
    assert json.loads(r.stdout) == {"partitions": 3}
    ok(cli("produce", "plain", "-m", "x"))
    r = ok(cli("topics", "get-partitioned-topic-metadata", "plain", "-o", "json"))
    assert json.loads(r.stdout) == {"partitions": 0}

    r = cli("topics", "create-partitioned-topic", "pt", "-p", "3")
    assert r.exit_code == 4, (r.exit_code, r.stderr)
    r = cli("topics", "create-partitioned-topic", "bad", "-p", "0")
    assert r.exit_code == 2, (r.exit_code, r.stderr)

    listed = json.loads(ok(cli("topics", "list", "public/default", "-o", "json")).stdout)
    assert {f"{PREFIX}pt-partition-{i}" for i in range(3)} <= set(listed)
    assert f"{PREFIX}plain" in listed
    r = ok(cli("topics", "list-partitioned-topics", "public/default", "-o", "json"))
    assert json.loads(r.stdout) == [f"{PREFIX}pt"]

    # A subscription on the partitioned topic; growing gives new partitions the subscription.
    ok(cli("topics", "create-subscription", "pt", "-s", "S", "-m", "earliest"))
    r = cli("topics", "update-partitioned-topic", "pt", "-p", "2")
    assert r.exit_code == 4, (r.exit_code, r.stderr)
    one_error_line(r.stderr)
    ok(cli("topics", "update-partitioned-topic", "pt", "-p", "5"))
    r = ok(cli("topics", "get-partitioned-topic-metadata", "pt", "-o", "json"))
    assert json.loads(r.stdout) == {"partitions": 5}
    for i in (3, 4):
        subs = json.loads(ok(cli("topics", "subscriptions", f"pt-partition-{i}", "-o",
                                 "json")).stdout)
        assert subs == ["S"]
    listed = json.loads(ok(cli("topics", "list", "public/default", "-o", "json")).stdout)
    assert {f"{PREFIX}pt-partition-{i}" for i in range(5)} <= set(listed)
    msg_ids = ok(cli("produce", "pt", "-m", "y", "-n", "10")).stdout.split()
    assert {part(m) for m in msg_ids} == set(range(5))
    r = ok(cli("consume", "pt", "-s", "S", "-n", "0", "--idle-timeout", "100ms", "-o", "ndjson"))
    assert sorted(ids(rows(r.stdout))) == sorted(msg_ids), "a new partition's messages were missed"

    # Deleting is refused while there are subscriptions, unless --force.
    r = cli("topics", "delete-partitioned-topic", "pt")
    assert r.exit_code == 4, (r.exit_code, r.stderr)
    one_error_line(r.stderr)
    r = ok(cli("topics", "get-partitioned-topic-metadata", "pt", "-o", "json"))
    assert json.loads(r.stdout) == {"partitions": 5}
    ok(cli("topics", "delete-partitioned-topic", "pt", "--force"))
    r = ok(cli("topics", "get-partitioned-topic-metadata", "pt", "-o", "json"))
    assert json.loads(r.stdout) == {"partitions": 0}
    listed = json.loads(ok(cli("topics", "list", "public/default", "-o", "json")).stdout)
    assert not [t for t in listed if "pt-partition-" in t]
    r = ok(cli("topics", "list-partitioned-topics", "public/default", "-o", "json"))
    assert json.loads(r.stdout) == []


# §12.2: key -> partition for n = 3, 4, 5.
ROUTING = {
    "JavaStringHash": {
        "key1": (0, 2, 3), "key2": (1, 3, 4), "Order-3459134": (2, 2, 1), "my-key": (2, 2, 1),
        "test-key": (2, 0, 0), "hello": (1, 2, 2), "a": (1, 1, 2),
    },
    "Murmur3_32Hash": {
        "key1": (0, 1, 1), "key2": (0, 0, 0), "Order-3459134": (0, 3, 2), "my-key": (1, 1, 3),
        "test-key": (2, 3, 3), "hello": (1, 3, 1), "a": (2, 2, 0),
    },
}


@pytest.mark.parametrize("scheme", ["JavaStringHash", "Murmur3_32Hash"])
def test_produce_routes_keys_as_pulsar(cli, scheme):
    for j, n in enumerate((3, 4, 5)):
        topic = f"r{n}"
        ok(cli("topics", "create-partitioned-topic", topic, "-p", str(n)))
        for key, want in ROUTING[scheme].items():
            args = ("produce", topic, "-m", "x", "-k", key)
            if scheme != "JavaStringHash" or key == "a":
                args += ("--hashing-scheme", scheme)  # JavaStringHash is also the default
            r = ok(cli(*args))
            (mid,) = r.stdout.split()
            assert part(mid) == want[j], f"{scheme}: key {key!r} on {n} partitions"


def test_produce_unkeyed_round_robin_and_single_partition(cli):
    ok(cli("topics", "create-partitioned-topic", "rr", "-p", "4"))
    msg_ids = ok(cli("produce", "rr", "-m", "x", "-n", "8")).stdout.split()
    assert len(msg_ids) == 8
    parts = [part(m) for m in msg_ids]
    assert sorted(parts) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert all((b - a) % 4 == 1 for a, b in zip(parts, parts[1:])), parts  # one after another

    for _ in range(3):
        msg_ids = ok(cli("produce", "rr", "-m", "y", "-n", "6", "--routing-mode",
                         "SinglePartition")).stdout.split()
        assert len({part(m) for m in msg_ids}) == 1
    # A key still wins over SinglePartition.
    r = ok(cli("produce", "rr", "-m", "z", "-k", "key2", "--routing-mode", "SinglePartition"))
    assert part(r.stdout.strip()) == 3
    r = cli("produce", "rr", "-m", "z", "--routing-mode", "Sideways")
    assert r.exit_code == 2
    r = cli("produce", "rr", "-m", "z", "--hashing-scheme", "BoostHash")
    assert r.exit_code == 2


def test_partitioned_consume_stats_and_ack_by_id(cli):
    ok(cli("topics", "create-partitioned-topic", "pc", "-p", "4"))
    keyed = ok(cli("produce", "pc", "-m", "k1", "-m", "k2", "-k", "hello")).stdout.split()
    assert {part(m) for m in keyed} == {2}
    plain = ok(cli("produce", "pc", "-m", "p", "-n", "6")).stdout.split()
    everything = keyed + plain

    r = ok(cli("consume", "pc", "-s", "all", "-p", "Earliest", "-n", "0", "--idle-timeout",
               "100ms", "-o", "ndjson"))
    recs = rows(r.stdout)
    assert sorted(ids(recs)) == sorted(everything)
    assert {m["topic"] for m in recs} <= {f"{PREFIX}pc-partition-{i}" for i in range(4)}
    for m in recs:
        assert m["topic"].endswith(f"-partition-{part(m['messageId'])}")
    # Per-key order across the partitioned topic: a key lives on one partition.
    assert [m["payload"] for m in recs if m["key"] == "hello"] == ["k1", "k2"]

    r = ok(cli("topics", "partitioned-stats", "pc", "--per-partition", "-o", "json"))
    st = json.loads(r.stdout)
    assert st["metadata"] == {"partitions": 4}
    assert st["msgInCounter"] == len(everything)
    assert set(st["partitions"]) == {f"{PREFIX}pc-partition-{i}" for i in range(4)}
    assert sum(p["msgInCounter"] for p in st["partitions"].values()) == len(everything)
    assert st["partitions"][f"{PREFIX}pc-partition-2"]["msgInCounter"] == \
        2 + sum(1 for m in plain if part(m) == 2)
    assert st["subscriptions"]["all"]["msgBacklog"] == 0
    r = ok(cli("topics", "partitioned-stats", "pc", "-o", "json"))
    assert "partitions" not in json.loads(r.stdout)
    r = cli("topics", "partitioned-stats", "plain-one", "-o", "json")
    assert r.exit_code == 3

    # receive + ack by id with the partitioned topic's name.
    got = rows(ok(cli("receive", "pc", "-s", "w", "-p", "Earliest", "-n", "5", "-o",
                         "ndjson")).stdout)
    assert len(got) == 5
    assert sub_stats(cli, "pc", "w")["unackedMessages"] == 5
    r = ok(cli("ack", "pc", "-s", "w", *ids(got[:2]), "-o", "json"))
    assert json.loads(r.stdout)["acked"] == 2
    assert ack_records(cli, "pc", "w", got[2:])["acked"] == 3
    st = sub_stats(cli, "pc", "w")
    assert st["unackedMessages"] == 0 and st["msgBacklog"] == len(everything) - 5
    r = cli("ack", "pc", "-s", "w", "999999:0:0")
    assert r.exit_code == 3


def test_cursor_admin_applies_to_every_partition(cli):
    ok(cli("topics", "create-partitioned-topic", "ca", "-p", "4"))
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    ok(cli("topics", "create-subscription", "ca", "-s", "S", "-m", "earliest"))
    ok(cli("produce", "ca", "-m", "x", "-n", "12"))  # 3 per partition

    def backlogs():
        st = json.loads(ok(cli("topics", "partitioned-stats", "ca", "--per-partition", "-o",
                               "json")).stdout)
        return [st["partitions"][f"{PREFIX}ca-partition-{i}"]["subscriptions"]["S"]["msgBacklog"]
                for i in range(4)]

    assert backlogs() == [3, 3, 3, 3]
    r = ok(cli("topics", "skip", "ca", "-s", "S", "-n", "1", "-o", "json"))
    assert json.loads(r.stdout)["skipped"] == 4
    assert backlogs() == [2, 2, 2, 2]
    r = ok(cli("topics", "clear-backlog", "ca", "-s", "S", "-o", "json"))
    assert json.loads(r.stdout)["cleared"] == 8
    assert backlogs() == [0, 0, 0, 0]

    ok(cli("clock", "advance", "1h"))
    ok(cli("produce", "ca", "-m", "late", "-n", "4"))  # 1 per partition, an hour later
    ok(cli("topics", "clear-backlog", "ca", "-s", "S"))
    ok(cli("topics", "reset-cursor", "ca", "-s", "S", "-t", "30m"))  # only the late ones
    assert backlogs() == [1, 1, 1, 1]
    ok(cli("topics", "reset-cursor", "ca", "-s", "S", "-t", "2h"))  # everything again
    assert backlogs() == [4, 4, 4, 4]
    r = ok(cli("consume", "ca", "-s", "S", "-n", "0", "--idle-timeout", "100ms", "-o", "ndjson"))
    assert len(rows(r.stdout)) == 16

    r = ok(cli("topics", "terminate", "ca", "-o", "json"))
    doc = json.loads(r.stdout)
    assert doc["terminated"] is True
    assert set(doc["lastMessageId"]) == {f"{PREFIX}ca-partition-{i}" for i in range(4)}
    for i in range(4):
        r = cli("produce", f"ca-partition-{i}", "-m", "after")
        assert r.exit_code == 4, (i, r.exit_code, r.stderr)
    r = cli("produce", "ca", "-m", "after", "-n", "4")
    assert r.exit_code == 4


# == 4. Multi-topic and pattern consumers =====================================================
def test_consume_several_topics(cli):
    a = ok(cli("produce", "ma", "-m", "a1", "-m", "a2")).stdout.split()
    b = ok(cli("produce", "mb", "-m", "b1")).stdout.split()
    ok(cli("topics", "create-partitioned-topic", "mc", "-p", "2"))
    c = ok(cli("produce", "mc", "-m", "c1", "-m", "c2")).stdout.split()
    r = ok(cli("consume", "ma", "mb", "mc", "-s", "S", "-p", "Earliest", "-n", "0",
               "--idle-timeout", "100ms", "-o", "ndjson"))
    recs = rows(r.stdout)
    assert sorted(ids(recs)) == sorted(a + b + c)
    assert [m["payload"] for m in recs if m["topic"] == PREFIX + "ma"] == ["a1", "a2"]
    for t in ("ma", "mb"):
        assert sub_stats(cli, t, "S")["msgBacklog"] == 0
    r = ok(cli("consume", "ma", "mb", "-s", "S", "-n", "0", "--idle-timeout", "100ms"))
    assert r.stdout == ""


def test_consume_regex_matches_topics(cli):
    ok(cli("produce", "mt-one", "-m", "1"))
    ok(cli("produce", "mt-two", "-m", "2a", "-m", "2b"))
    ok(cli("produce", "other", "-m", "no"))
    ok(cli("produce", "my-tenant-less", "-m", "no"))
    r = ok(cli("consume", "--regex", PREFIX + "mt-.*", "-s", "S", "-p", "Earliest", "-n", "0",
               "--idle-timeout", "100ms", "-o", "ndjson"))
    recs = rows(r.stdout)
    assert sorted(payloads(recs)) == ["1", "2a", "2b"]
    assert {m["topic"] for m in recs} == {PREFIX + "mt-one", PREFIX + "mt-two"}
    subs = json.loads(ok(cli("topics", "subscriptions", "other", "-o", "json")).stdout)
    assert subs == []


@pytest.mark.parametrize("pattern", [PREFIX + "mt-(", "mt-[", PREFIX + "mt-**",
                                     "persistent://public/def.*/mt-.*"])
def test_consume_regex_malformed_pattern_exit_2(cli, pattern):
    r = cli("consume", "--regex", pattern, "-s", "S", "-n", "0", "--idle-timeout", "100ms")
    assert r.exit_code == 2, (pattern, r.exit_code, r.stdout, r.stderr)
    one_error_line(r.stderr)
