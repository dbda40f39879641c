"""serve and its admin REST API share one worker thread over the Broker (issue 29 item 5): every
transaction of either runs on the listener's worker, none on a thread of REST's own. In this
process: the listener of serve_inproc.py, and REST started as `pulsarctl serve` starts it."""
from __future__ import annotations

import asyncio
import threading

import requests

from procs import PATIENCE_S
from serve_inproc import serving
from serve_raw import Raw
from pulsarctl.serve.run import _start_rest
from pulsarctl.serve.settings import ServeSettings


def _recording(seen: list):
    def wrap(broker):
        real_read, real_write = broker._read, broker._write

        def read(*a, **k):
            seen.append(threading.current_thread().name)
            return real_read(*a, **k)

        def write(*a, **k):
            seen.append(threading.current_thread().name)
            return real_write(*a, **k)
        broker._read, broker._write = read, write
    return wrap


def test_rest_and_the_binary_protocol_run_on_the_same_worker(tmp_path):
    seen: list[str] = []
    with serving(str(tmp_path / "store"), wrap=_recording(seen)) as it:
        settings = ServeSettings(http_port=0)
        runner, urls = asyncio.run_coroutine_threadsafe(
            _start_rest(it.broker, settings, it.server, it.log.append), it.loop).result(PATIENCE_S)
        try:
            r = requests.put(f"{urls[0]}/admin/v2/persistent/public/default/one-worker",
                             timeout=PATIENCE_S)
            assert r.status_code in (200, 204), r.text
            r = requests.get(f"{urls[0]}/admin/v2/persistent/public/default", timeout=PATIENCE_S)
            assert "persistent://public/default/one-worker" in r.json()
            raw = Raw(it.port)
            raw.handshake()
            raw.producer("persistent://public/default/one-worker")
            raw.close()
        finally:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), it.loop).result(PATIENCE_S)
        threads = set(seen)
        assert len(threads) == 1 and threads.pop().startswith("broker"), seen
