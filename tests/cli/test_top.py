"""`pulsarctl top` (issue 17 item 4): --once -o json's shape, --once as a person reads it at a
fixed width, the refusals, and the live view in a real terminal (tmux: send-keys to pick a topic
and open it, q to quit; capture-pane to see what a person sees)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import pytest

from cli_helpers import assert_error, ok, pjson
from pulsarctl import clock as clocks

AT = "2026-01-01T00:00:00Z"


def _scene(cli):
    ok(cli("clock", "simulate", "--at", AT))
    ok(cli("produce", "t", "-m", "a", "-m", "b", "-m", "c"))
    r = cli("receive", "t", "-s", "jobs", "-t", "Shared", "-p", "Earliest", "-n", "2",
            "--idle-timeout", "10ms", "--max-redeliver-count", "3", "-o", "ndjson")
    assert r.exit_code == 0, r.stderr


def test_once_json_shape(cli, fake_time):
    _scene(cli)
    doc = pjson(cli("top", "public/default", "--once", "-o", "json"))
    assert fake_time.slept == [1.0]                       # two snapshots a second apart
    assert list(doc) == ["namespace", "clock", "daemon", "intervalMs", "topics",
                         "deadLetterTopics"]
    assert doc["clock"] == {"mode": "simulated", "now": "2026-01-01T00:00:00.000Z",
                            "nowMs": 1_767_225_600_000}
    assert doc["daemon"]["running"] is False and doc["intervalMs"] == 1000
    (t,) = doc["topics"]
    assert set(t) == {"topic", "partitions", "msgInCounter", "msgOutCounter", "bytesInCounter",
                      "storageSize", "msgBacklog", "backlogMessages", "backlogMessagesExact",
                      "unackedMessages", "redeliveredCounter",
                      "consumers", "msgRateIn", "msgRateOut", "redeliveriesPerMinute",
                      "isDeadLetterTopic", "subscriptions"}
    (s,) = t["subscriptions"]
    assert set(s) == {"name", "type", "msgBacklog", "backlogMessages", "backlogMessagesExact",
                      "msgOutCounter", "unackedMessages",
                      "awaitingRedelivery", "delayedMessages", "redeliveredCounter",
                      "deadLetterTopic", "msgRateOut", "redeliveriesPerMinute", "consumers"}
    assert s["consumers"][0]["unackedMessages"] == 2
    assert doc["deadLetterTopics"] == [{
        "topic": "persistent://public/default/t-jobs-DLQ", "messages": 0,
        "originTopic": "persistent://public/default/t", "originSubscription": "jobs"}]


EXPECTED = """\
pulsarctl top · public/default · clock 2026-01-01T00:00:00.000Z (simulated)
timers: no daemon (they fire when a command touches the subscription) · rates over 1s

TOPIC                     IN/s  OUT/s  BACKLOG  MSGS  UNACKED  REDELIVER  DELAYED  REDEL/min
────────────────────────────────────────────────────────────────────────────────────────────
  t                        0.0    0.0        3     3        2                            0.0
    jobs · Shared                 0.0        3     3        2          0        0        0.0
      cli                                                   2                               

