"""pulsarctl serve: Pulsar's binary protocol over the store, for real Pulsar clients."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsarctl.cli import render
from pulsarctl.cli.common import state
from pulsarctl.errors import InvalidValue

top = typer.Typer()

Bind = Annotated[Optional[str], typer.Option(
    "--bind", help="Address to listen on (default 127.0.0.1; bindAddress in --config).",
    metavar="ADDR", show_default=False)]
Port = Annotated[Optional[int], typer.Option(
    "--port", help="Port of the binary protocol (default 6650; brokerServicePort in --config).",
    metavar="N", show_default=False)]
HttpPort = Annotated[Optional[int], typer.Option(
    "--http-port", help="Port of the admin REST API and HTTP lookup (default 8080; "
    "webServicePort in --config).", metavar="N", show_default=False)]
Config = Annotated[Optional[str], typer.Option(
    "--config", help="Pulsar's standalone.conf / broker.conf (key=value); flags override it.",
    metavar="FILE", show_default=False)]


@top.command("serve", help="Serve the store to real Pulsar clients, in any language, over "
             "Pulsar's binary protocol, in the foreground until SIGTERM or Ctrl-C; "
             "and the admin REST API over HTTP; prints http://HOST:PORT and pulsar://HOST:PORT "
             "on stderr once it accepts connections.")
def serve(ctx: typer.Context, bind: Bind = None, port: Port = None, http_port: HttpPort = None,
          config: Config = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.serve import conf
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.serve.run import run

    values, ignored = conf.read(config) if config else ({}, [])
    if ignored:
        render.err(f"{config}: ignored (not used by serve): {', '.join(ignored)}")
    host = bind or values.get("bindAddress") or "127.0.0.1"
    port = port if port is not None else values.get("brokerServicePort", 6650)
    max_size = values.get("maxMessageSize", 5 * 1024 * 1024)
    web = http_port if http_port is not None else values.get("webServicePort", 8080)
    for flag, n in (("--port", port), ("--http-port", web)):
        if not 0 <= n <= 65535:
            raise InvalidValue(f"{flag} {n} is no TCP port", hint="give 0 to 65535 (0: any free one)")
    run(state(ctx).broker(), host, port, max_size, listening=render.err, log=render.err,
        http_port=web, keep_alive_s=values.get("keepAliveIntervalSeconds", 30))
