"""serve in this process: a Broker on a temporary store and the listener (Server) on
127.0.0.1, port 0, running its asyncio loop in a thread; the test talks to it with the raw
client (serve_raw.Raw) and may wrap the Broker's methods to watch or hold what the worker does.
No process starts, so a protocol test takes milliseconds, and it can look inside."""
from __future__ import annotations

import asyncio
import contextlib
import threading

from procs import PATIENCE_S
from pulsarctl.broker import Broker
from pulsarctl.serve.listener import Server


class InProcess:
    def __init__(self, broker: Broker, server: Server, loop: asyncio.AbstractEventLoop):
        self.broker, self.server, self.loop = broker, server, loop
        self.log: list[str] = []

    @property
    def port(self) -> int:
        return self.server.port

    def connections(self) -> list:
        """The listener's open connections (read from the test's thread: a snapshot)."""
        return list(self.server._connections)


@contextlib.contextmanager
def serving(store_path: str, wrap=None, **server_kwargs):
    """An InProcess server over a new store. wrap(broker): called before the server starts,
    to replace Broker methods the test watches (the server binds them at start).
    server_kwargs: the listener's settings (Server's keyword arguments)."""
    broker = Broker(store_path)
    if wrap is not None:
        wrap(broker)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict = {}

    def run():
        asyncio.set_event_loop(loop)
        log: list[str] = []
        server = Server(broker, "127.0.0.1", 0, log=log.append,
                        **{"keep_alive_s": 0, **server_kwargs})
        loop.run_until_complete(server.start())
        holder["it"] = InProcess(broker, server, loop)
        holder["it"].log = log
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, name="serve-inproc", daemon=True)
    thread.start()
    assert started.wait(PATIENCE_S), "the in-process server did not start"
    try:
        yield holder["it"]
    finally:
        fut = asyncio.run_coroutine_threadsafe(_shutdown(holder["it"].server), loop)
        fut.result(PATIENCE_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(PATIENCE_S)
        loop.close()
        broker.close()


async def _shutdown(server: Server) -> None:
    """server.stop(), then the tasks it cancelled finish cancelling (none is left pending when
    the loop closes)."""
    await server.stop()
    rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in rest:
        t.cancel()
    await asyncio.gather(*rest, return_exceptions=True)


def gate_first(method: str, calls: list, gate):
    """A wrap for serving(): the Broker's method (publish_many, ack_many) notes the size of each
    call in calls, and its first call waits in the worker until the test sets gate (a
    threading.Event): what the server does meanwhile is seen, not timed."""
    def wrap(broker):
        real = getattr(broker, method)

        def held(jobs):
            calls.append(len(jobs))
            if len(calls) == 1:
                assert gate.wait(PATIENCE_S), "the test never opened the gate"
            return real(jobs)
        setattr(broker, method, held)
    return wrap
