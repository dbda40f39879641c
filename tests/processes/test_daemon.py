"""The timer daemon with real processes: election by lock, standby take-over, stop, SIGTERM,
firing timers on the real clock, `daemon run-once`, lease ends, and kill -9 in the middle of
dead letter moves.

Every command is a separate `python -m pulsarctl` process. Every wait polls with short sleeps up
to a deadline; every process started here (including daemons that `daemon start` detaches) is
killed in a finally/teardown, so a failing test never leaves a daemon behind.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_helpers import ok, one_error_line, pjson, rows
from procs import PATIENCE_S, argv, gone, pok, proc_state, reap, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="process liveness is read from /proc")

TOPIC = "t"
FULL_TOPIC = "persistent://public/default/t"
DLQ = "t-S-DLQ"  # <topic>-<subscription>-DLQ
SIM_START = "2026-01-01T00:00:00Z"


# -- helpers ---------------------------------------------------------------------------------
def _is_our_daemon(pid: int, store: str) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return False
    return b"pulsarctl" in cmd and b"daemon" in cmd and store.encode() in cmd


@pytest.fixture
def daemons(store_path):
    """pids of detached daemons (from `daemon start`): SIGKILLed at teardown if still ours."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if not gone(pid) and _is_our_daemon(pid, store_path):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    wait_for(lambda: all(gone(p) for p in pids), "the killed daemons to exit")


def _daemon_diag(cli, store: str, p: subprocess.Popen | None = None):
    """What a failed wait for a daemon saw: status, the daemon's exit code and stderr, its log."""
    def diag() -> str:
        rc, st, r = _status(cli)
        out = [f"status exit {rc}: {st or r.stderr.strip()}"]
        if p is not None:
            out.append(f"daemon pid {p.pid} exit {p.poll()}")
            if p.poll() is not None:
                out.append(f"stderr {p.stderr.read().strip()!r}")
        log = Path(store, "daemon.log")
        out.append(f"log {log.read_text()[-600:] if log.exists() else None!r}")
        return "; ".join(out)
    return diag


def _wait_ticked(store: str, p: subprocess.Popen) -> dict:
    """Wait until the foreground daemon p has ticked, by reading daemon.json: unlike `daemon
    status`, that never touches the election lock, so it cannot race with the daemon's start
    (see test_status_probes_never_make_a_starting_daemon_fail)."""
    from pulsarctl.daemon import read_state

    def ticked():
        if p.poll() is not None:
            pytest.fail(f"the daemon exited with {p.returncode}: {p.stderr.read().strip()!r}")
        st = read_state(store)
        return st if st.get("pid") == p.pid and st.get("lastTick") else None

    return wait_for(ticked, f"daemon {p.pid} to tick")


def _status(cli):
    """`daemon status -o json` (in-process: asking never touches the election lock)."""
    r = cli("daemon", "status", "-o", "json")
    return r.exit_code, (json.loads(r.stdout) if r.exit_code == 0 else None), r


def _as_cli(run_proc):
    """run_proc with results shaped as the cli fixture's (exit_code, stdout, stderr)."""
    def run(*args):
        r = run_proc(*args)
        return SimpleNamespace(exit_code=r.returncode, stdout=r.stdout, stderr=r.stderr)
    return run


def _start(run_proc, daemons, *extra) -> int:
    """`daemon start EXTRA`: its pid (recorded for teardown)."""
    r = pok(run_proc("daemon", "start", *extra))
    pid = int(r.stdout.strip())
    daemons.append(pid)
    return pid