DEAD LETTER TOPIC   MESSAGES   FROM TOPIC / SUBSCRIPTION
────────────────────────────────────────────────────────
t-jobs-DLQ                 0   t / jobs                 
"""


def test_once_text_at_a_fixed_width(cli, fake_time, monkeypatch):
    _scene(cli)
    monkeypatch.setenv("COLUMNS", "100")
    assert ok(cli("top", "public/default", "--once")).stdout == EXPECTED


def test_under_80_columns_the_topic_column_stays_and_the_others_go_first(cli, fake_time,
                                                                          monkeypatch):
    """A narrow terminal drops columns, the least needed first; never the topic's name, nor
    the backlog (entries and messages)."""
    _scene(cli)
    ok(cli("produce", "a-topic-with-a-long-name", "-m", "x"))
    order = ["REDEL/min", "DELAYED", "REDELIVER", "IN/s", "OUT/s", "UNACKED"]
    dropped_at = {}
    for width in (100, 80, 60, 44):
        monkeypatch.setenv("COLUMNS", str(width))
        out = ok(cli("top", "public/default", "--once")).stdout
        table = out[out.index("TOPIC"):out.index("DEAD LETTER")]
        assert "  a-topic-with-a-long-name " in table, table   # the name whole
        assert max(len(line) for line in table.splitlines()) <= width, table
        header = table.splitlines()[0].split()
        assert header[0] == "TOPIC" and "BACKLOG" in header and "MSGS" in header
        dropped = [c for c in order if c not in header]
        assert dropped == order[:len(dropped)], header     # in that order
        dropped_at[width] = len(dropped)
    assert dropped_at[100] == 0 and dropped_at[80] >= 1 and dropped_at[44] == len(order)
    assert dropped_at[100] <= dropped_at[80] <= dropped_at[60] <= dropped_at[44]


def test_messages_beside_pulsars_entry_counted_backlog(cli, fake_time, monkeypatch):
    """Pulsar's msgBacklog counts entries, a batch as one: top shows it as BACKLOG and the
    messages beside it as MSGS, labelled, and both in JSON."""
    ok(cli("topics", "create-subscription", "b", "-s", "s"))
    ok(cli("produce", "b", "--stdin", input="1\n2\n3\n4\n"))  # one batch entry of 4
    ok(cli("produce", "b", "-m", "plain"))
    doc = pjson(cli("top", "public/default", "--once", "-o", "json"))
    (t,) = doc["topics"]
    assert (t["msgBacklog"], t["backlogMessages"], t["backlogMessagesExact"]) == (2, 5, True)
    assert (t["subscriptions"][0]["msgBacklog"], t["subscriptions"][0]["backlogMessages"]) == \
        (2, 5)
    monkeypatch.setenv("COLUMNS", "100")
    out = ok(cli("top", "public/default", "--once")).stdout
    row = next(line for line in out.splitlines() if line.strip().startswith("b "))
    assert row.split()[3:5] == ["2", "5"]
    assert "BACKLOG counts entries, as Pulsar's msgBacklog does (a batch is one entry); MSGS " \
           "counts the messages in them" in out


def test_refusals(cli):
    # Not a terminal and no --once: one line, the usage exit code.
    line = assert_error(cli("top"), 2, stdout_empty=True)
    assert "not a terminal" in line and "--once" in line
    assert "needs --once" in assert_error(cli("top", "-o", "json"), 2)
    assert_error(cli("top", "nope/nope", "--once"), 3)


def test_keys_of_the_terminal():
    from pulsarctl.cli.top_cmd import keys_of

    assert keys_of(b"\x1b[A\x1b[Bjk\r\x1bq") == ["up", "down", "down", "up", "open", "back",
                                                 "quit"]
    assert keys_of(b"\x1b[5~x\x7f") == ["back"]          # Page Up and x are no keys of ours


# -- a real terminal --------------------------------------------------------------------------
TMUX = shutil.which("tmux")


def _wait(predicate, what, seconds=20.0):
    deadline = clocks.monotonic() + seconds
    while clocks.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        clocks.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_live_view_in_tmux(cli, store_path, tmp_path):
    _scene(cli)
    ok(cli("produce", "u", "-m", "x"))
    sock = f"pulsarctl-top-{uuid.uuid4().hex[:8]}"
    tmux = [TMUX, "-L", sock]
    env_cmd = (f"env -u COLUMNS -u LINES PULSARCTL_STORE={store_path} NO_COLOR=1 {sys.executable} -P -m pulsarctl "
               f"top public/default; echo EXIT=$?; sleep 60")
    subprocess.run(tmux + ["-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", "48",
                           env_cmd], check=True, cwd=str(tmp_path))

    def pane():
        return subprocess.run(tmux + ["capture-pane", "-p"], capture_output=True,
                              text=True).stdout

    def showing(*needles):
        p = pane()
        return p if all(n in p for n in needles) else None

    def keys(*k):
        subprocess.run(tmux + ["send-keys"] + list(k), check=True)
    try:
        first = _wait(lambda: showing("▶ t", "rates over"), "the dashboard with rates")
        assert "pulsarctl top · public/default" in first and "jobs · Shared" in first
        assert "↑/↓ or j/k pick a topic" in first
        keys("Down")
        _wait(lambda: "▶ u" in pane(), "u picked")
        keys("Up")
        _wait(lambda: "▶ t" in pane(), "t picked again")
        screen = pane()
        keys("Enter")
        detail = _wait(lambda: showing("CONSUMER", "HOLDS"), "the detail pane of t")
        assert "persistent://public/default/t: 3 in, 2 out" in detail
        assert "Esc or Backspace back" in detail
        assert "cursor of jobs" in detail  # the cursor picture, as `topics cursor` draws it
        keys("Escape")
        _wait(lambda: "▶ t" in pane(), "back to the topics")
        keys("q")
        end = _wait(lambda: showing("EXIT="), "top to quit")
        assert "EXIT=0" in end
        assert "Traceback" not in end
        out = os.environ.get("TOP_CAPTURE")
        if out:
            with open(out, "w", encoding="utf-8") as f:
                f.write(screen.rstrip("\n") + "\n\n--- after Enter ---\n\n"
                        + detail.rstrip("\n") + "\n")
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
