"""Terminal and script conventions (issue 14, items 7 and 9): help without a command, one JSON
document, tables a pipe can grep, --version, global options after the subcommand, what a
command says on a terminal, and control characters that never reach a terminal raw."""
from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys

import pytest

from cli_helpers import ok, pjson

PREFIX = "persistent://public/default/"


def proc(store_path, *args, input=None, env_extra=None, tty_stderr=False):
    """The real entry point; with tty_stderr its stderr is a terminal (a pty) and is returned
    as text read from the terminal's other end."""
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1", COLUMNS="40",
               **(env_extra or {}))
    argv = [sys.executable, "-m", "pulsarctl", *args]
    if not tty_stderr:
        return subprocess.run(argv, input=input, capture_output=True, text=True, env=env,
                              timeout=60)
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=slave,
                             env=env, text=True)
        os.close(slave)
        out, _ = p.communicate(input, timeout=60)
        seen = b""
        while select.select([master], [], [], 0.5)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other end is closed: all was read
                break
            if not chunk:
                break
            seen += chunk
        return subprocess.CompletedProcess(argv, p.returncode, out,
                                           seen.decode("utf-8", "replace"))
    finally:
        os.close(master)


# -- help, --version -------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [(), ("tenants",), ("dlq",), ("topics",)])
def test_no_command_prints_help_once_and_exits_0(store_path, argv):
    r = proc(store_path, *argv)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("Usage:") == 1, r.stdout
    assert r.stderr == ""


def test_version_flag(store_path):
    r = proc(store_path, "--version")
    assert r.returncode == 0 and r.stdout.startswith("pulsarctl ") and r.stderr == ""
    assert r.stdout.split()[1][0].isdigit()
    assert not os.path.exists(store_path)


# -- global options after the subcommand -----------------------------------------------------
def test_store_and_output_after_the_subcommand(cli, tmp_path):
    other = str(tmp_path / "other")
    ok(cli("produce", "elsewhere", "-m", "x", "--store", other))
    ok(cli("produce", "here", "-m", "x"))
    there = ok(cli("topics", "list", "public/default", "--store", other)).stdout.split()
    assert there == [PREFIX + "elsewhere"]
    assert ok(cli("topics", "list", "public/default", f"--store={other}", "-o", "json")).stdout \
        == json.dumps([PREFIX + "elsewhere"], indent=2) + "\n"
    here = ok(cli("topics", "list", "public/default")).stdout.split()
    assert here == [PREFIX + "here"]
    ok(cli("topics", "list", "public/default", "--traceback"))


def test_an_option_value_that_looks_like_a_global_option_stays_a_value(cli):
    ok(cli("produce", "t", "-m", "--store"))
    rec = pjson(cli("read", "t", "-m", "earliest", "-o", "json"))
    assert rec["payload"] == "--store"


# -- one JSON document -----------------------------------------------------------------------
def test_json_is_one_document_whatever_the_count(cli):
    ok(cli("produce", "t", "-m", "a", "-m", "b", "-m", "c"))
    many = pjson(cli("consume", "t", "-s", "s", "-p", "Earliest", "-n", "2", "-o", "json"))
    assert [m["payload"] for m in many] == ["a", "b"]
    one = pjson(cli("consume", "t", "-s", "s", "-o", "json"))
    assert one["payload"] == "c"
    none = pjson(cli("consume", "t", "-s", "s", "-n", "0", "--idle-timeout", "100ms",
                     "-o", "json"))
    assert none == []
    read = pjson(cli("read", "t", "-m", "earliest", "-n", "0", "--until-end", "-o", "json"))
    assert [m["payload"] for m in read] == ["a", "b", "c"]
    got = pjson(cli("receive", "t", "-s", "r", "-p", "Earliest", "-n", "3", "-o", "json"))
    assert len(got) == 3 and all("messageId" in m for m in got)


