"""The root command and its global options: joins the command modules' Typer groups and
top-level commands (_join), moves global options written after a subcommand in front of it
(hoist_globals), and run() runs a command line through errmap.guarded, the one place errors
become exit codes (click's usage errors mapped first by _click_errors)."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsarctl.cli import declare, helpfmt, render
from pulsarctl.cli.common import check_output
from pulsarctl.cli.errmap import guarded
from pulsarctl.cli.state import State
from pulsarctl.errors import UsageError

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
    explain: Annotated[bool, typer.Option(
        "--explain", help="After the command, say on stderr what it changed, one line per "
        "message event, in Pulsar's words (from the message history).")] = False,
    version: Annotated[bool, typer.Option(
        "--version", help="Print the version and exit.", is_eager=True,
        callback=lambda value: _print_version(value))] = False,
):
    ctx.obj = State(store, check_output(output), traceback)
    if explain:
        # lazy: the history module is only needed with --explain
        from pulsarctl.broker import history

        history.watch()


def _print_version(value: bool) -> None:
    if value:
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl import __version__

        render.outln(f"pulsarctl {__version__}")
        raise typer.Exit(0)


def _join() -> None:
    """Join the command modules' groups and top-level commands onto the root. Each module owns
    what it defines (no module imports this one to register itself); the order here is the
    order of `pulsarctl --help`. cursor_cmd, cursor_view_cmd and policies_cmd add commands to
    the topics and namespaces groups, so they are imported here too, after the modules that own
    those groups."""
    from pulsarctl.cli import (  # noqa: F401  (cursor_cmd, cursor_view_cmd, policies_cmd)
        client_cmds, topics_cmd, cursor_cmd, cursor_view_cmd, tenants_cmd, admin_cmd, perf_cmd,
        daemon_cmd, policies_cmd, dlq_cmd, spark_cmd, serve_cmd, tokens_cmd, explain_cmd, top_cmd,
        lesson_cmd,
    )

    app.registered_commands.extend(client_cmds.top.registered_commands)
    app.add_typer(topics_cmd.topics, name="topics")
    app.add_typer(tenants_cmd.tenants, name="tenants")
    app.add_typer(tenants_cmd.namespaces, name="namespaces")
    app.add_typer(admin_cmd.brokers, name="brokers")
    app.add_typer(admin_cmd.clock, name="clock")
    app.add_typer(admin_cmd.subscriptions, name="subscriptions")
    app.add_typer(admin_cmd.schemas, name="schemas")
    app.add_typer(tokens_cmd.tokens, name="tokens")
    app.registered_commands.extend(admin_cmd.top.registered_commands)  # version, doctor, completion
    app.add_typer(perf_cmd.perf, name="perf")
    app.add_typer(daemon_cmd.daemon, name="daemon")
    app.registered_commands.extend(serve_cmd.top.registered_commands)  # serve
    app.registered_commands.extend(top_cmd.top.registered_commands)  # top
    app.add_typer(dlq_cmd.dlq, name="dlq")
    app.registered_commands.extend(explain_cmd.top.registered_commands)  # explain
    app.add_typer(spark_cmd.spark_app, name="spark")
    app.add_typer(lesson_cmd.lesson, name="lesson")


declare.realize()  # what the command modules declared becomes typer's own (declare.py)
_join()
helpfmt.install()  # help shows metavars, not Python type names


# The global options are accepted after the subcommand too (`pulsarctl topics list NS --store
# P`): they are moved in front of it before click parses, unless the command has an option of
# that name itself (most commands have their own -o, which wins for that command).
_GLOBAL_VALUED = ("--store", "-o", "--output")
_GLOBAL_FLAGS = ("--traceback", "--explain")
_COMMAND = []


def command():
    """The click command tree of the app, built once."""
    if not _COMMAND:
        _COMMAND.append(typer.main.get_command(app))
    return _COMMAND[0]


def hoist_globals(argv: list[str], root=None) -> list[str]:
    """argv with global options found after the subcommand moved in front of it."""
    root = root or command()
    i = 0
    while i < len(argv) and argv[i].startswith("-"):  # global options already in front
        i += 1 if argv[i] in _GLOBAL_FLAGS or "=" in argv[i] else 2
    cmd = root
    while i < len(argv) and argv[i] in getattr(cmd, "commands", {}):
        cmd = cmd.commands[argv[i]]
        i += 1
    if cmd is root:
        return argv
    valued = {o for p in cmd.params if not getattr(p, "is_flag", True) and not getattr(p, "count", False)
              for o in getattr(p, "opts", ())}
    own = {o for p in cmd.params for o in getattr(p, "opts", ())}
    front, rest = [], []
    j = i
    while j < len(argv):
        a = argv[j]
        if a == "--":
            rest.extend(argv[j:])
            break
        name = a.split("=", 1)[0] if a.startswith("--") else a
        if name in own:
            rest.append(a)
            if name in valued and "=" not in a and j + 1 < len(argv):
                rest.append(argv[j + 1])
                j += 1
        elif name in _GLOBAL_FLAGS:
            front.append(a)
        elif name in _GLOBAL_VALUED:
            front.append(a)
            if "=" not in a and j + 1 < len(argv):
                front.append(argv[j + 1])
                j += 1
        else:
            rest.append(a)
        j += 1
    if not front:
        return argv
    # In front of the first subcommand name: after the root's own options.
    first = argv.index(next(a for a in argv[:i] if not a.startswith("-") and a in root.commands)) \
        if any(a in root.commands for a in argv[:i]) else i
    return argv[:first] + front + argv[first:i] + rest


def _click_errors(exc) -> int | None:
    if isinstance(exc, click_exc.NoArgsIsHelpError):
        # A command or group run without arguments shows its help once, on stdout, and that
        # is not an error. (typer's rich help has already printed it while the exception was
        # made; a plain formatter returns it as the message.)
        text = exc.format_message()
        if text.strip():
            render.outln(text.rstrip("\n"))
        return 0
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


def _check_utf8(argv: list[str]) -> None:
    """Arguments are text: bytes that are not UTF-8 (Python keeps them as lone surrogates)
    would fail deep inside a command, so they are refused up front, before anything is
    written."""
    for i, arg in enumerate(argv):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise UsageError(f"argument {i + 1} ({shown!r}) is not valid UTF-8",
                             hint="pass raw bytes in a file (-f FILE) or on standard input "
                                  "(--stdin)") from None


def run(argv: list[str]) -> int:
    """Run the command line; return the exit code."""
    def invoke():
        _check_utf8(argv)
        rv = command()(args=hoist_globals(argv), prog_name="pulsarctl", standalone_mode=False)
        if rv == 130:
            # typer turns Ctrl-C into a silent exit 130; say so, in one line.
            render.error_line("interrupted")
        return rv
    code = guarded(invoke, argv, _click_errors)
    if "--explain" in argv:
        _explained()
    return code


def _explained() -> None:
    """--explain: what the command's committed transactions changed, one line each on stderr
    (after the command's own output; a command that failed changed nothing it says)."""
    # lazy: the history module and the phrases are only needed with --explain
    from pulsarctl.broker import history
    from pulsarctl.cli.explain_cmd import explain_lines  # lazy: as above

    for line in explain_lines(history.watched()):
        render.err(render.safe(line))
