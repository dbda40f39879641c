"""Running the server in the foreground until SIGTERM or Ctrl-C."""
from __future__ import annotations

import asyncio
import signal

from pulsarctl.errors import PulsarctlError
from pulsarctl.serve import limits
from pulsarctl.serve.server import Server


def run(broker, host: str, port: int, max_message_size: int, listening, log,
        http_port: int | None = None, keep_alive_s: int = 30) -> None:
    """Serve until SIGTERM or SIGINT; listening(url) once connections are accepted, for the
    admin REST API's http:// URL (when http_port is given) and then the pulsar:// one.
    keep_alive_s: Pulsar's keepAliveIntervalSeconds (0: no keep-alive checks)."""
    limits.raise_open_files()
    asyncio.run(_main(broker, host, port, max_message_size, listening, log, http_port,
                      keep_alive_s))


async def _start_rest(broker, host, http_port, service_url):
    """The admin REST API (pulsarctl/rest/) on host:http_port, over the same Broker (LMDB
    allows one environment per process; its transactions serialize writers across threads)."""
    from aiohttp import web  # lazy: only serve loads aiohttp
    from pulsarctl.rest.app import SETTINGS, make_app  # lazy: only serve loads the REST app

    shown = host if ":" not in host else f"[{host}]"
    app = make_app(lambda: broker, service_url=service_url, web_url="")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, http_port, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise PulsarctlError(f"cannot listen on {host}:{http_port}: {exc.strerror}",
                             hint="pick another port with --http-port N") from None
    # The port it got (--http-port 0 picks a free one), for the lookup answers' httpUrl.
    bound = site._server.sockets[0].getsockname()[1]
    app[SETTINGS]["web_url"] = f"http://{shown}:{bound}"
    return runner, app[SETTINGS]["web_url"]


async def _main(broker, host, port, max_message_size, listening, log, http_port=None,
                keep_alive_s=30):
    limits.log_accept_errors_once(asyncio.get_running_loop(), log)
    server = Server(broker, host, port, max_message_size, log=log, keep_alive_s=keep_alive_s)
    try:
        url = await server.start()
    except OSError as exc:
        raise PulsarctlError(f"cannot listen on {host}:{port}: {exc.strerror}",
                             hint="pick another port with --port N") from None
    runner = None
    if http_port is not None:
        try:
            runner, http_url = await _start_rest(broker, host, http_port, url)
        except PulsarctlError:
            await server.stop()
            raise
        listening(http_url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    listening(url)
    try:
        await stop.wait()
    finally:
        if runner is not None:
            await runner.cleanup()
        await server.stop()
