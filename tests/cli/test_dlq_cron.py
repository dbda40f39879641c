"""The `dlq` commands run from cron (issue 14, item 6): a dead letter that fails does not block
the ones behind it, a run that had failures exits 7, every count is of messages (a batch entry
holds many), -q prints nothing unless something failed, --missing-ok reads a DLQ that does not
exist yet as an empty one. In process: real LMDB in tmp_path, typer's CliRunner through the real
error mapping; the DLQ's own lock and crashes are tests/processes/test_dlq_procs.py's."""
from __future__ import annotations

import json
import os

import pytest

from pulsarctl.broker import Broker
from pulsarctl.broker.batches import Spec
from pulsarctl.broker.dlq import SUBSCRIPTION, lock_path
from pulsarctl.messages import OutgoingMessage

from cli_helpers import assert_error, ok, pjson, rows

FULL = "persistent://public/default/"
DLQ = "orders-billing-DLQ"
PROPS = {"REAL_TOPIC": FULL + "orders", "REAL_SUBSCRIPTION": "billing"}
# --exec: fails (exit 1) on a payload that starts with "poison", logs every call
EXEC = 'p="$(cat)"; echo "$p" >> {log}; case "$p" in poison*) exit 1;; esac'


@pytest.fixture
def store(store_path):
    b = Broker(store_path)
    yield b
    b.close()


def publish(store, payloads, topic=DLQ, batched=False, props=PROPS):
    msgs = [OutgoingMessage(p.encode(), dict(props) if props else None) for p in payloads]
    return store.publish(topic, msgs, producer_name="test-dlq-cron",
                         batching=Spec() if batched else None)[1]


def waiting(cli, topic=DLQ):
    return [r["payload"] for r in rows(ok(cli("dlq", "peek", topic, "-n", "0", "-o",
                                                "ndjson")).stdout)]


def calls(log) -> list[str]:
    """The payloads --exec was run for since the last call (the log is emptied)."""
    if not log.exists():
        return []
    got = log.read_text().splitlines()
    log.write_text("")
    return got


POISON = ["poison0", "poison1", "poison2"]
GOOD = [f"good{i}" for i in range(7)]


# -- poison at the head ---------------------------------------------------------------------------
@pytest.mark.parametrize("batched", [False, True], ids=["entries", "one-batch"])
def test_poison_at_the_head_does_not_block_the_queue(cli, store, tmp_path, batched):
    """Three poison messages at the head and --max 3: each run tries each poison once, goes
    past them and drains three good ones; --max counts the drained. Every run that had a
    failure exits 7 with the summary as its one line; the poison stays for the next run."""
    publish(store, POISON + GOOD, batched=batched)
    log = tmp_path / "calls"
    cmd = EXEC.format(log=log)
    left = list(GOOD)
    for drained in (3, 3, 1, 0):
        r = cli("dlq", "drain", DLQ, "--exec", cmd, "--max", "3")
        line = assert_error(r, 7)
        assert line.startswith(f"error: drained {drained}, failed 3 on {FULL + DLQ}; ")
        assert f"`pulsarctl dlq peek {FULL + DLQ}`" in line
        good, left = left[:drained], left[drained:]
        assert calls(log) == POISON + good  # each poison tried once per run, then the rest
        assert waiting(cli) == POISON + left
    # -o json still prints its document, then the one error line
    r = cli("dlq", "drain", DLQ, "--exec", cmd, "-o", "json")
    assert r.exit_code == 7 and json.loads(r.stdout) == {
        "topic": FULL + DLQ, "drained": 0, "failed": 3, "out": None}
    calls(log)
    # the poison fixed (the command now takes it): drained, exit 0
    r = ok(cli("dlq", "drain", DLQ, "--exec", f"cat >> {log}", "--max", "3"))
    assert r.stderr.strip() == "drained 3, failed 0" and waiting(cli) == []


def test_the_failed_stay_and_the_good_ones_go_exactly_once(cli, store, tmp_path):
    """Poison between good ones, in batch entries and plain ones: a run hands every message
    to --exec exactly once, acks the good, keeps the poison."""
    publish(store, ["good0", "poison0", "good1"], batched=True)
    publish(store, ["poison1", "good2"])
    publish(store, ["good3", "good4", "poison2", "good5"], batched=True)
    log = tmp_path / "calls"
    r = cli("dlq", "drain", DLQ, "--exec", EXEC.format(log=log), "--batch", "2")
    assert assert_error(r, 7).startswith(f"error: drained 6, failed 3 on {FULL + DLQ}; ")
    assert sorted(calls(log)) == sorted(POISON + [f"good{i}" for i in range(6)])
    assert waiting(cli) == POISON


