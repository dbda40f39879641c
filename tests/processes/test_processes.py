"""Real processes: the entry point, concurrency across processes, crashes and Ctrl-C.

Every command here is a separate `python -m pulsarctl` process, as a user's shell would run it;
consumers meet only through the store. Message counts are small, and every wait is for an event
(a line printed, a process blocked, a signal delivered) with a generous deadline.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli_helpers import ok, one_error_line, pjson, rows
from procs import PATIENCE_S, argv, communicate_all, proc_state, signal_pending, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="process liveness is read from /proc")


# -- helpers ---------------------------------------------------------------------------------
class LineReader(threading.Thread):
    """Read a process's stdout line by line, slowly, stopping after `pause_after` lines until
    resume() (so the process can be made to block on a full pipe)."""

    def __init__(self, stream, pause_after: int | None = None, delay: float = 0.0):
        super().__init__(daemon=True)
        self.stream = stream
        self.lines: list[str] = []
        self.pause_after = pause_after
        self.delay = delay
        self.paused = threading.Event()
        self._resume = threading.Event()
        self.done = threading.Event()

    def run(self):
        try:
            for line in self.stream:
                self.lines.append(line)
                if self.pause_after is not None and len(self.lines) >= self.pause_after:
                    self.paused.set()
                    self._resume.wait(60)
                    self.pause_after = None
                    self.delay = 0.0
                if self.delay:
                    time.sleep(self.delay)
        finally:
            self.paused.set()
            self.done.set()

    def resume(self):
        self._resume.set()


# Set-up and observation run in-process (the `cli` fixture): only the commands under test are
# processes of their own.
def _stats(cli, topic="t") -> dict:
    return pjson(cli("topics", "stats", topic, "-o", "json"))


def _produce_lines(cli, payloads, topic="t") -> list[str]:
    # -db: one entry per message (what these tests count and hand out).
    r = ok(cli("produce", topic, "--stdin", "-db", input="".join(p + "\n" for p in payloads)))
    ids = r.stdout.split()
    assert len(ids) == len(payloads)
    return ids


def _create_sub(cli, sub, topic="t", at="earliest"):
    ok(cli("topics", "create-subscription", topic, "-s", sub, "-m", at))


def _wait_blocked(p) -> None:
    """Wait until p sleeps in the kernel: a consumer with messages to print whose stdout pipe
    nobody reads is blocked in write() then."""
    wait_for(lambda: proc_state(p.pid) == "S", f"process {p.pid} to block")


# -- 1. the entry point ----------------------------------------------------------------------
def test_entry_point_module_and_console_script(run_proc, env):
    r = run_proc("produce", "t", "-m", "x")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1:0:-1\n"
    assert r.stderr == ""

    script = Path(sys.executable).parent / "pulsarctl"
    command = [str(script)] if script.exists() else argv()
    r = subprocess.run([*command, "produce", "t", "-m", "y"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1:1:-1\n"

    # Through the typer app (not the produce fast path), from the same entry point.
    r = subprocess.run([*command, "read", "t", "-m", "earliest", "-n", "2", "-o", "ndjson"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [m["payload"] for m in rows(r.stdout)] == ["x", "y"]


# -- 2. two processes on one Shared subscription -----------------------------------------------
def test_two_processes_share_a_shared_subscription(cli, spawn):
    n = 3000
    payloads = [f"m-{i}" for i in range(n)]
    _produce_lines(cli, payloads)
    _create_sub(cli, "s")

    # Every message is there before they start, and neither can take back what the other has
    # pending: a consumer that finds nothing to fetch is done, so the idle timeout only ends it.
    args = ("consume", "t", "-s", "s", "-t", "Shared", "-n", "0", "--idle-timeout", "500ms",
            "-o", "ndjson")
    a, b = spawn(*args), spawn(*args)
    # Nobody reads their output until both are attached: a consumer that starts first fills
    # its pipe and blocks with at most a receiver queue (1000) pending, so it cannot take all
    # 3000 before the other one arrives, however the two start-ups race.
    def both_attached():
        sub = _stats(cli)["subscriptions"]["s"]
        return len(sub["consumers"]) == 2

    wait_for(both_attached, "both consumers to attach")
    (out_a, err_a), (out_b, err_b) = communicate_all([a, b])
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b
    ra, rb = rows(out_a), rows(out_b)
    pa, pb = [m["payload"] for m in ra], [m["payload"] for m in rb]

    assert len(pa) == len(set(pa)) and len(pb) == len(set(pb)), "a process printed a message twice"
    assert not set(pa) & set(pb), f"{len(set(pa) & set(pb))} messages went to both consumers"
    assert set(pa) | set(pb) == set(payloads)
    assert len(pa) + len(pb) == n
    assert pa and pb, f"one consumer got everything ({len(pa)} / {len(pb)})"
    assert {m["subscription"] for m in ra + rb} == {"s"}
    assert {m["redeliveryCount"] for m in ra + rb} == {0}
    names_a, names_b = {m["consumerName"] for m in ra}, {m["consumerName"] for m in rb}
    assert len(names_a) == 1 and len(names_b) == 1 and names_a != names_b

    sub = _stats(cli)["subscriptions"]["s"]
    assert sub["msgBacklog"] == 0
    assert sub["unackedMessages"] == 0
    assert sub["consumers"] == []
    assert sub["type"] == "Shared"


# -- 3. Exclusive across processes -------------------------------------------------------------
def test_exclusive_subscription_refuses_a_second_process(cli, run_proc, spawn):
    # No idle timeout: the first consumer runs until it has its one message.
    first = spawn("consume", "t", "-s", "ex", "-n", "1", "-o", "ndjson")

    def attached():
        r = cli("topics", "stats", "t", "-o", "json")
        if r.exit_code != 0:
            return None
        sub = json.loads(r.stdout)["subscriptions"].get("ex")
        return sub["consumers"] if sub and sub["consumers"] else None

    consumers = wait_for(attached, "the first consumer to attach")
    assert [c["address"] for c in consumers] == [f"pid:{first.pid}"]

    r = run_proc("consume", "t", "-s", "ex", "-n", "1", "--idle-timeout", "1s")
    assert first.poll() is None, "the first consumer ended before it had a message"
    assert r.returncode == 4, (r.returncode, r.stdout, r.stderr)
    assert "Exclusive consumer is already connected" in one_error_line(r.stderr)
    assert r.stdout == ""

    # The first one is still the consumer: it gets the next message, and ends.
    ok(cli("produce", "t", "-m", "first"))
    out, err = first.communicate(timeout=PATIENCE_S)
    assert first.returncode == 0, err
    assert [m["payload"] for m in rows(out)] == ["first"]

    ok(cli("produce", "t", "-m", "after"))
    r = run_proc("consume", "t", "-s", "ex", "-n", "1", "--idle-timeout", "5s", "-o", "ndjson")
    assert r.returncode == 0, r.stderr
    assert [m["payload"] for m in rows(r.stdout)] == ["after"]
    sub = _stats(cli)["subscriptions"]["ex"]
    assert sub["msgBacklog"] == 0 and sub["consumers"] == []


# -- 4. receive in one process, ack in another -----------------------------------------------
def test_receive_then_ack_from_another_process(cli, run_proc):
    ids = _produce_lines(cli, ["a", "b"])
    r = run_proc("receive", "t", "-s", "w", "-p", "Earliest", "-n", "2", "-o", "ndjson")
    assert r.returncode == 0, r.stderr
    recs = rows(r.stdout)
    assert [m["payload"] for m in recs] == ["a", "b"]
    assert [m["messageId"] for m in recs] == ids
    assert {m["consumerName"] for m in recs} == {"cli"}
    assert {m["subscription"] for m in recs} == {"w"}

    sub = _stats(cli)["subscriptions"]["w"]
    assert sub["unackedMessages"] == 2
    assert sub["msgBacklog"] == 2
    assert [(c["consumerName"], c["unackedMessages"], c["address"]) for c in sub["consumers"]] \
        == [("cli", 2, "lease")]

    r = run_proc("ack", "t", "-s", "w", "-", "-o", "json", input=r.stdout)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["acked"] == 2

    sub = _stats(cli)["subscriptions"]["w"]
    assert sub["msgBacklog"] == 0
    assert sub["unackedMessages"] == 0

    # Acking again is a no-op, still exit 0.
    r = run_proc("ack", "t", "-s", "w", *ids, "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["acked"] == 0


# -- 5. kill -9 gives the pending messages back ------------------------------------------------
def _kill9_scenario(cli, spawn, *, reap_before_next: bool):
    n = 2000
    payloads = [f"k-{i:05d}-" + "x" * 1000 for i in range(n)]
    _produce_lines(cli, payloads)
    _create_sub(cli, "k")

    first = spawn("consume", "t", "-s", "k", "-t", "Shared", "-n", "0", "-o", "ndjson")
    # Read 150 lines slowly (so some grouped acks are flushed), then stop reading: the
    # consumer fills the pipe and blocks with most of its receiver queue pending.
    reader = LineReader(first.stdout, pause_after=150, delay=0.003)
    reader.start()
    assert reader.paused.wait(PATIENCE_S), "the consumer printed nothing"

    def stuck_with_acks():
        sub = _stats(cli)["subscriptions"]["k"]
        return sub if 0 < sub["msgBacklog"] < n and sub["unackedMessages"] > 0 else None

    wait_for(stuck_with_acks, "some acks and pending messages from the first consumer")
    _wait_blocked(first)
    assert first.poll() is None
    first.send_signal(signal.SIGKILL)
    if reap_before_next:
        first.wait(timeout=PATIENCE_S)
    else:
        wait_for(lambda: proc_state(first.pid) == "Z", "the killed process to become a zombie")

    sub = _stats(cli)["subscriptions"]["k"]
    backlog_before = sub["msgBacklog"]
    acked_by_first = n - backlog_before
    assert acked_by_first > 0

    # Every message it can get is there before it starts: the idle timeout only ends it.
    second = spawn("consume", "t", "-s", "k", "-t", "Shared", "-n", "0", "--idle-timeout",
                   "500ms", "-o", "ndjson")
    (out2, err2), = communicate_all([second])
    assert second.returncode == 0, err2

    # Only now read what the killed consumer managed to print (it stays in the pipe).
    reader.resume()
    if not reap_before_next:
        first.wait(timeout=PATIENCE_S)
    assert reader.done.wait(PATIENCE_S)
    # (A line is one write() under PIPE_BUF, so a kill cannot cut one; skip a torn tail anyway.)
    printed_by_first = [json.loads(line)["payload"] for line in reader.lines
                        if line.endswith("\n")]

    recs2 = rows(out2)
    got2 = [m["payload"] for m in recs2]
    assert len(got2) == len(set(got2)), "the second consumer got a message twice"
    assert acked_by_first <= len(printed_by_first), "acked messages the first never printed"
    lost = set(payloads) - set(printed_by_first) - set(got2)
    if lost:
        pytest.fail(f"{len(lost)} messages neither printed by the killed consumer nor delivered "
                    f"to the next one (e.g. {sorted(lost)[0][:7]})")
    assert len(got2) == backlog_before, \
        f"second consumer got {len(got2)} messages, the backlog was {backlog_before}"
    # Back without a redelivery count increment, as when a Pulsar consumer disconnects.
    assert {m["redeliveryCount"] for m in recs2} == {0}

    sub = _stats(cli)["subscriptions"]["k"]
    assert sub["msgBacklog"] == 0
    assert sub["unackedMessages"] == 0
    assert sub["consumers"] == []


def test_kill_9_gives_pending_messages_back(cli, spawn):
    _kill9_scenario(cli, spawn, reap_before_next=True)


def test_kill_9_not_yet_reaped_zombie_is_disconnected(cli, spawn):
    """A killed process is dead as soon as the kernel closes its files, before its parent reaps
    it (a Pulsar consumer's connection drops then too): a zombie must not hold messages."""
    _kill9_scenario(cli, spawn, reap_before_next=False)


# -- 6. Ctrl-C ---------------------------------------------------------------------------------
@pytest.mark.parametrize("when", ["blocked on a full pipe", "while the pipe drains", "while idle"])
def test_ctrl_c_acks_exactly_what_was_printed(cli, spawn, when):
    """Ctrl-C: exit 130, one line on stderr, and every message that reached stdout is acked,
    none that did not (the backlog is exactly N - printed).

    blocked on a full pipe: we stop reading, the consumer blocks in write(), SIGINT arrives,
        and only then do we read on. while the pipe drains: the same, but we read on at once,
        as a pager or a downstream command does, so the blocked write can complete just as
        the signal is handled. while idle: everything was printed, the consumer is waiting.
    """
    n = 50 if when == "while idle" else 3000
    payloads = [f"c-{i:05d}-" + "y" * 200 for i in range(n)]
    _produce_lines(cli, payloads)
    _create_sub(cli, "c")

    p = spawn("consume", "t", "-s", "c", "-n", "0", "-o", "ndjson")
    # reads below are bounded even if SIGINT is ignored
    watchdog = threading.Timer(PATIENCE_S, p.kill)
    watchdog.start()
    try:
        if when == "while the pipe drains":
            lines = []
            for _ in range(100):
                line = p.stdout.readline()
                assert line, "the consumer stopped printing"
                lines.append(line)
            _wait_blocked(p)  # it fills the pipe and blocks in write()
            assert p.poll() is None
            p.send_signal(signal.SIGINT)
            lines.extend(p.stdout.readlines())
        else:
            if when == "blocked on a full pipe":
                reader = LineReader(p.stdout, pause_after=100, delay=0.002)
                reader.start()
                assert reader.paused.wait(PATIENCE_S), "the consumer printed nothing"
            else:
                reader = LineReader(p.stdout)
                reader.start()
                wait_for(lambda: len(reader.lines) >= n, "every message to be printed")
            _wait_blocked(p)  # in write() on the full pipe, or waiting for messages
            assert p.poll() is None
            p.send_signal(signal.SIGINT)
            # The signal lands before the pipe drains.
            wait_for(lambda: not signal_pending(p.pid, signal.SIGINT), "SIGINT to be delivered")
            reader.resume()
            assert reader.done.wait(PATIENCE_S)
            lines = reader.lines
        p.wait(timeout=PATIENCE_S)
    finally:
        watchdog.cancel()
    err = p.stderr.read()
    assert p.returncode == 130, (p.returncode, err)

    printed = [json.loads(line)["payload"] for line in lines]  # every line is whole
    assert printed == payloads[:len(printed)], "Exclusive consumer printed out of order"
    assert 0 < len(printed) <= n
    if when == "while idle":
        assert len(printed) == n
    else:
        assert len(printed) < n, "the consumer was not interrupted mid-stream"

    sub = _stats(cli)["subscriptions"]["c"]
    if sub["msgBacklog"] != n - len(printed):
        pytest.fail(f"printed {len(printed)} of {n} (last {printed[-1][:7]}), but the backlog "
                    f"is {sub['msgBacklog']}, not {n - len(printed)}")
    assert sub["unackedMessages"] == 0
    assert sub["consumers"] == []
    # Interrupted is an error like any other: exactly one line on stderr.
    assert one_error_line(err) == "interrupted"


# -- 7. two writers at once --------------------------------------------------------------------
def test_two_producers_write_concurrently(cli, spawn):
    n = 5000
    inputs = ["".join(f"{w}-{i}\n" for i in range(n)) for w in ("a", "b")]
    procs = [spawn("produce", "t", "--stdin", stdin=subprocess.PIPE) for _ in inputs]
    results = communicate_all(procs, inputs)
    ids = []
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
        got = out.split()
        assert len(got) == n
        ids.extend(got)
    assert len(set(ids)) == 2 * n, "two messages got the same id"

    st = _stats(cli)
    assert st["msgInCounter"] == 2 * n

    r = ok(cli("read", "t", "-m", "earliest", "-n", "0", "--until-end", "-o", "ndjson"))
    recs = rows(r.stdout)
    assert sorted(m["messageId"] for m in recs) == sorted(ids)
    by_writer = {w: [m["payload"] for m in recs if m["payload"].startswith(w + "-")]
                 for w in ("a", "b")}
    for w in ("a", "b"):  # each writer's messages are all there, in its order
        assert by_writer[w] == [f"{w}-{i}" for i in range(n)]


# -- 8. a leased consumer on a simulated clock -------------------------------------------------
def test_lease_ends_on_simulated_clock_across_processes(cli, run_proc):
    ids = _produce_lines(cli, ["one", "two", "three"])
    r = run_proc("clock", "simulate", "--at", "2026-01-01T00:00:00Z")
    assert r.returncode == 0, r.stderr

    r = run_proc("receive", "t", "-s", "l", "-p", "Earliest", "--lease", "1m", "-n", "1",
                 "-o", "ndjson")
    assert r.returncode == 0, r.stderr
    (first,) = rows(r.stdout)
    assert first["payload"] == "one" and first["consumerName"] == "cli"
    assert first["messageId"] == ids[0]

    busy = ("receive", "t", "-s", "l", "--consumer-name", "other", "-n", "1",
            "--idle-timeout", "1s", "-o", "ndjson")
    r = run_proc(*busy)
    assert r.returncode == 4, (r.returncode, r.stdout, r.stderr)
    line = one_error_line(r.stderr)
    assert "Exclusive consumer is already connected" in line and "'cli'" in line
    assert r.stdout == ""

    r = run_proc("clock", "advance", "30s")  # still inside the lease
    assert r.returncode == 0, r.stderr
    r = run_proc(*busy)
    assert r.returncode == 4, (r.returncode, r.stdout, r.stderr)

    r = run_proc("clock", "advance", "2m")  # the lease has ended
    assert r.returncode == 0, r.stderr
    r = run_proc(*busy)
    assert r.returncode == 0, r.stderr
    (again,) = rows(r.stdout)
    assert again["payload"] == "one", "the cursor did not rewind when the lease ended"
    assert again["messageId"] == first["messageId"]
    assert again["consumerName"] == "other"
    assert again["redeliveryCount"] == 0

    sub = _stats(cli)["subscriptions"]["l"]
    assert [c["consumerName"] for c in sub["consumers"]] == ["other"]
    assert sub["unackedMessages"] == 1
    assert sub["msgBacklog"] == 3