def _iso_s(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# Set-up and observation run in-process (the `cli` fixture; reading commands never fire, there
# as in a process of their own): the daemons are the processes here.
def _sub_stats(cli, sub="S", topic=TOPIC) -> dict:
    return pjson(cli("topics", "stats", topic, "-o", "json"))["subscriptions"][sub]


def _pending(cli, sub="S") -> list[dict]:
    return pjson(cli("subscriptions", "pending", TOPIC, sub, "-o", "json"))


def _consumers(cli) -> list[dict]:
    return pjson(cli("subscriptions", "consumers", TOPIC, "S", "-o", "json"))


def _dlq_in(cli) -> int:
    """msgInCounter of the dead letter topic (0 while it does not exist)."""
    r = cli("topics", "stats", DLQ, "-o", "json")
    if r.exit_code == 3:
        return 0
    return pjson(r)["msgInCounter"]


def _run_once(cli) -> dict:
    return pjson(cli("daemon", "run-once", "-o", "json"))


def _produce(cli, *payloads) -> list[str]:
    args = []
    for p in payloads:
        args += ["-m", p]
    return ok(cli("produce", TOPIC, *args)).stdout.split()


# == 1. election, standby, stop, SIGTERM ========================================================
def test_status_exits_3_with_one_line_when_no_daemon_runs(run_proc):
    for extra in ((), ("-o", "json")):
        r = run_proc("daemon", "status", *extra)
        assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
        assert r.stdout == ""
        line = one_error_line(r.stderr)
        assert "no daemon" in line


def _ticks_after(store: str, when_s: float, n: int = 1) -> None:
    """Wait until the running daemon has ticked n times after when_s (wall time, seconds), read
    from daemon.json (which never touches the election lock)."""
    from pulsarctl.daemon import read_state

    seen: set = set()

    def ticked():
        last = read_state(store).get("lastTick")
        if last and _iso_s(last) > when_s:
            seen.add(last)
        return len(seen) >= n

    wait_for(ticked, f"the daemon to tick {n} time(s)")


def test_start_busy_standby_takeover_and_stop(cli, run_proc, daemons, store_path):
    tick = 0.2
    before = time.time()
    active = _start(run_proc, daemons, "--tick", str(tick))
    assert not gone(active)

    # `start` returned only once the daemon held the lock and had ticked: status says so at once.
    rc, st, r = _status(cli)
    t1 = time.time()
    assert rc == 0, r.stderr
    assert st["running"] is True and st["pid"] == active and st["standby"] is False
    assert st["timersDue"] == 0
    assert st["lastTick"] is not None
    last = _iso_s(st["lastTick"])
    assert before - 0.05 <= last <= t1 + 0.05
    # ... and it goes on ticking.
    _ticks_after(store_path, t1)

    # A second active daemon is refused, in the background and in the foreground.
    r = run_proc("daemon", "start", "--tick", str(tick))
    assert r.returncode == 5, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert str(active) in one_error_line(r.stderr)
    r = run_proc("daemon", "run", "--tick", str(tick))
    assert r.returncode == 5, (r.returncode, r.stdout, r.stderr)
    one_error_line(r.stderr)

    # A standby returns with its pid while the active one still holds the lock (a `start
    # --standby` that waited for the lock would never return here), and leaves it in charge.
    standby = _start(run_proc, daemons, "--standby", "--tick", str(tick))
    assert standby != active
    assert not gone(active)
    _ticks_after(store_path, time.time(), n=2)  # the standby has tried the lock meanwhile
    assert not gone(standby), "the standby daemon exited"
    rc, st, _ = _status(cli)
    assert rc == 0 and st["pid"] == active

    # kill -9 the active one: the standby takes over (it tries the lock every tick).
    os.kill(active, signal.SIGKILL)
    killed_at = time.monotonic()

    def taken_over():
        rc, st, _ = _status(cli)
        return st if rc == 0 and st["pid"] == standby else None

    st = wait_for(taken_over, "the standby to take over", diag=_daemon_diag(cli, store_path))
    print(f"\nstandby took over {time.monotonic() - killed_at:.2f}s after kill -9 (tick {tick}s, "
          "seen via status)")
    assert st["running"] is True and st["lastTick"] is not None
    assert gone(active)

    # stop returns only once the daemon has exited; then nothing runs.
    r = run_proc("daemon", "stop")
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert gone(standby), "daemon stop returned while the daemon process still runs"
    rc, _, r = _status(cli)
    assert rc == 3, (rc, r.stdout, r.stderr)
    assert not Path(store_path, "daemon.json").exists()


def test_status_reports_a_waiting_standby(cli, run_proc, daemons):
    """CLI.md: status `standby` bool — a standby daemon is waiting. `start --standby` returns
    once the standby waits for the lock, so status says so as soon as it has returned."""
    active = _start(run_proc, daemons, "--tick", "0.2")
    standby = _start(run_proc, daemons, "--standby", "--tick", "0.2")
    assert not gone(standby)
    rc, st, r = _status(cli)
    assert rc == 0, r.stderr
    assert st["pid"] == active
    assert st["standby"] is True, f"a standby (pid {standby}) is waiting, status says {st}"


@pytest.mark.parametrize("standby", [False, True], ids=["active", "standby"])
def test_start_with_a_malformed_tick_is_a_usage_error(cli, run_proc, daemons, standby):
    """Malformed values are exit 2, and `start` must not report success for a daemon that
    exited at once (with --standby it returns 'once it is waiting for the lock')."""
    args = ["daemon", "start", "--tick", "0"] + (["--standby"] if standby else [])
    r = run_proc(*args)
    if r.returncode == 0 and r.stdout.strip().isdigit():
        daemons.append(int(r.stdout.strip()))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert "--tick" in one_error_line(r.stderr)
    rc, _, _ = _status(cli)
    assert rc == 3


def test_sigterm_stops_a_foreground_daemon_and_removes_its_state(cli, spawn, store_path):
    p = spawn("daemon", "run", "--tick", "0.1")
    state = Path(store_path, "daemon.json")

    _wait_ticked(store_path, p)
    rc, st, r = _status(cli)
    assert rc == 0, r.stderr
    assert st["running"] is True and st["pid"] == p.pid and st["lastTick"] is not None
    assert state.exists()
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=PATIENCE_S)
    except subprocess.TimeoutExpired:
        pytest.fail("the daemon did not exit after SIGTERM")
    assert rc == 0, p.stderr.read()
    assert not state.exists(), "daemon.json left behind"
    rc, _, _ = _status(cli)
    assert rc == 3


