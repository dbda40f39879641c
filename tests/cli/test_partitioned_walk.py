"""Every command that takes a topic, on a partitioned topic (issue 27, item 4): it works as
pulsar-admin or pulsar-client works on one (produce and consume route and gather, stats add up,
the cursor commands apply to every partition, describe shows each partition's cursor), or it
refuses as Pulsar does (405 in the admin API: examine-message, last-message-id, compact,
compaction-status; a DLQ is one topic) with one line that names the partition to ask instead,
exit 2. Nothing ends in an internal error.

The walk iterates the command tree: a command added later that takes a topic (an argument or
option named topic, or one whose metavar says TOPIC or DLQ) and is missing from WALK fails
test_every_command_that_takes_a_topic_is_in_the_walk, so no command can forget."""
from __future__ import annotations

import pytest

from cli_helpers import ok, rows
from pulsarctl.cli.app import command

PT = "persistent://public/default/pt"

OK, REFUSED, EXISTS, SLOW = "works", "refused", "already exists", "slow"

# Every (command, parameter) that names a topic -> (the command line after the command's
# name, what it does on a partitioned topic). {pt} is the partitioned topic; destructive
# commands get one of their own ({gone}); {id} / {id2} are ids of its messages (held by
# consumers of subscription s and r), {dir} a scratch directory.
WALK = {
    ("produce", "topic"): (["{pt}", "-m", "x"], OK),
    ("consume", "topics"): (["{pt}", "-s", "walk", "-p", "Earliest", "-n", "0",
                             "--idle-timeout", "1ms"], OK),
    ("consume", "dead_letter_topic"): (["t", "-s", "w", "--dead-letter-topic", "{pt}",
                                        "--max-redeliver-count", "1", "-n", "1",
                                        "--idle-timeout", "1ms"], OK),
    ("consume", "retry_letter_topic"): (["t", "-s", "w2", "--enable-retry",
                                         "--retry-letter-topic", "{pt}", "-n", "1",
                                         "--idle-timeout", "1ms"], OK),
    ("receive", "topics"): (["{pt}", "-s", "walk-r", "-n", "1", "--idle-timeout", "1ms"], OK),
    ("receive", "dead_letter_topic"): (["t", "-s", "w3", "--dead-letter-topic", "{pt}",
                                        "--max-redeliver-count", "1", "-n", "1",
                                        "--idle-timeout", "1ms"], OK),
    ("receive", "retry_letter_topic"): (["t", "-s", "w4", "--enable-retry",
                                         "--retry-letter-topic", "{pt}", "-n", "1",
                                         "--idle-timeout", "1ms"], OK),
    ("ack", "topic"): (["{pt}", "-s", "s", "{id}"], OK),
    ("nack", "topic"): (["{pt}", "-s", "r", "{id2}"], OK),
    ("read", "topic"): (["{pt}", "-m", "earliest", "-n", "0", "--until-end"], OK),
    ("redeliver-unacked", "topic"): (["{pt}", "-s", "r"], OK),
    ("reconsume-later", "topic"): (["{pt}", "-s", "r", "{id2}", "--delay", "1s"], OK),
    ("explain", "topic"): (["{id}", "-t", "{pt}"], OK),
    ("topics", "create", "topic"): (["{pt}"], EXISTS),
    ("topics", "delete", "topic"): (["{gone}", "--force"], OK),
    ("topics", "stats", "topic"): (["{pt}"], OK),
    ("topics", "stats-internal", "topic"): (["{pt}"], OK),
    ("topics", "subscriptions", "topic"): (["{pt}"], OK),
    ("topics", "create-subscription", "topic"): (["{pt}", "-s", "new"], OK),
    ("topics", "unsubscribe", "topic"): (["{pt}", "-s", "new"], OK),
    ("topics", "peek-messages", "topic"): (["{pt}", "-s", "s", "-n", "2"], OK),
    ("topics", "get-message-by-id", "topic"): (["{pt}", "-l", "{ledger}", "-e", "{entry}"], OK),
    ("topics", "last-message-id", "topic"): (["{pt}"], REFUSED),
    ("topics", "create-partitioned-topic", "topic"): (["{pt}", "-p", "2"], EXISTS),
    ("topics", "update-partitioned-topic", "topic"): (["{pt}", "-p", "3"], OK),
    ("topics", "get-partitioned-topic-metadata", "topic"): (["{pt}"], OK),
    ("topics", "delete-partitioned-topic", "topic"): (["{gone2}", "--force"], OK),
    ("topics", "partitioned-stats", "topic"): (["{pt}", "--per-partition"], OK),
    ("topics", "offload", "topic"): (["{pt}", "--to", "{dir}", "--older-than", "7d"], OK),
    ("topics", "offload", "to"): None,  # a directory, not a topic
    ("topics", "offload-status", "topic"): (["{pt}"], OK),
    ("topics", "skip", "topic"): (["{pt}", "-s", "s", "-n", "1"], OK),
    ("topics", "clear-backlog", "topic"): (["{pt}", "-s", "s"], OK),
    ("topics", "reset-cursor", "topic"): (["{pt}", "-s", "s", "-t", "1h"], OK),
    ("topics", "expire-messages", "topic"): (["{pt}", "-s", "s", "-t", "1h"], OK),
    ("topics", "terminate", "topic"): (["{gone3}"], OK),
    ("topics", "examine-message", "topic"): (["{pt}"], REFUSED),
    ("topics", "compact", "topic"): (["{pt}"], REFUSED),
    ("topics", "compaction-status", "topic"): (["{pt}"], REFUSED),
    ("topics", "cursor", "topic"): (["{pt}", "-s", "s"], OK),
    ("topics", "set-message-ttl", "target"): (["{pt}", "--ttl", "1h"], OK),
    ("topics", "get-message-ttl", "target"): (["{pt}"], OK),
    ("topics", "remove-message-ttl", "target"): (["{pt}"], OK),
    ("topics", "set-retention", "target"): (["{pt}", "--time", "1h", "--size", "1M"], OK),
    ("topics", "get-retention", "target"): (["{pt}"], OK),
    ("topics", "remove-retention", "target"): (["{pt}"], OK),
    ("topics", "set-deduplication", "target"): (["{pt}", "--enable"], OK),
    ("topics", "get-deduplication", "target"): (["{pt}"], OK),
    ("topics", "remove-deduplication", "target"): (["{pt}"], OK),
    ("topics", "set-backlog-quota", "target"): (["{pt}", "--limit", "1G", "--policy",
                                                 "producer_exception"], OK),
    ("topics", "get-backlog-quotas", "target"): (["{pt}"], OK),
    ("topics", "remove-backlog-quota", "target"): (["{pt}"], OK),
    ("topics", "set-delayed-delivery", "target"): (["{pt}", "--enable"], OK),
    ("topics", "get-delayed-delivery", "target"): (["{pt}"], OK),
    ("topics", "remove-delayed-delivery", "target"): (["{pt}"], OK),
    ("topics", "set-dead-letter-policy", "target"): (["{pt}", "--max-redeliver-count", "3"], OK),
    ("topics", "set-dead-letter-policy", "dlq"): (["t", "--max-redeliver-count", "3",
                                                   "--dead-letter-topic", "{pt}"], OK),
    ("namespaces", "set-dead-letter-policy", "dlq"): (["public/default", "--max-redeliver-count",
                                                       "3", "--dead-letter-topic", "{pt}"], OK),
    ("topics", "get-dead-letter-policy", "target"): (["{pt}"], OK),
    ("topics", "remove-dead-letter-policy", "target"): (["{pt}"], OK),
    ("topics", "set-max-unacked-messages-per-consumer", "target"): (["{pt}", "--max", "9"], OK),
    ("topics", "set-max-unacked-messages-on-consumer", "target"): (["{pt}", "--max", "9"], OK),
    ("topics", "get-max-unacked-messages-per-consumer", "target"): (["{pt}"], OK),
    ("topics", "remove-max-unacked-messages-per-consumer", "target"): (["{pt}"], OK),
    ("topics", "set-max-unacked-messages-per-subscription", "target"): (["{pt}", "--max", "9"],
                                                                         OK),
    ("topics", "set-max-unacked-messages-on-subscription", "target"): (["{pt}", "--max", "9"],
                                                                        OK),
    ("topics", "get-max-unacked-messages-per-subscription", "target"): (["{pt}"], OK),
    ("topics", "remove-max-unacked-messages-per-subscription", "target"): (["{pt}"], OK),
    ("topics", "policies", "topic"): (["{pt}"], OK),
    ("subscriptions", "consumers", "topic"): (["{pt}", "s"], OK),
    ("subscriptions", "describe", "topic"): (["{pt}", "s"], OK),
    ("subscriptions", "pending", "topic"): (["{pt}", "s"], OK),
    ("subscriptions", "close-consumer", "topic"): (["{pt}", "s", "c1"], OK),
    ("schemas", "get", "topic"): (["{pt}"], OK),
    ("schemas", "delete", "topic"): (["{pt}"], OK),
    ("perf", "produce", "topic"): (["{pt}", "-n", "20", "-b", "10"], OK),
    ("perf", "consume", "topic"): (["{pt}", "-n", "4"], OK),
    ("dlq", "stats", "topic"): (["{pt}"], REFUSED),
    ("dlq", "peek", "topic"): (["{pt}"], REFUSED),
    ("dlq", "drain", "topic"): (["{pt}", "-y"], REFUSED),
    ("dlq", "replay", "topic"): (["{pt}", "-y"], REFUSED),
    ("dlq", "replay", "to"): (["dead-DLQ", "--to", "{pt}", "-y"], OK),
    ("dlq", "purge", "topic"): (["{pt}", "-y"], REFUSED),
    # A partitioned DLQ is refused before Spark starts; export reads every partition (the
    # Spark tests read partitioned topics: tests/spark/test_spark_read.py): not run here.
    ("spark", "dlq-report", "dlq"): (["{pt}"], REFUSED),
    ("spark", "dlq-reprocess", "dlq"): (["{pt}", "--transform", "json:loads"], REFUSED),
    ("spark", "export", "topic"): (["{pt}", "--out", "{dir}/x"], SLOW),
}


