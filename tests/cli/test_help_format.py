"""--help names parameters as a person reads them: a flag shows nothing after its names, a valued
option its metavar (declared, else TEXT/INTEGER/FLOAT/PATH), an argument its name in capitals;
never a Python type name such as <bool>, <list[str]>, <str> or <int> (pulsarctl/cli/helpfmt.py).
"""
from __future__ import annotations

import re

import typer.main

from pulsarctl.cli.app import app

# What typer printed: <bool>, <str>, <int>, <float>, <list[str]>, <path>...
TYPE_NAME = re.compile(r"<(bool|str|int|float|path|text|integer|list\[[^\]>]*\]|tuple[^>]*)>",
                       re.I)
TYPE_WORDS = {"TEXT", "INTEGER", "FLOAT", "PATH"}


def _commands(cmd, path=()):
    """(path, click command) for the root and every visible command below it."""
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        if not sub.hidden:
            yield from _commands(sub, path + (name,))


def _tree():
    root = typer.main.get_command(app)
    ctx = root.make_context("pulsarctl", ["--help"], resilient_parsing=True)
    return root, ctx


def _contexts():
    """(path, command, context) for every command, contexts chained as click chains them."""
    root, root_ctx = _tree()
    ctxs = {(): root_ctx}
    for path, cmd in _commands(root):
        if path:
            parent = ctxs[path[:-1]]
            ctxs[path] = cmd.context_class(cmd, parent=parent, info_name=path[-1],
                                           **(cmd.context_settings or {}))
        yield path, cmd, ctxs[path]


ALL = list(_contexts())


def _row(help_text: str, first_name: str) -> list[str] | None:
    """The words of the help table row that starts with first_name, names and '*' included."""
    for line in help_text.splitlines():
        words = line.replace("│", " ").split()
        if words[:1] == ["*"]:
            words = words[1:]
        if words and words[0].split(",")[0] == first_name:
            return words
    return None


def _after_names(words: list[str], names: set[str]) -> str | None:
    """The first word of a row after the parameter's names (what typer put in its type column)."""
    i = 0
    while i < len(words) and set(words[i].split(",")) <= names:
        i += 1
    return words[i] if i < len(words) else None


def test_no_type_names_in_any_help(cli):
    bad = []
    for path, _cmd, _ctx in ALL:
        res = cli(*path, "--help")
        assert res.exit_code == 0, (path, res.stderr)
        found = TYPE_NAME.findall(res.stdout)
        if found:
            bad.append((" ".join(path) or "pulsarctl", sorted(set(found))))
    assert bad == [], bad


def test_flags_show_nothing_and_valued_options_a_metavar(cli):
    checked_flags = checked_valued = 0
    problems = []
    for path, cmd, ctx in ALL:
        text = cli(*path, "--help").stdout
        for p in cmd.get_params(ctx):
            if p.param_type_name != "option" or p.hidden or not p.help:
                continue
            names = set(p.opts) | set(p.secondary_opts)
            first = next((n for n in p.opts if n.startswith("--")), p.opts[0])
            words = _row(text, first)
            if words is None:
                problems.append((path, first, "row not found"))
                continue
            shown = _after_names(words, names)
            if p.is_flag or p.count:
                checked_flags += 1
                if shown != p.help.split()[0]:
                    problems.append((path, first, f"flag shows {shown!r}"))
            else:
                checked_valued += 1
                want = {p.metavar} if p.metavar else TYPE_WORDS
                if shown not in want:
                    problems.append((path, first, f"valued option shows {shown!r}"))
    assert problems == [], problems
    assert checked_flags > 50 and checked_valued > 200


def test_known_options_and_arguments(cli):
    text = cli("consume", "--help").stdout
    assert "Usage: pulsarctl consume [OPTIONS] TOPICS..." in text
    assert _after_names(_row(text, "--hex"), {"--hex"}) == "Print"
    assert _after_names(_row(text, "--num-messages"), {"--num-messages", "-n"}) == "INTEGER"
    assert _after_names(_row(text, "--subscription"), {"--subscription", "-s"}) == "TEXT"
    assert _after_names(_row(text, "--output"), {"--output", "-o"}) == "FORMAT"
    assert _after_names(_row(text, "TOPICS..."), {"TOPICS..."}) == "One"
    text = cli("dlq", "list", "--help").stdout
    assert "Usage: pulsarctl dlq list [OPTIONS] [NS]" in text
    assert _after_names(_row(text, "[NS]"), {"[NS]"}) == "A"
    text = cli("ack", "--help").stdout
    assert "Usage: pulsarctl ack [OPTIONS] TOPIC [IDS]..." in text
    text = cli("--help").stdout
    assert _after_names(_row(text, "--store"), {"--store"}) == "PATH"
    assert _after_names(_row(text, "--traceback"), {"--traceback"}) == "Show"
    # errors keep naming the argument as before
    res = cli("consume")
    assert res.exit_code == 2 and "Missing argument 'topics'" in res.stderr


def test_usage_lines_name_arguments_in_capitals(cli):
    for path, cmd, ctx in ALL:
        args = [p for p in cmd.get_params(ctx) if p.param_type_name == "argument"]
        if not args:
            continue
        text = cli(*path, "--help").stdout
        usage = " ".join(text.split("Usage:")[1].split("\n\n")[0].split())  # may wrap
        assert "{" not in usage, usage
        for a in args:
            name = a.metavar or a.name.upper()
            assert name in usage, (path, usage)
            words = _row(text, name if a.metavar or a.nargs == 1 else name + "...")
            assert words is not None, (path, name)


def test_plain_help_records_have_no_type_names():
    """click's plain formatter (used without rich) reads get_help_record: same convention."""
    for path, cmd, ctx in ALL:
        for p in cmd.get_params(ctx):
            rec = p.get_help_record(ctx)
            if rec is None:
                continue
            assert not TYPE_NAME.search(rec[0]), (path, rec[0])
            if p.param_type_name == "option" and (p.is_flag or p.count):
                assert set(rec[0].replace(",", " ").replace("/", " ").split()) <= (
                    set(p.opts) | set(p.secondary_opts)), (path, rec[0])