def test_sigterm_is_prompt_even_with_a_long_tick(spawn, store_path):
    """`daemon stop` waits 15 s for the daemon; a daemon that sleeps out its whole tick after
    SIGTERM makes stop fail for any tick over 15 s. With a one-hour tick, such a daemon would
    still run long after the (generous) wait below; a prompt one exits at once."""
    p = spawn("daemon", "run", "--tick", "3600")
    _wait_ticked(store_path, p)
    wait_for(lambda: proc_state(p.pid) == "S", "the daemon to sleep out its tick")
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=PATIENCE_S)
    except subprocess.TimeoutExpired:
        pytest.fail("the daemon (tick 1h) was still running after SIGTERM: it sleeps out the "
                    "whole tick before looking at the stop flag")
    assert rc == 0
    assert not Path(store_path, "daemon.json").exists()


def test_status_probes_never_make_a_starting_daemon_fail(cli, spawn, run_proc, daemons,
                                                         store_path):
    """`daemon status` is a read-only probe: however often it runs (a monitoring loop, a
    health check), a daemon starting meanwhile must not exit 5 "a daemon already runs" when
    none does. The probe here is the function behind `daemon status`, called in tight loops
    from threads of this process (as many concurrent `daemon status` commands would)."""
    import threading

    from pulsarctl.daemon import status as probe
    from pulsarctl.errors import NotFound

    ok(cli("produce", TOPIC, "-m", "x"))  # the store exists before the probes start
    stop = threading.Event()
    probes = [0]

    def hammer():
        while not stop.is_set():
            try:
                probe(store_path)
            except NotFound:
                pass
            probes[0] += 1

    threads = [threading.Thread(target=hammer, daemon=True) for _ in range(4)]
    for th in threads:
        th.start()
    failures = []
    try:
        for i in range(4):
            p = spawn("daemon", "run", "--tick", "0.1")

            def up_or_out():
                from pulsarctl.daemon import read_state
                return p.poll() is not None or read_state(store_path).get("pid") == p.pid

            wait_for(up_or_out, "the daemon to start or exit")
            if p.poll() is not None:
                failures.append(f"daemon run #{i} exited {p.returncode}: "
                                f"{p.stderr.read().strip()}")
                continue
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=PATIENCE_S) == 0
        for i in range(2):
            r = run_proc("daemon", "start", "--tick", "0.1")
            if r.returncode != 0:
                failures.append(f"daemon start #{i} exited {r.returncode}: {r.stderr.strip()}")
                continue
            daemons.append(int(r.stdout))
            r = run_proc("daemon", "stop")
            assert r.returncode == 0, r.stderr
    finally:
        stop.set()
        for th in threads:
            th.join(10)
    assert probes[0] > 100
    assert not failures, (f"{len(failures)} of 6 daemon starts failed while `daemon status` "
                          f"probes ran ({probes[0]} probes): " + " | ".join(failures))