def takes_a_topic(p) -> bool:
    names = " ".join(getattr(p, "opts", ()))
    return (p.name in ("topic", "topics", "dlq") or (p.metavar or "") in ("TOPIC", "DLQ")
            or names.endswith("-topic") or p.name == "to")


def leaves(cmd, path=()):
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from leaves(sub, path + (name,))
    else:
        yield path, cmd


def topic_params():
    return {path + (p.name,) for path, cmd in leaves(command()) for p in cmd.params
            if takes_a_topic(p)}


def test_every_command_that_takes_a_topic_is_in_the_walk():
    found = topic_params()
    missing = sorted(" ".join(k) for k in found - set(WALK))
    assert not missing, f"say what these do on a partitioned topic (WALK): {missing}"
    stale = sorted(" ".join(k) for k in set(WALK) - found)
    assert not stale, f"no longer in the command tree: {stale}"
    assert len(found) > 80


@pytest.fixture
def seeded(cli, tmp_path):
    for t in ("pt", "gone", "gone2", "gone3"):
        ok(cli("topics", "create-partitioned-topic", t, "-p", "2"))
    ok(cli("topics", "create-subscription", "pt", "-s", "s", "-m", "earliest"))
    ok(cli("topics", "create-subscription", "gone", "-s", "s", "-m", "earliest"))
    ok(cli("produce", "pt", "-m", "a", "-m", "b", "-m", "c", "-m", "d", "--value-schema",
           "string"))
    ok(cli("produce", "t", "-m", "plain"))
    ok(cli("produce", "dead-DLQ", "-m", "dead", "-p", f"REAL_TOPIC={PT}"))
    held = rows(ok(cli("receive", "pt", "-s", "s", "--consumer-name", "c1", "-o",
                       "ndjson")).stdout)[0]["messageId"]
    held2 = rows(ok(cli("receive", "pt", "-s", "r", "-t", "Shared", "-p", "Earliest",
                        "--enable-retry", "--consumer-name", "c2", "-o",
                        "ndjson")).stdout)[0]["messageId"]
    ledger, entry = held.split(":")[:2]
    return {"pt": "pt", "gone": "gone", "gone2": "gone2", "gone3": "gone3", "id": held,
            "id2": held2, "ledger": ledger, "entry": entry, "dir": str(tmp_path / "walk")}


