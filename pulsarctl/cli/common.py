"""Shared pieces of the command modules: global state, option types, value parsers."""
from __future__ import annotations

from typing import Annotated, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl.cli import render
from pulsarctl.cli.state import State
from pulsarctl.errors import InvalidValue


def state(ctx: typer.Context) -> State:
    root = ctx.find_root()
    if root.obj is None:
        root.obj = State()
    return root.obj


def fmt(ctx: typer.Context, output: str | None) -> str:
    value = output or state(ctx).output
    return check_output(value)


def check_output(value: str) -> str:
    if value not in render.FORMATS:
        raise InvalidValue(f"unknown output format {value!r}", hint="use text, json or ndjson")
    return value


def _output_option(value: str | None) -> str | None:
    # Checked while the command line is parsed, before the command body runs: a bad -o must
    # never leave a tenant created or a message sent (every command's -o is this option).
    return None if value is None else check_output(value)


Output = Annotated[Optional[str], typer.Option(
    "-o", "--output", help="Output format: text, json or ndjson.", metavar="FORMAT",
    callback=_output_option)]
Topic = Annotated[str, typer.Argument(help="Topic name: t, tenant/ns/t or persistent://tenant/ns/t.",
                                      show_default=False)]
Sub = Annotated[str, typer.Option("-s", "--subscription", help="Subscription name.",
                                  show_default=False)]
Force = Annotated[bool, typer.Option("-f", "--force", help="Do it even if it is not empty or in use.")]


def positive(value: int, what: str, allow_zero: bool = True) -> int:
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidValue(f"{what} must be {'zero or more' if allow_zero else 'positive'}, "
                           f"not {value}")
    return value


def done(ctx: typer.Context, output: str | None, doc: dict, line: str) -> None:
    """What a changing command reports: one line on stderr for people, the document for
    json/ndjson on stdout."""
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.err(render.safe(line))
    else:
        render.data(doc, out)
