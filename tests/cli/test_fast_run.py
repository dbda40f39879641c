"""The everyday commands' typer-free path (pulsarctl/cli/fast_run.py) must behave exactly as the
typer app: its table is the typer tree's (fastgen.py), it hands each command the arguments typer
hands it, and every line gives the same output, exit code and store on both paths. A test
process that imports nothing of typer (python -X importtime) shows what it saves."""
from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import subprocess
import sys
from typing import Annotated

import pytest
import typer

from pulsarctl.cli import declare, fast_run, fastgen
from pulsarctl.cli.app import command, run as app_run
from store.env import DATABASES, Env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STORE = "{STORE}"


# -- the table is the tree's ----------------------------------------------------------------------
def test_the_table_is_generated_from_the_tree():
    with open(fastgen.PATH, encoding="utf-8") as f:
        committed = f.read()
    assert committed == fastgen.source(), \
        "pulsarctl/cli/fast_table.py is stale: run `python -m pulsarctl.cli.fastgen`"
    assert fastgen.main(["--check"]) == 0


def test_every_everyday_command_is_in_the_table():
    assert sorted(fast_run.COMMANDS) == sorted(fastgen.EVERYDAY)


def _tiny(annotation=str, default="x", **option):
    """A command with one option made so."""
    def cmd(ctx, value=default):
        pass
    # (annotations are text in this module; typer reads these objects as they are)
    cmd.__annotations__ = {"ctx": typer.Context,
                           "value": Annotated[annotation, typer.Option("--value", **option)]}
    app = typer.Typer()
    app.command()(cmd)
    app.command("other")(lambda: None)
    return typer.main.get_command(app).commands["cmd"]


@pytest.mark.parametrize("option, why", [
    ({"envvar": "X"}, "environment variable"),
    ({"annotation": float}, "of type"),
    ({"annotation": list[str], "default": None}, "repeated"),
    ({"hidden": True}, "hidden"),
    ({"is_eager": True}, "eager"),
])
def test_the_generator_refuses_what_the_fast_path_cannot_read(option, why):
    with pytest.raises(RuntimeError, match=why):
        fastgen.entry(_tiny(**option))


def uses(ctx: typer.Context):
    return ctx.command_path


def hands_on(ctx: typer.Context):
    return len(str(ctx))


def exits(ctx: typer.Context):
    raise typer.Exit(3)


def test_the_generator_refuses_a_body_that_uses_its_context():
    app = typer.Typer()
    for fn in (uses, hands_on, exits):
        app.command()(fn)
    cmds = typer.main.get_command(app).commands
    for name in ("uses", "exits"):
        with pytest.raises(RuntimeError, match="uses its context or typer"):
            fastgen.entry(cmds[name])
    assert fastgen.entry(cmds["hands-on"])[1] == "hands_on"


# -- what the fast path leaves to typer --------------------------------------------------------
@pytest.mark.parametrize("argv", [
    [],
    ["-h"],
    ["--help"],
    ["topics"],
    ["topics", "--help"],
    ["topics", "stats"],
    ["topics", "stats", "t", "u"],
    ["topics", "stats", "t", "-h"],
    ["topics", "stats", "t", "--bogus"],
    ["topics", "stats", "t", "--"],
    ["topics", "stats", "t", "-o"],
    ["topics", "stats", "t", "-ojson"],
    ["topics", "stats", "t", "-o=json"],
    ["topics", "stats", "t", "--store"],
    ["topics", "stats", "t", "--traceback=yes"],
    ["topics", "create", "t"],
    ["topics", "cursor", "t"],
    ["topics", "cursor", "t", "-s", "s", "-n", "007"],
    ["topics", "cursor", "t", "-s", "s", "-n", "-0"],
    ["topics", "cursor", "t", "-s", "s", "-n", "1.5"],
    ["topics", "cursor", "t", "-s", "s", "-n", " 5"],
    ["topics", "cursor", "t", "-s", "s", "-n", "1_0"],
    ["topics", "cursor", "t", "-s", "s", "-n", "٣"],
    ["topics", "cursor", "t", "-s", "s", "-n", "1" * 19],
    ["read", "t", "--until-end=yes"],
    ["read", "t", "-mp=1"],
    ["read", "-1"],
    ["--explain", "topics", "list"],
    ["topics", "list", "--explain"],
    ["-o", "yaml", "topics", "list"],
    ["--output=yaml", "topics", "list"],
    ["--store"],
    ["--bogus", "topics", "list"],
    ["--traceback=1", "topics", "list"],
    ["produce", "t", "-m", "x"],
    ["consume", "t", "-s", "s"],
    ["dlq", "stats", "d"],
    ["clock", "advance", "1s"],
    ["topics", "list", "\udcff"],
])
def test_parse_declines(argv):
    assert fast_run.parse(argv) is None
    assert fast_run.try_run(argv) is None


