"""The root command, its global options, and the one place errors become exit codes."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsarctl.cli import helpfmt, render
from pulsarctl.cli.common import check_output
from pulsarctl.cli.errmap import guarded
from pulsarctl.cli.state import State

try:  # typer >= 0.29 vendors click
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - older typer
    import click.exceptions as click_exc

HELP = ("Apache Pulsar's messaging model on a local store: pulsar-client and pulsar-admin "
        "commands with no JVM and no server.")

app = typer.Typer(name="pulsarctl", help=HELP, no_args_is_help=True, add_completion=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  pretty_exceptions_enable=False)


@app.callback()
def root(
    ctx: typer.Context,
    store: Annotated[Optional[str], typer.Option(
        "--store", help="Store directory (default: $PULSARCTL_STORE, the config file, then "
        "~/.local/share/pulsarctl/store).", metavar="PATH", show_default=False)] = None,
    output: Annotated[str, typer.Option(
        "-o", "--output", help="Output format: text, json or ndjson.", metavar="FORMAT")] = "text",
    traceback: Annotated[bool, typer.Option(
        "--traceback", help="Show a traceback on errors (for bug reports).")] = False,
):
    ctx.obj = State(store, check_output(output), traceback)


def _register() -> None:
    from pulsarctl.cli import (  # noqa: F401  (each module adds its commands to app)
        client_cmds, topics_cmd, cursor_cmd, tenants_cmd, admin_cmd, perf_cmd, daemon_cmd,
        policies_cmd, dlq_cmd, spark_cmd,
    )


_register()
helpfmt.install()  # help shows metavars, not Python type names


def _click_errors(exc) -> int | None:
    if isinstance(exc, click_exc.NoArgsIsHelpError):
        render.err(exc.ctx.get_help() if exc.ctx else str(exc))
        return 2
    if isinstance(exc, click_exc.UsageError):
        where = f"`{exc.ctx.command_path} --help`" if exc.ctx else "`pulsarctl --help`"
        render.error_line(f"error: {exc.format_message().rstrip('.')}; see {where}")
        return 2
    if isinstance(exc, click_exc.ClickException):
        render.error_line(f"error: {exc.format_message()}")
        return exc.exit_code or 1
    if isinstance(exc, typer.Abort):
        render.error_line("interrupted")
        return 130
    if isinstance(exc, typer.Exit):
        return exc.exit_code
    return None


def run(argv: list[str]) -> int:
    """Run the command line; return the exit code."""
    def invoke():
        rv = app(args=argv, prog_name="pulsarctl", standalone_mode=False)
        if rv == 130:
            # typer turns Ctrl-C into a silent exit 130; say so, in one line.
            render.error_line("interrupted")
        return rv
    return guarded(invoke, argv, _click_errors)
