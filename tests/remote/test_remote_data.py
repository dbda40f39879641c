"""produce, consume and read against a remote Pulsar (issue 30 item 2), here a real `pulsarctl
serve` on 127.0.0.1, through the real pulsar-client library: the same message records and ids
as locally (compared with the same store read locally: serve shares it), the same exit codes,
--exec's contract (0 acks, 75 retries with --enable-retry, else nacks), and the flags the
library cannot honour refused before anything is sent."""
from __future__ import annotations

import json

import pytest

from pulsarctl.broker.routing import hash_key


def ok(r):
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


SAME = ("messageId", "topic", "payload", "key", "orderingKey", "properties", "eventTime",
        "publishTime", "producerName")


def test_produce_then_read_gives_what_the_store_holds(rcli, lcli, name):
    ids = ok(rcli("produce", name, "-m", "a", "-m", "b", "-k", "k1", "-p", "x=1", "-p",
                  "y=a=b", "--event-time", "2026-01-01T00:00:00Z", "--ordering-key", "ok"))
    ids = ids.stdout.split()
    assert len(ids) == 2 and all(i.count(":") == 2 for i in ids)
    remote = records(ok(rcli("read", name, "-m", "earliest", "-n", "2", "-o", "ndjson")).stdout)
    local = records(ok(lcli("read", name, "-m", "earliest", "-n", "2", "-o", "ndjson")).stdout)
    assert [r["messageId"] for r in remote] == ids
    assert [{k: r[k] for k in SAME} for r in remote] == [{k: r[k] for k in SAME} for r in local]
    assert remote[0]["properties"] == {"x": "1", "y": "a=b"}
    assert remote[0]["eventTime"] == "2026-01-01T00:00:00.000Z"
    assert remote[0]["orderingKey"] == "ok"
    # the library does not hand a received message's sequence id over: null, not made up
    assert remote[0]["sequenceId"] is None and local[0]["sequenceId"] is not None


def test_produce_repeats_splits_files_and_json(rcli, name, tmp_path):
    f = tmp_path / "body.bin"
    f.write_bytes(b"\x00\xffbinary")
    doc = json.loads(ok(rcli("produce", name, "-m", "a,b", "-s", ",", "-n", "2", "-f", str(f),
                             "-o", "json")).stdout)
    assert doc["topic"] == f"persistent://public/default/{name}"
    assert len(doc["messageIds"]) == 6 and doc["producerName"]
    got = records(ok(rcli("read", name, "-m", "earliest", "-n", "6", "-o", "ndjson")).stdout)
    assert [r["payload"] for r in got] == ["a", "b", "AP9iaW5hcnk="] * 2
    assert got[2]["encoding"] == "base64"


def test_produce_stdin_lines_and_ndjson_records(rcli, name):
    r = ok(rcli("produce", name, "--stdin", "-o", "ndjson", input="one\ntwo\nthree\n"))
    assert [x["topic"] for x in records(r.stdout)] == [f"persistent://public/default/{name}"] * 3
    lines = [{"payload": "p1", "key": "k", "properties": {"a": "1"},
              "eventTime": "2026-02-02T00:00:00Z"},
             {"payload": "//4=", "encoding": "base64", "orderingKey": "o"}]
    ok(rcli("produce", name, "--stdin", "--ndjson",
            input="".join(json.dumps(x) + "\n" for x in lines)))
    got = records(ok(rcli("read", name, "-m", "earliest", "-n", "5", "-o", "ndjson")).stdout)
    assert [g["payload"] for g in got[:3]] == ["one", "two", "three"]
    assert got[3]["key"] == "k" and got[3]["properties"] == {"a": "1"}
    assert got[3]["eventTime"] == "2026-02-02T00:00:00.000Z"
    assert got[4]["payload"] == "//4=" and got[4]["encoding"] == "base64"
    assert got[4]["orderingKey"] == "o"