def test_parse_result():
    root, path, entry, given = fast_run.parse(
        ["--store", "/x", "read", "t", "-n", "2", "--until-end", "-m", "earliest", "-n", "3",
         "--traceback", "--store=/y"])
    assert root == {"store": "/y", "output": "text", "traceback": True, "version": False}
    assert path == "read" and entry == fast_run.COMMANDS["read"]
    assert given == {"until_end": True, "start": "earliest", "num_messages": 3, "topic": "t"}
    assert fast_run.parse(["--version", "topics", "nonsense", "--bogus"]) == fast_run.VERSION
    assert fast_run.parse(["-o", "yaml", "--version"]) == fast_run.VERSION


# -- the same arguments as typer ---------------------------------------------------------------
KWARGS = {
    "version": [[], ["-o", "json"], ["--output=ndjson"]],
    "read": [["t"], ["t", "-m", "earliest", "-i", "-n", "0", "--until-end", "--idle-timeout", "1s",
                     "--fail-if-empty", "--hide-content", "--hex", "-mp", "--value-schema",
                     "string", "-o", "json"],
             ["--start-message-id=1:2", "--num-messages=-4", "t", "--start-message-id-inclusive",
              "--print-metadata", "--output", "ndjson"], ["t", "-n", "5", "-n", "6"]],
    "explain": [["1:0", "-t", "t"], ["-s", "s", "1:0:-1", "--topic=x", "-o", "json"]],
    "topics list": [[], ["tenant/ns"], ["-o", "json", "public/default"]],
    "topics stats": [["t"], ["t", "-o", "ndjson"], ["", "-o", "text"]],
    "topics subscriptions": [["t"], ["--output=json", "t"]],
    "topics cursor": [["t", "-s", "s"], ["t", "-s", "s", "--around", "1:2", "-n", "0",
                                         "--entries", "12", "-o", "json"]],
    "dlq list": [[], ["ns", "--fail-if-empty", "-q", "-o", "json"], ["--quiet"]],
    "clock show": [[], ["-o", "json"]],
    "serve": [[], ["--port", "0", "--http-port=0", "--bind", "::1"],
              ["--config", "b.conf", "--basic-auth-file", "users", "--port", "-5"]],
}


def test_every_command_has_kwargs_vectors():
    assert sorted(KWARGS) == sorted(fast_run.COMMANDS)


def _typer_kwargs(module: str, fn: str, ctx_name: str, args: list[str]) -> dict:
    """What typer hands the command's function for these arguments: the function's parameters
    read by typer as in the app, the call caught before the body runs."""
    declare.realize()
    original = fast_run._callable(f"{module}:{fn}")
    seen = {}

    @functools.wraps(original)
    def spy(**kwargs):
        kwargs.pop(ctx_name)
        seen.update(kwargs)

    app = typer.Typer()
    app.command()(spy)
    typer.main.get_command(app)(args=args, prog_name="pulsarctl", standalone_mode=False)
    return seen


