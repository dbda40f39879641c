"""How parameters are named in --help: no Python type names.

typer writes `<bool>` after every flag, `<list[str]>` after list arguments and `<str>`/`<int>`
after valued options. The convention here, for every command at once:

- a flag (or a counter) shows nothing after its names;
- a valued option shows its declared metavar (PATH, FORMAT, DUR...), else a word for its type:
  TEXT, INTEGER, FLOAT, PATH, or its choices as a|b|c;
- an argument shows its name in capitals (its metavar if it declares one), `...` when it takes
  several, in the usage line as in the table: `Usage: pulsarctl consume [OPTIONS] TOPICS...`.

install() applies it to typer's parameter classes, so every command built from them, now or
later, follows it; the man pages and completion scripts (docgen.py) take their metavars from
metavar() too. Error messages keep naming parameters as before.

A command's line in its group's listing (`pulsarctl --help`) is its summary(): the short_help
its decorator gives, else the first sentence of its help, cut before its first colon or
semicolon when longer than SUMMARY_MAX. Its own --help keeps the whole text.
"""
from __future__ import annotations

import inspect
import re
from enum import Enum

TYPE_NAMES = {str: "TEXT", int: "INTEGER", float: "FLOAT", bool: "BOOLEAN"}

# A summary fits two lines of the listing's help column on an 80-column terminal.
SUMMARY_MAX = 100
_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)[.?]\s")
_CLAUSE_END = re.compile(r"[:;]\s")


def summary(help_text: str | None, explicit: str | None = None) -> str:
    """A command's one-line summary (see the module's text)."""
    if explicit:
        return " ".join(inspect.cleandoc(explicit).split())
    text = inspect.cleandoc(help_text or "").replace("\b", "").strip()
    first = " ".join(re.split(r"\n\s*\n", text)[0].split())
    m = _SENTENCE_END.search(first)
    first = first[:m.start() + 1] if m else first
    if len(first) > SUMMARY_MAX:
        for c in _CLAUSE_END.finditer(first):
            head = first[:c.start()]
            if head.count("(") == head.count(")"):
                return head + "."
    return first


def _annotation(desc):
    # lazy: loaded when the command runs, not when the command tree is built
    from typing import get_args

    ann = desc.annotation
    if desc.is_list or desc.is_tuple:
        args = [a for a in get_args(ann) if a is not Ellipsis]
        ann = args[0] if args else str
    return ann


def metavar(param) -> str | None:
    """The word shown after a valued option (None for a flag), or an argument's name."""
    if param.param_type_name == "argument":
        return param.metavar or (param.name or "").upper()
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    if param.metavar:
        return param.metavar
    desc = getattr(param, "type_descriptor", None)
    if desc is None:
        return "TEXT"
    if desc.is_choice and desc.choices:
        return "|".join(str(c.value if isinstance(c, Enum) else c) for c in desc.choices)
    if desc.is_path or desc.is_file:
        return "PATH"
    if desc.is_datetime:
        return "DATETIME"
    ann = _annotation(desc)
    name = TYPE_NAMES.get(ann)
    if name is None:
        name = getattr(ann, "__name__", "value").upper()
    return name


def _option_type(self, ctx=None):
    """TyperOption.display_type_rich: what follows the option's names in help."""
    word = metavar(self)
    if word is not None and self.nargs > 1:
        word = " ".join([word] * self.nargs)
    return word


def _argument_type(self, ctx=None):
    """TyperArgument.display_type_rich: the name column says it all."""
    return None


def _argument_name(self) -> str:
    return metavar(self)


def _argument_usage(self) -> str:
    """The usage line: TOPIC, [NS], TOPICS... (click's own convention, not typer's {topic})."""
    name = metavar(self)
    if not self.required and not name.startswith("["):
        name = f"[{name}]"
    return name + ("..." if self.nargs != 1 and not self.metavar else "")


def _argument_error_hint(self) -> str:
    """Errors keep saying 'topic' (or the declared metavar), as before."""
    return f"'{self.metavar or self.name}'"


def _get_short_help(self) -> str:
    return summary(self.help, self.__dict__.get("_explicit_short_help"))


def _set_short_help(self, value) -> None:
    self.__dict__["_explicit_short_help"] = value


def install() -> None:
    """Apply the convention to typer's parameter and command classes (idempotent)."""
    # lazy: loaded when the command runs, not when the command tree is built
    from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

    if getattr(TyperOption, "_pulsarctl_help", False):
        return
    for cls in (TyperCommand, TyperGroup):
        cls.short_help = property(_get_short_help, _set_short_help)
    TyperOption.display_type_rich = _option_type
    TyperArgument.display_type_rich = _argument_type
    TyperArgument.display_name_raw = property(_argument_name)
    TyperArgument._usage_display_name = _argument_usage
    TyperArgument.get_error_hint = _argument_error_hint
    TyperOption._pulsarctl_help = True
