"""Writes pulsarctl/cli/fast_table.py, the table fast_run.py parses the everyday commands by,
from the typer command tree: `python -m pulsarctl.cli.fastgen` (`--check`: exit 1 if the
committed table differs). tests/cli/test_fast_run.py fails when the table is stale.

Only the commands in EVERYDAY are in the table, and only while every parameter is of a kind
fast_run.py reads exactly as click does (a text, integer or on/off option, a one-value
argument, a callback of the value alone); anything else stops the generator with a message
rather than let the two paths differ.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import os
import sys
import textwrap

from pulsarctl.cli import render

# The commands people run all day, one-shot and read-only or nearly (issue 27, item 11);
# `produce` has its own fast path (fast.py).
EVERYDAY = (
    "version",
    "read",
    "explain",
    "topics list",
    "topics stats",
    "topics subscriptions",
    "topics cursor",
    "dlq list",
    "clock show",
    # not one-shot, but started over and over (tests, scripts); what typer costs delays the
    # moment it accepts connections (issue 29, item 6)
    "serve",
)

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fast_table.py")

# What fast_run.py does in place of app.py: the root's options (fast_run._root), moving global
# options written after the command (app.hoist_globals), and the run around the command
# (app.run, _check_utf8, _click_errors). The table carries a fingerprint of their source, so a
# change to them makes it stale until fast_run.py is checked against it and the table
# regenerated.
MIRRORED = ("root", "hoist_globals", "run", "_check_utf8", "_click_errors")
# The root's options as fast_run.py reads them, (click name, option names); -h/--help is
# click's own (fast_run.py leaves every line with it to typer).
ROOT_OPTIONS = {("store", ("--store",)), ("output", ("-o", "--output")),
                ("traceback", ("--traceback",)), ("explain", ("--explain",)),
                ("version", ("--version",))}
# The root's target options (a remote Pulsar): fast_run.py does not know them, so a line that
# gives one goes to typer (a target chosen by the environment or the current context is the
# command body's to see, on either path: State.remote).
ROOT_OPTIONS |= {("context", ("--context",)), ("service_url", ("--service-url",)),
                 ("admin_url", ("--admin-url",)), ("auth_plugin", ("--auth-plugin",)),
                 ("auth_params", ("--auth-params",)), ("token", ("--token",)),
                 ("tls_trust_certs_file", ("--tls-trust-certs-file",)),
                 ("tls_allow_insecure", ("--tls-allow-insecure",))}


# The generator's refusals are RuntimeError: a message for the maintainer, never for users.
Unsupported = RuntimeError


def _where(fn) -> str:
    """module:name, by which fast_run.py finds fn again (so fn must be that module's name)."""
    if getattr(sys.modules.get(fn.__module__), fn.__qualname__, None) is not fn:
        raise Unsupported(f"{fn.__qualname__} is not a name of its module {fn.__module__}")
    return f"{fn.__module__}:{fn.__qualname__}"


def _original(fn):
    return inspect.unwrap(fn)


def _kind(p) -> str:
    annotation = p.type_descriptor.annotation
    if type(p).__name__ == "TyperArgument":
        if p.nargs != 1 or annotation is not str:
            raise Unsupported(f"argument {p.name}: only one text value")
        return "argument"
    if p.multiple or p.nargs != 1 or getattr(p, "count", False) or p.secondary_opts:
        raise Unsupported(f"option {p.name}: repeated, counted, several values or --no- form")
    if p.is_flag:
        if annotation is not bool or p.default is not False:
            raise Unsupported(f"option {p.name}: a flag that is not off by default")
        return "flag"
    if annotation is str:
        return "str"
    if annotation is int:
        return "int"
    raise Unsupported(f"option {p.name}: of type {annotation!r}")


def _callback(p) -> str | None:
    if p.callback is None:
        return None
    fn = _original(p.callback)
    if list(inspect.signature(fn).parameters) != ["value"]:
        raise Unsupported(f"option {p.name}: a callback that takes more than the value")
    return _where(fn)


def _body(fn) -> list[ast.stmt]:
    """The statements of fn's body (not its decorators or signature)."""
    return ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0].body


def _ctx_uses(fn, ctx: str) -> list[str]:
    """How the body uses its context beyond handing it on (fast_run.py's context has only
    find_root() and obj, which is all common.state() reads)."""
    nodes = [n for stmt in _body(fn) for n in ast.walk(stmt)]
    handed_on = {id(a) for n in nodes if isinstance(n, ast.Call) for a in n.args}
    return [f"line {n.lineno}" for n in nodes
            if isinstance(n, ast.Name) and n.id == ctx and id(n) not in handed_on]


