"""`dlq` commands as real processes: the per-DLQ lock (--no-wait exits 5, otherwise a second
command waits), concurrent replays moving each message exactly once, and kill -9 in the middle
of a replay (nothing lost, nothing duplicated) or of a drain (nothing lost; only an unacked
batch may be written twice)."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from pulsarctl.broker import Broker
from pulsarctl.messages import MessageId, OutgoingMessage

from procs import PATIENCE_S, communicate_all, flock_waiters, reap, wait_for

FULL = "persistent://public/default/"
DLQ = "orders-billing-DLQ"


@pytest.fixture
def store(store_path):
    b = Broker(store_path)
    yield b
    b.close()


@pytest.fixture
def spawn(store_path):
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
    started = []

    def run(*args, **kw):
        p = subprocess.Popen([sys.executable, "-m", "pulsarctl", *args], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)
        started.append(p)
        return p
    yield run
    for p in started:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    reap(started)


def letters(store, n):
    msgs = [OutgoingMessage(f"m{i}".encode(), {"REAL_TOPIC": FULL + "orders",
                                                "REAL_SUBSCRIPTION": "billing",
                                                "ORIGIN_MESSAGE_ID": f"9:{i}:-1"})
            for i in range(n)]
    store.publish(DLQ, msgs)
    return {f"9:{i}:-1" for i in range(n)}


def waiting_origins(store) -> list[str]:
    return [m.properties()["ORIGIN_MESSAGE_ID"] for m in store.dlq(DLQ).peek(0)]


def topic_origins(store, topic) -> list[str]:
    if not store.topics.exists(topic):
        return []
    msgs, _nxt, _last = store.read_entries(topic, None, 100_000, after_id=MessageId.earliest)
    return [m.properties()["ORIGIN_MESSAGE_ID"] for m in msgs]


def wait_for_lock_holder(store, pid, timeout=PATIENCE_S):
    """Until the DLQ's lock file names pid (it writes it once it holds the lock)."""
    from pulsarctl.broker.dlq import lock_path

    path = lock_path(store.path, DLQ)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(path) as f:
                if f.read().strip() == str(pid):
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} never took the lock")


def test_no_wait_exits_5_while_another_process_holds_the_lock(store, spawn, run_proc):
    letters(store, 3)
    holder = spawn("dlq", "drain", DLQ, "--exec", "sleep 30")
    wait_for_lock_holder(store, holder.pid)
    for cmd in (["replay", DLQ], ["drain", DLQ], ["purge", DLQ, "--older-than", "1s"]):
        r = run_proc("dlq", *cmd, "--no-wait")
        assert r.returncode == 5, r.stderr
        assert r.stderr.splitlines() == [
            f"error: another dlq command is working on {FULL + DLQ} (pid {holder.pid}); run "
            f"again later, or without --no-wait to wait for it"]
    os.killpg(holder.pid, signal.SIGKILL)  # the kernel drops the lock with its process
    holder.wait(10)
    r = run_proc("dlq", "purge", DLQ, "--no-wait")
    assert r.returncode == 0 and r.stderr.strip() == "purged 3", r.stderr


def test_a_second_command_waits_for_the_lock(store, spawn, tmp_path):
    from pulsarctl.broker.dlq import lock_path

    letters(store, 2)
    gate = tmp_path / "gate"  # the drain's --exec holds the lock until the gate opens
    drain = spawn("dlq", "drain", DLQ, "--max", "1", "--exec",
                  f"while [ ! -e '{gate}' ]; do sleep 0.01; done")
    wait_for_lock_holder(store, drain.pid)
    purge = spawn("dlq", "purge", DLQ)
    wait_for(lambda: purge.pid in flock_waiters(lock_path(store.path, DLQ))
             or purge.poll() is not None, "the purge to wait for the drain's lock")
    assert purge.poll() is None, purge.communicate()  # waiting for the drain's lock
    gate.touch()
    (_o1, e1), (_o2, e2) = communicate_all([drain, purge], timeout=60)
    assert drain.returncode == 0 and e1.strip() == "drained 1, failed 0", e1
    assert purge.returncode == 0 and e2.strip() == "purged 1", e2
    assert waiting_origins(store) == []