def test_produce_json_names_the_full_topic(cli):
    doc = pjson(cli("produce", "t", "-m", "a", "-o", "json"))
    assert doc["topic"] == PREFIX + "t"
    rows = ok(cli("produce", "t", "--stdin", "-o", "ndjson", input="x\ny\n")).stdout
    assert {json.loads(line)["topic"] for line in rows.splitlines()} == {PREFIX + "t"}


# -- tables through a pipe -------------------------------------------------------------------
def test_tables_through_a_pipe_are_whole_rows_without_boxes(store_path):
    long = "orders-" + "x" * 120
    dlq = f"{long}-sub-DLQ"
    r = proc(store_path, "produce", dlq, "-m", "dead", "-p",
             f"REAL_TOPIC={PREFIX}{long}")
    assert r.returncode == 0, r.stderr
    r = proc(store_path, "dlq", "list")  # COLUMNS=40, stdout a pipe
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if dlq in line]
    assert len(rows) == 1, r.stdout
    assert PREFIX + dlq in rows[0] and rows[0].split()[-1] != dlq  # the row goes on
    assert not set("│┃━─┏┗╇") & set(r.stdout)
    stats = proc(store_path, "topics", "stats", dlq)
    assert not set("│┃━─┏┗╇") & set(stats.stdout)
    assert any(line.split()[:2] == ["msgInCounter", "1"] for line in stats.stdout.splitlines())


# -- what a command says on a terminal -------------------------------------------------------
def test_consume_says_what_it_waits_for_on_a_terminal_only(store_path):
    r = proc(store_path, "consume", "t", "-s", "s", "--idle-timeout", "200ms", tty_stderr=True)
    assert r.returncode == 0
    assert f"waiting for a message on {PREFIX}t (Exclusive subscription s)" in r.stderr
    quiet = proc(store_path, "receive", "t", "-s", "s", "-n", "0", "--idle-timeout", "200ms")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_produce_stdin_ends_with_a_summary_on_a_terminal(store_path):
    r = proc(store_path, "produce", "t", "--stdin", input="a\nb\nc\n", tty_stderr=True)
    assert r.returncode == 0, r.stderr
    assert f"produced 3 message(s) to {PREFIX}t" in r.stderr
    assert len(r.stdout.split()) == 3
    piped = proc(store_path, "produce", "t", "--stdin", input="d\n")
    assert piped.returncode == 0 and piped.stderr == ""


# -- control characters ----------------------------------------------------------------------
C1 = "\u009b31m\u0085"


def test_c1_controls_never_reach_the_output_raw(cli):
    ok(cli("produce", "t", "-m", "p" + C1, "-k", "k" + C1, "-p", "n=v" + C1))
    for fmt in ("json", "ndjson"):
        out = ok(cli("read", "t", "-m", "earliest", "-o", fmt)).stdout
        assert not any(0x80 <= ord(ch) <= 0x9F for ch in out), repr(out)
        rec = json.loads(out)
        assert rec["payload"] == "p" + C1 and rec["key"] == "k" + C1
        assert rec["properties"] == {"n": "v" + C1}
    text = ok(cli("read", "t", "-m", "earliest", "-mp")).stdout
    assert not any(0x80 <= ord(ch) <= 0x9F for ch in text)
    assert "\\u009b31m" in text


def test_c1_controls_are_escaped_in_drained_dead_letters(cli, tmp_path):
    ok(cli("produce", "t-s-DLQ", "-m", "p" + C1, "-p", f"REAL_TOPIC={PREFIX}t"))
    out = tmp_path / "dead.ndjson"
    ok(cli("dlq", "drain", "t-s-DLQ", "--out", str(out)))
    text = out.read_text("utf-8")
    assert not any(0x80 <= ord(ch) <= 0x9F for ch in text), repr(text)
    assert json.loads(text)["payload"] == "p" + C1


def test_an_unset_event_time_reads_null_in_the_text_view(cli):
    ok(cli("produce", "t", "-m", "x"))
    text = ok(cli("read", "t", "-m", "earliest", "-mp")).stdout
    assert "eventTime:[null]" in text and "None" not in text
