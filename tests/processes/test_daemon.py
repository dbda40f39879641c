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
import select
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from procs import reap

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="process liveness is read from /proc")

TOPIC = "t"
FULL_TOPIC = "persistent://public/default/t"
DLQ = "t-S-DLQ"  # <topic>-<subscription>-DLQ
SIM_START = "2026-01-01T00:00:00Z"


# -- helpers ---------------------------------------------------------------------------------
def _argv(*args) -> list[str]:
    return [sys.executable, "-m", "pulsarctl", *args]


@pytest.fixture
def env(store_path):
    return dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")


def _gone(pid: int) -> bool:
    """The process has exited (no such process, or a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat[stat.rindex(")") + 2:].split()[0] in ("Z", "X")


def _is_our_daemon(pid: int, store: str) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return False
    return b"pulsarctl" in cmd and b"daemon" in cmd and store.encode() in cmd


@pytest.fixture
def spawn(env):
    """Popen `python -m pulsarctl ARGS`; killed and reaped at teardown."""
    started: list[subprocess.Popen] = []

    def start(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
        p = subprocess.Popen(_argv(*args), env=env, stdin=subprocess.DEVNULL, stdout=stdout,
                             stderr=stderr, text=True)
        started.append(p)
        return p

    yield start
    reap(started)


@pytest.fixture
def daemons(store_path):
    """pids of detached daemons (from `daemon start`): SIGKILLed at teardown if still ours."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if not _gone(pid) and _is_our_daemon(pid, store_path):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.02)


def _wait_for(pred, what: str, timeout: float = 10.0, interval: float = 0.05, diag=None):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}"
                        + (f"; {diag()}" if diag else ""))
        time.sleep(interval)


def _daemon_diag(run_proc, store: str, p: subprocess.Popen | None = None):
    """What a failed wait for a daemon saw: status, the daemon's exit code and stderr, its log."""
    def diag() -> str:
        rc, st, r = _status(run_proc)
        out = [f"status exit {rc}: {st or r.stderr.strip()}"]
        if p is not None:
            out.append(f"daemon pid {p.pid} exit {p.poll()}")
            if p.poll() is not None:
                out.append(f"stderr {p.stderr.read().strip()!r}")
        log = Path(store, "daemon.log")
        out.append(f"log {log.read_text()[-600:] if log.exists() else None!r}")
        return "; ".join(out)
    return diag


def _wait_ticked(store: str, p: subprocess.Popen, timeout: float = 15.0) -> dict:
    """Wait until the foreground daemon p has ticked, by reading daemon.json: unlike `daemon
    status`, that never touches the election lock, so it cannot race with the daemon's start
    (see test_status_probes_never_make_a_starting_daemon_fail)."""
    from pulsarctl.daemon import read_state

    def ticked():
        if p.poll() is not None:
            pytest.fail(f"the daemon exited with {p.returncode}: {p.stderr.read().strip()!r}")
        st = read_state(store)
        return st if st.get("pid") == p.pid and st.get("lastTick") else None

    return _wait_for(ticked, f"daemon {p.pid} to tick", timeout=timeout, interval=0.02)


def _one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {stderr!r}"
    assert "Traceback" not in stderr
    return lines[0]


def _status(run_proc):
    r = run_proc("daemon", "status", "-o", "json", timeout=20)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else None), r


def _start(run_proc, daemons, *extra):
    """`daemon start EXTRA`: its pid (recorded for teardown) and how long it took."""
    t0 = time.monotonic()
    r = run_proc("daemon", "start", *extra, timeout=30)
    took = time.monotonic() - t0
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    pid = int(r.stdout.strip())
    daemons.append(pid)
    return pid, took