def test_max_failures_stops_a_run_early(cli, store, tmp_path):
    publish(store, [f"poison{i}" for i in range(5)] + ["good0", "good1"])
    log = tmp_path / "calls"
    cmd = EXEC.format(log=log)
    line = assert_error(cli("dlq", "drain", DLQ, "--exec", cmd, "--max-failures", "2"), 7)
    assert line.startswith(f"error: drained 0, failed 2 on {FULL + DLQ}; stopped at "
                           f"--max-failures 2; ")
    assert calls(log) == ["poison0", "poison1"]
    assert len(waiting(cli)) == 7
    # --max-failures and --max together: whichever comes first
    line = assert_error(cli("dlq", "drain", DLQ, "--exec", cmd, "--max-failures", "6",
                            "--max", "1"), 7)
    assert line.startswith(f"error: drained 1, failed 5 on {FULL + DLQ}; the failed stay")
    assert calls(log) == [f"poison{i}" for i in range(5)] + ["good0"]
    assert_error(cli("dlq", "drain", DLQ, "--exec", cmd, "--max-failures", "-1"), 2)


def test_replay_goes_past_failures_and_exits_7(cli, store):
    """A dead letter without REAL_TOPIC fails to replay: replay goes past it, --max counts the
    replayed, --max-failures stops it (inside a batch too), a dry run says 7 as well."""
    publish(store, ["orphan0", "orphan1", "orphan2"], props=None)
    publish(store, GOOD[:4], batched=True)
    for replayed in (2, 2, 0):
        r = cli("dlq", "replay", DLQ, "--max", "2", "-o", "ndjson")
        line = assert_error(r, 7)
        assert line.startswith(f"error: replayed {replayed}, skipped 0, failed 3 on "
                               f"{FULL + DLQ}; ")
        assert "--to TOPIC" in line
        assert [x["action"] for x in rows(r.stdout)] == ["failed"] * 3 + ["replayed"] * replayed
    assert waiting(cli) == ["orphan0", "orphan1", "orphan2"]
    got = rows(ok(cli("read", "orders", "-m", "earliest", "-n", "0", "--idle-timeout", "10ms",
                      "-o", "ndjson")).stdout)
    assert [g["payload"] for g in got] == GOOD[:4]
    r = cli("dlq", "replay", DLQ, "--max-failures", "2", "-o", "ndjson")
    assert [x["action"] for x in rows(r.stdout)] == ["failed", "failed"]
    assert "stopped at --max-failures 2" in assert_error(r, 7)
    assert_error(cli("dlq", "replay", DLQ, "--dry-run"), 7)
    # the ones that failed replay elsewhere with --to; then a clean run is exit 0
    ok(cli("dlq", "replay", DLQ, "--to", "fixed"))
    assert waiting(cli) == []


# -- counts are messages --------------------------------------------------------------------------
class _Bar:
    """Stands in for render.Progress: records its total and how far it got."""
    made: list = []

    def __init__(self, total, what):
        self.total, self.what, self.done = total, what, 0
        _Bar.made.append(self)

    def advance(self, n):
        self.done += n

    def close(self):
        pass


