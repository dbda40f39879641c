"""The broker's dead letter moves go through one producer per (subscription, dead letter topic)
whose sequence ids rise from one move to the next, across commands (issue 27 item 10), as a
Pulsar consumer's one DLQ producer does (pulsar-semantics.md §6.4: its name is
<topic>-<subscription>-<consumerName>-<5 random>-DLQ, made once)."""
from __future__ import annotations

import re

from cli_helpers import ok, rows

AT = "2026-01-01T00:00:00Z"
DLQ = "t-s-DLQ"


def _dead_letter_one(cli, mid):
    """Receive mid, nack it past --max-redeliver-count 1: the nack timer that fires moves it."""
    for _ in range(2):
        got = rows(ok(cli("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest",
                          "--max-redeliver-count", "1", "--nack-delay", "1s", "-n", "1",
                          "--consumer-name", "worker", "--idle-timeout", "10ms",
                          "-o", "ndjson")).stdout)
        assert [m["messageId"] for m in got] == [mid]
        ok(cli("nack", "t", "-s", "s", mid))
        ok(cli("clock", "advance", "2s"))   # fires: a redelivery, then the move


def test_two_moves_in_two_commands_share_one_producer_and_count_on(cli):
    ok(cli("clock", "simulate", "--at", AT))
    first, second = ok(cli("produce", "t", "-m", "a", "-m", "b")).stdout.split()
    _dead_letter_one(cli, first)
    _dead_letter_one(cli, second)
    dead = rows(ok(cli("read", DLQ, "-m", "earliest", "-n", "0", "--idle-timeout", "10ms",
                       "-o", "ndjson")).stdout)
    assert [m["payload"] for m in dead] == ["a", "b"]
    assert [m["sequenceId"] for m in dead] == [0, 1]
    names = {m["producerName"] for m in dead}
    assert len(names) == 1
    (name,) = names
    assert re.fullmatch(re.escape("persistent://public/default/t-s-worker-") +
                        r"[a-zA-Z0-9]{5}-DLQ", name), name