def _iso_s(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _ok(r):
    assert r.returncode == 0, (r.args[3:] if hasattr(r, "args") else None, r.returncode,
                               r.stdout, r.stderr)
    return r


def _sub_stats(run_proc, sub="S", topic=TOPIC) -> dict:
    r = _ok(run_proc("topics", "stats", topic, "-o", "json"))
    return json.loads(r.stdout)["subscriptions"][sub]


def _pending(run_proc, sub="S") -> list[dict]:
    return json.loads(_ok(run_proc("subscriptions", "pending", TOPIC, sub, "-o", "json")).stdout)


def _dlq_in(run_proc) -> int:
    """msgInCounter of the dead letter topic (0 while it does not exist)."""
    r = run_proc("topics", "stats", DLQ, "-o", "json")
    if r.returncode == 3:
        return 0
    _ok(r)
    return json.loads(r.stdout)["msgInCounter"]


def _run_once(run_proc) -> dict:
    return json.loads(_ok(run_proc("daemon", "run-once", "-o", "json")).stdout)


def _produce(run_proc, *payloads) -> list[str]:
    args = []
    for p in payloads:
        args += ["-m", p]
    return _ok(run_proc("produce", TOPIC, *args)).stdout.split()


# == 1. election, standby, stop, SIGTERM ========================================================
def test_status_exits_3_with_one_line_when_no_daemon_runs(run_proc):
    for extra in ((), ("-o", "json")):
        r = run_proc("daemon", "status", *extra)
        assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
        assert r.stdout == ""
        line = _one_error_line(r.stderr)
        assert "no daemon" in line


def test_start_busy_standby_takeover_and_stop(run_proc, daemons, store_path):
    tick = 0.2
    before = time.time()
    active, _took = _start(run_proc, daemons, "--tick", str(tick))
    assert not _gone(active)

    # `start` returned only once the daemon held the lock and had ticked: status says so at once.
    t0 = time.time()
    rc, st, r = _status(run_proc)
    t1 = time.time()
    assert rc == 0, r.stderr
    assert st["running"] is True and st["pid"] == active and st["standby"] is False
    assert st["timersDue"] == 0
    assert st["lastTick"] is not None
    last = _iso_s(st["lastTick"])
    assert before - 0.05 <= last <= t1 + 0.05
    assert last >= t0 - 2 * tick - 0.3, f"lastTick {t0 - last:.2f}s old with a {tick}s tick"

    # A second active daemon is refused, in the background and in the foreground.
    r = run_proc("daemon", "start", "--tick", str(tick), timeout=20)
    assert r.returncode == 5, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert str(active) in _one_error_line(r.stderr)
    r = run_proc("daemon", "run", "--tick", str(tick), timeout=20)
    assert r.returncode == 5, (r.returncode, r.stdout, r.stderr)
    _one_error_line(r.stderr)

    # A standby returns at once with its pid and leaves the active one in charge.
    standby, took = _start(run_proc, daemons, "--standby", "--tick", str(tick))
    assert took < 5, f"start --standby blocked for {took:.1f}s"
    assert standby != active
    time.sleep(2 * tick)
    assert not _gone(standby), "the standby daemon exited"
    rc, st, _ = _status(run_proc)
    assert rc == 0 and st["pid"] == active

    # kill -9 the active one: the standby takes over within a tick (plus process slack).
    os.kill(active, signal.SIGKILL)
    killed_at = time.monotonic()

    def taken_over():
        rc, st, _ = _status(run_proc)
        return st if rc == 0 and st["pid"] == standby else None

    st = _wait_for(taken_over, "the standby to take over", timeout=tick + 8, interval=0.02,
                   diag=_daemon_diag(run_proc, store_path))
    took_over = time.monotonic() - killed_at
    print(f"\nstandby took over {took_over:.2f}s after kill -9 (tick {tick}s, seen via status)")
    assert took_over <= tick + 2.0, f"take-over took {took_over:.2f}s with a {tick}s tick"
    assert st["running"] is True and st["lastTick"] is not None
    assert _gone(active)

    # stop returns only once the daemon has exited; then nothing runs.
    r = run_proc("daemon", "stop", timeout=30)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert _gone(standby), "daemon stop returned while the daemon process still runs"
    rc, _, r = _status(run_proc)
    assert rc == 3, (rc, r.stdout, r.stderr)
    assert not Path(store_path, "daemon.json").exists()


def test_status_reports_a_waiting_standby(run_proc, daemons):
    """CLI.md: status `standby` bool — a standby daemon is waiting."""
    active, _ = _start(run_proc, daemons, "--tick", "0.2")
    standby, _ = _start(run_proc, daemons, "--standby", "--tick", "0.2")
    time.sleep(0.8)  # long enough for the standby to have started and failed to get the lock
    assert not _gone(standby)
    rc, st, r = _status(run_proc)
    assert rc == 0, r.stderr
    assert st["pid"] == active
    assert st["standby"] is True, f"a standby (pid {standby}) is waiting, status says {st}"


@pytest.mark.parametrize("standby", [False, True], ids=["active", "standby"])
def test_start_with_a_malformed_tick_is_a_usage_error(run_proc, daemons, standby):
    """Malformed values are exit 2, and `start` must not report success for a daemon that
    exited at once (with --standby it returns 'once it is waiting for the lock')."""
    args = ["daemon", "start", "--tick", "0"] + (["--standby"] if standby else [])
    r = run_proc(*args, timeout=30)
    if r.returncode == 0 and r.stdout.strip().isdigit():
        daemons.append(int(r.stdout.strip()))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert "--tick" in _one_error_line(r.stderr)
    rc, _, _ = _status(run_proc)
    assert rc == 3


def test_sigterm_stops_a_foreground_daemon_and_removes_its_state(run_proc, spawn, store_path):
    p = spawn("daemon", "run", "--tick", "0.1")
    state = Path(store_path, "daemon.json")

    _wait_ticked(store_path, p)
    rc, st, r = _status(run_proc)
    assert rc == 0, r.stderr
    assert st["running"] is True and st["pid"] == p.pid and st["lastTick"] is not None
    assert state.exists()
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pytest.fail("the daemon did not exit within 5 s of SIGTERM")
    assert rc == 0, p.stderr.read()
    assert not state.exists(), "daemon.json left behind"
    rc, _, _ = _status(run_proc)
    assert rc == 3


def test_sigterm_is_prompt_even_with_a_long_tick(run_proc, spawn, store_path):
    """`daemon stop` waits 15 s for the daemon; a daemon that sleeps out its whole tick after
    SIGTERM makes stop fail for any tick over 15 s."""
    p = spawn("daemon", "run", "--tick", "30")
    _wait_ticked(store_path, p)
    time.sleep(0.2)  # well inside its 30 s sleep
    p.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    try:
        rc = p.wait(timeout=3)
    except subprocess.TimeoutExpired:
        pytest.fail("the daemon (tick 30s) was still running 3 s after SIGTERM: it sleeps "
                    "out the whole tick before looking at the stop flag")
    assert rc == 0
    assert time.monotonic() - t0 < 3
    assert not Path(store_path, "daemon.json").exists()


def test_status_probes_never_make_a_starting_daemon_fail(spawn, run_proc, daemons, store_path):
    """`daemon status` is a read-only probe: however often it runs (a monitoring loop, a
    health check), a daemon starting meanwhile must not exit 5 "a daemon already runs" when
    none does. The probe here is the function behind `daemon status`, called in tight loops
    from threads of this process (as many concurrent `daemon status` commands would)."""
    import threading

    from pulsarctl.daemon import status as probe
    from pulsarctl.errors import NotFound

    _ok(run_proc("produce", TOPIC, "-m", "x"))  # the store exists before the probes start
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

            _wait_for(up_or_out, "the daemon to start or exit", timeout=15, interval=0.02)
            if p.poll() is not None:
                failures.append(f"daemon run #{i} exited {p.returncode}: "
                                f"{p.stderr.read().strip()}")
                continue
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=5) == 0
        for i in range(2):
            r = run_proc("daemon", "start", "--tick", "0.1", timeout=30)
            if r.returncode != 0:
                failures.append(f"daemon start #{i} exited {r.returncode}: {r.stderr.strip()}")
                continue
            daemons.append(int(r.stdout))
            r = run_proc("daemon", "stop", timeout=30)
            assert r.returncode == 0, r.stderr
    finally:
        stop.set()
        for th in threads:
            th.join(10)
    assert probes[0] > 100
    assert not failures, (f"{len(failures)} of 6 daemon starts failed while `daemon status` "
                          f"probes ran ({probes[0]} probes): " + " | ".join(failures))


