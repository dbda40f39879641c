"""The dlq commands against a remote Pulsar (issue 30 item 2), here a real `pulsarctl serve` on
127.0.0.1: list, stats and peek change nothing and create no subscription; drain, replay and
purge work through an Exclusive consumer on the DLQ's durable subscription pulsarctl-dlq (the
lock: a second command waits, or exits 5 with --no-wait), acking after writing, republishing
with REAL_TOPIC / ORIGIN_MESSAGE_ID kept and REPLAY_COUNT added."""
from __future__ import annotations

import json


def ok(r):
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def dead_letters(rcli, name, n=3) -> str:
    """n dead letters in NAME-s-DLQ, as a consumer's dead letter policy puts them there."""
    dlq = f"{name}-s-DLQ"
    for i in range(n):
        ok(rcli("produce", dlq, "-m", f"d{i}", "-k", f"k{i}", "-p", f"REAL_TOPIC=persistent://public/default/{name}",
                "-p", "REAL_SUBSCRIPTION=s", "-p", f"ORIGIN_MESSAGE_ID=1:{i}:-1",
                "-p", f"kind={'a' if i % 2 == 0 else 'b'}"))
    return dlq


def subs(rcli, topic) -> list:
    return json.loads(ok(rcli("topics", "subscriptions", topic, "-o", "json")).stdout)


def test_list_stats_peek_change_nothing(rcli, name):
    dlq = dead_letters(rcli, name)
    rows = json.loads(ok(rcli("dlq", "list", "-o", "json")).stdout)
    row = next(r for r in rows if r["topic"] == f"persistent://public/default/{dlq}")
    assert row["backlog"] == 3 and row["originTopic"] == f"persistent://public/default/{name}"
    assert row["originSubscription"] == "s" and row["oldestPublishTime"]
    st = json.loads(ok(rcli("dlq", "stats", dlq, "--by-property", "kind", "-o", "json")).stdout)
    assert st["total"] == 3 and st["byProperty"]["counts"] == {"a": 2, "b": 1}
    assert st["byRealSubscription"] == {"s": 3} and st["byAge"]["<1m"] == 3
    got = json.loads(ok(rcli("dlq", "peek", dlq, "-n", "2", "--filter", "kind=a",
                             "-o", "json")).stdout)
    assert [m["payload"] for m in got] == ["d0", "d2"]
    assert subs(rcli, dlq) == []  # peek, stats and list created no subscription
    assert rcli("dlq", "peek", f"{name}-nope-DLQ").exit_code == 3
    assert rcli("dlq", "peek", f"{name}-nope-DLQ", "--missing-ok",
                "--fail-if-empty").exit_code == 6


def test_drain_writes_then_acks_and_a_second_run_finds_nothing(rcli, name, tmp_path):
    dlq = dead_letters(rcli, name)
    out = tmp_path / "dead.ndjson"
    r = ok(rcli("dlq", "drain", dlq, "--out", str(out), "--filter", "kind=a"))
    assert "drained 2, failed 0" in r.stderr
    got = records(out.read_text())
    assert [g["payload"] for g in got] == ["d0", "d2"]
    assert got[0]["subscription"] == "pulsarctl-dlq"
    assert got[0]["properties"]["ORIGIN_MESSAGE_ID"] == "1:0:-1"
    assert subs(rcli, dlq) == ["pulsarctl-dlq"]
    # the one the filter left is still waiting; after draining it, nothing is
    st = json.loads(ok(rcli("dlq", "stats", dlq, "-o", "json")).stdout)
    assert st["total"] == 1
    ok(rcli("dlq", "drain", dlq, "--out", str(out)))
    assert len(records(out.read_text())) == 3
    assert rcli("dlq", "drain", dlq, "--out", str(out), "--fail-if-empty").exit_code == 6


def test_drain_exec_failure_leaves_it_exit_7(rcli, name):
    dlq = dead_letters(rcli, name, 2)
    r = rcli("dlq", "drain", dlq, "--exec", 'test "$(cat)" = d0')
    assert r.exit_code == 7 and "drained 1, failed 1" in r.stderr
    assert json.loads(ok(rcli("dlq", "stats", dlq, "-o", "json")).stdout)["total"] == 1