def test_counts_are_messages_not_entries(cli, store, tmp_path, monkeypatch):
    """A DLQ filled in batches (produce --stdin batches, 1000 a batch): list, stats, peek, the
    confirmation, the progress bar and the summaries count its messages."""
    from pulsarctl.cli import dlq_cmd, render

    lines = "".join(f"m{i}\n" for i in range(2500))
    ok(cli("produce", DLQ, "--stdin", "-p", f"REAL_TOPIC={FULL}orders",
           "-p", "REAL_SUBSCRIPTION=billing", input=lines))
    assert len(rows(ok(cli("read", DLQ, "-m", "earliest", "-n", "0", "--idle-timeout", "10ms",
                           "-o", "ndjson")).stdout)) == 2500

    def agree(n):
        [rec] = rows(ok(cli("dlq", "list", "-o", "ndjson")).stdout)
        assert rec["backlog"] == n
        assert ok(cli("dlq", "list")).stderr.strip().splitlines()[-1] == (
            f"1 dead letter topic, {n} dead letters waiting")
        assert pjson(cli("dlq", "stats", DLQ, "-o", "json"))["total"] == n
        assert ok(cli("dlq", "peek", DLQ)).stderr.strip() == (
            f"showed {min(n, 10)} of {n} dead letters waiting")
        assert len(waiting(cli)) == n

    agree(2500)
    _Bar.made = []
    monkeypatch.setattr(render, "Progress", _Bar)
    monkeypatch.setattr(render, "stderr_tty", lambda: True)
    monkeypatch.setattr(dlq_cmd, "_interactive", lambda: True)
    out = tmp_path / "d.ndjson"
    r = ok(cli("dlq", "drain", DLQ, "--out", str(out), "--max", "1500", "--batch", "400",
               input="y\n"))
    assert r.stderr.splitlines()[0] == (f"drain 1500 dead letters of {FULL + DLQ} to {out} "
                                        f"(they leave the DLQ)? [y/N]")
    assert r.stderr.splitlines()[-1] == "drained 1500, failed 0"
    [bar] = _Bar.made
    assert (bar.total, bar.done) == (1500, 1500)
    assert len(out.read_text().splitlines()) == 1500
    agree(1000)  # the second batch is half acked (by index): its 500 others still count
    r = ok(cli("dlq", "purge", DLQ, "--batch", "300", input="y\n"))
    assert r.stderr.splitlines()[0].startswith(f"purge 1000 dead letters of {FULL + DLQ}?")
    assert r.stderr.splitlines()[-1] == "purged 1000"
    assert (_Bar.made[-1].total, _Bar.made[-1].done) == (1000, 1000)
    agree(0)


def test_a_batched_origin_dead_letters_each_message(cli):
    """What lands in a DLQ when a batched topic's messages are dead-lettered: one dead letter
    per message (the DLQ producer does not batch). Messages produced to it in batches (parked
    there by hand) count as messages too: every count agrees."""
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    ok(cli("produce", "orders", "--stdin", input="".join(f"o{i}\n" for i in range(30))))
    for _ in range(2):
        got = ok(cli("receive", "orders", "-s", "billing", "-t", "Shared", "-p", "Earliest",
                     "--max-redeliver-count", "1", "--nack-delay", "1s", "-n", "30",
                     "-o", "ndjson")).stdout
        assert len(rows(got)) == 30
        ok(cli("nack", "orders", "-s", "billing", "-", input=got))
        ok(cli("clock", "advance", "2s"))
    assert waiting(cli) == [f"o{i}" for i in range(30)]
    assert [r["backlog"] for r in rows(ok(cli("dlq", "list", "-o", "ndjson")).stdout)] == [30]
    assert pjson(cli("dlq", "stats", DLQ, "-o", "json"))["total"] == 30
    ok(cli("produce", DLQ, "--stdin", "-p", f"REAL_TOPIC={FULL}orders",
           "-p", "REAL_SUBSCRIPTION=billing", input="".join(f"p{i}\n" for i in range(20))))
    assert len(waiting(cli)) == 50
    assert [r["backlog"] for r in rows(ok(cli("dlq", "list", "-o", "ndjson")).stdout)] == [50]
    assert pjson(cli("dlq", "stats", DLQ, "-o", "json"))["total"] == 50
    r = ok(cli("dlq", "drain", DLQ, "--out", os.devnull))
    assert r.stderr.strip() == "drained 50, failed 0"