# == 2. the daemon fires timers by itself; run-once ===============================================
def test_daemon_fires_nack_timers_on_the_real_clock_then_dead_letters(run_proc, daemons):
    (mid,) = _produce(run_proc, "hello")
    r = _ok(run_proc("receive", TOPIC, "-s", "S", "-t", "Shared", "-p", "Earliest",
                     "--nack-delay", "300ms", "--max-redeliver-count", "1", "-n", "1",
                     "--idle-timeout", "5s", "-o", "ndjson"))
    (m,) = _records(r.stdout)
    assert m["messageId"] == mid and m["redeliveryCount"] == 0
    _ok(run_proc("nack", TOPIC, "-s", "S", mid))

    # Control: with no daemon, nothing fires however late it is (reading commands never fire).
    time.sleep(0.5)
    (p,) = _pending(run_proc)
    assert p["messageId"] == mid and p["consumerName"] == "cli"
    assert p["nextRedelivery"] is not None and _iso_s(p["nextRedelivery"]) < time.time()
    assert _sub_stats(run_proc)["replayCount"] == 0

    _start(run_proc, daemons, "--tick", "0.1")
    t0 = time.monotonic()

    def fired():
        if _pending(run_proc):
            return None
        s = _sub_stats(run_proc)
        return s if s["replayCount"] == 1 else None

    s = _wait_for(fired, "the daemon to fire the due nack", timeout=5, interval=0.02)
    assert time.monotonic() - t0 < 3
    assert s["unackedMessages"] == 0 and s["msgBacklog"] == 1
    assert [c["consumerName"] for c in s["consumers"]] == ["cli"]

    # Redelivered with count 1; a second nack goes to the DLQ (limit 1) — fired by the daemon
    # within the nack delay plus a tick, while only reading commands run.
    r = _ok(run_proc("receive", TOPIC, "-s", "S", "-t", "Shared", "-n", "1",
                     "--idle-timeout", "5s", "-o", "ndjson"))
    (m,) = _records(r.stdout)
    assert m["messageId"] == mid and m["redeliveryCount"] == 1
    _ok(run_proc("nack", TOPIC, "-s", "S", mid))
    t0 = time.monotonic()

    def dead_lettered():
        return _dlq_in(run_proc) == 1 and _sub_stats(run_proc)["msgBacklog"] == 0

    _wait_for(dead_lettered, "the daemon to move the message to the DLQ", timeout=5,
              interval=0.02)
    assert time.monotonic() - t0 < 3
    s = _sub_stats(run_proc)
    assert s["unackedMessages"] == 0 and s["replayCount"] == 0
    assert _pending(run_proc) == []
    r = _ok(run_proc("read", DLQ, "-m", "earliest", "-n", "0", "--until-end", "-o", "ndjson"))
    (d,) = _records(r.stdout)
    assert d["payload"] == "hello"
    assert d["properties"]["ORIGIN_MESSAGE_ID"] == mid
    assert d["properties"]["REAL_TOPIC"] == FULL_TOPIC
    assert d["properties"]["REAL_SUBSCRIPTION"] == "S"

    rc, st, _ = _status(run_proc)
    assert rc == 0 and st["timersDue"] == 0
    _ok(run_proc("daemon", "stop", timeout=30))


