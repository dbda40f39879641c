"""Command-line papercuts (issue 27, item 10): a row printed twice, a "no" without an exit code
of its own, a negative duration taken for an option, "a Exclusive", the man page and README.md
disagreeing on where global options go, and a root --help of 112 lines. A closed pipe (`| head`)
needs a real process: tests/processes/test_closed_pipe.py."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_helpers import assert_error, ok, rows
from pulsarctl.cli import docgen, helpfmt
from pulsarctl.cli.app import command
from pulsarctl.errors import EXIT_CODES, Declined

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def flat(text: str) -> str:
    return " ".join(text.split())


# -- dlq stats --by-property --------------------------------------------------------------------
@pytest.mark.parametrize("prop", ["REAL_SUBSCRIPTION", "REAL_TOPIC"])
def test_dlq_stats_by_a_property_it_already_counts_shows_its_rows_once(cli, prop):
    ok(cli("produce", "t-s-DLQ", "-m", "a", "-m", "b", "-p",
           "REAL_TOPIC=persistent://public/default/t", "-p", "REAL_SUBSCRIPTION=s",
           "-p", "reason=timeout"))
    table = ok(cli("dlq", "stats", "t-s-DLQ", "--by-property", prop)).stdout.splitlines()
    assert len([ln for ln in table if ln.split()[:1] == [prop]]) == 1, table
    # Another property is a group of its own, as before.
    table = ok(cli("dlq", "stats", "t-s-DLQ", "--by-property", "reason")).stdout.splitlines()
    assert [ln.split() for ln in table if ln.startswith("reason")] == [["reason", "timeout", "2"]]
    d = json.loads(ok(cli("dlq", "stats", "t-s-DLQ", "--by-property", prop, "-o",
                          "json")).stdout)
    assert d["byProperty"]["name"] == prop and sum(d["byProperty"]["counts"].values()) == 2


# -- a confirmation answered no -------------------------------------------------------------------
def test_a_confirmation_answered_no_has_a_documented_exit_code_of_its_own(cli, monkeypatch):
    from pulsarctl.cli import dlq_cmd

    ok(cli("produce", "t-s-DLQ", "-m", "a", "-p", "REAL_TOPIC=persistent://public/default/t"))
    monkeypatch.setattr(dlq_cmd, "_interactive", lambda: True)
    for answer in ("n\n", "\n", "maybe\n"):
        r = cli("dlq", "purge", "t-s-DLQ", input=answer)
        assert r.exit_code == Declined.exit_code == 9, (answer, r.exit_code, r.stderr)
        assert r.stderr.splitlines()[-1].startswith("error: cancelled; nothing was changed")
    assert len(rows(ok(cli("dlq", "peek", "t-s-DLQ", "-o", "ndjson")).stdout)) == 1
    assert 9 in EXIT_CODES and "declined" in EXIT_CODES[9]
    # No other meaning had 9: the table gives each code one meaning.
    assert len(set(EXIT_CODES)) == len(EXIT_CODES)


def test_the_readme_lists_every_exit_code_as_the_man_pages_do():
    table = README.read_text().split("## Exit codes")[1].split("\n## ")[0]
    listed = [int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)]
    assert listed == list(EXIT_CODES), listed
    man = (ROOT / "man" / "pulsarctl.1").read_text()
    for code in EXIT_CODES:
        assert f".TP\n\\fB\\%{code}\\fR\n" in man, code


# -- clock advance with a negative duration -------------------------------------------------------
@pytest.mark.parametrize("duration", ["-5s", "-5", "-0.5m"])
def test_clock_advance_by_a_negative_duration_says_the_clock_cannot_go_back(cli, duration):
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    line = assert_error(cli("clock", "advance", duration), 2, stdout_empty=True)
    assert line.startswith(f"error: the clock cannot go back ('{duration}')"), line
    assert "No such option" not in line
    now = json.loads(ok(cli("clock", "show", "-o", "json")).stdout)["now"]
    assert now == "2026-01-01T00:00:00.000Z"
    # Options still work around it; an option it does not have is still one.
    ok(cli("clock", "advance", "5s", "-o", "json"))
    assert "no such option: --soon" in assert_error(cli("clock", "advance", "--soon"), 2)


# -- articles -----------------------------------------------------------------------------------
def test_a_consumer_of_another_type_is_refused_with_the_right_article(cli):
    ok(cli("receive", "t", "-s", "s", "-t", "Shared", "--consumer-name", "a",
           "--idle-timeout", "1ms"))
    line = assert_error(cli("receive", "t", "-s", "s", "-t", "Exclusive", "--consumer-name",
                            "b", "--idle-timeout", "1ms"), 4)
    assert "an Exclusive consumer cannot join it" in line, line
    line = assert_error(cli("receive", "t", "-s", "s", "-t", "Failover", "--consumer-name",
                            "c", "--idle-timeout", "1ms"), 4)
    assert "a Failover consumer cannot join it" in line, line


# -- where global options go: one text, in README.md and the man pages ----------------------------
def test_readme_and_man_pages_say_where_global_options_go_in_the_same_words():
    text = docgen.global_options_text()
    assert flat(text) in flat(README.read_text())
    roff = docgen._roff(text)
    for page in ("pulsarctl.1", "pulsarctl-topics.1", "pulsarctl-dlq.1"):
        assert roff in (ROOT / "man" / page).read_text(), page
    assert "Global options go before the command; see" not in (
        ROOT / "man" / "pulsarctl-topics.1").read_text()


def test_what_the_text_says_about_global_options_is_what_the_code_does(cli, tmp_path):
    other = str(tmp_path / "other")
    ok(cli("tenants", "create", "only-there", "--store", other))      # after the command
    assert "only-there" in ok(cli("--store", other, "tenants", "list")).stdout.split()
    assert "only-there" not in ok(cli("tenants", "list")).stdout.split()
    assert json.loads(ok(cli("tenants", "list", "--output", "json")).stdout) == ["public"]
    assert json.loads(ok(cli("tenants", "-o", "json", "list")).stdout) == ["public"]
    ok(cli("clock", "show", "--traceback", "--explain"))
    text = docgen.global_options_text()
    for flag in ("`--store`", "`-o`/`--output`", "`--traceback`", "`--explain`"):
        assert flag in text.split(" may also follow it")[0], flag
    assert "`--version` only goes before it" in text
    assert_error(cli("tenants", "list", "--version"), 2)


# -- the root help ------------------------------------------------------------------------------
def leaves_and_groups(cmd, path=()):
    for name, sub in getattr(cmd, "commands", {}).items():
        yield path + (name,), sub
        yield from leaves_and_groups(sub, path + (name,))


def test_every_command_has_a_short_summary():
    long = {" ".join(p): c.short_help for p, c in leaves_and_groups(command())
            if len(c.short_help) > 110 or "\n" in c.short_help}
    assert not long, long


def test_the_root_help_lists_each_command_in_one_or_two_lines(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    text = ok(cli("--help")).stdout
    lines = text.splitlines()
    assert len(lines) <= 70, len(lines)                # it was 112, 37 of them top's schema
    panel = text.split("Commands")[1].splitlines()[1:]
    names = list(command().commands)
    per_command: dict[str, int] = {}
    current = None
    for ln in panel:
        cell = ln.strip("│ ").split(" ")[0] if ln.startswith("│ ") else None
        if cell in names and ln.startswith(f"│ {cell} "):
            current = cell
            per_command[current] = 1
        elif current is not None and ln.startswith("│ "):
            per_command[current] += 1
    assert set(per_command) == set(names), set(names) ^ set(per_command)
    assert max(per_command.values()) <= 2, per_command
    # Each command's own --help keeps its whole text.
    assert "Keys: up/down or j/k pick a topic" in flat(ok(cli("top", "--help")).stdout)
    assert "authentication (TLS certificates, tokens, basic)" in flat(
        ok(cli("serve", "--help")).stdout)


def test_a_summary_is_the_first_sentence_cut_at_a_clause_when_long():
    assert helpfmt.summary("Do a thing. And more.") == "Do a thing."
    assert helpfmt.summary("Is it running (exit 3 if not)? More words.") == \
        "Is it running (exit 3 if not)?"
    long = "A message's life: " + "x " * 60 + "end."
    assert helpfmt.summary(long) == "A message's life."
    assert helpfmt.summary("Count (by: a) " + "y " * 60 + "end.").startswith("Count (by: a)")
    assert helpfmt.summary("Anything.", explicit="Short.") == "Short."