# -- quiet ----------------------------------------------------------------------------------------
def test_quiet_prints_nothing_on_success_and_the_summary_on_failure(cli, store, tmp_path):
    publish(store, GOOD[:3])
    out = tmp_path / "d.ndjson"
    # list still warns about a DLQ nothing retains (a problem), but says no summary
    r = ok(cli("dlq", "list", "-q"))
    assert [ln.split(":")[0] for ln in r.stderr.splitlines()] == ["warning"]
    for cmd in (["stats", DLQ], ["peek", DLQ, "-o", "ndjson"], ["replay", DLQ, "--dry-run"]):
        r = ok(cli("dlq", *cmd, "-q"))
        assert r.stderr == "", cmd
    assert ok(cli("dlq", "replay", DLQ, "--dry-run", "-q")).stdout == ""  # text: no listing
    r = ok(cli("dlq", "drain", DLQ, "--out", str(out), "--max", "1", "-q"))
    assert (r.stdout, r.stderr) == ("", "")
    r = ok(cli("dlq", "replay", DLQ, "--to", "fixed", "--max", "1", "-q"))
    assert (r.stdout, r.stderr) == ("", "")
    r = ok(cli("dlq", "purge", DLQ, "-q"))
    assert (r.stdout, r.stderr) == ("", "")
    # something failed: the summary (one error line), -q or not, and in text the failed lines
    publish(store, ["poison0", "good0"])
    r = cli("dlq", "drain", DLQ, "--exec", EXEC.format(log=tmp_path / "log"), "-q")
    assert assert_error(r, 7).startswith(f"error: drained 1, failed 1 on {FULL + DLQ}; ")
    assert r.stdout == ""
    publish(store, ["good1"])
    r = cli("dlq", "replay", DLQ, "--to", "fixed", "-q")
    assert r.exit_code == 0 and (r.stdout, r.stderr) == ("", "")
    publish(store, ["orphan"], props=None)
    publish(store, ["good2"])
    r = cli("dlq", "replay", DLQ, "-q")
    assert assert_error(r, 7).startswith("error: replayed 1, skipped 0, failed 1 on ")
    [failed] = r.stdout.splitlines()
    assert failed.startswith("failed ") and "no REAL_TOPIC property" in failed
    # errors always print
    assert_error(cli("dlq", "purge", "nope-DLQ", "-q"), 3)
    assert ok(cli("dlq", "purge", DLQ, "-q")).stderr == ""
    assert_error(cli("dlq", "purge", DLQ, "-q", "--fail-if-empty"), 6)


# -- missing-ok -----------------------------------------------------------------------------------
def test_missing_ok_reads_a_missing_dlq_as_empty_and_creates_nothing(cli, store, tmp_path):
    missing = "later-billing-DLQ"
    out = tmp_path / "never.ndjson"
    cmds = (["stats", missing], ["peek", missing], ["drain", missing, "--out", str(out)],
            ["drain", missing, "--exec", "true"], ["replay", missing],
            ["replay", missing, "--dry-run"], ["purge", missing])
    for cmd in cmds:
        assert_error(cli("dlq", *cmd), 3)
        ok(cli("dlq", *cmd, "--missing-ok"))
        assert_error(cli("dlq", *cmd, "--missing-ok", "--fail-if-empty"), 6)
        assert ok(cli("dlq", *cmd, "--missing-ok", "-q")).stderr == ""
    assert ok(cli("dlq", "drain", missing, "--out", str(out), "--missing-ok")).stderr.strip() == (
        "drained 0, failed 0")
    assert ok(cli("dlq", "purge", missing, "--missing-ok")).stderr.strip() == "purged 0"
    assert ok(cli("dlq", "replay", missing, "--missing-ok")).stderr.strip() == (
        "replayed 0, skipped 0, failed 0")
    d = pjson(cli("dlq", "stats", missing, "--missing-ok", "-o", "json"))
    assert d["topic"] == FULL + missing and d["total"] == 0 and d["byRealTopic"] == {}
    assert pjson(cli("dlq", "drain", missing, "--exec", "true", "--missing-ok", "-o",
                     "json")) == {"topic": FULL + missing, "drained": 0, "failed": 0,
                                  "out": None}
    assert ok(cli("dlq", "peek", missing, "--missing-ok")).stderr.strip() == (
        "showed 0 of 0 dead letters waiting")
    # nothing was created: no topic, no subscription, no lock file, no output file
    assert not store.topics.exists(missing)
    assert not os.path.exists(lock_path(store.path, missing))
    assert not out.exists()
    assert ok(cli("dlq", "list")).stdout == ""
    # an existing DLQ is read as always; a partitioned topic's name is still a usage error
    publish(store, GOOD[:2])
    assert pjson(cli("dlq", "stats", DLQ, "--missing-ok", "-o", "json"))["total"] == 2
    r = ok(cli("dlq", "purge", DLQ, "--missing-ok"))
    assert r.stderr.strip() == "purged 2" and store.topics.subscriptions(DLQ) == [SUBSCRIPTION]
    ok(cli("topics", "create-partitioned-topic", "parted-DLQ", "-p", "2"))
    assert_error(cli("dlq", "purge", "parted-DLQ", "--missing-ok"), 2)