def outcome(r, expected: str) -> str | None:
    """What is wrong with the command's result, or None."""
    if "Traceback" in r.stderr or "unexpected" in r.stderr:
        return f"an internal error: {r.stderr.strip()}"
    if expected == OK:
        return None if r.exit_code == 0 else f"exit {r.exit_code}: {r.stderr.strip()}"
    if expected == EXISTS:
        return None if r.exit_code == 4 and "already exists" in r.stderr else \
            f"exit {r.exit_code}: {r.stderr.strip()}"
    lines = r.stderr.splitlines()
    if r.exit_code != 2 or len(lines) != 1 or not lines[0].startswith("error: "):
        return f"not one usage error line (exit {r.exit_code}): {r.stderr.strip()}"
    if f"{PT}-partition-0" not in lines[0]:
        return f"the partition to ask instead is not named: {lines[0]}"
    return None


def test_every_command_on_a_partitioned_topic_works_or_names_the_partition(cli, seeded):
    wrong, ran = [], 0
    for key, spec in WALK.items():
        if spec is None or spec[1] == SLOW:
            continue
        argv, expected = spec
        line = list(key[:-1]) + [a.format(**seeded) for a in argv]
        problem = outcome(cli(*line), expected)
        if problem:
            wrong.append(f"`pulsarctl {' '.join(line)}` ({expected}): {problem}")
        ran += 1
    assert not wrong, "\n".join(wrong)
    assert ran > 80


def test_describe_on_a_partitioned_topic_shows_each_partitions_cursor(cli, seeded):
    import json

    d = json.loads(ok(cli("subscriptions", "describe", "pt", "s", "-o", "json")).stdout)
    assert d["topic"] == PT and d["type"] == "Exclusive"
    assert set(d["partitions"]) == {f"{PT}-partition-0", f"{PT}-partition-1"}
    assert d["msgBacklog"] == sum(p["msgBacklog"] for p in d["partitions"].values()) == 4
    one = json.loads(ok(cli("subscriptions", "describe", "pt-partition-1", "s", "-o",
                            "json")).stdout)
    assert one["readPosition"] == d["partitions"][f"{PT}-partition-1"]["readPosition"]
    assert "partitions" not in one
    text = ok(cli("topics", "stats-internal", "pt")).stdout
    assert f"{PT}-partition-0" in text and f"{PT}-partition-1" in text and "ledgers" in text