def test_concurrent_replays_move_each_message_exactly_once(store, spawn):
    everything = letters(store, 300)
    procs = [spawn("dlq", "replay", DLQ, "--to", "target", "--batch", "7", "-o", "ndjson")
             for _ in range(3)]
    procs += [spawn("dlq", "replay", DLQ, "--to", "target", "--max", "40", "-o", "ndjson")
              for _ in range(2)]
    results = communicate_all(procs, timeout=60)
    replayed = []
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
        replayed += [json.loads(ln)["messageId"] for ln in out.splitlines()]
    assert len(replayed) == len(set(replayed)) == 300
    got = topic_origins(store, "target")
    assert len(got) == 300 and set(got) == everything
    assert waiting_origins(store) == []


def test_kill_9_during_replay_never_loses_or_duplicates(store, spawn):
    everything = letters(store, 300)
    rng = random.Random(7)
    for _ in range(12):
        # Killed once it has moved a few more messages (1 to 30, at random), a moment later:
        # every kill lands in the middle of its work, however slow the machine.
        want = min(300, len(topic_origins(store, "target")) + rng.randint(1, 30))
        p = spawn("dlq", "replay", DLQ, "--to", "target", "--batch", "5", "--rate", "100")
        wait_for(lambda: len(topic_origins(store, "target")) >= want or p.poll() is not None,
                 "the replay to move messages")
        time.sleep(rng.uniform(0, 0.05))  # where in a batch the kill lands
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
        moved, left = topic_origins(store, "target"), waiting_origins(store)
        assert len(moved) == len(set(moved)), "a message was replayed twice"
        assert set(moved).isdisjoint(left) and set(moved) | set(left) == everything
    assert topic_origins(store, "target"), "no kill landed after the first batch"
    p = spawn("dlq", "replay", DLQ, "--to", "target")
    _out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    moved = topic_origins(store, "target")
    assert len(moved) == 300 and set(moved) == everything
    assert waiting_origins(store) == []


def _drained(path) -> list[str]:
    """Message ids of the complete records in the file (a torn last line is not one)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    complete = lines[:-1]  # the part after the last newline is empty or torn
    return [json.loads(ln)["messageId"] for ln in complete]


def test_kill_9_during_drain_loses_nothing(store, spawn, tmp_path):
    letters(store, 300)
    all_ids = {str(m.id) for m in store.dlq(DLQ).peek(0)}
    out = str(tmp_path / "drained.ndjson")
    rng = random.Random(11)
    kills, batch = 12, 5
    for _ in range(kills):
        # Killed once it has written a few more records (1 to 30, at random), a moment later.
        want = min(300, len(set(_drained(out))) + rng.randint(1, 30))
        p = spawn("dlq", "drain", DLQ, "--out", out, "--batch", str(batch), "--rate", "100")
        wait_for(lambda: len(set(_drained(out))) >= want or p.poll() is not None,
                 "the drain to write records")
        time.sleep(rng.uniform(0, 0.05))  # where in a batch the kill lands
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
        written = _drained(out)
        left = {str(m.id) for m in store.dlq(DLQ).peek(0)}
        # every message acked (gone from the DLQ) was written first
        assert all_ids - left <= set(written)
        assert len(written) - len(set(written)) <= kills * batch
    assert _drained(out), "no kill landed after the first batch"
    p = spawn("dlq", "drain", DLQ, "--out", out)
    _o, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    with open(out, encoding="utf-8") as f:
        lines = f.read().splitlines()
    records = [json.loads(ln) for ln in lines]  # the torn tails were cut: every line parses
    ids = [r["messageId"] for r in records]
    assert set(ids) == all_ids
    assert len(ids) - len(all_ids) <= kills * batch  # at-least-once: only unacked batches again
    assert {r["payload"] for r in records} == {f"m{i}" for i in range(300)}
    assert store.dlq(DLQ).peek(0) == []