# == 2. the daemon fires timers by itself; run-once ===============================================
def test_daemon_fires_nack_timers_on_the_real_clock_then_dead_letters(cli, run_proc, daemons):
    (mid,) = _produce(cli, "hello")
    r = ok(cli("receive", TOPIC, "-s", "S", "-t", "Shared", "-p", "Earliest",
               "--nack-delay", "300ms", "--max-redeliver-count", "1", "-n", "1",
               "--idle-timeout", "5s", "-o", "ndjson"))
    (m,) = rows(r.stdout)
    assert m["messageId"] == mid and m["redeliveryCount"] == 0
    ok(cli("nack", TOPIC, "-s", "S", mid))

    # Control: with no daemon, nothing fires however late it is (reading commands never fire).
    (p,) = _pending(cli)
    assert p["nextRedelivery"] is not None
    due = _iso_s(p["nextRedelivery"])
    wait_for(lambda: time.time() > due + 0.2, "the nack delay to pass")
    (p,) = _pending(cli)
    assert p["messageId"] == mid and p["consumerName"] == "cli"
    assert _sub_stats(cli)["replayCount"] == 0

    _start(run_proc, daemons, "--tick", "0.1")

    def fired():
        if _pending(cli):
            return None
        s = _sub_stats(cli)
        return s if s["replayCount"] == 1 else None

    s = wait_for(fired, "the daemon to fire the due nack")
    assert s["unackedMessages"] == 0 and s["msgBacklog"] == 1
    assert [c["consumerName"] for c in s["consumers"]] == ["cli"]

    # Redelivered with count 1; a second nack goes to the DLQ (limit 1) — fired by the daemon
    # once the nack delay has passed, while only reading commands run.
    r = ok(cli("receive", TOPIC, "-s", "S", "-t", "Shared", "-n", "1",
               "--idle-timeout", "5s", "-o", "ndjson"))
    (m,) = rows(r.stdout)
    assert m["messageId"] == mid and m["redeliveryCount"] == 1
    ok(cli("nack", TOPIC, "-s", "S", mid))

    def dead_lettered():
        return _dlq_in(cli) == 1 and _sub_stats(cli)["msgBacklog"] == 0

    wait_for(dead_lettered, "the daemon to move the message to the DLQ")
    s = _sub_stats(cli)
    assert s["unackedMessages"] == 0 and s["replayCount"] == 0
    assert _pending(cli) == []
    r = ok(cli("read", DLQ, "-m", "earliest", "-n", "0", "--until-end", "-o", "ndjson"))
    (d,) = rows(r.stdout)
    assert d["payload"] == "hello"
    assert d["properties"]["ORIGIN_MESSAGE_ID"] == mid
    assert d["properties"]["REAL_TOPIC"] == FULL_TOPIC
    assert d["properties"]["REAL_SUBSCRIPTION"] == "S"

    rc, st, _ = _status(cli)
    assert rc == 0 and st["timersDue"] == 0
    pok(run_proc("daemon", "stop"))


