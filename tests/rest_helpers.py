"""A real admin REST server (pulsarctl.rest.make_app) on 127.0.0.1 and a free port, in a thread
of the test process with its own event loop, over a store of the test's tmp_path."""
from __future__ import annotations

import asyncio
import socket
import threading

from aiohttp import web

from pulsarctl.broker import Broker
from pulsarctl.rest import make_app


class RestServer:
    def __init__(self, store_path: str):
        self.store_path = store_path
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runner = None

    def start(self) -> "RestServer":
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)
        return self

    async def _start(self):
        app = make_app(lambda: Broker(self.store_path), service_url="pulsar://127.0.0.1:6650",
                       web_url=self.url)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.SockSite(self.runner, self.sock).start()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()
