"""serve in this process. serving(): a Broker on a temporary store and the listener (Server)
on 127.0.0.1, port 0, running its asyncio loop in a thread; the test talks to it with the raw
client (serve_raw.Raw) and may wrap the Broker's methods to watch or hold what the worker does.
serve_in_process(): the whole of what `pulsarctl serve` runs (run.main: the listener, the admin
REST API, the timers), likewise in a thread, with the attributes of a served process
(serve_procs.Served). No process starts, so a protocol test takes milliseconds."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from procs import PATIENCE_S, wait_for
from pulsarctl.broker import Broker
from pulsarctl.serve import conf, run
from pulsarctl.serve.listener import Server
from pulsarctl.serve.settings import ServeSettings, configure


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


class Served:
    """`pulsarctl serve` in this process: what the command runs (pulsarctl/serve/run.py
    main(): the listener, the admin REST API on the worker they share, the timers under the
    daemon lock, the broker.conf defaults), in a thread with its own asyncio loop, until stop().
    The attributes of serve_procs.Served: url, port, http_url, tls_url, https_url, before (the
    lines printed before the pulsar:// one), log (what serve would print on stderr), proc (its
    poll() is None while it serves), stop() (its exit code, 0)."""

    def __init__(self, thread: threading.Thread, holder: dict, log: "Log"):
        self._thread, self._holder, self.log = thread, holder, log
        urls = holder["urls"]
        self.url = next(u for u in urls if u.startswith("pulsar://"))
        self.port = int(self.url.rsplit(":", 1)[1])
        first = lambda scheme: next((u for u in urls if u.startswith(scheme)), None)  # noqa: E731
        self.http_url = first("http://")
        self.tls_url = first("pulsar+ssl://")
        self.https_url = first("https://")
        self.before = "".join(f"{line}\n" for line in log.lines[:log.lines.index(self.url)])
        self.proc = self   # poll(), as a process's

    def poll(self) -> int | None:
        """None while it serves; once ended, its exit code (0: stopped cleanly, 1: failed)."""
        if self._thread.is_alive():
            return None
        return 1 if "error" in self._holder else 0

    def stop(self) -> int:
        """Stop it, as SIGTERM does serve (stop accepting, close the connections, REST, the
        timers and the broker), and wait (bounded) for the end; its exit code. A server that
        failed raises what it failed with."""
        if self._thread.is_alive():
            self._holder["loop"].call_soon_threadsafe(self._holder["stop"].set)
            self._thread.join(PATIENCE_S)
            assert not self._thread.is_alive(), "the in-process serve did not stop"
        if "error" in self._holder:
            raise self._holder["error"]
        return 0


class Log:
    """What serve prints on stderr, as lines: its own lines (the log and listening callbacks)
    and, as Python's last-resort handler would print them, the warnings and errors logged by
    its thread (asyncio's "Task exception was never retrieved", aiohttp's, with tracebacks)."""

    def __init__(self):
        self.lines: list[str] = []
        self._ended = threading.Event()

    def __call__(self, line: str) -> None:
        self.lines.extend(str(line).split("\n"))

    def count(self, text: str) -> int:
        return sum(text in line for line in list(self.lines))

    def wait(self, text: str):
        return wait_for(lambda: self.count(text), f"{text!r} on serve's stderr",
                        diag=lambda: self.lines[-20:])

    def finished(self, timeout=PATIENCE_S) -> list[str]:
        """Every line, once serve ended (stop() first)."""
        assert self._ended.wait(timeout), "serve did not end"
        return self.lines


class _ThreadRecords(logging.Handler):
    """Log records of one thread, formatted as logging's last resort formats them."""

    def __init__(self, ident: int, log: Log):
        super().__init__(logging.WARNING)
        self.ident, self.log = ident, log

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.ident:
            self.log(self.format(record))


@contextlib.contextmanager
def serve_in_process(store_path: str, settings: ServeSettings | None = None):
    """A Served over the store at store_path (made if missing), with settings (default: ports
    0 on 127.0.0.1, the admin REST API on); stopped, and its thread ended, after the block."""
    served = start_in_process(store_path, settings)
    try:
        yield served
    finally:
        served.stop()


def start_in_process(store_path: str, settings: ServeSettings | None = None) -> Served:
    """A Served over the store at store_path, started (see serve_in_process); the caller
    stops it."""
    settings = settings or ServeSettings(port=0, http_port=0)
    log = Log()
    holder: dict = {"urls": []}
    started = threading.Event()

    def listening(url: str) -> None:
        log(url)
        holder["urls"].append(url)
        if url.startswith("pulsar://"):
            started.set()

    async def main() -> None:
        holder["loop"], holder["stop"] = asyncio.get_running_loop(), asyncio.Event()
        broker = Broker(store_path)
        try:
            await run.main(broker, settings, listening, log, stop=holder["stop"])
        finally:
            # main closes it once it served; a serve that failed to start leaves that to its
            # process's end, which here never comes
            broker.close()

    def thread_main() -> None:
        records = _ThreadRecords(threading.get_ident(), log)
        logging.getLogger().addHandler(records)
        try:
            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001  (stop() raises it in the test's thread)
            holder["error"] = exc
            log(f"serve failed: {type(exc).__name__}: {exc}")
        finally:
            logging.getLogger().removeHandler(records)
            log._ended.set()
            started.set()

    thread = threading.Thread(target=thread_main, name="serve-in-process", daemon=True)
    thread.start()
    assert started.wait(PATIENCE_S), f"the in-process serve did not start: {log.lines}"
    if "error" in holder:
        thread.join(PATIENCE_S)
        raise holder["error"]
    return Served(thread, holder, log)


def configured(conf_path, **flags) -> ServeSettings:
    """The ServeSettings `pulsarctl serve --port 0 --http-port 0 --config conf_path FLAGS`
    runs with: the file read and checked by the code the command uses (serve/conf.py,
    serve/settings.py). What the command prints about keys it ignores is the process's."""
    values, _ = conf.read(str(conf_path))
    return configure(values, **{"port": 0, "http_port": 0, **flags})