def test_run_once_fires_what_is_due(cli):
    ids = _produce(cli, "a", "b")
    ok(cli("clock", "simulate", "--at", SIM_START))
    r = ok(cli("receive", TOPIC, "-s", "S", "-t", "Shared", "-p", "Earliest",
               "--nack-delay", "1m", "-n", "2", "--idle-timeout", "5s", "-o", "ndjson"))
    assert [m["messageId"] for m in rows(r.stdout)] == ids
    ok(cli("nack", TOPIC, "-s", "S", *ids))

    assert _run_once(cli) == {"fired": 0, "firedByKind": {"nack": 0, "ackTimeout": 0},
                                    "disconnected": 0, "timersScheduled": 2, "timersDue": 0,
                                    "expired": 0, "trimmedLedgers": 0}
    ok(cli("clock", "advance", "30s"))  # not due yet
    assert _run_once(cli)["fired"] == 0
    assert len(_pending(cli)) == 2

    # Move the clock past the nack delay *without* firing (`clock advance` would fire, as a
    # daemon tick): only run-once fires.
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:02:00Z"))
    assert len(_pending(cli)) == 2
    assert _run_once(cli) == {"fired": 2, "firedByKind": {"nack": 2, "ackTimeout": 0},
                                    "disconnected": 0, "timersScheduled": 0, "timersDue": 0,
                                    "expired": 0, "trimmedLedgers": 0}
    assert _pending(cli) == []
    s = _sub_stats(cli)
    assert s["replayCount"] == 2 and s["unackedMessages"] == 0 and s["msgBacklog"] == 2
    assert _run_once(cli)["fired"] == 0  # nothing twice

    r = ok(cli("receive", TOPIC, "-s", "S", "-t", "Shared", "-n", "2",
               "--idle-timeout", "5s", "-o", "ndjson"))
    assert sorted((m["messageId"], m["redeliveryCount"]) for m in rows(r.stdout)) == \
        sorted((i, 1) for i in ids)


def test_run_once_works_while_a_daemon_runs(cli, spawn, store_path):
    (mid,) = _produce(cli, "x")
    ok(cli("clock", "simulate", "--at", SIM_START))
    # A daemon with a long tick: after its first tick it sleeps, so only run-once can fire.
    p = spawn("daemon", "run", "--tick", "30")

    _wait_ticked(store_path, p)
    rc, st, _ = _status(cli)
    assert rc == 0 and st["pid"] == p.pid
    ok(cli("receive", TOPIC, "-s", "S", "-t", "Shared", "-p", "Earliest",
           "--nack-delay", "1m", "-n", "1", "--idle-timeout", "5s"))
    ok(cli("nack", TOPIC, "-s", "S", mid))
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:02:00Z"))
    assert _run_once(cli)["fired"] == 1
    assert _sub_stats(cli)["replayCount"] == 1
    assert p.poll() is None, "run-once disturbed the running daemon"
    rc, st, _ = _status(cli)
    assert rc == 0 and st["pid"] == p.pid
    p.send_signal(signal.SIGTERM)  # prompt, even in the middle of a 30 s tick
    assert p.wait(timeout=5) == 0


# == 3. lease ends ================================================================================
def _leased_consumer_with_two_messages(cli) -> list[str]:
    ids = _produce(cli, "a", "b")
    ok(cli("clock", "simulate", "--at", SIM_START))
    r = ok(cli("receive", TOPIC, "-s", "S", "-t", "Shared", "-p", "Earliest",
               "--lease", "1m", "-n", "2", "--idle-timeout", "5s", "-o", "ndjson"))
    assert [m["messageId"] for m in rows(r.stdout)] == ids
    cons = _consumers(cli)
    assert [(c["consumerName"], c["unackedMessages"]) for c in cons] == [("cli", 2)]
    return ids


def _check_disconnected(cli, ids):
    cons = _consumers(cli)
    assert cons == []
    assert _pending(cli) == []
    s = _sub_stats(cli)
    # (the last consumer of a Shared subscription left: Pulsar rewinds the cursor)
    assert s["unackedMessages"] == 0 and s["msgBacklog"] == 2
    r = ok(cli("receive", TOPIC, "-s", "S", "-t", "Shared", "--consumer-name", "other",
               "-n", "2", "--idle-timeout", "5s", "-o", "ndjson"))
    got = rows(r.stdout)
    # Back without a redelivery count increment, as when a Pulsar consumer disconnects.
    assert sorted((m["messageId"], m["redeliveryCount"]) for m in got) == \
        sorted((i, 0) for i in ids)


def test_run_once_disconnects_a_consumer_whose_lease_ended(cli):
    ids = _leased_consumer_with_two_messages(cli)
    assert _run_once(cli)["disconnected"] == 0  # lease still running
    # Past the lease *without* firing (`clock advance` would disconnect, as a daemon tick).
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:02:00Z"))
    doc = _run_once(cli)
    assert doc["disconnected"] == 1 and doc["fired"] == 0
    _check_disconnected(cli, ids)


