"""The command tree reduced to what the generators need: commands, their options and
arguments, the fixed values they take and which of them name things in the store.

tree() walks a typer app (or the click command made from one) into Node, Opt and Arg records,
hidden commands left out, in the tree's order. The completion scripts (cli/completion_gen.py)
and the man pages (cli/docgen.py) are both made from it; it is apart from them because it is
the one place that reads click's parameters, while they only write text. Like
completion_gen.py it never imports the root app: the caller passes the tree in.
"""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from enum import Enum

from pulsarctl.cli import helpfmt
from pulsarctl.cli.complete import KINDS as NAME_KINDS
from pulsarctl.cli.render import FORMATS

SHELLS = ("bash", "zsh", "fish")
PROG = "pulsarctl"

# Fixed values the tree only states in help text or in code, keyed by long flag (Pulsar's
# subscription types are fixed; `perf consume -t` does not list them in its help).
_SUB_TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")
_FLAG_VALUES = {"--output": FORMATS, "--subscription-type": _SUB_TYPES}
# Positional arguments with fixed values, keyed by (command path, parameter name).
_ARG_VALUES = {(("completion",), "shell"): SHELLS}
# Value options that name files although typed as plain strings.
_FILE_FLAGS = ("--store", "--files")
# "A|B|C ..." at the start of a help text lists the accepted values.
_HELP_CHOICES = re.compile(r"^([A-Za-z0-9_.-]+(?:\|[A-Za-z0-9_.-]+)+)(?=\s|$)")

# Values named from the store by `pulsarctl __complete KIND` (complete.py): which parameters
# take a topic, a dead letter topic or a subscription (of the command's topic argument).
TOPICS, SUBSCRIPTIONS, DLQS = NAME_KINDS


def _arg_names(p) -> str:
    if p.metavar == "DLQ":
        return DLQS
    if p.metavar == "TOPIC" or p.name in ("topic", "topics"):
        return TOPICS
    return SUBSCRIPTIONS if p.name == "subscription" else ""


def _opt_names(p, long_flags: list[str]) -> str:
    if p.metavar == "TOPIC" or any(f.endswith("-topic") for f in long_flags):
        return TOPICS
    return SUBSCRIPTIONS if "--subscription" in long_flags else ""


# -- the command tree, reduced to what the generators need -------------------------------------
@dataclass
class Opt:
    flags: list[str]
    nvals: int  # values taken after the flag (0 for a flag)
    metavar: str
    help: str
    choices: tuple[str, ...]
    files: bool
    multiple: bool
    required: bool
    default: str | None
    names: str = ""  # topics, subscriptions or dlqs: completed from the store


@dataclass
class Arg:
    name: str
    metavar: str
    help: str
    choices: tuple[str, ...]
    files: bool
    variadic: bool
    required: bool
    names: str = ""


@dataclass
class Node:
    path: tuple[str, ...]  # () for the root
    help: str
    opts: list[Opt] = field(default_factory=list)
    args: list[Arg] = field(default_factory=list)
    subs: list["Node"] = field(default_factory=list)
    is_group: bool = False
    topic_arg: int | None = None  # which argument names the topic (for its subscriptions)
    summary: str = ""  # the line its group's listing shows (helpfmt.summary)
    # Hidden options (the authentication flags): never offered, but a script must know them
    # to read the line, or the value of `--token T` counts as a command or an argument.
    hidden: list[Opt] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " ".join((PROG,) + self.path)

    @property
    def key(self) -> str:
        return " ".join(self.path)

    def walk(self):
        yield self
        for s in self.subs:
            yield from s.walk()

    def value_flags(self) -> list[str]:
        """The options that take a value, hidden ones too (for skipping their values)."""
        return [f for o in self.opts + self.hidden if o.nvals for f in o.flags]

    def all_flags(self) -> list[str]:
        return [f for o in self.opts for f in o.flags]


def _clean(text: str | None) -> str:
    return inspect.cleandoc(text or "").strip()


def _one_line(text: str | None) -> str:
    return " ".join(_clean(text).replace("\b", "").split())


def short_help(text: str | None, explicit: str | None = None) -> str:
    """A command's one-line summary, as its group's --help lists it (helpfmt.summary)."""
    return helpfmt.summary(text, explicit)