def test_run_once_fires_what_is_due(run_proc):
    ids = _produce(run_proc, "a", "b")
    _ok(run_proc("clock", "simulate", "--at", SIM_START))
    r = _ok(run_proc("receive", TOPIC, "-s", "S", "-t", "Shared", "-p", "Earliest",
                     "--nack-delay", "1m", "-n", "2", "--idle-timeout", "5s", "-o", "ndjson"))
    assert [m["messageId"] for m in _records(r.stdout)] == ids
    _ok(run_proc("nack", TOPIC, "-s", "S", *ids))

    assert _run_once(run_proc) == {"fired": 0, "disconnected": 0, "timersDue": 0,
                                    "expired": 0, "trimmedLedgers": 0}
    _ok(run_proc("clock", "advance", "30s"))  # not due yet
    assert _run_once(run_proc)["fired"] == 0
    assert len(_pending(run_proc)) == 2

    # Move the clock past the nack delay *without* firing (`clock advance` would fire, as a
    # daemon tick): only run-once fires.
    _ok(run_proc("clock", "simulate", "--at", "2026-01-01T00:02:00Z"))
    assert len(_pending(run_proc)) == 2
    assert _run_once(run_proc) == {"fired": 2, "disconnected": 0, "timersDue": 0,
                                    "expired": 0, "trimmedLedgers": 0}
    assert _pending(run_proc) == []
    s = _sub_stats(run_proc)
    assert s["replayCount"] == 2 and s["unackedMessages"] == 0 and s["msgBacklog"] == 2
    assert _run_once(run_proc)["fired"] == 0  # nothing twice

    r = _ok(run_proc("receive", TOPIC, "-s", "S", "-t", "Shared", "-n", "2",
                     "--idle-timeout", "5s", "-o", "ndjson"))
    assert sorted((m["messageId"], m["redeliveryCount"]) for m in _records(r.stdout)) == \
        sorted((i, 1) for i in ids)