def test_consume_acks_after_printing(rcli, name):
    ok(rcli("produce", name, "-m", "1", "-m", "2", "-m", "3"))
    got = records(ok(rcli("consume", name, "-s", "s", "-p", "Earliest", "-n", "0",
                          "--idle-timeout", "1s", "-o", "ndjson")).stdout)
    assert [g["payload"] for g in got] == ["1", "2", "3"]
    assert all(g["subscription"] == "s" and g["redeliveryCount"] == 0 for g in got)
    stats = json.loads(ok(rcli("topics", "stats", name, "-o", "json")).stdout)
    assert stats["subscriptions"]["s"]["msgBacklog"] == 0
    r = rcli("consume", name, "-s", "s", "--idle-timeout", "500ms", "--fail-if-empty")
    assert r.exit_code == 6


def test_consume_output_formats(rcli, name):
    ok(rcli("produce", name, "-m", "hi", "-k", "kk", "-p", "a=b"))
    text = ok(rcli("consume", name, "-s", "s1", "-p", "Earliest", "-mp")).stdout
    assert "----- got message -----" in text and "key:[kk], properties:[a=b], content:hi" in text
    assert "messageId:" in text and "redeliveryCount:[0]" in text
    hexed = ok(rcli("consume", name, "-s", "s2", "-p", "Earliest", "--hex")).stdout
    assert "content:6869" in hexed
    hidden = ok(rcli("consume", name, "-s", "s3", "-p", "Earliest", "--hide-content",
                     "-o", "json")).stdout
    assert "payload" not in json.loads(hidden)


def test_exec_exit_codes(rcli, name):
    """--exec: 0 acks, anything else nacks (redelivered), 75 with --enable-retry reconsumes
    later through the retry letter topic, with Pulsar's properties."""
    ok(rcli("produce", name, "-m", "job"))
    # Shared: Pulsar counts redeliveries on Shared and Key_Shared subscriptions only
    r = ok(rcli("consume", name, "-s", "w", "-t", "Shared", "-p", "Earliest", "-n", "2",
                "--nack-delay",
                "100ms", "--idle-timeout", "30s",
                "--exec", 'cat >/dev/null; test "$PULSAR_REDELIVERY_COUNT" = 1'))
    assert "1 acked, 1 nacked" in r.stderr, r.stderr
    ok(rcli("produce", name, "-m", "job2"))
    r = ok(rcli("consume", name, "-s", "w", "-t", "Shared", "-n", "1", "--idle-timeout", "30s",
                "--enable-retry", "--exec-retry-delay", "100ms", "--exec", "exit 75"))
    assert "1 reconsumed later" in r.stderr, r.stderr
    retry = records(ok(rcli("read", f"{name}-w-RETRY", "-m", "earliest", "-o", "ndjson")).stdout)
    props = retry[0]["properties"]
    assert props["REAL_TOPIC"] == f"persistent://public/default/{name}"
    assert props["RECONSUMETIMES"] == "1" and props["DELAY_TIME"] == "100"
    assert props["ORIGIN_MESSAGE_ID"].count(":") >= 2
    # the retried message comes back on the same subscription (it reads its retry topic too)
    r = ok(rcli("consume", name, "-s", "w", "-t", "Shared", "-n", "1", "--idle-timeout", "30s",
                "--enable-retry", "--exec", 'test "$PULSAR_PROP_RECONSUMETIMES" = 1'))
    assert "1 acked" in r.stderr


def test_dead_letter_policy_moves_to_the_dlq(rcli, name):
    ok(rcli("produce", name, "-m", "poison"))
    ok(rcli("consume", name, "-s", "d", "-t", "Shared", "-p", "Earliest", "-n", "3",
            "--idle-timeout", "3s",
            "--nack-delay", "100ms", "--max-redeliver-count", "1", "--exec", "exit 1"))
    dead = records(ok(rcli("read", f"{name}-d-DLQ", "-m", "earliest", "--idle-timeout", "10s",
                           "-o", "ndjson")).stdout)
    assert dead[0]["payload"] == "poison"
    assert dead[0]["properties"]["REAL_TOPIC"] == f"persistent://public/default/{name}"


