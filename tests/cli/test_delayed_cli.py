"""Issue 14, item 4, through the command line: three immediate and three delayed messages, consumed
on a Shared subscription, the clock moved past the delivery time, consumed again: each delayed
message comes once (it came twice: `del-0, del-1, del-2` and again). With `--deliver-after`,
`--deliver-at` and NDJSON records with `deliverAt` (`produce --stdin --ndjson`, batched or with
-db), moved by `clock advance` or `clock advance` then `daemon run-once`, consumed once or by
several runs. In-process through CliRunner and the real error mapping; the simulated clock.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from simclock import START_MS
from cli_helpers import ok, pjson, rows

IMMEDIATE = ["imm-0", "imm-1", "imm-2"]
DELAYED = ["del-0", "del-1", "del-2"]
AT = START_MS + 10_000


def consume(cli, *extra, sub_type="Shared"):
    r = ok(cli("consume", "t", "-s", "s", "-t", sub_type, "-p", "Earliest", "-n", "0",
               "--idle-timeout", "300ms", "-o", "ndjson", *extra))
    return [m["payload"] for m in rows(r.stdout)]


def produce(cli, how: str):
    if how in ("deliver-after", "deliver-at"):
        for p in IMMEDIATE:
            ok(cli("produce", "t", "-m", p))
        for p in DELAYED:
            flag = ["--deliver-after", "10s"] if how == "deliver-after" else [
                "--deliver-at", "2026-01-01T00:00:10Z"]
            ok(cli("produce", "t", "-m", p, *flag))
        return
    # NDJSON records, immediate and delayed mixed in one stdin; deliverAt as ISO or epoch ms.
    recs = [{"payload": p} for p in IMMEDIATE]
    recs += [{"payload": p, "deliverAt": AT if i % 2 else "2026-01-01T00:00:10Z"}
             for i, p in enumerate(DELAYED)]
    recs = [recs[0], recs[3], recs[1], recs[4], recs[2], recs[5]]
    text = "".join(json.dumps(r) + "\n" for r in recs)
    args = ["produce", "t", "--stdin", "--ndjson"] + (["-db"] if how == "ndjson-db" else [])
    ok(cli(*args, input=text))


@pytest.mark.parametrize("how", ["deliver-after", "deliver-at", "ndjson", "ndjson-db"])
@pytest.mark.parametrize("sub_type", ["Shared", "Key_Shared"])
@pytest.mark.parametrize("fire", ["clock-advance", "daemon-run-once"])
def test_delayed_messages_come_once(cli, how, sub_type, fire):
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    produce(cli, how)
    assert sorted(consume(cli, sub_type=sub_type)) == IMMEDIATE
    st = pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]
    assert st["msgBacklog"] == 3
    ok(cli("clock", "advance", "11s"))
    if fire == "daemon-run-once":
        ok(cli("daemon", "run-once"))
    got = consume(cli, sub_type=sub_type)
    assert Counter(got) == Counter(DELAYED), got
    assert consume(cli, sub_type=sub_type) == []
    st = pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]
    assert (st["msgBacklog"], st["delayedMessages"]) == (0, 0)


def test_the_issue_reproduction(cli):
    """Word for word: produced one by one, the second consume after `clock advance 11s`."""
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    for i in range(3):
        ok(cli("produce", "t", "-m", f"imm-{i}"))
    for i in range(3):
        ok(cli("produce", "t", "-m", f"del-{i}", "--deliver-after", "10s"))
    r = ok(cli("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "0",
               "--idle-timeout", "300ms"))
    assert [x for x in r.stdout.splitlines() if "content:" in x] == [
        f"key:[null], properties:[], content:imm-{i}" for i in range(3)]
    ok(cli("clock", "advance", "11s"))
    r = ok(cli("consume", "t", "-s", "s", "-t", "Shared", "-n", "0", "--idle-timeout", "300ms"))
    assert [x for x in r.stdout.splitlines() if "content:" in x] == [
        f"key:[null], properties:[], content:del-{i}" for i in range(3)]


def test_several_runs_before_and_after_the_delivery_time(cli):
    """Runs while the messages wait get nothing (each run's end rewinds the cursor); runs after
    get each delayed message once between them."""
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    produce(cli, "deliver-after")
    seen = consume(cli)
    for _ in range(3):
        ok(cli("clock", "advance", "2s"))     # up to 6 s: before the time (and its tick)
        assert consume(cli) == []
    ok(cli("clock", "advance", "5s"))
    for _ in range(3):
        seen += consume(cli, "-n", "0")
    assert Counter(seen) == Counter(IMMEDIATE + DELAYED), seen


def test_what_a_learner_sees_of_held_messages_after_the_consumer_left(cli):
    """The consumer that held the delayed messages back is gone: they stay counted as delayed,
    `clock advance` says they came due, and each goes out once, to Shared only when due; a
    change to Exclusive (which delivers delayed messages at once) gets them at once."""
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    produce(cli, "deliver-after")
    assert consume(cli) == IMMEDIATE
    sub = pjson(cli("topics", "stats", "t", "-o", "json"))["subscriptions"]["s"]
    assert sub["delayedMessages"] == 3 and sub["msgBacklog"] == 3
    assert consume(cli) == []  # not due: still held, not read again from the rewound cursor
    fired = pjson(cli("clock", "advance", "11s", "-o", "json"))["fired"]
    assert fired["delayed"] == 3
    assert consume(cli) == DELAYED
    assert consume(cli) == []
    ok(cli("produce", "t", "-m", "late", "--deliver-after", "1h"))
    assert consume(cli) == []
    assert consume(cli, sub_type="Exclusive") == ["late"]