def _choice_values(param) -> tuple[str, ...]:
    desc = getattr(param, "type_descriptor", None)
    if desc is not None and desc.is_choice and desc.choices is not None:
        values = tuple(str(c.value) if isinstance(c, Enum) else str(c) for c in desc.choices)
        # Values the scripts could not quote simply are left to the user to type.
        if all(re.fullmatch(r"[\w.,:+@/=-]+", v) for v in values):
            return values
    return ()


def _is_path(param) -> bool:
    desc = getattr(param, "type_descriptor", None)
    return bool(desc is not None and (desc.is_path or desc.is_file))


def _default(param) -> str | None:
    shown = getattr(param, "show_default", None)
    if shown is False:
        return None
    if isinstance(shown, str):
        return shown
    d = param.default
    # Only plain values: anything computed (a callable, a home path) would vary by machine.
    if isinstance(d, bool) or not isinstance(d, (int, float, str, Enum)) or d == "":
        return None
    return str(d.value if isinstance(d, Enum) else d)


def _build(cmd, ctx, path: tuple[str, ...]) -> Node:
    node = Node(path, _clean(cmd.help or cmd.short_help),
                summary=short_help(cmd.help, cmd.short_help))
    help_opt = cmd.get_help_option(ctx)
    for p in cmd.get_params(ctx):
        if getattr(p, "hidden", False):
            if p.param_type_name != "argument":
                node.hidden.append(Opt(list(p.opts) + list(p.secondary_opts),
                                       0 if (p.is_flag or p.count) else max(p.nargs, 1),
                                       p.metavar or helpfmt.metavar(p) or "", "", (), False,
                                       bool(p.multiple), False, None))
            continue
        if p.param_type_name == "argument":
            name = p.name or ""
            choices = _choice_values(p) or _ARG_VALUES.get((path, name), ())
            node.args.append(Arg(name, helpfmt.metavar(p).upper(), _one_line(p.help),
                                 tuple(choices), _is_path(p), p.nargs < 0, bool(p.required),
                                 "" if choices else _arg_names(p)))
            continue
        flags = list(p.opts) + list(p.secondary_opts)
        if p is help_opt:  # its names come from a set: take the context's order
            flags = [n for n in ctx.help_option_names if n in flags]
        nvals = 0 if (p.is_flag or p.count) else max(p.nargs, 1)
        help_text = _one_line(p.help)
        long_flags = [f for f in flags if f.startswith("--")]
        choices: tuple[str, ...] = ()
        if nvals:
            m = _HELP_CHOICES.match(help_text)
            choices = (_choice_values(p)
                       or next((_FLAG_VALUES[f] for f in long_flags if f in _FLAG_VALUES), ())
                       or (tuple(m.group(1).split("|")) if m else ()))
        files = bool(nvals) and (_is_path(p) or any(f in _FILE_FLAGS for f in flags))
        metavar = p.metavar or ("PATH" if files else helpfmt.metavar(p))
        names = "" if (choices or files or not nvals) else _opt_names(p, long_flags)
        node.opts.append(Opt(flags, nvals, metavar, help_text, tuple(choices), files,
                             bool(p.multiple), bool(p.required), _default(p) if nvals else None,
                             names))
    node.topic_arg = next((i for i, a in enumerate(node.args) if a.names == TOPICS), None)
    if node.topic_arg is None:  # subscriptions of what? (dlq replay --subscription: another's)
        for x in node.opts + node.args:
            if x.names == SUBSCRIPTIONS:
                x.names = ""
    commands = getattr(cmd, "commands", None)
    if commands is not None:
        node.is_group = True
        for name, sub in commands.items():
            if sub.hidden:
                continue
            sub_ctx = sub.context_class(sub, parent=ctx, info_name=name,
                                        **(sub.context_settings or {}))
            node.subs.append(_build(sub, sub_ctx, path + (name,)))
    return node


def tree(root) -> Node:
    """The command tree of root (a typer app, or the click command built from one), hidden
    commands and options left out."""
    import typer  # lazy: loaded when the command runs, not when the command tree is built
    import typer.main  # lazy: loaded when the command runs, not when the command tree is built

    if isinstance(root, typer.Typer):
        root = typer.main.get_command(root)
    ctx = root.context_class(root, info_name=PROG, **(root.context_settings or {}))
    return _build(root, ctx, ())