def test_daemon_disconnects_a_consumer_whose_lease_ended(cli, run_proc, daemons, store_path):
    ids = _leased_consumer_with_two_messages(cli)
    _start(run_proc, daemons, "--tick", "0.1")
    _ticks_after(store_path, time.time(), n=3)  # a few ticks inside the lease change nothing
    cons = _consumers(cli)
    assert [c["consumerName"] for c in cons] == ["cli"]
    # Past the lease without disconnecting (`clock advance` would): the daemon does it.
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:02:00Z"))
    wait_for(lambda: _consumers(cli) == [], "the daemon to disconnect the consumer")
    _check_disconnected(cli, ids)
    pok(run_proc("daemon", "stop"))


# == 4. kill -9 during dead letter moves ==========================================================
# The children are forked from one server process that has imported everything: each is a real
# process running the real entry point on its own store, killed with SIGKILL, but starts in a
# millisecond instead of an interpreter's start-up, so a kill delay measured from its start
# lands in the command's work, and a hundred of them cost little. The server itself never opens
# a store (an LMDB environment is never shared across fork()).
_FORKSERVER = r"""
import json, os, sys, traceback
import pulsarctl.cli.app, pulsarctl.cli.daemon_cmd, pulsarctl.cli.client_cmds, pulsarctl.daemon
import pulsarctl.broker.service, pulsarctl.broker.nacks, pulsarctl.broker.deadletter
import pulsarctl.broker.consumers, pulsarctl.broker.subscriptions, pulsarctl.broker.timers
import pulsarctl.broker.redelivery, pulsarctl.broker.producers, pulsarctl.broker.topics
import pulsarctl.broker.dispatch, pulsarctl.broker.stats
from pulsarctl.cli.entry import main

pulsarctl.cli.app.command()  # the click command tree, built once here rather than in each child


def child(req):
    code = 1
    try:
        os.environ["PULSARCTL_STORE"] = req["store"]
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                (1, req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            f = os.open(path, flags, 0o600)
            os.dup2(f, fd)
            os.close(f)
        main(req["args"])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (exc.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


for line in sys.stdin:
    req = json.loads(line)
    if "wait" in req:
        reply = os.waitstatus_to_exitcode(os.waitpid(req["wait"], 0)[1])
    else:
        reply = os.fork()
        if reply == 0:
            child(req)
    sys.stdout.write(f"{reply}\n")
    sys.stdout.flush()
"""


