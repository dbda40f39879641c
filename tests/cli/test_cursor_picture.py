"""`topics cursor TOPIC -s SUB` as people see it (CLI.md "Watching and teaching"): the picture
at 80 columns with NO_COLOR compared with its expected rendering, the same picture in colour
(one colour per state), and the JSON shapes of a topic and a partitioned topic."""
from __future__ import annotations

import io

from rich.console import Console

from cli_helpers import assert_error, ok, pjson
from pulsarctl.cli.cursor_picture import cursor_picture
from pulsarctl.cli.state import State

AT = "2026-01-01T00:00:00Z"

PICTURE = """\
persistent://public/default/t  subscription s (Shared)
backlog 8  ·  at 00:00:00
  1:0       ✓ acked
  ── mark-delete 1:0 ──
  1:1       ↻ redeliver         nacked, due 00:00:04.864 (in 4.864s) · was cli †
  1:2       ✓ acked
  1:3       ● pending           cli since 00:00:00 †
  ── read position 1:4 ──
  1:4–1:7   ○ backlog   ×4
  ⋮ 2 entries after the window not drawn (--around ID, -n N)
  † pulsarctl: the broker keeps this nack timer; Pulsar's lives in the client
  † pulsarctl: a consumer held by a lease; Pulsar's lives by its connection
"""


def _scene(cli):
    """Ten messages; cli received four, nacked 1:1 (5 s delay), acked 1:0 and 1:2."""
    ok(cli("clock", "simulate", "--at", AT))
    for i in range(10):
        ok(cli("produce", "t", "-m", f"x{i}"))
    r = cli("receive", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "4",
            "--nack-delay", "5s", "--idle-timeout", "10ms", "-o", "ndjson")
    assert r.exit_code in (0, 6), r.stderr
    ok(cli("nack", "t", "-s", "s", "1:1"))
    ok(cli("ack", "t", "-s", "s", "1:0", "1:2"))


def test_the_picture_at_80_columns_without_colour(cli, monkeypatch):
    _scene(cli)
    monkeypatch.setenv("COLUMNS", "80")
    out = ok(cli("topics", "cursor", "t", "-s", "s", "-n", "8")).stdout
    assert out == PICTURE
    assert "\x1b[" not in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_the_window_around_an_id_counts_what_it_does_not_draw(cli, monkeypatch):
    _scene(cli)
    monkeypatch.setenv("COLUMNS", "80")
    out = ok(cli("topics", "cursor", "t", "-s", "s", "--around", "1:7", "-n", "3")).stdout
    # The read position (1:4) falls among the entries not drawn (1:1-1:5): it cuts them in two
    # where it is, never drawn as if it stood just before the window.
    assert out.splitlines()[2:] == [
        "  1:0       ✓ acked",
        "  ── mark-delete 1:0 ──",
        "  ⋮ 3 entries before the window not drawn (--around ID, -n N)",
        "  ── read position 1:4 ──",
        "  ⋮ 2 entries before the window not drawn (--around ID, -n N)",
        "  1:6–1:8   ○ backlog   ×3",
        "  ⋮ 1 entry after the window not drawn (--around ID, -n N)",
    ]


def test_each_state_has_its_colour(cli):
    _scene(cli)
    b = State().broker()
    try:
        views = b.subscription("t", "s").cursor_view(None, 8)
    finally:
        b.close()
    console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system="standard",
                      record=True)
    console.print(cursor_picture(views))
    styled = console.export_text(styles=True, clear=False)
    for mark, label, sgr in (("✓", "acked", "32"), ("●", "pending", "33"),
                             ("↻", "redeliver", "1;31"), ("○", "backlog", "97")):
        assert f"\x1b[{sgr}m  {mark} \x1b[0m\x1b[{sgr}m{label}" in styled, label
    assert console.export_text() == PICTURE