@pytest.mark.parametrize("path, args", [(p, a) for p, vectors in KWARGS.items() for a in vectors],
                         ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_the_command_gets_what_typer_gives_it(path, args):
    parsed = fast_run.parse(path.split() + args)
    assert parsed is not None, "this line should take the fast path"
    _root, _path, (module, fn, ctx_name, params), given = parsed
    got = fast_run._values(params, given)
    want = _typer_kwargs(module, fn, ctx_name, args)
    assert got == want
    assert [type(v) for v in got.values()] == [type(v) for v in want.values()]


# -- same output, same store -------------------------------------------------------------------
VECTORS = [
    ["--version"],
    ["--store", STORE, "--version"],
    ["-o", "json", "--version", "topics", "nonsense"],
    ["version"],
    ["version", "-o", "json"],
    ["topics", "list"],
    ["topics", "list", "public/default", "-o", "json"],
    ["-o", "ndjson", "topics", "list"],
    ["topics", "list", "-o", "ndjson", "--store", STORE],
    [f"--store={STORE}", "topics", "list", "--output=json"],
    ["topics", "list", "no/such"],
    ["topics", "list", "bad name"],
    ["topics", "stats", "t"],
    ["topics", "stats", "t", "-o", "json"],
    ["topics", "stats", "t", "-o", "json", "-o", "text"],
    ["topics", "stats", "t", "-o", "yaml"],
    ["-o", "json", "topics", "stats", "missing", "--output=yaml"],
    ["read", "t", "-o", "yaml", "-m", "nonsense", "-n", "-3"],
    ["topics", "stats", "missing"],
    ["topics", "stats", "persistent://public/default/t", "-o", "ndjson"],
    ["topics", "stats", "a/b/c/d"],
    ["topics", "subscriptions", "t"],
    ["topics", "subscriptions", "t", "-o", "json"],
    ["topics", "subscriptions", "missing"],
    ["read", "t", "-m", "earliest"],
    ["read", "t", "-m", "earliest", "-n", "2", "-o", "ndjson"],
    ["read", "t", "-m", "earliest", "-n", "0", "--until-end", "-mp"],
    ["read", "t", "--start-message-id=earliest", "--num-messages=1", "--hex"],
    ["read", "t", "-m", "earliest", "--hide-content", "-o", "json", "-n", "2"],
    ["read", "t", "-m", "1:0", "-i", "-n", "1"],
    ["read", "t", "-m", "earliest", "-n", "-1"],
    ["read", "t", "-m", "nonsense"],
    ["read", "t", "-m", "earliest", "--until-end", "-n", "0", "--value-schema", "json"],
    ["read", "empty", "-m", "earliest", "--until-end", "-n", "0", "--fail-if-empty"],
    ["read", "t", "-m", "earliest", "--idle-timeout", "bad"],
    ["dlq", "list"],
    ["dlq", "list", "-o", "json"],
    ["dlq", "list", "public/default", "-q"],
    ["dlq", "list", "other/ns", "--fail-if-empty"],
    ["clock", "show"],
    ["clock", "show", "-o", "json"],
    ["topics", "cursor", "t", "-s", "s"],
    ["topics", "cursor", "t", "-s", "s", "-o", "json", "-n", "5"],
    ["topics", "cursor", "t", "-s", "s", "--around", "1:1", "--entries", "3"],
    ["topics", "cursor", "t", "-s", "nope"],
    ["topics", "cursor", "t", "-s", "s", "-n", "0"],
    ["explain", "1:0", "-t", "t"],
    ["explain", "1:0", "-t", "t", "-s", "s", "-o", "json"],
    ["explain", "bad", "-t", "t"],
    ["explain", "9:9", "-t", "t"],
    ["--traceback", "topics", "list"],
    ["topics", "list", "--traceback"],
    # serve's lines that stop before it listens (a bad port or file: one line, exit 2)
    ["serve", "--port", "70000"],
    ["serve", "--port", "0", "--http-port", "-1"],
    ["serve", "--config", "no-such.conf", "--port", "0"],
    ["serve", "--basic-auth-file", "no-such-file", "--port", "0"],
]

SETUP = [
    ["clock", "simulate", "--at", "2026-01-01T00:00:00Z"],
    ["produce", "t", "-m", "a", "-m", "b", "-k", "k", "-p", "p=1"],
    ["produce", "t", "-m", "\x1b[31mred\x1b[0m ünï"],
    ["topics", "create-subscription", "t", "-s", "s", "-m", "earliest"],
    ["produce", "t-s-DLQ", "-m", "dead"],
    ["clock", "advance", "90s"],
]


def _run(fn, argv, store, monkeypatch, capsys):
    argv = [a.replace(STORE, store) for a in argv]
    monkeypatch.setenv("PULSARCTL_STORE", store)
    capsys.readouterr()
    code = fn(argv)
    out = capsys.readouterr()
    return code, out.out.replace(store, STORE), out.err.replace(store, STORE)


def dump(path: str) -> dict:
    """Every key and value of every database of the store."""
    env = Env(path, readonly=True, create=False)
    try:
        with env.read() as txn:
            return {db: [(bytes(k), bytes(v)) for k, v in txn.cursor(db=env.db[db])]
                    for db in DATABASES if db in env.db}
    finally:
        env.close()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """One prepared store; each test copies it (an LMDB store is its files)."""
    base = str(tmp_path_factory.mktemp("prepared") / "store")
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        mp.setenv("PULSARCTL_STORE", base)
        for argv in SETUP:
            assert app_run(argv) == 0, argv
    return base


def _copy(base: str, to) -> str:
    shutil.copytree(base, to)
    return str(to)


@pytest.mark.parametrize("argv", VECTORS, ids=[" ".join(v) for v in VECTORS])
def test_fast_path_and_typer_agree(argv, stores, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")
    fast_store, typer_store = _copy(stores, tmp_path / "fast"), _copy(stores, tmp_path / "typer")
    assert fast_run.parse([a.replace(STORE, fast_store) for a in argv]) is not None, \
        "this line should take the fast path"
    got_fast = _run(fast_run.try_run, argv, fast_store, monkeypatch, capsys)
    got_typer = _run(app_run, argv, typer_store, monkeypatch, capsys)
    assert got_fast[0] == got_typer[0], f"exit codes differ: fast {got_fast} typer {got_typer}"
    assert got_fast[1] == got_typer[1], "stdout differs"
    assert got_fast[2] == got_typer[2], "stderr differs"
    assert "Traceback" not in got_fast[2] or "--traceback" in argv
    assert dump(fast_store) == dump(typer_store), "the stores differ"


def test_the_comparison_sees_a_difference(stores, tmp_path, monkeypatch, capsys):
    """The store dump and the output comparison are not blind: a line that writes differs."""
    a, b = _copy(stores, tmp_path / "a"), _copy(stores, tmp_path / "b")
    assert dump(a) == dump(b)
    monkeypatch.setenv("PULSARCTL_STORE", b)
    assert app_run(["topics", "create-subscription", "t", "-s", "other"]) == 0
    assert dump(a) != dump(b)


# -- the everyday commands import no typer, click, pydantic or rich -----------------------------
EVERYDAY_LINES = [
    ["--version"],
    ["version"],
    ["produce", "t", "-m", "x"],
    ["topics", "list"],
    ["topics", "stats", "t"],
    ["topics", "stats", "t", "-o", "json"],
    ["topics", "subscriptions", "t"],
    ["read", "t", "-m", "earliest", "-n", "1"],
    ["dlq", "list"],
    ["clock", "show"],
    ["topics", "cursor", "t", "-s", "s", "-o", "json"],
    ["topics", "cursor", "t", "-s", "s"],
    ["explain", "1:0", "-t", "t"],
]
HEAVY = ("typer", "click", "pydantic", "pydantic_core", "rich", "annotated_types")


def _imported(stores, tmp_path, argv) -> tuple[list[str], subprocess.CompletedProcess]:
    env = dict(os.environ, PULSARCTL_STORE=_copy(stores, tmp_path / "store"), NO_COLOR="1")
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "pulsarctl", *argv],
                       capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    modules = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines()
               if line.startswith("import time:") and "|" in line]
    return modules[1:], r  # the first line is the header