def test_run_once_works_while_a_daemon_runs(run_proc, spawn, store_path):
    (mid,) = _produce(run_proc, "x")
    _ok(run_proc("clock", "simulate", "--at", SIM_START))
    # A daemon with a long tick: after its first tick it sleeps, so only run-once can fire.
    p = spawn("daemon", "run", "--tick", "30")

    _wait_ticked(store_path, p)
    rc, st, _ = _status(run_proc)
    assert rc == 0 and st["pid"] == p.pid
    _ok(run_proc("receive", TOPIC, "-s", "S", "-t", "Shared", "-p", "Earliest",
                 "--nack-delay", "1m", "-n", "1", "--idle-timeout", "5s"))
    _ok(run_proc("nack", TOPIC, "-s", "S", mid))
    _ok(run_proc("clock", "simulate", "--at", "2026-01-01T00:02:00Z"))
    assert _run_once(run_proc)["fired"] == 1
    assert _sub_stats(run_proc)["replayCount"] == 1
    assert p.poll() is None, "run-once disturbed the running daemon"
    rc, st, _ = _status(run_proc)
    assert rc == 0 and st["pid"] == p.pid
    p.send_signal(signal.SIGTERM)  # prompt, even in the middle of a 30 s tick
    assert p.wait(timeout=5) == 0


# == 3. lease ends ================================================================================
def _leased_consumer_with_two_messages(run_proc) -> list[str]:
    ids = _produce(run_proc, "a", "b")
    _ok(run_proc("clock", "simulate", "--at", SIM_START))
    r = _ok(run_proc("receive", TOPIC, "-s", "S", "-t", "Shared", "-p", "Earliest",
                     "--lease", "1m", "-n", "2", "--idle-timeout", "5s", "-o", "ndjson"))
    assert [m["messageId"] for m in _records(r.stdout)] == ids
    cons = json.loads(_ok(run_proc("subscriptions", "consumers", TOPIC, "S", "-o", "json")).stdout)
    assert [(c["consumerName"], c["unackedMessages"]) for c in cons] == [("cli", 2)]
    return ids


def _check_disconnected(run_proc, ids):
    cons = json.loads(_ok(run_proc("subscriptions", "consumers", TOPIC, "S", "-o", "json")).stdout)
    assert cons == []
    assert _pending(run_proc) == []
    s = _sub_stats(run_proc)
    # (the last consumer of a Shared subscription left: Pulsar rewinds the cursor)
    assert s["unackedMessages"] == 0 and s["msgBacklog"] == 2
    r = _ok(run_proc("receive", TOPIC, "-s", "S", "-t", "Shared", "--consumer-name", "other",
                     "-n", "2", "--idle-timeout", "5s", "-o", "ndjson"))
    got = _records(r.stdout)
    # Back without a redelivery count increment, as when a Pulsar consumer disconnects.
    assert sorted((m["messageId"], m["redeliveryCount"]) for m in got) == \
        sorted((i, 0) for i in ids)


def test_run_once_disconnects_a_consumer_whose_lease_ended(run_proc):
    ids = _leased_consumer_with_two_messages(run_proc)
    assert _run_once(run_proc)["disconnected"] == 0  # lease still running
    _ok(run_proc("clock", "advance", "2m"))
    doc = _run_once(run_proc)
    assert doc["disconnected"] == 1 and doc["fired"] == 0
    _check_disconnected(run_proc, ids)


