"""Helpers of the multi-consumer command-line tests (Failover, Key_Shared, partitioned and
pattern consumers, in tests/cli and tests/processes): keyed messages, leased `receive`
consumers, stats."""
from __future__ import annotations

import json

from cli_helpers import ok, rows


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


def receive(cli, topic, sub, name, *extra, n=0, expect=0):
    """A leased consumer: `receive ... --consumer-name NAME`. It is tied to no process (only to
    its lease), so it stays connected after the command, as after a process of its own exits.
    What it can get is in the store already and nothing else runs, so a short idle timeout
    ends it once it has everything."""
    r = cli("receive", topic, "-s", sub, "--consumer-name", name, "-n", str(n),
            "--idle-timeout", "50ms", "-o", "ndjson", *extra)
    assert r.exit_code == expect, (name, r.exit_code, r.stdout, r.stderr)
    return rows(r.stdout) if expect == 0 else r


def consumers_of(cli, topic, sub) -> list[dict]:
    return json.loads(ok(cli("subscriptions", "consumers", topic, sub, "-o", "json")).stdout)


def sub_stats(cli, topic, sub) -> dict:
    return json.loads(ok(cli("topics", "stats", topic, "-o", "json")).stdout)["subscriptions"][sub]


def ack_records(cli, topic, sub, recs) -> dict:
    text = "".join(json.dumps(m) + "\n" for m in recs)
    return json.loads(ok(cli("ack", topic, "-s", sub, "-", "-o", "json", input=text)).stdout)


def simulate_clock(cli):
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
