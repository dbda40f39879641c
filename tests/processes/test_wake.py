"""Waking waiting consumers: a publish (or a fired timer) in another process wakes a consumer
that waits for messages, instead of leaving it to its next poll.

Nothing here measures real time: the Waiter's own timing runs on a FakeTime, and the consumer
across processes is made to poll never (only a wake can end its wait), so it receives the
message only if the publish woke it."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

from pulsarctl import wake, wake_events
from pulsarctl.client import Client, ConsumerType, InitialPosition

from procs import PATIENCE_S, wait_for


def _notify_seen(store: str) -> None:
    """wake.notify(), repeated until the file's stamp has changed: two notifies within one tick
    of the file system's clock leave the same modification time (a Waiter then sees one)."""
    before = wake.Waiter(store).seen

    def changed():
        wake.notify(store)
        return wake.Waiter(store).seen != before

    wait_for(changed, "the wake file's stamp to change")


def test_waiter_sleeps_its_time_without_a_notify_and_wakes_on_one(tmp_path, fake_time,
                                                                  monkeypatch):
    # The Waiter of a system without inotify (the stamp fallback): only its sleeps run on the
    # FakeTime; an inotify wait sleeps in the kernel (tests/broker/test_wake_events.py).
    monkeypatch.setattr(wake_events, "USE_INOTIFY", False)
    store = str(tmp_path)
    w = wake.Waiter(store)
    t0 = fake_time.now
    assert w.sleep(0.05) is False
    assert fake_time.now - t0 >= 0.05 - 1e-9
    wake.notify(store)  # creates the file
    assert w.sleep(1.0) is True
    # A notify 50 ms into a 2 s sleep ends it within a slice (5 ms), not at its end.
    t0 = fake_time.now
    fake_time.at(t0 + 0.05, lambda: _notify_seen(store))
    assert w.sleep(2.0) is True
    assert 0.05 - 1e-9 <= fake_time.now - t0 <= 0.05 + 2 * wake.SLICE_S


def test_a_publish_in_another_process_wakes_a_waiting_consumer(tmp_path, monkeypatch):
    import pulsarctl.client.client as client_module

    store = str(tmp_path / "store")
    topic = "t"
    Client(store=store).create_producer(topic).send(b"warm-up")  # the wake file exists
    # A waiting consumer polls again after an hour at the earliest: only a wake brings it back
    # before the receive below gives up.
    monkeypatch.setattr(client_module, "_WAIT_MIN", 3600.0)
    monkeypatch.setattr(client_module, "_WAIT_MAX", 3600.0)
    waiting = threading.Event()
    woken = []
    sleep = wake.Waiter.sleep

    def watched_sleep(self, seconds):
        waiting.set()
        woken.append(sleep(self, seconds))
        return woken[-1]

    monkeypatch.setattr(wake.Waiter, "sleep", watched_sleep)

    client = Client(store=store)
    consumer = client.subscribe(topic, "s", consumer_type=ConsumerType.Shared,
                                initial_position=InitialPosition.Latest)
    got = {}

    def take():
        try:
            got["m"] = consumer.receive(timeout_millis=int(PATIENCE_S * 1000))
            got["at"] = time.time()
        except BaseException as exc:  # reported below
            got["error"] = exc

    t = threading.Thread(target=take, daemon=True)
    t.start()
    assert waiting.wait(PATIENCE_S), "the consumer never started waiting"
    r = subprocess.run(
        [sys.executable, "-c",
         "import sys, time; from pulsarctl.client import Client\n"
         "p = Client(store=sys.argv[1]).create_producer(sys.argv[2])\n"
         "p.send(b'x'); print(time.time())", store, topic],
        capture_output=True, text=True, timeout=PATIENCE_S)
    assert r.returncode == 0, r.stderr
    t.join(PATIENCE_S + 5)
    assert "error" not in got, f"the consumer got nothing: {got.get('error')!r}"
    assert got.get("m") is not None and got["m"].data() == b"x"
    # Every wait ended by a wake (not by running out, after which it looks once more).
    assert woken and all(woken), f"the publish did not wake the consumer: {woken}"
    print(f"\nwake-up latency after a publish in another process: "
          f"{(got['at'] - float(r.stdout)) * 1000:.1f} ms")
    consumer.close()
    client.close()
