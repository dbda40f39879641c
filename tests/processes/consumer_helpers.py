"""Helpers of the multi-consumer command-line tests (Failover, Key_Shared, partitioned and
pattern consumers): records, leased `receive` processes, stats and a bounded poll."""
from __future__ import annotations

import json
import sys
import time

def ok(r):
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def pok(r):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {stderr!r}"
    return lines[0]


def part(mid: str) -> int:
    """The partition index: the last field of a printed message id."""
    return int(mid.split(":")[2])


def payloads(recs) -> list[str]:
    return [m["payload"] for m in recs]


def ids(recs) -> list[str]:
    return [m["messageId"] for m in recs]


def ndjson_messages(pairs) -> str:
    """(key, payload) pairs as `produce --stdin --ndjson` input."""
    return "".join(json.dumps({"payload": p, "key": k}) + "\n" for k, p in pairs)


def produce_keyed(cli, topic, pairs) -> list[str]:
    # -db: one entry per message, so Key_Shared routes each by its own key (§9.1).
    r = ok(cli("produce", topic, "--stdin", "--ndjson", "-db", input=ndjson_messages(pairs)))
    out = r.stdout.split()
    assert len(out) == len(pairs)
    return out


def receive(run_proc, topic, sub, name, *extra, n=0, idle="300ms", expect=0):
    """A leased consumer in its own process: `receive ... --consumer-name NAME`; it stays
    connected after the process exits, until its lease ends."""
    r = run_proc("receive", topic, "-s", sub, "--consumer-name", name, "-n", str(n),
                 "--idle-timeout", idle, "-o", "ndjson", *extra)
    assert r.returncode == expect, (name, r.returncode, r.stdout, r.stderr)
    return records(r.stdout) if expect == 0 else r


def consumers_of(cli, topic, sub) -> list[dict]:
    return json.loads(ok(cli("subscriptions", "consumers", topic, sub, "-o", "json")).stdout)


def sub_stats(cli, topic, sub) -> dict:
    return json.loads(ok(cli("topics", "stats", topic, "-o", "json")).stdout)["subscriptions"][sub]


def ack_records(cli, topic, sub, recs) -> dict:
    text = "".join(json.dumps(m) + "\n" for m in recs)
    return json.loads(ok(cli("ack", topic, "-s", sub, "-", "-o", "json", input=text)).stdout)


def simulate_clock(run_proc):
    pok(run_proc("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))


def wait_for(predicate, what: str, timeout: float = 15.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
