"""ARCHITECTURE.md's layer rules, checked by reading the code with `ast` (nothing is imported):

- store/ imports nothing from pulsarctl; only store/env.py imports lmdb;
- pulsarctl/broker/ never imports typer, rich or pulsarctl.cli;
- nothing outside pulsarctl/cli imports pulsarctl.cli;
- inside pulsarctl/cli only the entry points (entry.py, docgen.py, fastgen.py) import the root,
  pulsarctl.cli.app: each command module owns its groups and commands and app.py joins them;
- only pulsarctl/clock.py reads the time (imports `time`, calls datetime.now/utcnow/today);
- nothing outside pulsarctl/cli/render.py prints or writes to sys.stdout / sys.stderr;
- every exception class is in pulsarctl/errors.py (store's in store/errors.py);
- only pulsarctl/names.py builds -DLQ, -RETRY and -partition-N names.
- the Broker's transactions are its own: nothing outside pulsarctl/broker calls read, write or
  read_in_place (or their private names) on a Broker with a body to run in the transaction, so
  every call naming a non-persistent topic goes through the Broker's routing (issue 29 item 2;
  pulsarctl/serve is a temporary exception until its split is wired to the named methods);
- the broker side (pulsarctl/broker, pulsarctl/client, offload.py, daemon.py) never imports
  pulsarctl.spark or pulsarctl.cli, local imports included; import_graph and import_cycles
  measure the cycles among all modules (imports inside functions count); there are none.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("store", "pulsarctl")

# `python -m pulsarctl` has to reach the command line: pulsarctl/__main__.py is an entry point
# (as the console script pulsarctl.cli.entry:main in pyproject.toml is), not a layer.
ENTRY_POINTS = {"pulsarctl/__main__.py"}

# The root command (pulsarctl/cli/app.py) imports the command modules and joins their groups
# and top-level commands; none of them imports it back to register itself. Only these need
# the root: the console script runs it, docgen and fastgen walk its command tree.
ROOT_IMPORTERS = {"pulsarctl/cli/entry.py", "pulsarctl/cli/docgen.py", "pulsarctl/cli/fastgen.py"}


# -- reading the code --------------------------------------------------------------------------
def sources() -> list[Path]:
    files = []
    for pkg in PACKAGES:
        files += [p for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts]
    assert files, f"no sources found under {ROOT}"
    return sorted(files)


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def module_name(relpath: str) -> str:
    parts = relpath[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve_from(node: ast.ImportFrom, relpath: str) -> str:
    if not node.level:
        return node.module or ""
    pkg = module_name(relpath).split(".")
    if not relpath.endswith("__init__.py"):
        pkg = pkg[:-1]
    base = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
    return ".".join(base + ([node.module] if node.module else []))


def _loop_constants(tree: ast.AST) -> dict[int, list[str]]:
    """For `for name in ("a", "b"): ... __import__(name)`: id(Name node) -> the constants."""
    out: dict[int, list[str]] = {}
    for loop in ast.walk(tree):
        if not (isinstance(loop, (ast.For, ast.comprehension)) and isinstance(loop.target, ast.Name)
                and isinstance(loop.iter, (ast.Tuple, ast.List, ast.Set))):
            continue
        values = [e.value for e in loop.iter.elts if isinstance(e, ast.Constant)
                  and isinstance(e.value, str)]
        body = loop.body if isinstance(loop, ast.For) else []
        for stmt in body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Name) and n.id == loop.target.id:
                    out[id(n)] = values
    return out


def imports(tree: ast.AST, relpath: str) -> list[tuple[int, str]]:
    """(line, module) for every import, including `from x import y` as x and x.y, and
    __import__ / importlib.import_module with names that can be read off the code."""
    found: list[tuple[int, str]] = []
    loops = _loop_constants(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve_from(node, relpath)
            found.append((node.lineno, mod))
            found += [(node.lineno, f"{mod}.{a.name}" if mod else a.name) for a in node.names
                      if a.name != "*"]
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            dynamic = (isinstance(f, ast.Name) and f.id == "__import__") or (
                isinstance(f, ast.Attribute) and f.attr == "import_module")
            if not dynamic:
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((node.lineno, arg.value))
            elif isinstance(arg, ast.Name) and id(arg) in loops:
                found += [(node.lineno, v) for v in loops[id(arg)]]
    return found


def _is(mod: str, target: str) -> bool:
    return mod == target or mod.startswith(target + ".")


# Every file is read and parsed once per session, not once per rule (14 rules re-parsing the
# whole tree took 6-10 s each on a loaded machine). Keyed by ROOT: a test points ROOT at a
# folder of snippets. The trees are only walked, never changed, so sharing them is safe.
_PARSED: dict[Path, list[tuple[str, str, ast.AST]]] = {}


def _parsed_files() -> list[tuple[str, str, ast.AST]]:
    """(relative path, text, tree) of every source file under ROOT, made once."""
    if ROOT not in _PARSED:
        files = []
        for path in sources():
            r, text = rel(path), path.read_text(encoding="utf-8")
            files.append((r, text, ast.parse(text, filename=r)))
        _PARSED[ROOT] = files
    return _PARSED[ROOT]


def parsed():
    for r, _text, tree in _parsed_files():
        yield r, tree


def source_text(relpath: str) -> str:
    return next(text for r, text, _tree in _parsed_files() if r == relpath)


# -- the checks (pure functions of one file, so they can be tested on snippets) ----------------
def import_violations(relpath: str, tree: ast.AST) -> list[str]:
    out = []
    for line, mod in imports(tree, relpath):
        where = f"{relpath}:{line}: imports {mod}"
        if relpath.startswith("store/") and _is(mod, "pulsarctl"):
            out.append(f"{where} (store/ imports nothing from pulsarctl)")
        if _is(mod, "lmdb") and relpath != "store/env.py":
            out.append(f"{where} (only store/env.py imports lmdb)")
        if relpath.startswith("pulsarctl/broker/") and any(
                _is(mod, m) for m in ("typer", "rich", "click", "pulsarctl.cli")):
            out.append(f"{where} (pulsarctl/broker never imports typer, rich or the CLI)")
        if (_is(mod, "pulsarctl.cli") and not relpath.startswith("pulsarctl/cli/")
                and relpath not in ENTRY_POINTS):
            out.append(f"{where} (nothing outside pulsarctl/cli imports it)")
        if (_is(mod, "pulsarctl.cli.app") and relpath.startswith("pulsarctl/cli/")
                and relpath not in ROOT_IMPORTERS):
            out.append(f"{where} (in pulsarctl/cli only the entry points import the root app)")
    return out


TIME_CALLS = {"now", "utcnow", "today"}


# Programs of their own that perf_compare runs in a separate process, with nothing of
# pulsarctl loaded (so that the peer they measure is measured alone): they time and print
# themselves, and test_standalone_programs_import_nothing_of_pulsarctl checks that they stay so.
STANDALONE = {"pulsarctl/perf_peer.py"}


def time_violations(relpath: str, tree: ast.AST) -> list[str]:
    if relpath == "pulsarctl/clock.py" or relpath in STANDALONE:
        return []
    out = []
    for line, mod in imports(tree, relpath):
        if _is(mod, "time"):
            out.append(f"{relpath}:{line}: imports {mod} (only pulsarctl/clock.py reads the time)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in TIME_CALLS:
            owner = node.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
            if name in ("datetime", "date", "time"):
                out.append(f"{relpath}:{node.lineno}: {name}.{node.attr} "
                           f"(only pulsarctl/clock.py reads the time)")
        if isinstance(node, ast.Attribute) and node.attr in ("time", "time_ns", "monotonic",
                                                            "perf_counter", "localtime", "gmtime"):
            if isinstance(node.value, ast.Name) and node.value.id == "time":
                out.append(f"{relpath}:{node.lineno}: time.{node.attr} "
                           f"(only pulsarctl/clock.py reads the time)")
    return out


STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}
# Asking about a stream is not writing to it.
READ_ONLY = {"isatty", "fileno", "encoding", "errors"}


def output_violations(relpath: str, tree: ast.AST) -> list[str]:
    if relpath == "pulsarctl/cli/render.py" or relpath in STANDALONE:
        return []
    out = []
    sys_names = {"sys"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            sys_names |= {a.asname for a in node.names if a.name == "sys" and a.asname}
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    for node in ast.walk(tree):
        where = f"{relpath}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Name) and node.id == "print":
            out.append(f"{where}: print (only pulsarctl/cli/render.py prints)")
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" and any(
                a.name in STREAMS for a in node.names):
            out.append(f"{where}: from sys import a stream (only render.py writes to them)")
        elif (isinstance(node, ast.Attribute) and node.attr in STREAMS
              and isinstance(node.value, ast.Name) and node.value.id in sys_names):
            parent = parents.get(id(node))
            if isinstance(parent, ast.Attribute) and parent.attr in READ_ONLY:
                continue
            out.append(f"{where}: sys.{node.attr} (only pulsarctl/cli/render.py writes to it)")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "write" and isinstance(node.func.value, ast.Name)
              and node.func.value.id == "os" and node.args
              and isinstance(node.args[0], ast.Constant) and node.args[0].value in (1, 2)):
            if _enclosing(node, parents) in RELAYS.get(relpath, ()):
                continue
            out.append(f"{where}: os.write to fd {node.args[0].value}")
    return out


# Functions that pass a child process's own stream on (they print nothing of ours): Spark's
# JVM writes to stderr through pulsarctl.spark's relay, which only leaves out its start-up
# warning; without the relay the JVM would write to fd 2 itself.
RELAYS = {"pulsarctl/spark/__init__.py": ("_pass_stderr",)}


def _enclosing(node, parents) -> str | None:
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node.name
    return None


_FOUND: dict[tuple[Path, object], list[str]] = {}


def _all(check) -> list[str]:
    """check(relpath, tree) over every file, run once per session (the five import rules share
    one run of import_violations)."""
    if (ROOT, check) not in _FOUND:
        out = []
        for r, tree in parsed():
            out += check(r, tree)
        _FOUND[ROOT, check] = out
    return list(_FOUND[ROOT, check])


# -- the rules, on the real code ---------------------------------------------------------------
def _imports_matching(pred) -> list[str]:
    return [v for v in _all(import_violations) if pred(v)]


def test_store_imports_nothing_from_pulsarctl():
    found = _imports_matching(lambda v: "store/ imports nothing" in v)
    assert not found, "\n".join(found)


def test_only_store_env_imports_lmdb():
    found = _imports_matching(lambda v: "only store/env.py imports lmdb" in v)
    assert not found, "\n".join(found)


def test_broker_never_imports_typer_rich_or_cli():
    found = _imports_matching(lambda v: "pulsarctl/broker never imports" in v)
    assert not found, "\n".join(found)


def test_nothing_outside_cli_imports_cli():
    found = _imports_matching(lambda v: "nothing outside pulsarctl/cli" in v)
    assert not found, "\n".join(found)


def test_in_cli_only_the_entry_points_import_the_root_app():
    found = _imports_matching(lambda v: "only the entry points import the root app" in v)
    assert not found, "\n".join(found)
    names = {rel(p) for p in sources()}
    assert ROOT_IMPORTERS <= names, ROOT_IMPORTERS - names  # no stale exemption


def test_only_clock_reads_the_time():
    found = _all(time_violations)
    assert not found, "\n".join(found)


def test_standalone_programs_import_nothing_of_pulsarctl():
    for relpath in sorted(STANDALONE):
        mods = [m for _, m in imports(ast.parse((ROOT / relpath).read_text()), relpath)]
        assert mods and not [m for m in mods if m.split(".")[0] in ("pulsarctl", "store")], (
            relpath, mods)


def test_only_render_prints():
    found = _all(output_violations)
    assert not found, "\n".join(found)


def test_the_scan_sees_the_packages():
    names = {rel(p) for p in sources()}
    for must in ("store/env.py", "pulsarctl/clock.py", "pulsarctl/cli/render.py",
                 "pulsarctl/cli/app.py", "pulsarctl/broker/service.py"):
        assert must in names
    # and it finds the imports the rules are about where they are allowed
    env_imports = [m for _, m in imports(ast.parse((ROOT / "store/env.py").read_text()),
                                         "store/env.py")]
    assert "lmdb" in env_imports
    clock_imports = [m for _, m in imports(ast.parse((ROOT / "pulsarctl/clock.py").read_text()),
                                           "pulsarctl/clock.py")]
    assert "time" in clock_imports


# -- the checks themselves catch what they should -------------------------------------------
def _check(check, relpath, code):
    return check(relpath, ast.parse(code))


@pytest.mark.parametrize("relpath, code, needle", [
    ("store/ledger.py", "from pulsarctl.names import parse_topic", "store/ imports nothing"),
    ("store/ledger.py", "import pulsarctl", "store/ imports nothing"),
    ("store/ledger.py", "def f():\n    from pulsarctl import clock", "store/ imports nothing"),
    ("store/ledger.py", "import lmdb", "only store/env.py imports lmdb"),
    ("pulsarctl/cli/admin_cmd.py", "def f():\n    import lmdb", "only store/env.py imports lmdb"),
    ("pulsarctl/doctor.py", "for m in ('lmdb', 'x'):\n    __import__(m)", "lmdb"),
    ("pulsarctl/x.py", "import importlib\nimportlib.import_module('lmdb.cffi')", "lmdb"),
    ("pulsarctl/broker/topics.py", "import typer", "pulsarctl/broker never"),
    ("pulsarctl/broker/topics.py", "from rich.table import Table", "pulsarctl/broker never"),
    ("pulsarctl/broker/topics.py", "from pulsarctl.cli import render", "pulsarctl/broker never"),
    ("pulsarctl/broker/dispatch/shared.py", "from ...cli import render", "pulsarctl/broker never"),
    ("pulsarctl/client/client.py", "from pulsarctl import cli", "nothing outside pulsarctl/cli"),
    ("pulsarctl/daemon.py", "from .cli.render import err", "nothing outside pulsarctl/cli"),
    ("pulsarctl/cli/topics_cmd.py", "from pulsarctl.cli.app import app", "only the entry points"),
    ("pulsarctl/cli/spark_cmd.py", "def f():\n    from pulsarctl.cli import app",
     "only the entry points"),
    ("pulsarctl/cli/dlq_cmd.py", "from .app import app", "only the entry points"),
    ("pulsarctl/cli/perf_cmd.py", "import pulsarctl.cli.app", "only the entry points"),
])
def test_import_check_catches(relpath, code, needle):
    assert any(needle in v for v in _check(import_violations, relpath, code))


@pytest.mark.parametrize("relpath, code", [
    ("store/env.py", "import lmdb"),
    ("pulsarctl/cli/app.py", "from pulsarctl.cli import render"),
    ("pulsarctl/__main__.py", "from pulsarctl.cli.entry import main"),
    ("pulsarctl/cli/entry.py", "def main():\n    from pulsarctl.cli.app import run"),
    ("pulsarctl/cli/docgen.py", "def tree():\n    from pulsarctl.cli.app import app"),
    ("pulsarctl/cli/app.py", "from pulsarctl.cli import client_cmds, topics_cmd"),
    ("pulsarctl/broker/topics.py", "from pulsarctl.names import parse_topic"),
    ("store/ledger.py", "from store import codec\nfrom . import keys"),
])
def test_import_check_allows(relpath, code):
    assert _check(import_violations, relpath, code) == []


@pytest.mark.parametrize("code", [
    "import time",
    "import time as t",
    "from time import monotonic",
    "def f():\n    import time",
    "from datetime import datetime\nx = datetime.now()",
    "import datetime\nx = datetime.datetime.utcnow()",
    "from datetime import date\nx = date.today()",
    "from datetime import datetime, timezone\nx = datetime.now(timezone.utc)",
])
def test_time_check_catches(code):
    assert _check(time_violations, "pulsarctl/broker/topics.py", code)


@pytest.mark.parametrize("code", [
    "from datetime import datetime, timezone\nx = datetime.fromtimestamp(1, tz=timezone.utc)",
    "from pulsarctl import clock\nx = clock.wall_ms()",
    "'''time.time() in a docstring'''\n# import time in a comment",
])
def test_time_check_allows(code):
    assert _check(time_violations, "pulsarctl/messages.py", code) == []


def test_time_check_allows_clock():
    assert _check(time_violations, "pulsarctl/clock.py", "import time\ntime.time()") == []


@pytest.mark.parametrize("code", [
    "print('x')",
    "p = print",
    "import sys\nsys.stdout.write('x')",
    "import sys\nsys.stderr.write('x')",
    "import sys\nsys.stdout.buffer.write(b'x')",
    "import sys\nf(file=sys.stderr)",
    "import sys as s\ns.stdout.write('x')",
    "from sys import stderr",
    "import sys\nsys.__stdout__.write('x')",
    "import os\nos.write(1, b'x')",
])
def test_output_check_catches(code):
    assert _check(output_violations, "pulsarctl/broker/topics.py", code)


def test_only_the_named_relay_may_pass_a_stream_on():
    relay = "import os\ndef _pass_stderr(line):\n    os.write(2, line)"
    assert _check(output_violations, "pulsarctl/spark/__init__.py", relay) == []
    assert _check(output_violations, "pulsarctl/spark/jobs.py", relay)
    other = "import os\ndef report(line):\n    os.write(2, line)"
    assert _check(output_violations, "pulsarctl/spark/__init__.py", other)


@pytest.mark.parametrize("code", [
    "'''print( in a docstring, sys.stdout too'''\n# print('in a comment')",
    "import sys\nfor line in sys.stdin:\n    pass",
    "import sys\nif sys.stderr.isatty():\n    pass",
    "from pulsarctl.cli import render\nrender.err('x')",
    "x = 'print(1)'",
])
def test_output_check_allows(code):
    assert _check(output_violations, "pulsarctl/cli/produce_run.py", code) == []


def test_output_check_allows_render():
    assert _check(output_violations, "pulsarctl/cli/render.py",
                  "import sys\nsys.stdout.write('x')\nprint()") == []


# -- one exception tree, one place for derived topic names --------------------------------------
# Every exception class lives in pulsarctl/errors.py (store/, which imports nothing from
# pulsarctl, keeps its own in store/errors.py); every -DLQ, -RETRY and -partition-N name is built
# by a function of pulsarctl/names.py.
EXCEPTION_HOMES = {"pulsarctl/errors.py", "store/errors.py"}
BUILTIN_EXCEPTIONS = {n for n, v in vars(__import__("builtins")).items()
                      if isinstance(v, type) and issubclass(v, BaseException)}
DERIVED_SUFFIXES = ("-DLQ", "-RETRY", "-partition-")
SUFFIX_CONSTANTS = {"DLQ_SUFFIX", "RETRY_SUFFIX", "PARTITIONED_TOPIC_SUFFIX"}


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _classes(tree: ast.AST) -> list[ast.ClassDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def exception_names(trees) -> set[str]:
    """Names of the classes that derive from an exception, through any chain of classes the
    trees define (BacklogQuotaHold(BacklogQuotaExceeded(PulsarctlError(Exception))))."""
    known = set(BUILTIN_EXCEPTIONS) | {"PulsarctlError", "StoreError"}
    classes = [c for tree in trees for c in _classes(tree)]
    grew = True
    while grew:
        grew = False
        for c in classes:
            if c.name not in known and any(_base_name(b) in known for b in c.bases):
                known.add(c.name)
                grew = True
    return known


def exception_violations(relpath: str, tree: ast.AST, exceptions: set[str]) -> list[str]:
    if relpath in EXCEPTION_HOMES:
        return []
    return [f"{relpath}:{c.lineno}: class {c.name} is an exception (exception classes live in "
            f"pulsarctl/errors.py, store's in store/errors.py)" for c in _classes(tree)
            if any(_base_name(b) in exceptions for b in c.bases)]


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                out.add(id(body[0].value))
    return out


def suffix_violations(relpath: str, tree: ast.AST) -> list[str]:
    """A string (or a piece of an f-string) ending in -DLQ, -RETRY or -partition-, or names.py's
    DLQ_SUFFIX, RETRY_SUFFIX or PARTITIONED_TOPIC_SUFFIX put into an f-string or added to a
    string, builds a derived topic name: only pulsarctl/names.py does. Docstrings, comments and
    text that only mentions such a name (help, hints, patterns) build none; testing a name with
    .endswith(DLQ_SUFFIX) builds none either."""
    if relpath == "pulsarctl/names.py":
        return []
    docs = _docstrings(tree)
    why = "(pulsarctl/names.py builds every -DLQ, -RETRY and -partition-N name)"
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docs and node.value.endswith(DERIVED_SUFFIXES)):
            out.append(f"{relpath}:{node.lineno}: {node.value!r} {why}")
        parts = []
        if isinstance(node, ast.JoinedStr):
            parts = [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            parts = [node.left, node.right]
        for part in parts:
            if _base_name(part) in SUFFIX_CONSTANTS:
                out.append(f"{relpath}:{node.lineno}: builds a name with {_base_name(part)} "
                           f"{why}")
    return out


def test_every_exception_class_is_in_errors_py():
    trees = list(parsed())
    exceptions = exception_names(tree for _, tree in trees)
    found = [v for r, tree in trees for v in exception_violations(r, tree, exceptions)]
    assert not found, "\n".join(found)


def test_names_py_builds_every_derived_topic_name():
    found = _all(suffix_violations)
    assert not found, "\n".join(found)


def test_the_exception_scan_sees_the_trees():
    exceptions = exception_names(tree for _, tree in parsed())
    for must in ("PulsarctlError", "NotFound", "TopicNotFound", "StoreError", "StoreDamaged",
                 "InvalidValue", "ValueError"):
        assert must in exceptions


@pytest.mark.parametrize("code", [
    "class Boom(Exception):\n    pass",
    "class Bad(ValueError):\n    pass",
    "from pulsarctl.errors import NotFound\nclass Gone(NotFound):\n    pass",
    "from pulsarctl import errors\nclass Gone(errors.Conflict):\n    pass",
    "class A(Exception):\n    pass\nclass B(A):\n    pass",
    "def f():\n    class Local(RuntimeError):\n        pass",
])
def test_exception_check_catches(code):
    tree = ast.parse(code)
    exceptions = exception_names([tree, ast.parse("class NotFound(PulsarctlError): pass\n"
                                                  "class Conflict(PulsarctlError): pass")])
    assert exception_violations("pulsarctl/broker/topics.py", tree, exceptions)


@pytest.mark.parametrize("relpath, code", [
    ("pulsarctl/errors.py", "class NotFound(PulsarctlError):\n    exit_code = 3"),
    ("store/errors.py", "class StoreError(Exception):\n    pass"),
    ("pulsarctl/broker/topics.py", "class Info:\n    pass\nclass Kind(enum.Enum):\n    A = 1"),
])
def test_exception_check_allows(relpath, code):
    tree = ast.parse(code)
    assert exception_violations(relpath, tree, exception_names([tree])) == []


@pytest.mark.parametrize("code", [
    "x = f'{topic}-{sub}-DLQ'",
    "x = topic + '-RETRY'",
    "x = f'{name}-partition-{i}'",
    "x = name.endswith('-DLQ')",
    "SUFFIX = '-partition-'",
    "from pulsarctl.names import DLQ_SUFFIX\nx = f'{topic}-{sub}{DLQ_SUFFIX}'",
    "from pulsarctl import names\nx = topic + names.RETRY_SUFFIX",
    "x = f'{t}{names.PARTITIONED_TOPIC_SUFFIX}{i}'",
])
def test_suffix_check_catches(code):
    assert _check(suffix_violations, "pulsarctl/broker/deadletter.py", code)


@pytest.mark.parametrize("relpath, code", [
    ("pulsarctl/names.py", "DLQ_SUFFIX = '-DLQ'\nx = f'{t}-{s}{DLQ_SUFFIX}'"),
    ("pulsarctl/broker/deadletter.py", "'''<topic>-<subscription>-RETRY'''\n# name-DLQ"),
    ("pulsarctl/broker/deadletter.py", "def f():\n    '''<topic>-<subscription>-RETRY'''"),
    ("pulsarctl/cli/client_cmds.py", "h = 'Dead letter topic (default <topic>-<sub>-DLQ).'"),
    ("pulsarctl/cli/complete.py", "import re\nP = re.compile(r'^(.*)-partition-\\d+$')"),
    ("pulsarctl/broker/dlq.py", "from pulsarctl.names import dlq_topic\nx = dlq_topic(t, s)"),
    ("pulsarctl/broker/fired.py", "from pulsarctl.names import RETRY_SUFFIX\n"
                                  "x = name.endswith(RETRY_SUFFIX)"),
])
def test_suffix_check_allows(relpath, code):
    assert _check(suffix_violations, relpath, code) == []


# -- the import graph: cycles, and what the broker side may import ------------------------------
# Every import counts, those made inside functions too (a local import only delays the load;
# the modules still depend on each other).
_GRAPHS: dict[Path, dict[str, set[str]]] = {}


def import_graph() -> dict[str, set[str]]:
    """{module: the modules of pulsarctl/ and store/ it imports}, by the imports anywhere in its
    file; `from pulsarctl.broker import topics` is the submodule pulsarctl.broker.topics, and
    `from pulsarctl.names import parse_topic` the module pulsarctl.names. Made once per session
    (a copy each call)."""
    if ROOT not in _GRAPHS:
        _GRAPHS[ROOT] = _import_graph()
    return {m: set(deps) for m, deps in _GRAPHS[ROOT].items()}


def _import_graph() -> dict[str, set[str]]:
    trees = {module_name(r): (r, tree) for r, tree in parsed()}
    graph: dict[str, set[str]] = {m: set() for m in trees}
    for mod, (r, tree) in trees.items():
        found = imports(tree, r)
        for node in ast.walk(tree):
            # `from package import module, module`: the modules, not the package
            if isinstance(node, ast.ImportFrom):
                base = _resolve_from(node, r)
                if all(f"{base}.{a.name}" in trees for a in node.names):
                    found.remove((node.lineno, base))
        for _line, name in found:
            # the longest known module the name is or is inside of
            parts = name.split(".")
            while parts and ".".join(parts) not in trees:
                parts.pop()
            if parts and ".".join(parts) != mod:
                graph[mod].add(".".join(parts))
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


# The broker side (the broker, the client, tiered storage and the daemon) sits below the Spark
# data source and the command line: none of it imports pulsarctl.spark or pulsarctl.cli, not
# even inside a function. What both sides need (the scan of messages, the Arrow columns) lives
# below both: pulsarctl/broker/scan.py, pulsarctl/arrow_columns.py.
BROKER_SIDE = ("pulsarctl/broker/", "pulsarctl/client/", "pulsarctl/offload.py",
               "pulsarctl/daemon.py")
ABOVE_THE_BROKER = ("pulsarctl.spark", "pulsarctl.cli")


def broker_side_violations(relpath: str, tree: ast.AST) -> list[str]:
    if not relpath.startswith(BROKER_SIDE):
        return []
    return [f"{relpath}:{line}: imports {mod} (the broker side never imports pulsarctl.spark "
            f"or pulsarctl.cli)" for line, mod in imports(tree, relpath)
            if any(_is(mod, m) for m in ABOVE_THE_BROKER)]


def test_the_broker_side_never_imports_spark_or_cli():
    found = _all(broker_side_violations)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("relpath, code", [
    ("pulsarctl/offload.py", "def f():\n    from pulsarctl.spark._arrow import record_batch"),
    ("pulsarctl/offload.py", "from .spark import _access"),
    ("pulsarctl/broker/service.py", "def f():\n    import pulsarctl.spark.source"),
    ("pulsarctl/broker/dispatch/shared.py", "from ...spark import jobs"),
    ("pulsarctl/client/client.py", "def f():\n    from pulsarctl.cli import render"),
    ("pulsarctl/daemon.py", "from pulsarctl import spark"),
])
def test_broker_side_check_catches(relpath, code):
    assert _check(broker_side_violations, relpath, code)


@pytest.mark.parametrize("relpath, code", [
    ("pulsarctl/offload.py", "from pulsarctl.arrow_columns import record_batch"),
    ("pulsarctl/offload.py", "def f():\n    from pulsarctl.broker.scan import scan_messages"),
    ("pulsarctl/spark/_access.py", "from pulsarctl.broker.scan import whole_messages"),
    ("pulsarctl/cli/spark_cmd.py", "from pulsarctl.spark import jobs"),
])
def test_broker_side_check_allows(relpath, code):
    assert _check(broker_side_violations, relpath, code) == []


def test_the_import_graph_resolves_modules_and_finds_cycles():
    graph = import_graph()
    # `from pulsarctl.broker import topics` inside a function is pulsarctl.broker.topics
    assert "pulsarctl.broker.topics" in graph["pulsarctl.offload"]
    assert "pulsarctl.broker.scan" in graph["pulsarctl.offload"]
    assert "pulsarctl.names" in graph["pulsarctl.offload"]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
    # tiered storage and the broker are in no cycle with the Spark data source
    for cycle in import_cycles(graph):
        assert not (any(m.startswith("pulsarctl.spark") for m in cycle)
                    and any(m in ("pulsarctl.offload", "pulsarctl.broker.service")
                            for m in cycle)), cycle


def test_no_import_cycles():
    """No module of pulsarctl/ or store/ imports, even inside a function, one that imports it
    back: a cascade against the layers (deleting a topic drops its subscriptions) sits in the
    module above both (pulsarctl/broker/cascade.py), and `pulsarctl completion` builds its
    script from the running root command rather than importing the root app."""
    cycles = import_cycles(import_graph())
    assert cycles == [], "\n".join(" <-> ".join(c) for c in cycles)


def lazy_imports_without_a_reason() -> list[str]:
    """Imports made inside a function (lazy imports) with no comment on their line or the line
    before saying why they are not at the top of the module."""
    out = []
    for r, tree in parsed():
        lines = source_text(r).splitlines()
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                here = lines[node.lineno - 1]
                before = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
                if "#" not in here and not before.startswith("#"):
                    out.append(f"{r}:{node.lineno}: {here.strip()}")
    return out


def test_every_lazy_import_says_why():
    """Issue 15: imports belong at the top of a module; one made inside a function stays only
    where start-up needs it (one-shot produce, building the command tree, optional or costly
    packages such as pyarrow and lz4) or a name clash forces it, and says so in a comment."""
    missing = lazy_imports_without_a_reason()
    assert not missing, f"{len(missing)} lazy imports with no reason given:\n" + "\n".join(
        missing[:40])


def test_the_lazy_import_check_catches(tmp_path, monkeypatch):
    (tmp_path / "pulsarctl").mkdir()
    (tmp_path / "pulsarctl" / "m.py").write_text(
        "def f():\n    import json\n    return json\n\n"
        "def g():\n    import lz4.frame  # lazy: optional\n    return lz4\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert lazy_imports_without_a_reason() == ["pulsarctl/m.py:2: import json"]


# -- the Broker's facade (issue 29 item 2) -----------------------------------------------------
# Transactions are the Broker's own business: a body run in one from outside skips the routing
# of non-persistent topics to the Broker that holds them (serve's CONSUMER_STATS read None for a
# non-persistent consumer that way). Callers use the Broker's named methods and nouns.
TRANSACTION_METHODS = {"read", "write", "read_in_place", "_read", "_write", "_read_in_place"}
# What the code calls a Broker handle.
BROKER_NAMES = {"broker", "b", "_broker", "np", "owner", "parent"}
# Wrappers that make a transaction body of a function.
BODY_MAKERS = {"attrgetter", "itemgetter", "methodcaller", "partial"}
# No exception: serve too calls the named methods (issue 29 item 2).
FACADE_EXCEPTIONS: tuple = ()


def _tail_name(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _tail_name(node.func)
    return None


def facade_violations(relpath: str, tree: ast.AST) -> list[str]:
    """Calls outside pulsarctl/broker that run a body in a Broker transaction: read, write or
    read_in_place (or the private _read, _write, _read_in_place) on a handle named as a Broker
    is, or given a body: a lambda, a function of the module, a function of pulsarctl imported
    by name or through its module, or one wrapped by attrgetter/partial. (A file's f.write(text)
    or os.read(fd, n) passes none of these.)"""
    if (not relpath.startswith("pulsarctl/") or relpath.startswith("pulsarctl/broker/")
            or relpath.startswith(FACADE_EXCEPTIONS)):
        return []
    defs = {n.name for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    ours = set()  # names bound to pulsarctl modules or to functions imported from them
    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom)
                and _resolve_from(node, relpath).startswith("pulsarctl")):
            ours |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            ours |= {a.asname or a.name.split(".")[0] for a in node.names
                     if a.name.startswith("pulsarctl")}

    def body(arg, local: set) -> bool:
        if isinstance(arg, ast.Lambda):
            return True
        if isinstance(arg, ast.Name):
            return arg.id not in local and (arg.id in defs or arg.id in ours)
        if isinstance(arg, ast.Attribute):
            base = arg.value
            while isinstance(base, ast.Attribute):
                base = base.value
            return isinstance(base, ast.Name) and base.id in ours and base.id not in local
        if isinstance(arg, ast.Call):
            return _tail_name(arg.func) in BODY_MAKERS
        return False

    out = []

    def visit(node, local: set) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            # a function's parameters and the names it assigns shadow the module's
            a = node.args
            local = local | {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
            local |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
            local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                      and isinstance(n.ctx, ast.Store)}
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in TRANSACTION_METHODS):
            attr, handle = node.func.attr, node.func.value
            own = isinstance(handle, ast.Name) and handle.id in ("self", "cls")
            if ((attr.startswith("_") and not own) or _tail_name(handle) in BROKER_NAMES
                    or (node.args and body(node.args[0], local))):
                out.append(f"{relpath}:{node.lineno}: .{attr}(...) runs a body in a Broker "
                           "transaction: call a named method of the Broker or its nouns")
        for child in ast.iter_child_nodes(node):
            visit(child, local)
    visit(tree, set())
    return out


def test_nothing_outside_the_broker_runs_a_body_in_its_transactions():
    found = _all(facade_violations)
    assert found == [], "\n".join(found)


def test_the_broker_has_no_public_transaction_methods():
    from pulsarctl.broker import Broker

    assert not {"read", "write", "read_in_place"} & set(dir(Broker))
    assert FACADE_EXCEPTIONS == ()


@pytest.mark.parametrize("relpath, code", [
    ("pulsarctl/offload.py", "def f(broker):\n    return broker.read(lambda ctx: 1)"),
    ("pulsarctl/offload.py", "def f(broker):\n    def run(ctx):\n        pass\n"
                             "    return broker.write(run)"),
    ("pulsarctl/spark/_access.py", "def f(b):\n    return b.read_in_place(g)"),
    ("pulsarctl/spark/_access.py", "def f(state):\n    return state.handle._read(g)"),
    ("pulsarctl/rest/access.py", "import operator\ndef f(x):\n"
                                 "    return x.read(operator.attrgetter('now'))"),
    ("pulsarctl/dashboard.py", "from pulsarctl.auth import authorization\ndef f(s):\n"
                               "    return s.store.read(authorization.allowed, 'r')"),
    ("pulsarctl/cli/top_cmd.py", "from pulsarctl.broker.producers import last_sequence_id\n"
                                 "def f(h, t):\n    return h.read(last_sequence_id, t, 'p')"),
    ("pulsarctl/cli/top_cmd.py", "def f(state):\n    return state.broker().write(g)"),
    ("pulsarctl/rest/app.py", "def f(self):\n    return self._broker.read(g)"),
    ("pulsarctl/serve/connection.py", "def f(s):\n    return s.broker.read(g)"),
])
def test_facade_check_catches(relpath, code):
    assert _check(facade_violations, relpath, code)


@pytest.mark.parametrize("relpath, code", [
    ("pulsarctl/config.py", "def f(path):\n    with open(path) as f:\n        return f.read()"),
    ("pulsarctl/cli/dlq_cmd.py", "def f(fh, text):\n    fh.write(text)\n    fh.write(b'x')"),
    ("pulsarctl/client/produce.py", "import os\ndef f(fd):\n    return os.read(fd, 1 << 16)"),
    ("pulsarctl/cli/serve_cmd.py", "from pulsarctl.serve import conf\ndef f(config):\n"
                                   "    return conf.read(config)"),
    ("pulsarctl/broker/admin/topics.py", "def f(self):\n    return self._broker._read(run)"),
    ("pulsarctl/offload.py", "def f(broker, t):\n    return broker.offloader.status(t)"),
    ("pulsarctl/cli/render.py", "import sys\ndef data(obj):\n    pass\n"
                                "def out_bytes(data):\n    sys.stdout.buffer.write(data)"),
    ("pulsarctl/client/reading.py", "class R:\n    def read(self, n):\n"
                                    "        return self._read(n)"),
])
def test_facade_check_allows(relpath, code):
    assert _check(facade_violations, relpath, code) == []