def test_replay_to_origin_keeps_the_properties_and_counts(rcli, name):
    dlq = dead_letters(rcli, name, 2)
    dry = ok(rcli("dlq", "replay", dlq, "--dry-run"))
    assert "would replay 2" in dry.stderr
    assert json.loads(ok(rcli("dlq", "stats", dlq, "-o", "json")).stdout)["total"] == 2
    r = ok(rcli("dlq", "replay", dlq, "-o", "json"))
    doc = json.loads(r.stdout)
    assert doc["replayed"] == 2 and doc["messages"][0]["target"] == \
        f"persistent://public/default/{name}"
    back = records(ok(rcli("read", name, "-m", "earliest", "-n", "2", "-o", "ndjson")).stdout)
    assert [b["payload"] for b in back] == ["d0", "d1"] and back[0]["key"] == "k0"
    p = back[0]["properties"]
    assert p["REPLAY_COUNT"] == "1" and p["ORIGIN_MESSAGE_ID"] == "1:0:-1"
    assert p["REAL_TOPIC"] == f"persistent://public/default/{name}"
    assert json.loads(ok(rcli("dlq", "stats", dlq, "-o", "json")).stdout)["total"] == 0


def test_replay_refuses_past_max_replays_and_without_real_topic(rcli, name):
    dlq = f"{name}-x-DLQ"
    ok(rcli("produce", dlq, "-m", "tired", "-p", "REAL_TOPIC=t", "-p", "REPLAY_COUNT=3"))
    ok(rcli("produce", dlq, "-m", "orphan"))
    r = rcli("dlq", "replay", dlq)
    assert r.exit_code == 7 and "replayed 0, skipped 1, failed 1" in r.stderr
    r = ok(rcli("dlq", "replay", dlq, "--to", f"{name}-fixed", "--max-replays", "5"))
    assert "replayed 2" in r.stderr


def test_purge_and_the_subscription_is_the_lock(rcli, name, cli, remote):
    dlq = dead_letters(rcli, name, 2)
    ok(rcli("topics", "create-subscription", dlq, "-s", "pulsarctl-dlq", "-m", "earliest"))
    # another command holds the lock: an Exclusive consumer of pulsarctl-dlq
    import pulsar

    client = pulsar.Client(remote.service_url, logger=pulsar.FileLogger(
        pulsar.LoggerLevel.Error, "/dev/null"))
    try:
        holder = client.subscribe(f"persistent://public/default/{dlq}", "pulsarctl-dlq",
                                  consumer_type=pulsar.ConsumerType.Exclusive)
        r = rcli("dlq", "purge", dlq, "--no-wait")
        assert r.exit_code == 5 and r.stderr.count("\n") == 1, r.stderr
        holder.close()
    finally:
        client.close()
    r = ok(rcli("dlq", "purge", dlq, "-o", "json"))
    assert json.loads(r.stdout)["purged"] == 2
    assert json.loads(ok(rcli("dlq", "stats", dlq, "-o", "json")).stdout)["total"] == 0


def test_drain_and_replay_need_no_admin_url(cli, remote, rcli, name):
    """A target with a service URL only (pulsar-lite has no admin REST API): drain and replay
    work over the binary protocol; what needs the admin API says so in one line, exit 2."""
    dlq = dead_letters(rcli, name, n=2)
    svc = ["--service-url", remote.service_url]
    got = records(ok(cli(*svc, "dlq", "drain", dlq, "--max", "1")).stdout)
    assert [g["payload"] for g in got] == ["d0"]
    r = ok(cli(*svc, "dlq", "replay", dlq, "--yes"))
    assert "replayed 1" in r.stderr + r.stdout
    assert cli(*svc, "dlq", "drain", dlq, "--fail-if-empty").exit_code == 6
    back = records(ok(rcli("read", name, "-m", "earliest", "-n", "1", "-o", "ndjson")).stdout)
    assert back[0]["payload"] == "d1" and back[0]["properties"]["REPLAY_COUNT"] == "1"
    r = cli(*svc, "topics", "list", "public/default")
    assert r.exit_code == 2 and "no admin URL" in r.stderr and "Traceback" not in r.stderr
