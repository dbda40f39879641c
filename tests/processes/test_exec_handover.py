"""Issue 14: `consume --exec` hands every message over, and what it nacks outlives it.

- A NUL in a key or a property (the environment cannot hold one) used to stop every run on that
  message; now the value is passed base64-encoded with <VARIABLE>_ENCODING=base64, and a message
  that cannot be handed over at all (its environment over the system's limit) is nacked with
  one line on stderr while the run goes on: no wall in front of the subscription.
- Exit 75 with retry enabled is reported as reconsumed later, not as nacked.
- A failing command nacks; once the `consume` process has exited (or was killed) the message
  comes back only after the nack delay, with its redelivery count raised by one, whichever
  process is running then (a later consume, `daemon run-once`).
Real `python -m pulsarctl` processes; the store's simulated clock, never a sleep.
"""
from __future__ import annotations

import base64
import json
import shlex
import sys

import pytest

from procs import PATIENCE_S, pok, wait_for
from simclock import START_MS

RECORDER = r'''
import json, os, sys
data = sys.stdin.buffer.read()
env = {k: v for k, v in os.environ.items() if k.startswith("PULSAR_")}
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"env": env, "stdin": data.hex()}) + "\n")
sys.exit(int(sys.argv[2]))
'''


@pytest.fixture
def recorder(tmp_path):
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    log = tmp_path / "calls.jsonl"

    def cmd(code=0):
        return " ".join(shlex.quote(p) for p in (sys.executable, str(script), str(log), str(code)))

    def calls():
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines() if line]

    cmd.calls = calls
    return cmd