def test_daemon_disconnects_a_consumer_whose_lease_ended(run_proc, daemons):
    ids = _leased_consumer_with_two_messages(run_proc)
    _start(run_proc, daemons, "--tick", "0.1")
    time.sleep(0.3)  # a few ticks inside the lease change nothing
    cons = json.loads(_ok(run_proc("subscriptions", "consumers", TOPIC, "S", "-o", "json")).stdout)
    assert [c["consumerName"] for c in cons] == ["cli"]
    _ok(run_proc("clock", "advance", "2m"))
    _wait_for(lambda: json.loads(_ok(run_proc("subscriptions", "consumers", TOPIC, "S", "-o",
                                              "json")).stdout) == [],
              "the daemon to disconnect the consumer", timeout=5, interval=0.02)
    _check_disconnected(run_proc, ids)
    _ok(run_proc("daemon", "stop", timeout=30))


# == 4. kill -9 during dead letter moves ==========================================================
# The child pre-imports everything, says "ready", then runs the real entry point: so a kill
# delay measured from "ready" lands in the command's work rather than in interpreter start-up.
_CHILD = r"""
import sys
import pulsarctl.cli.app, pulsarctl.cli.daemon_cmd, pulsarctl.cli.client_cmds, pulsarctl.daemon
import pulsarctl.broker.service, pulsarctl.broker.nacks, pulsarctl.broker.deadletter
import pulsarctl.broker.consumers, pulsarctl.broker.subscriptions, pulsarctl.broker.timers
import pulsarctl.broker.redelivery, pulsarctl.broker.producers, pulsarctl.broker.topics
import pulsarctl.broker.dispatch, pulsarctl.broker.stats
from pulsarctl.cli.entry import main
sys.stdout.write("ready\n")
sys.stdout.flush()
main(sys.argv[1:])
"""
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
        unacked = {str(m.message_id()) for m in b.peek(TOPIC, "S", len(ids) + 10)}
        backlog = b.topic_stats(TOPIC)["subscriptions"]["S"]["msgBacklog"]
        assert backlog == len(unacked), (backlog, len(unacked))
        try:
            dlq_in = b.topic_stats(DLQ)["msgInCounter"]
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


def _read_ready(p: subprocess.Popen, timeout: float) -> float:
    r, _, _ = select.select([p.stdout], [], [], timeout)
    assert r, "the child never got ready"
    line = p.stdout.readline()
    assert line == "ready\n", (line, p.stderr.read() if p.poll() is not None else "")
    return time.monotonic()


