"""`pulsarctl serve` runs the timers while it holds the daemon lock (pulsarctl/serve/timers.py):
`daemon status` names it; a `daemon run` holding the lock first keeps it, and serve takes over
when that daemon stops; timers fire on time for subscriptions no wire consumer fetches.

Real processes (serve, `daemon run`) where the process is what is tested (its pid in the lock
and in daemon.json, a signal from `daemon stop`, a daemon process beside it); elsewhere serve
runs in the test process (tests/serve_inproc.py). The real pulsar-client; every wait polls up
to a deadline; observations go through reading commands, which never fire a timer themselves."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pulsar
import pytest

from cli_helpers import ok, pjson, rows
from procs import PATIENCE_S, argv, reap, wait_for
from serve_inproc import start_in_process
from serve_procs import stop_all, quiet_logger, start_serve

TOPIC = "timers-t"
RECEIVE_MS = int(PATIENCE_S * 1000)


def _state(store: str) -> dict:
    """daemon.json as `daemon status` reads it (reading it never touches the lock)."""
    from pulsarctl.daemon import read_state

    return read_state(store)


def _status(cli) -> tuple[int, dict | None]:
    r = cli("daemon", "status", "-o", "json")
    return r.exit_code, (json.loads(r.stdout) if r.exit_code == 0 else None)


def _serve_log(s) -> list[str]:
    """What serve printed after its URL, once it has stopped, as lines."""
    return s.proc.stderr.read().splitlines()


@pytest.fixture
def serves(env):
    """Start serves over this test's store; each is stopped and reaped at teardown."""
    started = []

    def start():
        s = start_serve(env)
        started.append(s)
        return s
    yield start
    stop_all(started)


@pytest.fixture
def serves_here(store_path):
    """Start serves in this process over this test's store; each is stopped at teardown."""
    started = []

    def start():
        s = start_in_process(store_path)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


def test_daemon_status_names_serve_as_the_active_daemon(cli, serves, store_path):
    s = serves()

    def active():
        code, st = _status(cli)
        return st if code == 0 and st["pid"] == s.proc.pid and st["lastTick"] else None

    st = wait_for(active, "daemon status to name serve's pid", diag=lambda: _status(cli))
    assert st["lockHolder"] == s.proc.pid and st["standby"] is False

    # Stopped, serve leaves as a stopped daemon does: no daemon.json, status exit 3.
    assert s.stop() == 0
    assert _status(cli) == (3, None)
    assert not Path(store_path, "daemon.json").exists()
    lines = _serve_log(s)
    assert [ln for ln in lines if ln.startswith("timers:")] == [
        f"timers: serve (pid {s.proc.pid}) holds the daemon lock and fires the timers every 1s"]
    log = Path(store_path, "daemon.log").read_text()
    assert f"active pid {s.proc.pid}" in log and f"stopped pid {s.proc.pid}" in log


def test_a_running_daemon_keeps_the_lock_and_serve_takes_over_when_it_stops(cli, env, serves,
                                                                          store_path):
    d = subprocess.Popen(argv("daemon", "run", "--tick", "0.1"), env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _state(store_path).get("pid") == d.pid, "the daemon to tick",
                 diag=lambda: (d.poll(), _state(store_path)))
        s = serves()
        # serve waits as a standby: status names the daemon, and lists serve as waiting.
        code, st = wait_for(lambda: (lambda r: r if r[1] and s.proc.pid in r[1]["standbyPids"]
                                     else None)(_status(cli)),
                            "serve to wait for the lock", diag=lambda: _status(cli))
        assert code == 0 and st["pid"] == d.pid and st["standby"] is True

        # A produce and a consume through serve work meanwhile.
        client = pulsar.Client(s.url, operation_timeout_seconds=30, logger=quiet_logger())
        try:
            client.create_producer(TOPIC).send(b"while the daemon ticks")
            c = client.subscribe(TOPIC, "w", initial_position=pulsar.InitialPosition.Earliest)
            assert c.receive(RECEIVE_MS).data() == b"while the daemon ticks"
        finally:
            client.close()

        d.send_signal(signal.SIGTERM)
        assert d.wait(timeout=PATIENCE_S) == 0

        def serve_active():
            code, st = _status(cli)
            return st if code == 0 and st["pid"] == s.proc.pid and st["lastTick"] else None

        st = wait_for(serve_active, "serve to take over the lock", diag=lambda: _status(cli))
        assert st["standbyPids"] == []
    finally:
        if d.poll() is None:
            d.kill()
        reap([d])
    assert s.stop() == 0
    timer_lines = [ln for ln in _serve_log(s) if ln.startswith("timers:")]
    assert timer_lines == [
        f"timers: another process (pid {d.pid}) holds the daemon lock and runs them; serve "
        "takes over when it stops",
        f"timers: serve (pid {s.proc.pid}) holds the daemon lock and fires the timers every 1s"]