@pytest.mark.parametrize("argv", EVERYDAY_LINES, ids=[" ".join(v) for v in EVERYDAY_LINES])
def test_everyday_commands_do_not_import_typer(argv, stores, tmp_path):
    modules, r = _imported(stores, tmp_path, argv)
    assert r.returncode == 0, r.stderr[-2000:]
    assert modules, "python -X importtime printed nothing"
    assert any(m in modules for m in ("pulsarctl.cli.fast_run", "pulsarctl.cli.fast")), modules
    heavy = sorted({m for m in modules if m.split(".")[0] in HEAVY})
    if argv == ["topics", "cursor", "t", "-s", "s"]:
        # the picture is drawn with rich (a text picture needs it; -o json above does not)
        heavy = [m for m in heavy if m.split(".")[0] != "rich"]
    assert heavy == [], f"`pulsarctl {' '.join(argv)}` imported {heavy}"


def test_the_import_check_sees_typer(stores, tmp_path):
    """The control: a command that is not everyday (no fast path) imports typer."""
    modules, r = _imported(stores, tmp_path, ["topics", "stats-internal", "t"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert "typer" in modules and "pulsarctl.cli.app" in modules


# -- declarations recorded first, typer's objects after --------------------------------------
RECORDED_FIRST = r"""
import sys
from pulsarctl.cli import client_cmds, common, declare, topics_cmd
assert not [m for m in sys.modules if m.split(".")[0] in ("typer", "click", "pydantic")]
assert type(topics_cmd.topics) is declare._Group, type(topics_cmd.topics)
output_info = common.Output.__metadata__[0]
assert type(output_info) is declare._Param
# the rest in app._join's order (a group lists its commands in the order they were declared)
from pulsarctl.cli import (cursor_cmd, cursor_view_cmd, tenants_cmd, admin_cmd, perf_cmd,
                           daemon_cmd, policies_cmd, dlq_cmd, explain_cmd)
from pulsarctl.cli import docgen, fastgen
assert docgen.stale(sys.argv[1]) == [], docgen.stale(sys.argv[1])  # builds the typer app
import typer
from typer.models import OptionInfo
assert isinstance(topics_cmd.topics, typer.Typer) and isinstance(output_info, OptionInfo)
assert common.Output.__metadata__[0] is output_info  # the same object, now typer's
assert open(fastgen.PATH).read() == fastgen.source()
print("same")
"""


def test_records_made_before_typer_give_the_same_app(tmp_path):
    """A process that imports command modules before the app (their declarations recorded)
    builds the very same command tree: help, man pages, completions and fast table."""
    r = subprocess.run([sys.executable, "-c", RECORDED_FIRST, REPO], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path,
                       env=dict(os.environ, PULSARCTL_STORE=str(tmp_path / "s")))
    assert r.returncode == 0 and r.stdout.strip() == "same", r.stderr[-3000:]


def test_the_table_is_stale_when_what_fast_run_stands_in_for_changes(monkeypatch):
    """The table carries a fingerprint of app.py's root, hoist_globals and run: another
    function (as if one of them changed) makes the committed table stale."""
    fresh = fastgen.mirrored()
    monkeypatch.setattr(fastgen, "MIRRORED", fastgen.MIRRORED + ("_explained",))
    assert fastgen.mirrored() != fresh
    assert fastgen.main(["--check"]) == 1


def test_the_generator_refuses_a_root_option_fast_run_does_not_know(monkeypatch):
    monkeypatch.setattr(fastgen, "ROOT_OPTIONS", fastgen.ROOT_OPTIONS - {("store", ("--store",))})
    with pytest.raises(RuntimeError, match="root's options changed"):
        fastgen.mirrored()


def test_the_generator_refuses_a_function_it_could_not_find_again():
    def make():
        def nested(ctx: typer.Context):
            pass
        return nested
    app = typer.Typer()
    app.command("nested")(make())
    app.command("other")(lambda: None)
    with pytest.raises(RuntimeError, match="not a name of its module"):
        fastgen.entry(typer.main.get_command(app).commands["nested"])