def _typer_uses(fn) -> list[str]:
    """typer's exceptions raised by the body would be turned into exit codes by click."""
    return [f"line {n.lineno}: typer.{n.attr}" for stmt in _body(fn) for n in ast.walk(stmt)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "typer"]


def entry(cmd) -> tuple:
    """(module, function, context parameter, params) of one click command."""
    if cmd.context_settings or cmd.no_args_is_help or cmd.allow_extra_args \
            or cmd.allow_interspersed_args is False:
        raise Unsupported("context settings of its own")
    fn = _original(cmd.callback)
    names = [p.name for p in cmd.params]
    ctx = [n for n in inspect.signature(fn).parameters if n not in names]
    if len(ctx) != 1:
        raise Unsupported(f"parameters typer does not show: {ctx}")
    for bad in (_ctx_uses(fn, ctx[0]), _typer_uses(fn)):
        if bad:
            raise Unsupported(f"the body uses its context or typer itself: {bad}")
    params = []
    for p in cmd.params:
        if p.envvar or p.is_eager or not p.expose_value or p.hidden:
            raise Unsupported(f"{p.name}: an environment variable, eager, hidden or unexposed")
        kind = _kind(p)
        default = None if kind == "argument" and p.required else p.default
        if not isinstance(default, (type(None), str, int)):
            raise Unsupported(f"{p.name}: default {default!r}")
        params.append((p.name, kind, tuple(p.opts) if kind != "argument" else (),
                       bool(p.required), default, _callback(p)))
    module, name = _where(fn).split(":")
    return module, name, ctx[0], tuple(params)


def mirrored() -> str:
    """A fingerprint of the app.py code fast_run.py stands in for (MIRRORED), after checking
    that the root has the options fast_run.py knows, none read from the environment."""
    # lazy: the generator reads the root command's code; the fast path only its output
    from pulsarctl.cli import app

    root = app.command()
    options = {(p.name, tuple(p.opts)) for p in root.params}
    if options != ROOT_OPTIONS or any(p.envvar for p in root.params):
        raise Unsupported(f"the root's options changed ({sorted(options ^ ROOT_OPTIONS)}): "
                          f"teach fast_run._root, then ROOT_OPTIONS")
    text = "".join(inspect.getsource(getattr(app, name)) for name in MIRRORED)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def table(root=None) -> dict:
    """{command path: entry} for EVERYDAY, from the typer tree."""
    if root is None:
        # lazy: the generator walks the root command; the fast path only reads its output
        from pulsarctl.cli.app import command

        root = command()
    out = {}
    for path in EVERYDAY:
        cmd = root
        for name in path.split():
            cmd = cmd.commands[name]
        try:
            out[path] = entry(cmd)
        except Unsupported as exc:
            raise Unsupported(f"`{path}` cannot take the fast path: {exc} (teach fast_run.py "
                              f"or take it out of fastgen.EVERYDAY)") from None
    return out


def source(root=None) -> str:
    lines = ['"""The everyday commands\' parameters, as the typer tree has them: generated by',
             '`python -m pulsarctl.cli.fastgen` from the tree; do not edit. fast_run.py reads',
             "it; a parameter is (name, kind, option names, required, default, callback).",
             '"""', "",
             "# app.py's root, hoist_globals, run, _check_utf8 and _click_errors, which",
             "# fast_run.py stands in for: when they change, check fast_run.py, then regenerate.",
             f"MIRRORS = {mirrored()!r}", "", "COMMANDS = {"]
    for path, (module, fn, ctx, params) in table(root).items():
        lines.append(f"    {path!r}: ({module!r}, {fn!r}, {ctx!r}, (")
        lines += [f"        {p!r}," for p in params]
        lines.append("    )),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--check"]):
        render.err("usage: python -m pulsarctl.cli.fastgen [--check]")
        return 2
    text = source()
    try:
        with open(PATH, encoding="utf-8") as f:
            current = f.read()
    except FileNotFoundError:
        current = None
    if argv == ["--check"]:
        if current != text:
            render.err("stale: pulsarctl/cli/fast_table.py; regenerate with "
                       "`python -m pulsarctl.cli.fastgen`")
            return 1
        return 0
    with open(PATH, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    render.err("wrote pulsarctl/cli/fast_table.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
