"""The everyday commands without typer: `--version`, `topics list|stats|subscriptions|cursor`,
`read`, `explain`, `dlq list`, `clock show`, `version`, and `serve`, whose start-up matters
(fastgen.EVERYDAY). typer, its click and
the pydantic its parameters load cost five to ten times what these commands do; here a plain
command line of one of them is parsed by the table fastgen.py makes from the typer tree
(fast_table.py), and the command's own function runs, with the same arguments typer would give
it, inside the same errmap.guarded.

Only what click would accept and read the same way is taken: a known option (long ones also as
--name=value), its value, the arguments; the global options in front (and --store, --traceback
after the command, as app.hoist_globals moves them). Anything else (help, `--`, --explain, an
unknown or malformed option, a missing or extra argument, a number click might read otherwise)
returns None and the typer app runs the line, so what a user sees never differs; only start-up
time does. tests/cli/test_fast_run.py checks the table against the tree and that both paths
give the same output, exit code and store.
"""
from __future__ import annotations

import errno
import os
import re
from importlib import import_module

from pulsarctl.cli import render
from pulsarctl.cli.fast_table import COMMANDS
from pulsarctl.cli.state import State

_ROOT_VALUED = {"--store": "store", "-o": "output", "--output": "output"}
_ROOT_FLAGS = {"--traceback": "traceback", "--version": "version"}
# Tokens the typer path gives a meaning the table does not know, wherever they stand.
_DECLINE = {"-h", "--help", "--", "--explain"}
# Integers as pydantic reads them for typer, and nothing it might read otherwise.
_INT = re.compile(r"0|-?[1-9][0-9]{0,17}")
VERSION = "--version"


class _Context:
    """All a command body sees of click's context: common.state() reads find_root().obj, and
    command_path (the name a remote target's refusal gives, State.local_only)."""

    def __init__(self, obj, command_path: str | None = None):
        self.obj = obj
        self.command_path = command_path

    def find_root(self):
        return self


def _split(arg: str):
    """click splits --name=value, never -n=value."""
    return arg.partition("=") if arg.startswith("--") else (arg, "", "")


def _root(argv: list[str]):
    """(the global options, index of the first word after them), or None."""
    root = {"store": None, "output": "text", "traceback": False, "version": False}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        name, eq, inline = _split(argv[i])
        if name in _ROOT_FLAGS and not eq:
            root[_ROOT_FLAGS[name]] = True
        elif name in _ROOT_VALUED:
            if not eq:
                if i + 1 >= len(argv):
                    return None
                i += 1
                inline = argv[i]
            root[_ROOT_VALUED[name]] = inline
        else:
            return None
        i += 1
    return root, i


def _command(argv: list[str], i: int):
    """(path, table entry, index after the command's name), or None."""
    for words in (2, 1):
        path = " ".join(argv[i:i + words])
        if len(argv) >= i + words and path in COMMANDS:
            return path, COMMANDS[path], i + words
    return None


def _value(kind: str, text: str):
    if kind != "int":
        return text
    if not _INT.fullmatch(text):
        raise ValueError(text)
    return int(text)


def parse(argv: list[str]):
    """VERSION, or (global options, path, table entry, {parameter: value}) for a plain line of
    an everyday command; None for anything else."""
    if any(a in _DECLINE for a in argv):
        return None
    try:
        "".join(argv).encode("utf-8")
    except UnicodeEncodeError:
        return None  # the typer path refuses it in one line (app._check_utf8)
    found = _root(argv)
    if found is None:
        return None
    root, i = found
    if root["version"]:
        return VERSION  # eager: typer prints it whatever follows the global options
    if root["output"] not in render.FORMATS:
        return None
    found = _command(argv, i)
    if found is None:
        return None
    path, (_module, _fn, _ctx, params), i = found
    options = {opt: p for p in params for opt in p[2]}
    given: dict = {}
    positional: list[str] = []
    while i < len(argv):
        name, eq, inline = _split(argv[i])
        if not argv[i].startswith("-") or argv[i] == "-":
            positional.append(argv[i])
        elif name in options:
            pname, kind = options[name][:2]
            if kind == "flag":
                if eq:
                    return None
                value = True
            else:
                if not eq:
                    if i + 1 >= len(argv):
                        return None
                    i += 1
                    inline = argv[i]
                try:
                    value = _value(kind, inline)
                except ValueError:
                    return None
            given[pname] = value  # the last value counts; click orders by the first
        elif name == "--store":  # a global option after the command (app.hoist_globals)
            if not eq:
                if i + 1 >= len(argv):
                    return None
                i += 1
                inline = argv[i]
            root["store"] = inline
        elif name == "--traceback" and not eq:
            root["traceback"] = True
        else:
            return None
        i += 1
    arguments = [p for p in params if p[1] == "argument"]
    if len(positional) > len(arguments):
        return None
    for p, text in zip(arguments, positional):
        given[p[0]] = text
    if any(p[3] and p[0] not in given for p in params):
        return None
    return root, path, COMMANDS[path], given


def _callable(where: str):
    module, _, name = where.partition(":")
    return getattr(import_module(module), name)  # the command's module: only the one that runs


def _values(params, given: dict) -> dict:
    """Every parameter's value as typer hands it to the command: the given ones first, in the
    order given, then the rest, as click processes them; each through its callback."""
    order = [p for name in given for p in params if p[0] == name]
    order += [p for p in params if p[0] not in given]
    values = {}
    for name, _kind, _opts, _required, default, callback in order:
        value = given.get(name, default)
        values[name] = _callable(callback)(value) if callback else value
    return {p[0]: values[p[0]] for p in params}


def _invoke(root: dict, entry, given: dict, path: str = "") -> int:
    """The command's function, with what click's main around it does (app.run's invoke)."""
    module, fn, ctx_name, params = entry
    ctx = _Context(State(root["store"], root["output"], root["traceback"]), path)
    try:
        kwargs = _values(params, given)
        rv = _callable(f"{module}:{fn}")(**{ctx_name: ctx}, **kwargs)
    except KeyboardInterrupt:
        rv = 130  # click: typer.Exit(130)
    except EOFError:
        render.err("")  # click writes a newline, then aborts
        rv = 130
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        # click: the output silenced, exit 1
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        except OSError:
            pass
        raise SystemExit(1) from None
    if rv == 130:
        render.error_line("interrupted")
    return rv


def try_run(argv: list[str]) -> int | None:
    parsed = parse(argv)
    if parsed is None:
        return None
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.errmap import guarded

    if parsed == VERSION:
        return guarded(_version, argv)
    root, path, entry, given = parsed
    return guarded(lambda: _invoke(root, entry, given, f"pulsarctl {path}"), argv)


def _version() -> int:
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import __version__

    render.outln(f"pulsarctl {__version__}")
    return 0
