"""The fast path for `produce` (pulsarctl/cli/fast.py) must behave exactly as the typer command:
same flags, same destinations, same output, same stored messages; it only starts faster, by
never importing typer or rich."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import typing

import pytest
import typer

from pulsarctl.cli import fast
from pulsarctl.cli.app import app, run as app_run


def _command(name: str):
    return typer.main.get_command(app).commands[name]


def _options(cmd) -> dict:
    """flag -> click parameter, for every option of a command."""
    out = {}
    for p in cmd.params:
        for flag in [*p.opts, *p.secondary_opts]:
            if flag.startswith("-"):
                out[flag] = p
    return out


# -- the flag table ----------------------------------------------------------------------------
@pytest.mark.parametrize("flag", sorted(fast.PRODUCE_FLAGS))
def test_every_fast_flag_exists_on_the_typer_command(flag):
    dest, kind = fast.PRODUCE_FLAGS[flag]
    opts = _options(_command("produce"))
    assert flag in opts, f"{flag} is parsed by the fast path but unknown to `produce`"
    param = opts[flag]
    assert param.name == dest, f"{flag}: fast path sets {dest}, typer sets {param.name}"
    assert kind in ("list", "str", "int", "flag"), kind
    assert bool(param.is_flag) == (kind == "flag"), flag
    assert bool(param.multiple) == (kind == "list"), flag


def test_fast_flag_kinds_match_the_typer_annotations():
    from pulsarctl.cli import client_cmds

    hints = typing.get_type_hints(client_cmds.produce, include_extras=True)

    def base(tp):
        while typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if typing.get_origin(tp) is typing.Union and len(args) == 1:
            tp = args[0]
        return tp

    for flag, (dest, kind) in fast.PRODUCE_FLAGS.items():
        tp = base(hints[dest])
        expected = {"int": int, "flag": bool, "str": str}.get(kind)
        if kind == "list":
            assert typing.get_origin(base(tp)) is list, (flag, tp)
        else:
            assert tp is expected, (flag, dest, tp)


def test_every_fast_flag_spelling_of_a_parameter_is_known():
    """If the fast path knows one spelling of an option it must know all of them, or the other
    spelling silently takes the slow path (harmless) -- but a spelling it knows with the wrong
    destination would not be. Check the table covers whole options."""
    opts = _options(_command("produce"))
    for flag, (dest, _kind) in fast.PRODUCE_FLAGS.items():
        for other in [*opts[flag].opts, *opts[flag].secondary_opts]:
            assert fast.PRODUCE_FLAGS.get(other, (dest,))[0] == dest


@pytest.mark.parametrize("flag", sorted(fast.GLOBAL_FLAGS))
def test_global_flags_exist_on_the_root(flag):
    root = typer.main.get_command(app)
    opts = _options(root)
    assert flag in opts
    assert opts[flag].name == fast.GLOBAL_FLAGS[flag]


def test_produce_options_the_fast_path_does_not_know_fall_back():
    opts = _options(_command("produce"))
    for flag, param in opts.items():
        if flag in fast.PRODUCE_FLAGS or flag in ("-h", "--help"):
            continue
        argv = ["produce", "t", "-m", "x", flag] + ([] if param.is_flag else ["v"])
        assert fast.parse(argv) is None, f"the fast path swallowed {flag}"


# -- what the fast path must not handle --------------------------------------------------------
@pytest.mark.parametrize("argv", [
    [],
    ["--help"],
    ["-h"],
    ["produce", "--help"],
    ["produce", "t", "-m", "x", "--help"],
    ["produce", "t", "-m", "x", "-h"],
    ["produce", "t", "--stdin"],
    ["produce", "t", "--stdin", "--ndjson"],
    ["produce", "t", "-f", "-"],
    ["produce", "t", "--files", "-"],
    ["produce", "t", "-m", "x", "--bogus"],
    ["produce", "t", "-m", "x", "-Z", "1"],
    ["produce", "t", "-m", "x", "--"],
    ["produce", "-m", "x"],
    ["produce", "t"],
    ["produce", "t", "-k", "k"],
    ["produce", "t", "-m"],
    ["produce", "t", "u", "-m", "x"],
    ["produce", "t", "-m", "x", "-o", "bad"],
    ["produce", "t", "-m", "x", "--output=yaml"],
    ["-o", "bad", "produce", "t", "-m", "x"],
    ["--traceback", "produce", "t", "-m", "x"],
    ["--store"],
    ["produce", "t", "-m", "x", "-n", "many"],
    ["produce", "t", "-m", "x", "--sequence-id", "1.5"],
    ["produce", "t", "-m", "x", "-db=yes"],
    ["produce", "t", "-m", "x", "--rate", "10"],
    ["produce", "t", "-m", "x", "--compression", "lz4"],
    ["consume", "t", "-s", "s"],
    ["topics", "list"],
    ["version"],
])
def test_parse_refuses(argv):
    assert fast.parse(argv) is None
    assert fast.try_run(argv) is None


def test_parse_result_shape():
    store, output, topic, kwargs = fast.parse(
        ["--store", "/x", "produce", "t", "-m", "a", "-m", "b", "-k", "k", "-n", "2", "-o", "json"])
    assert (store, output, topic) == ("/x", "json", "t")
    assert kwargs == {"messages": ["a", "b"], "key": "k", "num_produce": 2}


# -- same output, same store -------------------------------------------------------------------
STORE = "{STORE}"
FILE = "{FILE}"

VECTORS = [
    ["produce", "t", "-m", "a"],
    ["produce", "t", "-m", "a", "-m", "b", "-m", "c,d"],
    ["produce", "t", "-m", "a,b,c", "-s", ","],
    ["produce", "t", "-m", "a|b", "--separator", "|", "-m", "c"],
    ["produce", "t", "-m", "a", "-m", "b", "-n", "3"],
    ["produce", "t", "-m", "x", "-n", "0"],
    ["produce", "t", "-m", "x", "-k", "cust-1", "--ordering-key", "ok"],
    ["produce", "t", "-m", "x", "-p", "a=b", "-p", "c=d=e", "--properties", "f="],
    ["produce", "t", "-m", "x", "--producer-name", "my-prod", "--sequence-id", "41"],
    ["produce", "t", "-m", "x", "-m", "y", "--sequence-id", "7"],
    ["produce", "t", "-m", "x", "--event-time", "2026-01-01T00:00:00Z"],
    ["produce", "t", "-m", "x", "--event-time", "1767225600123"],
    ["produce", "t", "-m", "x", "--deliver-at", "2026-01-01T00:00:00Z"],
    ["produce", "t", "-m", "x", "-db"],
    ["produce", "t", "-m", "x", "--disable-batching"],
    ["produce", "t", "-f", FILE],
    ["produce", "t", "-f", f"{FILE},{FILE}", "--files", FILE, "-m", "m"],
    ["produce", "t", "-m", "x", "-m", "y", "-o", "json"],
    ["produce", "t", "-m", "x", "-m", "y", "-o", "ndjson"],
    ["produce", "t", "-m", "x", "-o", "text"],
    ["produce", "t", "-m", "x", "--output", "json"],
    ["-o", "json", "produce", "t", "-m", "x"],
    ["--output", "ndjson", "produce", "t", "-m", "x"],
    ["-o", "json", "produce", "t", "-m", "x", "-o", "ndjson"],
    ["--store", STORE, "produce", "t", "-m", "x"],
    ["--store", STORE, "-o", "json", "produce", "t", "-m", "x", "-k", "k"],
    [f"--store={STORE}", "--output=ndjson", "produce", "t", "-m", "x"],
    ["produce", "t", "--messages=x", "--key=k", "--num-produce=2", "--properties=a=b=c",
     "--producer-name=pn", "--sequence-id=5", "--ordering-key=ok", "--separator=,",
     "--output=json", "--event-time=2026-01-01T00:00:00Z"],
    ["produce", "t", "--messages=", "--messages=a=b"],
    ["produce", "persistent://public/default/t", "-m", "full name"],
    ["produce", "public/default/t", "-m", "x"],
    ["produce", "t", "-m", "-dash", "-k", "-k"],
    ["produce", "t", "-m", "ünïcödé ✓"],
    ["produce", "-m", "x", "t"],
    # errors must be the same too
    ["produce", "t", "-m", "x", "-p", "novalue"],
    ["produce", "a/b", "-m", "x"],
    ["produce", "persistent://", "-m", "x"],
    ["produce", "t", "-m", "x", "-n", "-1"],
    ["produce", "t", "-f", "/nonexistent/file"],
    ["produce", "t", "-m", "x", "--event-time", "yesterday"],
    ["produce", "t", "-m", "x", "--deliver-after", "abc"],
]


def _run(fn, argv, store, file, monkeypatch, capsys):
    argv = [a.replace(STORE, store).replace(FILE, file) for a in argv]
    monkeypatch.setenv("PULSARCTL_STORE", store)
    monkeypatch.setenv("NO_COLOR", "1")
    capsys.readouterr()
    code = fn(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _stored(store, monkeypatch, capsys):
    monkeypatch.setenv("PULSARCTL_STORE", store)
    capsys.readouterr()
    code = app_run(["read", "t", "-m", "earliest", "-n", "0", "--until-end", "-o", "ndjson"])
    out = capsys.readouterr().out
    recs = [json.loads(line) for line in out.splitlines() if line.strip()]
    for r in recs:
        r.pop("publishTime", None)
        r.pop("producerName", None)
    return code, recs


@pytest.mark.parametrize("argv", VECTORS, ids=[" ".join(v) for v in VECTORS])
def test_fast_path_and_typer_agree(argv, tmp_path, monkeypatch, capsys):
    file = tmp_path / "payload.bin"
    file.write_bytes(b"file body\n\x00\xff")
    fast_store, typer_store = str(tmp_path / "fast"), str(tmp_path / "typer")
    fast_store_argv = [a.replace(STORE, fast_store) for a in argv]
    assert fast.parse(fast_store_argv) is not None, "this vector should take the fast path"

    got_fast = _run(fast.try_run, argv, fast_store, str(file), monkeypatch, capsys)
    got_typer = _run(app_run, argv, typer_store, str(file), monkeypatch, capsys)
    assert got_fast[0] == got_typer[0], f"exit codes differ: fast {got_fast} typer {got_typer}"
    assert got_fast[1] == got_typer[1], "stdout differs"
    assert got_fast[2] == got_typer[2], "stderr differs"
    assert "Traceback" not in got_fast[2]

    stored_fast = _stored(fast_store, monkeypatch, capsys)
    stored_typer = _stored(typer_store, monkeypatch, capsys)
    assert stored_fast == stored_typer


@pytest.mark.parametrize("argv", [
    ["produce", "t", "-m=hello"],
    ["produce", "t", "-m", "x", "-k=key"],
    ["-o=json", "produce", "t", "-m", "x"],
])
def test_short_options_with_equals_are_left_to_typer(argv):
    # click never splits -f=value (the value is "=value"); the fast path declines such lines
    # rather than guess, so they behave exactly as typer makes them behave.
    assert fast.parse(argv) is None


# -- a plain produce never imports typer or rich -----------------------------------------------
WRAPPER = r"""
import json, sys
report, argv = sys.argv[1], sys.argv[2:]
from pulsarctl.cli.entry import main
code = None
try:
    main(argv)