def test_serve_fires_a_nack_timer_of_a_subscription_nobody_fetches(cli, serves_here):
    """A CLI consumer nacked with a 300 ms delay; no wire consumer on that subscription and
    only reading commands run: serve's tick is the only thing that can redeliver it."""
    (mid,) = ok(cli("produce", TOPIC, "-m", "hello")).stdout.split()
    r = ok(cli("receive", TOPIC, "-s", "S", "-t", "Shared", "-p", "Earliest",
               "--nack-delay", "300ms", "-n", "1", "--idle-timeout", "5s", "-o", "ndjson"))
    assert rows(r.stdout)[0]["messageId"] == mid
    ok(cli("nack", TOPIC, "-s", "S", mid))
    assert len(pjson(cli("subscriptions", "pending", TOPIC, "S", "-o", "json"))) == 1

    serves_here()

    def fired():
        if pjson(cli("subscriptions", "pending", TOPIC, "S", "-o", "json")):
            return None
        sub = pjson(cli("topics", "stats", TOPIC, "-o", "json"))["subscriptions"]["S"]
        return sub if sub["replayCount"] == 1 else None

    sub = wait_for(fired, "serve's tick to fire the due nack")
    assert sub["msgBacklog"] == 1 and sub["unackedMessages"] == 0


def test_a_negative_ack_redelivery_reaches_a_wire_consumer(serves_here):
    s = serves_here()
    client = pulsar.Client(s.url, operation_timeout_seconds=30, logger=quiet_logger())
    try:
        consumer = client.subscribe(TOPIC, "n", consumer_type=pulsar.ConsumerType.Shared,
                                    negative_ack_redelivery_delay_ms=100)
        client.create_producer(TOPIC).send(b"again")
        first = consumer.receive(RECEIVE_MS)
        assert first.data() == b"again" and first.redelivery_count() == 0
        consumer.negative_acknowledge(first)
        again = consumer.receive(RECEIVE_MS)
        assert again.data() == b"again" and again.redelivery_count() == 1
        assert str(again.message_id()) == str(first.message_id())
        consumer.acknowledge(again)
    finally:
        client.close()


def test_serve_still_serves_when_the_lock_file_cannot_be_opened(cli, serves_here, store_path):
    """A daemon.lock serve may not open (here: a directory of that name) is one line, and serve
    goes on serving without the timers."""
    ok(cli("produce", TOPIC, "-m", "first"))   # the store exists
    os.mkdir(Path(store_path, "daemon.lock"))
    s = serves_here()
    client = pulsar.Client(s.url, operation_timeout_seconds=30, logger=quiet_logger())
    try:
        client.create_producer(TOPIC).send(b"no timers")
    finally:
        client.close()
    assert s.stop() == 0
    lines = s.log.finished()   # what serve says, in this process
    timer_lines = [ln for ln in lines if ln.startswith("timers:")]
    assert len(timer_lines) == 1 and "cannot use" in timer_lines[0], lines
    assert not any("Traceback" in ln for ln in lines), lines


def test_daemon_stop_stops_serve_when_serve_holds_the_lock(cli, env, serves, store_path):
    """As the README says: `daemon stop` stops the process holding the lock, serve included,
    cleanly (exit 0, the lock and daemon.json let go of)."""
    s = serves()
    wait_for(lambda: _state(store_path).get("pid") == s.proc.pid, "serve to tick")
    r = subprocess.run(argv("daemon", "stop"), env=env, capture_output=True, text=True,
                       timeout=PATIENCE_S)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == f"stopped daemon {s.proc.pid}"
    assert s.proc.wait(timeout=PATIENCE_S) == 0
    assert _status(cli) == (3, None)
