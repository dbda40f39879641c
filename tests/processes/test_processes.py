"""Real processes: the entry point, concurrency across processes, crashes and Ctrl-C.

Every command here is a separate `python -m pulsarctl` process, as a user's shell would run it;
consumers meet only through the store. Message counts are small and every wait has a deadline,
so the file runs in well under a minute.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from procs import communicate_all

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="process liveness is read from /proc")


# -- helpers ---------------------------------------------------------------------------------
def _argv(*args) -> list[str]:
    return [sys.executable, "-m", "pulsarctl", *args]


@pytest.fixture
def env(store_path):
    return dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")


@pytest.fixture
def spawn(env):
    """Start `python -m pulsarctl ARGS` in the background; every process started here is killed
    and reaped when the test ends, whatever happened."""
    started: list[subprocess.Popen] = []

    def start(*args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
        p = subprocess.Popen(_argv(*args), env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                             text=True)
        started.append(p)
        return p

    yield start
    for p in started:
        if p.poll() is None:
            p.kill()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process that ignores SIGKILL
            pass
        for f in (p.stdin, p.stdout, p.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass




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


def _records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _stats(run_proc, topic="t") -> dict:
    r = run_proc("topics", "stats", topic, "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _wait_for(predicate, what: str, timeout: float = 15.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def _produce_lines(run_proc, payloads, topic="t") -> list[str]:
    # -db: one entry per message (what these tests count and hand out).
    r = run_proc("produce", topic, "--stdin", "-db", input="".join(p + "\n" for p in payloads))
    assert r.returncode == 0, r.stderr
    ids = r.stdout.split()
    assert len(ids) == len(payloads)
    return ids


def _create_sub(run_proc, sub, topic="t", at="earliest"):
    r = run_proc("topics", "create-subscription", topic, "-s", sub, "-m", at)
    assert r.returncode == 0, r.stderr


def _one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {stderr!r}"
    return lines[0]


# -- 1. the entry point ----------------------------------------------------------------------
def test_entry_point_module_and_console_script(run_proc, env):
    r = run_proc("produce", "t", "-m", "x")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1:0:-1\n"
    assert r.stderr == ""

    script = Path(sys.executable).parent / "pulsarctl"
    argv = [str(script)] if script.exists() else _argv()
    r = subprocess.run([*argv, "produce", "t", "-m", "y"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1:1:-1\n"

    # Through the typer app (not the produce fast path), from the same entry point.
    r = subprocess.run([*argv, "read", "t", "-m", "earliest", "-n", "2", "-o", "ndjson"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [m["payload"] for m in _records(r.stdout)] == ["x", "y"]


# -- 2. two processes on one Shared subscription -----------------------------------------------
def test_two_processes_share_a_shared_subscription(run_proc, spawn):
    n = 3000
    payloads = [f"m-{i}" for i in range(n)]
    _produce_lines(run_proc, payloads)
    _create_sub(run_proc, "s")

    args = ("consume", "t", "-s", "s", "-t", "Shared", "-n", "0", "--idle-timeout", "2s",
            "-o", "ndjson")
    a, b = spawn(*args), spawn(*args)
    # Nobody reads their output until both are attached: a consumer that starts first fills
    # its pipe and blocks with at most a receiver queue (1000) pending, so it cannot take all
    # 3000 before the other one arrives, however the two start-ups race.
    def both_attached():
        sub = _stats(run_proc)["subscriptions"]["s"]
        return len(sub["consumers"]) == 2

    _wait_for(both_attached, "both consumers to attach")
    (out_a, err_a), (out_b, err_b) = communicate_all([a, b])
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b
    ra, rb = _records(out_a), _records(out_b)
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

    sub = _stats(run_proc)["subscriptions"]["s"]
    assert sub["msgBacklog"] == 0
    assert sub["unackedMessages"] == 0
    assert sub["consumers"] == []
    assert sub["type"] == "Shared"


# -- 3. Exclusive across processes -------------------------------------------------------------
def test_exclusive_subscription_refuses_a_second_process(run_proc, spawn):
    first = spawn("consume", "t", "-s", "ex", "-n", "0", "--idle-timeout", "5s", "-o", "ndjson")

    def attached():
        r = run_proc("topics", "stats", "t", "-o", "json")
        if r.returncode != 0:
            return None
        sub = json.loads(r.stdout)["subscriptions"].get("ex")
        return sub["consumers"] if sub and sub["consumers"] else None

    consumers = _wait_for(attached, "the first consumer to attach")
    assert [c["address"] for c in consumers] == [f"pid:{first.pid}"]

    r = run_proc("consume", "t", "-s", "ex", "-n", "1", "--idle-timeout", "1s")
    assert first.poll() is None, "the first consumer ended too early for this test"
    assert r.returncode == 4, (r.returncode, r.stdout, r.stderr)
    assert "Exclusive consumer is already connected" in _one_error_line(r.stderr)
    assert r.stdout == ""

    out, err = first.communicate(timeout=30)
    assert first.returncode == 0, err
    assert out == ""

    r = run_proc("produce", "t", "-m", "after")
    assert r.returncode == 0, r.stderr
    r = run_proc("consume", "t", "-s", "ex", "-n", "1", "--idle-timeout", "5s", "-o", "ndjson")
    assert r.returncode == 0, r.stderr
    assert [m["payload"] for m in _records(r.stdout)] == ["after"]
    sub = _stats(run_proc)["subscriptions"]["ex"]
    assert sub["msgBacklog"] == 0 and sub["consumers"] == []


# -- 4. receive in one process, ack in another -----------------------------------------------
def test_receive_then_ack_from_another_process(run_proc):
    ids = _produce_lines(run_proc, ["a", "b"])
    r = run_proc("receive", "t", "-s", "w", "-p", "Earliest", "-n", "2", "-o", "ndjson")
    assert r.returncode == 0, r.stderr
    recs = _records(r.stdout)
    assert [m["payload"] for m in recs] == ["a", "b"]
    assert [m["messageId"] for m in recs] == ids
    assert {m["consumerName"] for m in recs} == {"cli"}
    assert {m["subscription"] for m in recs} == {"w"}

    sub = _stats(run_proc)["subscriptions"]["w"]
    assert sub["unackedMessages"] == 2
    assert sub["msgBacklog"] == 2
    assert [(c["consumerName"], c["unackedMessages"], c["address"]) for c in sub["consumers"]] \
        == [("cli", 2, "lease")]

    r = run_proc("ack", "t", "-s", "w", "-", "-o", "json", input=r.stdout)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["acked"] == 2

    sub = _stats(run_proc)["subscriptions"]["w"]
    assert sub["msgBacklog"] == 0
    assert sub["unackedMessages"] == 0

    # Acking again is a no-op, still exit 0.
    r = run_proc("ack", "t", "-s", "w", *ids, "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["acked"] == 0


# -- 5. kill -9 gives the pending messages back ------------------------------------------------
def _kill9_scenario(run_proc, spawn, *, reap_before_next: bool):
    n = 2000
    payloads = [f"k-{i:05d}-" + "x" * 1000 for i in range(n)]
    _produce_lines(run_proc, payloads)
    _create_sub(run_proc, "k")

    first = spawn("consume", "t", "-s", "k", "-t", "Shared", "-n", "0", "-o", "ndjson")
    # Read 150 lines slowly (so some grouped acks are flushed), then stop reading: the
    # consumer fills the pipe and blocks with most of its receiver queue pending.
    reader = LineReader(first.stdout, pause_after=150, delay=0.003)
    reader.start()
    assert reader.paused.wait(30), "the consumer printed nothing"

    def stuck_with_acks():
        sub = _stats(run_proc)["subscriptions"]["k"]
        return sub if 0 < sub["msgBacklog"] < n and sub["unackedMessages"] > 0 else None

    _wait_for(stuck_with_acks, "some acks and pending messages from the first consumer")
    time.sleep(0.3)  # let it fill the pipe and block
    assert first.poll() is None
    first.send_signal(signal.SIGKILL)
    if reap_before_next:
        first.wait(timeout=10)
    else:
        _wait_for(lambda: Path(f"/proc/{first.pid}/stat").read_text().split(")")[-1].split()[0]
                  == "Z", "the killed process to become a zombie", timeout=10)

    sub = _stats(run_proc)["subscriptions"]["k"]
    backlog_before = sub["msgBacklog"]
    acked_by_first = n - backlog_before
    assert acked_by_first > 0

    second = spawn("consume", "t", "-s", "k", "-t", "Shared", "-n", "0", "--idle-timeout", "2s",
                   "-o", "ndjson")
    (out2, err2), = communicate_all([second])
    assert second.returncode == 0, err2

    # Only now read what the killed consumer managed to print (it stays in the pipe).
    reader.resume()
    if not reap_before_next:
        first.wait(timeout=10)
    assert reader.done.wait(10)
    # (A line is one write() under PIPE_BUF, so a kill cannot cut one; skip a torn tail anyway.)
    printed_by_first = [json.loads(line)["payload"] for line in reader.lines
                        if line.endswith("\n")]

    recs2 = _records(out2)
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

    sub = _stats(run_proc)["subscriptions"]["k"]
    assert sub["msgBacklog"] == 0
    assert sub["unackedMessages"] == 0
    assert sub["consumers"] == []


def test_kill_9_gives_pending_messages_back(run_proc, spawn):
    _kill9_scenario(run_proc, spawn, reap_before_next=True)


def test_kill_9_not_yet_reaped_zombie_is_disconnected(run_proc, spawn):
    """A killed process is dead as soon as the kernel closes its files, before its parent reaps
    it (a Pulsar consumer's connection drops then too): a zombie must not hold messages."""
    _kill9_scenario(run_proc, spawn, reap_before_next=False)


# -- 6. Ctrl-C ---------------------------------------------------------------------------------
@pytest.mark.parametrize("when", ["blocked on a full pipe", "while the pipe drains", "while idle"])
def test_ctrl_c_acks_exactly_what_was_printed(run_proc, spawn, when):
    """Ctrl-C: exit 130, one line on stderr, and every message that reached stdout is acked,
    none that did not (the backlog is exactly N - printed).

    blocked on a full pipe: we stop reading, the consumer blocks in write(), SIGINT arrives,
        and only then do we read on. while the pipe drains: the same, but we read on at once,
        as a pager or a downstream command does, so the blocked write can complete just as
        the signal is handled. while idle: everything was printed, the consumer is waiting.
    """
    n = 50 if when == "while idle" else 3000
    payloads = [f"c-{i:05d}-" + "y" * 200 for i in range(n)]
    _produce_lines(run_proc, payloads)
    _create_sub(run_proc, "c")

    p = spawn("consume", "t", "-s", "c", "-n", "0", "-o", "ndjson")
    watchdog = threading.Timer(30, p.kill)  # reads below are bounded even if SIGINT is ignored
    watchdog.start()
    try:
        if when == "while the pipe drains":
            lines = []
            for _ in range(100):
                line = p.stdout.readline()
                assert line, "the consumer stopped printing"
                lines.append(line)
            time.sleep(0.3)  # it fills the pipe and blocks in write()
            assert p.poll() is None
            p.send_signal(signal.SIGINT)
            lines.extend(p.stdout.readlines())
        else:
            if when == "blocked on a full pipe":
                reader = LineReader(p.stdout, pause_after=100, delay=0.002)
                reader.start()
                assert reader.paused.wait(30), "the consumer printed nothing"
            else:
                reader = LineReader(p.stdout)
                reader.start()
                _wait_for(lambda: len(reader.lines) >= n, "every message to be printed")
            time.sleep(0.3)
            assert p.poll() is None
            p.send_signal(signal.SIGINT)
            time.sleep(0.2)  # let the signal land before the pipe drains
            reader.resume()
            assert reader.done.wait(30)
            lines = reader.lines
        p.wait(timeout=20)
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

    sub = _stats(run_proc)["subscriptions"]["c"]
    if sub["msgBacklog"] != n - len(printed):
        pytest.fail(f"printed {len(printed)} of {n} (last {printed[-1][:7]}), but the backlog "
                    f"is {sub['msgBacklog']}, not {n - len(printed)}")
    assert sub["unackedMessages"] == 0
    assert sub["consumers"] == []
    # Interrupted is an error like any other: exactly one line on stderr.
    assert _one_error_line(err) == "interrupted"


# -- 7. two writers at once --------------------------------------------------------------------
def test_two_producers_write_concurrently(run_proc, spawn):
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

    st = _stats(run_proc)
    assert st["msgInCounter"] == 2 * n

    r = run_proc("read", "t", "-m", "earliest", "-n", "0", "--until-end", "-o", "ndjson")
    assert r.returncode == 0, r.stderr
    recs = _records(r.stdout)
    assert sorted(m["messageId"] for m in recs) == sorted(ids)
    by_writer = {w: [m["payload"] for m in recs if m["payload"].startswith(w + "-")]
                 for w in ("a", "b")}
    for w in ("a", "b"):  # each writer's messages are all there, in its order
        assert by_writer[w] == [f"{w}-{i}" for i in range(n)]


# -- 8. a leased consumer on a simulated clock -------------------------------------------------
def test_lease_ends_on_simulated_clock_across_processes(run_proc):
    ids = _produce_lines(run_proc, ["one", "two", "three"])
    r = run_proc("clock", "simulate", "--at", "2026-01-01T00:00:00Z")
    assert r.returncode == 0, r.stderr

    r = run_proc("receive", "t", "-s", "l", "-p", "Earliest", "--lease", "1m", "-n", "1",
                 "-o", "ndjson")
    assert r.returncode == 0, r.stderr
    (first,) = _records(r.stdout)
    assert first["payload"] == "one" and first["consumerName"] == "cli"
    assert first["messageId"] == ids[0]

    busy = ("receive", "t", "-s", "l", "--consumer-name", "other", "-n", "1",
            "--idle-timeout", "1s", "-o", "ndjson")
    r = run_proc(*busy)
    assert r.returncode == 4, (r.returncode, r.stdout, r.stderr)
    line = _one_error_line(r.stderr)
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
    (again,) = _records(r.stdout)
    assert again["payload"] == "one", "the cursor did not rewind when the lease ended"
    assert again["messageId"] == first["messageId"]
    assert again["consumerName"] == "other"
    assert again["redeliveryCount"] == 0

    sub = _stats(run_proc)["subscriptions"]["l"]
    assert [c["consumerName"] for c in sub["consumers"]] == ["other"]
    assert sub["unackedMessages"] == 1
    assert sub["msgBacklog"] == 3
