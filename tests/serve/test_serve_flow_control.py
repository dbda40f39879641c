"""Flow control on the way in (issue 29 item 3): Pulsar's maxPendingSendRequests. A connection
with that many SENDs awaiting their receipts is not read until half of them went out, so a
producer faster than the store waits in its own socket, not in serve's memory. Driven in this
process (serve_inproc.py) with the raw client; the first publish commit is held on a gate."""
from __future__ import annotations

import threading

from procs import wait_for
from serve_inproc import gate_first, serving
from serve_raw import Raw, T, command, send

TOPIC = "persistent://public/default/flow-in"
WINDOW = 10


def _sends_then_ping(raw: Raw, n: int) -> None:
    """A producer on a new connection sends n messages without waiting, then a PING."""
    raw.handshake()
    raw.producer(TOPIC)
    for i in range(n):
        raw.send(send(1, i, f"m-{i}".encode()))
    raw.send(command(T.PING, "ping"))


def test_a_full_window_of_sends_stops_reading_until_half_of_the_receipts_went_out(tmp_path):
    calls, gate = [], threading.Event()
    with serving(str(tmp_path / "store"), wrap=gate_first("publish_many", calls, gate),
                 max_pending_sends=WINDOW) as it:
        raw = Raw(it.port)
        _sends_then_ping(raw, WINDOW)
        (conn,) = it.connections()
        wait_for(lambda: conn.sends_in_flight == WINDOW, "the window of sends read")
        assert not conn.reads_resumed.is_set()   # the PING behind them is not read
        gate.set()
        receipts_before_pong = 0
        while (f := raw.read())[0].type != T.PONG:
            assert f[0].type == T.SEND_RECEIPT, T.Type.Name(f[0].type)
            receipts_before_pong += 1
        # Reading resumed only once half of the window's receipts had gone out.
        assert receipts_before_pong >= WINDOW // 2
        while receipts_before_pong < WINDOW:
            raw.expect(T.SEND_RECEIPT)
            receipts_before_pong += 1
        assert conn.sends_in_flight == 0 and conn.reads_resumed.is_set()
        raw.close()


def test_below_the_window_the_connection_reads_on_while_sends_commit(tmp_path):
    calls, gate = [], threading.Event()
    with serving(str(tmp_path / "store"), wrap=gate_first("publish_many", calls, gate),
                 max_pending_sends=WINDOW) as it:
        raw = Raw(it.port)
        _sends_then_ping(raw, WINDOW - 1)
        assert raw.read()[0].type == T.PONG   # the commit is still held: no receipt yet
        gate.set()
        for _ in range(WINDOW - 1):
            raw.expect(T.SEND_RECEIPT)
        raw.close()


def test_the_window_is_the_config_files_max_pending_send_requests(tmp_path):
    from pulsarctl.serve import conf
    from pulsarctl.serve.settings import configure

    f = tmp_path / "broker.conf"
    assert configure({}).max_pending_sends == 1000   # Pulsar's default
    f.write_text("maxPendingSendRequests=7\n")
    values, ignored = conf.read(str(f))
    assert "maxPendingSendRequests" not in ignored
    assert configure(values).max_pending_sends == 7


def test_a_window_of_0_never_stops_reading(tmp_path):
    calls, gate = [], threading.Event()
    with serving(str(tmp_path / "store"), wrap=gate_first("publish_many", calls, gate),
                 max_pending_sends=0) as it:
        raw = Raw(it.port)
        _sends_then_ping(raw, 50)
        assert raw.read()[0].type == T.PONG
        gate.set()
        for _ in range(50):
            raw.expect(T.SEND_RECEIPT)
        raw.close()
