"""pulsarctl serve: Pulsar's binary protocol over the store, for real Pulsar clients."""
from __future__ import annotations

from typing import Annotated, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl.cli import render
from pulsarctl.cli.common import state

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
BasicAuthFile = Annotated[Optional[str], typer.Option(
    "--basic-auth-file", help="The users and password hashes of AuthenticationProviderBasic "
    "(htpasswd -m; as Pulsar's -Dpulsar.auth.basic.conf; basicAuthConf in --config).",
    metavar="FILE", show_default=False)]


@top.command("serve", short_help="Serve the store to real Pulsar clients (binary protocol, "
             "admin REST) until SIGTERM or Ctrl-C.",
             help="Serve the store to real Pulsar clients, in any language, over "
             "Pulsar's binary protocol, in the foreground until SIGTERM or Ctrl-C; "
             "and the admin REST API over HTTP; TLS, authentication (TLS certificates, tokens, "
             "basic) and authorization as --config's broker.conf keys say; prints http://HOST:PORT "
             "and pulsar://HOST:PORT on stderr once it accepts connections.")
def serve(ctx: typer.Context, bind: Bind = None, port: Port = None, http_port: HttpPort = None,
          config: Config = None, basic_auth_file: BasicAuthFile = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.serve import conf
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.serve.run import run
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.serve.settings import configure

    values, ignored = conf.read(config) if config else ({}, [])
    settings = configure(values, bind=bind, port=port, http_port=http_port,
                         basic_auth_file=basic_auth_file)
    if ignored:
        render.err(f"{config}: ignored (not used by serve): {', '.join(ignored)}")
    run(state(ctx).broker(), settings, listening=render.err, log=render.err)