def test_regex_subscribes_to_every_matching_topic(rcli, name):
    ok(rcli("produce", f"{name}-a", "-m", "A"))
    ok(rcli("produce", f"{name}-b", "-m", "B"))
    got = records(ok(rcli("consume", "--regex", f"persistent://public/default/{name}-.*",
                          "-s", "rx", "-p", "Earliest", "-n", "2", "--idle-timeout", "20s",
                          "-o", "ndjson")).stdout)
    assert sorted(g["payload"] for g in got) == ["A", "B"]


def test_read_start_inclusive_and_until_end(rcli, name):
    ids = ok(rcli("produce", name, "-m", "1", "-m", "2", "-m", "3")).stdout.split()
    got = records(ok(rcli("read", name, "-m", ids[1], "-i", "-n", "0", "--until-end",
                          "-o", "ndjson")).stdout)
    assert [g["payload"] for g in got] == ["2", "3"]
    got = records(ok(rcli("read", name, "-m", ids[1], "-n", "1", "-o", "ndjson")).stdout)
    assert [g["payload"] for g in got] == ["3"]
    assert rcli("read", name, "-m", "latest", "--idle-timeout", "300ms",
                "--fail-if-empty").exit_code == 6


def test_partitioned_topic_with_murmur3_keys(rcli, lcli, name):
    ok(rcli("topics", "create-partitioned-topic", name, "-p", "3"))
    for key in ("alpha", "beta", "gamma", "delta"):
        mid = ok(rcli("produce", name, "-m", "x", "-k", key, "--hashing-scheme",
                      "Murmur3_32Hash")).stdout.strip()
        assert int(mid.split(":")[2]) == hash_key(key, "Murmur3_32Hash") % 3, (key, mid)
        mid = ok(rcli("produce", name, "-m", "x", "-k", key)).stdout.strip()
        assert int(mid.split(":")[2]) == hash_key(key, "JavaStringHash") % 3, (key, mid)


def test_chunking_sends_what_is_over_the_maximum(rcli, name, tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"z" * (6 * 1024 * 1024))
    r = rcli("produce", name, "-f", str(big))
    assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    ok(rcli("produce", name, "-f", str(big), "-c"))
    got = records(ok(rcli("read", name, "-m", "earliest", "-o", "ndjson")).stdout)
    assert len(got[0]["payload"]) == 6 * 1024 * 1024


@pytest.mark.parametrize("flag", [["--nack-backoff", "1s:10s"], ["--ack-timeout-tick", "1s"],
                                  ["--priority", "1"],
                                  ["-t", "Key_Shared", "--key-shared-policy",
                                   "consistent-hashing"]])
def test_flags_the_library_cannot_honour_are_refused(rcli, name, flag):
    r = rcli("consume", name, "-s", "refused", *flag)
    assert r.exit_code == 2 and "works on a local store only" in r.stderr
    subs = json.loads(ok(rcli("topics", "subscriptions", name, "-o", "json")).stdout) \
        if rcli("topics", "stats", name).exit_code == 0 else []
    assert "refused" not in subs


def test_receive_says_why_it_cannot(rcli, name):
    r = rcli("receive", name, "-s", "s")
    assert r.exit_code == 2 and "go back to the subscription when it disconnects" in r.stderr


def test_an_unreachable_target_is_one_line_exit_1(cli):
    r = cli("--service-url", "pulsar://127.0.0.1:9", "produce", "t", "-m", "x")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1
    assert "cannot reach pulsar://127.0.0.1:9" in r.stderr
    r = cli("--admin-url", "http://127.0.0.1:9", "topics", "list")
    assert r.exit_code == 1 and "cannot reach the admin API" in r.stderr
    r = cli("--service-url", "pulsar://127.0.0.1:9", "topics", "list")
    assert r.exit_code == 2 and "has no admin URL" in r.stderr
