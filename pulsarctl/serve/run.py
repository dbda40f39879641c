"""Running the server in the foreground until SIGTERM or Ctrl-C."""
from __future__ import annotations

import asyncio
import signal

from pulsarctl.errors import PulsarctlError
from pulsarctl.serve import limits
from pulsarctl.serve.listener import Server
from pulsarctl.serve.settings import ServeSettings
from pulsarctl.serve.timers import Timers


def run(broker, settings: ServeSettings, listening, log) -> None:
    """Serve until SIGTERM or SIGINT; listening(url) once connections are accepted, for the
    admin REST API's URLs (http://, then https:// when configured) and then the binary
    protocol's (pulsar://, then pulsar+ssl://)."""
    limits.raise_open_files()
    asyncio.run(main(broker, settings, listening, log))


def _shown(host: str) -> str:
    return host if ":" not in host else f"[{host}]"


def _rest_modules():
    """aiohttp and the REST app: a third of serve's start-up (aiohttp alone loads its client
    and two TLS contexts with the system's CA bundle). Loaded in a thread while the binary
    port already answers (the loop serves its connections meanwhile)."""
    from aiohttp import web  # lazy: only serve loads aiohttp, after the binary port listens
    # lazy: only serve loads the REST app, after the binary port listens
    from pulsarctl.rest.app import SETTINGS, make_app
    # lazy: only serve loads the REST app, after the binary port listens
    from pulsarctl.rest.http_errors import Runner

    return web, SETTINGS, make_app, Runner


async def _start_rest(broker, settings: ServeSettings, server: Server, log):
    """The admin REST API (pulsarctl/rest/) on the web ports, over the same Broker (LMDB
    allows one environment per process; its transactions serialize writers across threads),
    which serve closes itself, last."""
    web, SETTINGS, make_app, Runner = await asyncio.get_running_loop().run_in_executor(
        None, _rest_modules)
    app = make_app(lambda: broker, service_url=server.url, web_url="", cluster=settings.cluster,
                   service_url_tls=server.tls_url or "",
                   authentication=settings.authentication,
                   authorization=settings.authorization, owns_broker=False,
                   worker=server.worker)
    runner = Runner(app, log)
    await runner.setup()
    urls = []
    for port, tls, flag in ((settings.http_port, None, "--http-port"),
                            (settings.https_port, settings.ssl, "webServicePortTls")):
        if port is None or (flag != "--http-port" and tls is None):
            continue
        site = web.TCPSite(runner, settings.host, port, reuse_address=True, ssl_context=tls)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise PulsarctlError(f"cannot listen on {settings.host}:{port}: {exc.strerror}",
                                 hint=f"pick another port with {flag}") from None
        # The port it got (0 picks a free one), for the lookup answers' httpUrl.
        bound = site._server.sockets[0].getsockname()[1]
        url = f"{'https' if tls else 'http'}://{_shown(server.advertised)}:{bound}"
        app[SETTINGS]["web_url_tls" if tls else "web_url"] = url
        urls.append(url)
    return runner, urls


SERVE_DEFAULTS = {"acknowledgmentAtBatchIndexLevelEnabled": True}


async def main(broker, settings: ServeSettings, listening, log,
               stop: asyncio.Event | None = None):
    """What `pulsarctl serve` runs, until stop is set; stop None: until SIGTERM or SIGINT
    (signal handlers, which only the main thread may install). The tests pass their own stop
    to run this same server in a thread of their process (tests/serve_inproc.py)."""
    limits.log_accept_errors_once(asyncio.get_running_loop(), log)
    # A Pulsar 4.x broker acknowledges at batch index level unless its broker.conf says not
    # (ServiceConfiguration's default, which serve's clients see on real Pulsar); the command
    # line's store default stays pulsarctl's own.
    broker.conf_defaults = {**SERVE_DEFAULTS, **settings.dynamic}
    server = Server(broker, settings.host, settings.port, settings.max_message_size, log=log,
                    tls_port=settings.tls_port, ssl=settings.ssl,
                    authentication=settings.authentication, authorization=settings.authorization,
                    advertised=settings.advertised, listeners=settings.listeners,
                    keep_alive_s=settings.keep_alive_s,
                    max_pending_sends=settings.max_pending_sends,
                    entry_cache_bytes=settings.entry_cache_mb * 1024 * 1024)
    try:
        url = await server.start()
    except OSError as exc:
        raise PulsarctlError(f"cannot listen on {settings.host}: {exc.strerror}",
                             hint="pick other ports with --port N (and brokerServicePortTls)") from None
    runner = None
    if settings.http_port is not None:
        try:
            runner, http_urls = await _start_rest(broker, settings, server, log)
        except PulsarctlError:
            await server.stop()
            raise
        for u in http_urls:
            listening(u)
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    if server.tls_url:
        listening(server.tls_url)
    listening(url)
    timers = Timers(server)   # while serve holds the daemon lock
    timers.start()
    try:
        await stop.wait()
    finally:
        # Stop accepting on every port; close the connections, whose consumers and producers
        # leave the store; then REST (its requests in flight end); then the broker.
        server.stop_accepting()
        if runner is not None:
            for site in list(runner.sites):
                await site.stop()
        await timers.stop()
        await server.stop(keep_worker=runner is not None)
        if runner is not None:
            await runner.cleanup()
            server.worker.shutdown(wait=True)
        timers.release()
        broker.close()