def test_the_json_shape(cli):
    _scene(cli)
    doc = pjson(cli("topics", "cursor", "t", "-s", "s", "-n", "8", "-o", "json"))
    assert doc["markDeletePosition"] == "1:0" and doc["readPosition"] == "1:4"
    assert [(e["messageId"], e["state"], e["count"]) for e in doc["entries"]] == [
        ("1:0:-1", "acked", 1), ("1:1:-1", "redeliver", 1), ("1:2:-1", "acked", 1),
        ("1:3:-1", "pending", 1), ("1:4:-1", "backlog", 4)]
    nacked = doc["entries"][1]
    assert {k: nacked[k] for k in ("consumerName", "redeliveryCount", "due", "reason")} == {
        "consumerName": "cli", "redeliveryCount": 0, "due": "2026-01-01T00:00:04.864Z",
        "reason": "nacked"}
    for e in doc["entries"]:
        assert {"messageId", "state", "consumerName", "redeliveryCount", "due"} <= set(e)


def test_a_partitioned_topic_gives_one_picture_per_partition(cli, monkeypatch):
    ok(cli("topics", "create-partitioned-topic", "pt", "-p", "2"))
    ok(cli("topics", "create-subscription", "pt", "-s", "s", "-m", "earliest"))
    for i in range(4):
        ok(cli("produce", "pt", "-m", f"x{i}"))
    doc = pjson(cli("topics", "cursor", "pt", "-s", "s", "-o", "json"))
    assert set(doc) == {"topic", "subscription", "partitions"}
    assert [p["topic"] for p in doc["partitions"]] == [
        "persistent://public/default/pt-partition-0", "persistent://public/default/pt-partition-1"]
    assert sum(p["msgBacklog"] for p in doc["partitions"]) == 4
    monkeypatch.setenv("COLUMNS", "80")
    out = ok(cli("topics", "cursor", "pt", "-s", "s")).stdout
    assert out.count("subscription s (None)") == 2   # no consumer yet: Pulsar says None
    assert "pt-partition-0" in out and "pt-partition-1" in out


def test_unknown_topic_or_subscription_is_one_line(cli):
    ok(cli("produce", "t", "-m", "x"))
    line = assert_error(cli("topics", "cursor", "t", "-s", "nope"), 3, stdout_empty=True)
    assert "subscription 'nope' not found" in line
    assert_error(cli("topics", "cursor", "missing", "-s", "s"), 3, stdout_empty=True)
    assert_error(cli("topics", "cursor", "t", "-s", "s", "-n", "0"), 2)


def test_what_is_pulsarctls_is_marked_in_the_picture(cli, monkeypatch):
    """A redelivery count on an Exclusive subscription is pulsarctl's (Pulsar's single-active
    dispatchers count nothing): the row ends in a † the picture explains, and its JSON says
    so in beyondPulsar."""
    ok(cli("clock", "simulate", "--at", AT))
    (mid,) = ok(cli("produce", "t", "-m", "x")).stdout.split()
    recv = ("receive", "t", "-s", "ex", "-t", "Exclusive", "-p", "Earliest", "-n", "1",
            "--idle-timeout", "10ms", "--nack-delay", "1s", "-o", "ndjson")
    assert cli(*recv).exit_code == 0
    ok(cli("nack", "t", "-s", "ex", mid))
    ok(cli("clock", "advance", "2s"))
    assert cli(*recv).exit_code == 0                     # delivered again, count 1
    monkeypatch.setenv("COLUMNS", "80")
    out = ok(cli("topics", "cursor", "t", "-s", "ex")).stdout
    row = next(line for line in out.splitlines() if line.startswith("  1:0 "))
    assert "redelivery 1" in row and row.endswith(" †")
    assert "  † pulsarctl: Pulsar keeps no count on Exclusive and Failover subscriptions" in out
    (entry,) = [e for e in pjson(cli("topics", "cursor", "t", "-s", "ex", "-o", "json"))[
        "entries"] if e["messageId"] == mid]
    assert "Pulsar keeps no count on Exclusive and Failover subscriptions" in \
        entry["beyondPulsar"]