except SystemExit as exc:
    code = exc.code
mods = sorted(m for m in sys.modules if m.split(".")[0] in ("typer", "rich", "click"))
with open(report, "w") as f:
    json.dump({"code": code, "modules": mods}, f)
"""


def _wrapped(tmp_path, store, *argv):
    report = tmp_path / "report.json"
    env = dict(os.environ, PULSARCTL_STORE=store, NO_COLOR="1")
    r = subprocess.run([sys.executable, "-c", WRAPPER, str(report), *argv], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(report.read_text()), r


def test_plain_produce_does_not_import_typer_or_rich(tmp_path, store_path):
    rep, r = _wrapped(tmp_path, store_path, "produce", "t", "-m", "a", "-m", "b", "-k", "k",
                      "-p", "a=b", "-o", "json")
    assert rep["code"] == 0, r.stderr
    assert rep["modules"] == [], f"the fast path imported {rep['modules']}"
    assert len(json.loads(r.stdout)["messageIds"]) == 2
    # the control: a command no fast path handles (fast.py, fast_run.py) does import typer
    rep, r = _wrapped(tmp_path, store_path, "consume", "t", "-s", "c", "-p", "Earliest", "-n",
                      "2", "-o", "ndjson")
    assert rep["code"] == 0, r.stderr
    assert "typer" in rep["modules"]
    assert [json.loads(x)["payload"] for x in r.stdout.splitlines()] == ["a", "b"]


def test_python_m_pulsarctl_produce_does_not_import_typer(store_path):
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "pulsarctl", "produce", "t",
                        "-m", "x"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1:0:-1"
    imported = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines()
                if line.startswith("import time:") and "|" in line]
    assert "pulsarctl.cli.fast" in imported
    heavy = [m for m in imported if m.split(".")[0] in ("typer", "rich", "click")]
    assert heavy == [], heavy