class _ForkServer:
    """start(store, args) -> pid of a forked child running `pulsarctl ARGS` on store;
    wait(pid) -> its exit code (negative: the signal that ended it)."""

    def __init__(self, env, tmp: Path):
        self.out, self.err = str(tmp / "child.out"), str(tmp / "child.err")
        self.p = subprocess.Popen([sys.executable, "-c", _FORKSERVER], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.running: set[int] = set()

    def _ask(self, req: dict) -> int:
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        assert line, f"the fork server died: {self.p.stderr.read()}"
        return int(line)

    def start(self, store: str, args: list[str]) -> int:
        pid = self._ask({"store": store, "args": args, "out": self.out, "err": self.err})
        self.running.add(pid)
        return pid

    def wait(self, pid: int) -> int:
        code = self._ask({"wait": pid})
        self.running.discard(pid)
        return code

    def output(self) -> tuple[str, str]:
        return Path(self.out).read_text(), Path(self.err).read_text()

    def close(self) -> None:
        for pid in self.running:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        reap([self.p])


FIRE_COMMANDS = [
    ["daemon", "run-once", "-o", "json"],
    ["daemon", "run-once", "-o", "json"],
    # a fetch fires due timers lazily, too
    ["receive", TOPIC, "-s", "S", "-t", "Shared", "--consumer-name", "crash", "-n", "1",
     "--idle-timeout", "100ms", "-o", "ndjson"],
]


def _where(store: str, ids: list[str]) -> tuple[set, list, int]:
    """(unacked original ids on S, ORIGIN_MESSAGE_IDs in the DLQ, DLQ msgInCounter), read
    in-process (much faster than three CLI processes per iteration)."""
    from pulsarctl.broker import Broker
    from pulsarctl.errors import TopicNotFound
    from pulsarctl.messages import MessageId

    b = Broker(store, readonly=True)
    try:
        unacked = {str(m.message_id()) for m in b.subscription(TOPIC, "S").peek(len(ids) + 10)}
        backlog = b.topics.stats(TOPIC)["subscriptions"]["S"]["msgBacklog"]
        assert backlog == len(unacked), (backlog, len(unacked))
        try:
            dlq_in = b.topics.stats(DLQ)["msgInCounter"]
            msgs, _, _ = b.read_entries(DLQ, None, len(ids) * 3 + 10, MessageId.earliest)
        except TopicNotFound:
            dlq_in, msgs = 0, []
        origins = [m.properties()["ORIGIN_MESSAGE_ID"] for m in msgs]
        assert len(origins) == dlq_in
        return unacked, origins, dlq_in
    finally:
        b.close()


def _check_invariant(store: str, ids: list[str], when: str) -> int:
    unacked, origins, dlq_in = _where(store, ids)
    dups = {o for o in origins if origins.count(o) > 1}
    assert not dups, f"{when}: dead-lettered twice: {sorted(dups)[:5]}"
    both = unacked & set(origins)
    assert not both, f"{when}: {len(both)} message(s) both unacked and in the DLQ, e.g. {min(both)}"
    lost = set(ids) - unacked - set(origins)
    assert not lost, \
        f"{when}: {len(lost)} message(s) neither unacked nor in the DLQ, e.g. {min(lost)}"
    assert set(origins) <= set(ids)
    assert len(unacked) + dlq_in == len(ids), (when, len(unacked), dlq_in)
    return dlq_in


def test_kill_9_during_dead_letter_moves_loses_and_duplicates_nothing(cli, env, tmp_path,
                                                                       store_path):
    n = 400
    ok(cli("produce", TOPIC, "--stdin", "-db",  # one entry per message
           input="".join(f"m-{i:04d}\n" for i in range(n))))
    ok(cli("clock", "simulate", "--at", SIM_START))
    r = ok(cli("receive", TOPIC, "-s", "S", "-t", "Shared", "-p", "Earliest",
               "--max-redeliver-count", "1", "--nack-delay", "1m", "-n", str(n),
               "--idle-timeout", "5s", "-o", "ndjson"))
    first = rows(r.stdout)
    ids = [m["messageId"] for m in first]
    assert len(ids) == n == len(set(ids))
    ok(cli("nack", TOPIC, "-s", "S", "-", input=r.stdout))
    ok(cli("clock", "advance", "61s"))  # fires: redelivery count 1, back for replay
    r = ok(cli("receive", TOPIC, "-s", "S", "-t", "Shared", "-n", str(n),
               "--idle-timeout", "5s", "-o", "ndjson"))
    again = rows(r.stdout)
    assert sorted(m["messageId"] for m in again) == sorted(ids)
    assert {m["redeliveryCount"] for m in again} == {1}
    ok(cli("nack", TOPIC, "-s", "S", "-", input=r.stdout))
    # Due now, and the next fire dead-letters every one of them. (`clock simulate --at` moves
    # the clock without firing.)
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:03:00Z"))
    assert _check_invariant(store_path, ids, "set-up") == 0
    assert len(pjson(cli("subscriptions", "pending", TOPIC, "S", "-o", "json"))) == n

    snapshot = tmp_path / "snapshot"
    shutil.copytree(store_path, snapshot, ignore=shutil.ignore_patterns("lock.mdb", "daemon.*"))
    copies = iter(range(10_000))

    def fresh_copy() -> str:
        dst = str(tmp_path / f"copy-{next(copies)}")
        shutil.copytree(snapshot, dst)
        return dst

    server = _ForkServer(env, tmp_path)
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    outcomes = {"before": 0, "after": 0, "partial": 0, "finished": 0}
    iterations = 100
    try:
        # Calibrate: how long from its start to its exit does an undisturbed dead-lettering take?
        cal = fresh_copy()
        t0 = time.monotonic()
        code = server.wait(server.start(cal, FIRE_COMMANDS[0]))
        work = time.monotonic() - t0
        out, err = server.output()
        assert code == 0, err
        assert json.loads(out)["fired"] == n
        assert _check_invariant(cal, ids, "calibration") == n
        window = max(0.05, work * 1.1)

        store = fresh_copy()
        _check_invariant(store, ids, "fresh copy")
        first_after = None
        for i in range(1, iterations + 1):
            args = FIRE_COMMANDS[i % len(FIRE_COMMANDS)]
            # The first kills spread over the whole run; then they close in on the commit: just
            # before the earliest kill that found the moves committed is inside the transaction.
            # (Real time only picks where the kills land; what is checked does not depend on it.)
            if i <= 10 or first_after is None:
                delay = rng.uniform(0, window)
            else:
                delay = rng.uniform(max(0.0, first_after - 0.08), first_after + 0.01)
            pid = server.start(store, args)
            time.sleep(delay)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # pragma: no cover - reaped only by wait() below
                pass
            code = server.wait(pid)
            if code not in (0, -signal.SIGKILL):
                pytest.fail(f"{args} failed: {code} {server.output()[1]}")
            when = f"iteration {i} ({' '.join(args[:2])}, seed {seed})"
            moved = _check_invariant(store, ids, when)
            if code == 0:
                outcomes["finished"] += 1
            else:
                outcomes["before" if moved == 0 else "after" if moved == n else "partial"] += 1
                if moved == n and (first_after is None or delay < first_after):
                    first_after = delay
            if moved == n:
                store = fresh_copy()  # all moved: start over from the snapshot
                _check_invariant(store, ids, "fresh copy")
        print(f"\nkill -9 outcomes over {iterations} iterations (window {window * 1000:.0f} ms, "
              f"earliest kill after the commit "
              f"{'-' if first_after is None else round(first_after * 1000)} ms, seed {seed}): "
              f"{outcomes}")
    finally:
        server.close()

    # Finish on the last crashed store with the real CLI: a run-once that completes moves what
    # is left, and every original message is in the DLQ exactly once.
    left = n - _check_invariant(store, ids, "before the final run-once")
    run_final = dict(env, PULSARCTL_STORE=store)
    r = subprocess.run(argv("daemon", "run-once", "-o", "json"), env=run_final,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["fired"] == left
    r = subprocess.run(argv("topics", "stats", DLQ, "-o", "json"), env=run_final,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["msgInCounter"] == n
    r = subprocess.run(argv("topics", "stats", TOPIC, "-o", "json"), env=run_final,
                       capture_output=True, text=True, timeout=60)
    s = json.loads(r.stdout)["subscriptions"]["S"]
    assert s["msgBacklog"] == 0 and s["unackedMessages"] == 0 and s["replayCount"] == 0
    r = subprocess.run(argv("read", DLQ, "-m", "earliest", "-n", "0", "--until-end", "-o",
                             "ndjson"), env=run_final, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    origins = [m["properties"]["ORIGIN_MESSAGE_ID"] for m in rows(r.stdout)]
    assert len(origins) == n and sorted(origins) == sorted(ids)
    payloads = sorted(m["payload"] for m in rows(r.stdout))
    assert payloads == [f"m-{i:04d}" for i in range(n)]


def test_status_names_the_lock_holder_without_taking_the_lock(run_proc, store_path):
    import fcntl

    from pulsarctl import daemon as d

    pok(run_proc("produce", TOPIC, "-m", "x"))  # the store exists
    # status in a process of its own: this one holds the lock below
    rc, _st, r = _status(_as_cli(run_proc))
    assert rc == 3 and r.stdout == ""
    fd = os.open(os.path.join(store_path, d.LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert d.lock_holder(store_path) == os.getpid()
        rc, st, r = _status(_as_cli(run_proc))
        assert rc == 0, r.stderr
        assert st["running"] is True and st["lockHolder"] == os.getpid()
        # A probe that took the lock would fail here: we hold it throughout.
    finally:
        os.close(fd)
    assert d.lock_holder(store_path) is None
    assert _status(_as_cli(run_proc))[0] == 3
