"""Running the server in the foreground until SIGTERM or Ctrl-C."""
from __future__ import annotations

import asyncio
import signal

from pulsarctl.errors import PulsarctlError
from pulsarctl.serve.server import Server


def run(broker, host: str, port: int, max_message_size: int, listening, log) -> None:
    """Serve until SIGTERM or SIGINT; listening(url) once connections are accepted."""
    asyncio.run(_main(broker, host, port, max_message_size, listening, log))


async def _main(broker, host, port, max_message_size, listening, log):
    server = Server(broker, host, port, max_message_size, log=log)
    try:
        url = await server.start()
    except OSError as exc:
        raise PulsarctlError(f"cannot listen on {host}:{port}: {exc.strerror}",
                             hint="pick another port with --port N") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    listening(url)
    try:
        await stop.wait()
    finally:
        await server.stop()