def test_kill_9_during_dead_letter_moves_loses_and_duplicates_nothing(run_proc, env, tmp_path,
                                                                       store_path):
    n = 400
    _ok(run_proc("produce", TOPIC, "--stdin", "-db",  # one entry per message
                 input="".join(f"m-{i:04d}\n" for i in range(n))))
    _ok(run_proc("clock", "simulate", "--at", SIM_START))
    r = _ok(run_proc("receive", TOPIC, "-s", "S", "-t", "Shared", "-p", "Earliest",
                     "--max-redeliver-count", "1", "--nack-delay", "1m", "-n", str(n),
                     "--idle-timeout", "5s", "-o", "ndjson"))
    first = _records(r.stdout)
    ids = [m["messageId"] for m in first]
    assert len(ids) == n == len(set(ids))
    _ok(run_proc("nack", TOPIC, "-s", "S", "-", input=r.stdout))
    _ok(run_proc("clock", "advance", "61s"))  # fires: redelivery count 1, back for replay
    r = _ok(run_proc("receive", TOPIC, "-s", "S", "-t", "Shared", "-n", str(n),
                     "--idle-timeout", "5s", "-o", "ndjson"))
    again = _records(r.stdout)
    assert sorted(m["messageId"] for m in again) == sorted(ids)
    assert {m["redeliveryCount"] for m in again} == {1}
    _ok(run_proc("nack", TOPIC, "-s", "S", "-", input=r.stdout))
    # Due now, and the next fire dead-letters every one of them. (`clock simulate --at` moves
    # the clock without firing.)
    _ok(run_proc("clock", "simulate", "--at", "2026-01-01T00:03:00Z"))
    assert _check_invariant(store_path, ids, "set-up") == 0
    assert len(_pending(run_proc)) == n

    snapshot = tmp_path / "snapshot"
    shutil.copytree(store_path, snapshot, ignore=shutil.ignore_patterns("lock.mdb", "daemon.*"))
    copies = iter(range(10_000))

    def fresh_copy() -> str:
        dst = str(tmp_path / f"copy-{next(copies)}")
        shutil.copytree(snapshot, dst)
        return dst

    children: list[subprocess.Popen] = []

    def child(store: str, args: list[str]) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", _CHILD, *args],
                             env=dict(env, PULSARCTL_STORE=store), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        children.append(p)
        return p

    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    outcomes = {"before": 0, "after": 0, "partial": 0, "finished": 0}
    try:
        # Calibrate: how long from "ready" to exit does an undisturbed dead-lettering take?
        cal = fresh_copy()
        p = child(cal, FIRE_COMMANDS[0])
        t_ready = _read_ready(p, 20)
        out, err = p.communicate(timeout=30)
        work = time.monotonic() - t_ready
        assert p.returncode == 0, err
        assert json.loads(out)["fired"] == n
        assert _check_invariant(cal, ids, "calibration") == n
        window = max(0.05, work * 1.1)

        store = fresh_copy()
        _check_invariant(store, ids, "fresh copy")
        started = time.monotonic()
        iterations = 0
        first_after = None
        while iterations < 100 and time.monotonic() - started < 150:
            iterations += 1
            args = FIRE_COMMANDS[iterations % len(FIRE_COMMANDS)]
            p = child(store, args)
            _read_ready(p, 20)
            # The first kills spread over the whole run; then they close in on the commit: just
            # before the earliest kill that found the moves committed is inside the transaction.
            if iterations <= 10 or first_after is None:
                delay = rng.uniform(0, window)
            else:
                delay = rng.uniform(max(0.0, first_after - 0.08), first_after + 0.01)
            time.sleep(delay)
            finished = p.poll() is not None
            p.kill()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pytest.fail("a SIGKILLed child did not die")
            if finished and p.returncode not in (0, -signal.SIGKILL):
                pytest.fail(f"{args} failed: {p.returncode} {p.stderr.read()}")
            when = f"iteration {iterations} ({' '.join(args[:2])}, seed {seed})"
            moved = _check_invariant(store, ids, when)
            if finished or p.returncode == 0:
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
        assert iterations == 100, f"only {iterations} iterations in the time budget"
    finally:
        for p in children:
            if p.poll() is None:
                p.kill()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
            for f in (p.stdout, p.stderr):
                f.close()

    # Finish on the last crashed store with the real CLI: a run-once that completes moves what
    # is left, and every original message is in the DLQ exactly once.
    left = n - _check_invariant(store, ids, "before the final run-once")
    run_final = dict(env, PULSARCTL_STORE=store)
    r = subprocess.run(_argv("daemon", "run-once", "-o", "json"), env=run_final,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["fired"] == left
    r = subprocess.run(_argv("topics", "stats", DLQ, "-o", "json"), env=run_final,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["msgInCounter"] == n
    r = subprocess.run(_argv("topics", "stats", TOPIC, "-o", "json"), env=run_final,
                       capture_output=True, text=True, timeout=60)
    s = json.loads(r.stdout)["subscriptions"]["S"]
    assert s["msgBacklog"] == 0 and s["unackedMessages"] == 0 and s["replayCount"] == 0
    r = subprocess.run(_argv("read", DLQ, "-m", "earliest", "-n", "0", "--until-end", "-o",
                             "ndjson"), env=run_final, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    origins = [m["properties"]["ORIGIN_MESSAGE_ID"] for m in _records(r.stdout)]
    assert len(origins) == n and sorted(origins) == sorted(ids)
    payloads = sorted(m["payload"] for m in _records(r.stdout))
    assert payloads == [f"m-{i:04d}" for i in range(n)]


def test_status_names_the_lock_holder_without_taking_the_lock(run_proc, store_path):
    import fcntl

    from pulsarctl import daemon as d

    _ok(run_proc("produce", TOPIC, "-m", "x"))  # the store exists
    rc, _st, r = _status(run_proc)
    assert rc == 3 and r.stdout == ""
    fd = os.open(os.path.join(store_path, d.LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert d.lock_holder(store_path) == os.getpid()
        rc, st, r = _status(run_proc)
        assert rc == 0, r.stderr
        assert st["running"] is True and st["lockHolder"] == os.getpid()
        # A probe that took the lock would fail here: we hold it throughout.
    finally:
        os.close(fd)
    assert d.lock_holder(store_path) is None
    assert _status(run_proc)[0] == 3