def summary(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert lines, "no summary line on stderr"
    return lines[-1]


def backlog(run_proc, topic="t", sub="s") -> int:
    st = json.loads(pok(run_proc("topics", "stats", topic, "-o", "json")).stdout)
    return st["subscriptions"][sub]["msgBacklog"]


def decoded(env: dict, name: str) -> str:
    assert env.get(name + "_ENCODING") == "base64", env
    return base64.b64decode(env[name]).decode("utf-8")


# -- NUL in a key or a property ------------------------------------------------------------------
def test_nul_in_key_and_properties_is_handed_over_escaped(run_proc, recorder):
    recs = [{"payload": "first", "key": "k\u0000ey", "properties": {
                "nul": "a\u0000b", "plain": "p", "tail": "\u0000"}},
            {"payload": "second", "key": "fine", "properties": {"x": "y"}}]
    pok(run_proc("produce", "t", "--stdin", "--ndjson",
                 input="".join(json.dumps(r) + "\n" for r in recs)))
    p = run_proc("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "2",
                 "--exec", recorder(0), "--idle-timeout", "5s")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    first, second = recorder.calls()
    assert bytes.fromhex(first["stdin"]) == b"first"
    env = first["env"]
    assert decoded(env, "PULSAR_KEY") == "k\0ey"
    assert decoded(env, "PULSAR_PROP_NUL") == "a\0b"
    assert decoded(env, "PULSAR_PROP_TAIL") == "\0"
    assert env["PULSAR_PROP_PLAIN"] == "p" and "PULSAR_PROP_PLAIN_ENCODING" not in env
    # The next message is plain again: no marker left over from the one before.
    env = second["env"]
    assert env["PULSAR_KEY"] == "fine" and env["PULSAR_PROP_X"] == "y"
    assert not [k for k in env if k.endswith("_ENCODING")]
    line = summary(p.stderr)
    assert "2 message" in line and "2 acked" in line and "0 nacked" in line
    assert backlog(run_proc) == 0


def test_a_message_that_cannot_be_handed_over_is_nacked_and_the_run_goes_on(run_proc, recorder):
    """A property of 200 KB is more than one environment string may hold (E2BIG): the command
    cannot start. That message is nacked (said in one line), the next is handed over."""
    recs = [{"payload": "huge", "properties": {"big": "x" * 200_000}},
            {"payload": "next"}]
    pok(run_proc("produce", "t", "--stdin", "--ndjson", "-db",
                 input="".join(json.dumps(r) + "\n" for r in recs)))
    p = run_proc("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "2",
                 "--nack-delay", "1m", "--exec", recorder(0), "--idle-timeout", "3s")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert [bytes.fromhex(c["stdin"]) for c in recorder.calls()] == [b"next"]
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    warned = [x for x in lines if "could not be handed" in x]
    assert len(warned) == 1 and "nacked" in warned[0], p.stderr
    line = summary(p.stderr)
    assert "2 message" in line and "1 acked" in line and "1 nacked" in line
    assert backlog(run_proc) == 1
    pending = json.loads(pok(run_proc("subscriptions", "pending", "t", "s", "-o", "json")).stdout)
    assert [r["nextRedelivery"] is not None for r in pending] == [True]


# -- exit 75 -----------------------------------------------------------------------------------
def test_exit_75_with_retry_is_reported_as_reconsumed_later(run_proc):
    pok(run_proc("clock", "simulate", "--at", str(START_MS)))
    pok(run_proc("produce", "t", "-m", "a", "-m", "b", "-m", "c"))
    p = run_proc("consume", "t", "-s", "s", "-t", "Shared", "-p", "Earliest", "-n", "3",
                 "--enable-retry", "--exec-retry-delay", "1m", "--idle-timeout", "5s",
                 "--exec", 'test "$(cat)" = a && exit 0; test "$PULSAR_KEY" = "" && exit 75')
    assert p.returncode == 0, p.stderr
    line = summary(p.stderr)
    assert "3 message" in line and "1 acked" in line and "0 nacked" in line, line
    assert "2 reconsumed later" in line, line
    p = run_proc("consume", "t", "-s", "s2", "-t", "Shared", "-p", "Earliest", "-n", "1",
                 "--idle-timeout", "5s", "--exec", "exit 75")
    line = summary(p.stderr)
    assert "1 nacked" in line and "reconsumed" not in line, line     # no retry: a nack


# -- a nack outlives the process -------------------------------------------------------------------
@pytest.mark.parametrize("typ", ["Shared", "Exclusive"])
@pytest.mark.parametrize("firer", ["consume", "daemon run-once"])
def test_after_the_process_exits_the_nacked_message_waits_for_its_delay(run_proc, recorder,
                                                                        typ, firer):
    pok(run_proc("clock", "simulate", "--at", str(START_MS)))
    pok(run_proc("produce", "t", "-m", "poison"))
    run = ["consume", "t", "-s", "s", "-t", typ, "-p", "Earliest", "-n", "1",
           "--idle-timeout", "300ms"]
    p = run_proc(*run, "--nack-delay", "30s", "--exec", "exit 1")
    assert "1 nacked" in summary(p.stderr)
    # The process has exited: nothing before the delay, whoever asks.
    assert run_proc(*run, "--exec", recorder(0), "--fail-if-empty").returncode == 6
    pok(run_proc("clock", "advance", "29s"))
    pok(run_proc("daemon", "run-once"))
    assert run_proc(*run, "--exec", recorder(0), "--fail-if-empty").returncode == 6
    assert recorder.calls() == []
    assert backlog(run_proc) == 1
    pok(run_proc("clock", "advance", "1s"))
    if firer == "daemon run-once":
        pok(run_proc("daemon", "run-once"))
    p = run_proc(*run, "--exec", recorder(0), "--fail-if-empty")
    assert p.returncode == 0, p.stderr
    [call] = recorder.calls()
    assert bytes.fromhex(call["stdin"]) == b"poison"
    assert call["env"]["PULSAR_REDELIVERY_COUNT"] == "1"
    assert backlog(run_proc) == 0


@pytest.mark.parametrize("typ", ["Shared", "Key_Shared", "Exclusive", "Failover"])
def test_a_killed_consume_leaves_its_nack_for_the_delay(run_proc, spawn, recorder, tmp_path,
                                                       typ):
    """kill -9 of the `consume --exec` process right after its command failed: the message
    stays held for the nack delay, then comes back counted, once."""
    pok(run_proc("clock", "simulate", "--at", str(START_MS)))
    pok(run_proc("produce", "t", "-m", "poison", "-k", "k"))
    mark = tmp_path / "failed"
    p = spawn("consume", "t", "-s", "s", "-t", typ, "-p", "Earliest", "-n", "0",
              "--nack-delay", "20s", "--exec", f"touch {shlex.quote(str(mark))}; exit 1")
    wait_for(lambda: mark.exists(), "the --exec command to fail once")

    def nacked():
        rows = json.loads(pok(run_proc("subscriptions", "pending", "t", "s", "-o",
                                       "json")).stdout)
        return rows and rows[0]["nextRedelivery"] is not None
    wait_for(nacked, "the nack to be recorded", timeout=PATIENCE_S)
    p.kill()
    p.wait()
    run = ["consume", "t", "-s", "s", "-t", typ, "-p", "Earliest", "-n", "1",
           "--idle-timeout", "300ms", "--exec", recorder(0)]
    assert run_proc(*run, "--fail-if-empty").returncode == 6
    pok(run_proc("clock", "advance", "20s"))
    pok(run_proc(*run, "--fail-if-empty"))
    assert [c["env"]["PULSAR_REDELIVERY_COUNT"] for c in recorder.calls()] == ["1"]
    assert run_proc(*run, "--fail-if-empty").returncode == 6
