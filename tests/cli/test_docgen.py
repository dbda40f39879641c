"""completions/ and man/ are generated from the command tree (pulsarctl.cli.docgen): they must
match a fresh generation, the scripts must really complete, and the man pages must cover every
command."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

import pulsarctl
from pulsarctl.cli import docgen
from pulsarctl.cli.app import app
from pulsarctl.errors import EXIT_CODES

REPO = Path(__file__).resolve().parents[2]
BASH_SCRIPT = REPO / "completions" / "pulsarctl.bash"
ZSH_SCRIPT = REPO / "completions" / "_pulsarctl"
FISH_SCRIPT = REPO / "completions" / "pulsarctl.fish"
MAN = REPO / "man"
ROFF_MACROS = (".TH", ".SH", ".SS", ".TP", ".PP", ".RS", ".RE", ".nf", ".fi", '.\\"')


def _commands(cmd=None, path=()):
    """(path, click command) for every visible command below the root, in tree order."""
    cmd = cmd or typer.main.get_command(app)
    for name, sub in getattr(cmd, "commands", {}).items():
        if sub.hidden:
            continue
        yield path + (name,), sub
        yield from _commands(sub, path + (name,))


COMMANDS = list(_commands())


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _code(text: str) -> str:
    """The script without its comment lines."""
    return "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))


def _option_flags(cmd) -> list[str]:
    return [f for p in cmd.params if p.param_type_name == "option" and not p.hidden
            for f in list(p.opts) + list(p.secondary_opts)]


def _on_disk(root: Path) -> set[str]:
    return {f"{d}/{p.name}" for d in ("completions", "man") for p in (root / d).iterdir()}


# -- drift -------------------------------------------------------------------------------------
def test_regenerating_gives_the_committed_files(tmp_path):
    written = docgen.write_all(str(tmp_path))
    assert _on_disk(tmp_path) == set(written)
    # Every file under completions/ and man/ is generated, and every generated file is there.
    assert _on_disk(REPO) == set(written), "run `python -m pulsarctl.cli.docgen`"
    for rel in written:
        fresh = (tmp_path / rel).read_bytes()
        assert (REPO / rel).read_bytes() == fresh, f"{rel} is stale: run " \
            "`python -m pulsarctl.cli.docgen`"
    assert docgen.stale(str(REPO)) == []


def test_check_names_stale_and_leftover_files(tmp_path):
    docgen.write_all(str(tmp_path))
    assert docgen.stale(str(tmp_path)) == []
    (tmp_path / "man" / "pulsarctl-topics.1").write_text("old\n")
    (tmp_path / "man" / "pulsarctl-gone.1").write_text("a page for a removed group\n")
    (tmp_path / "completions" / "pulsarctl.bash").unlink()
    assert sorted(docgen.stale(str(tmp_path))) == [
        "completions/pulsarctl.bash", "man/pulsarctl-gone.1", "man/pulsarctl-topics.1"]
    docgen.write_all(str(tmp_path))
    assert docgen.stale(str(tmp_path)) == []
    assert not (tmp_path / "man" / "pulsarctl-gone.1").exists()


def test_output_does_not_depend_on_hash_seed_terminal_or_environment(tmp_path):
    # The help option's names come from a set: another hash seed must not reorder them.
    env = dict(os.environ, PYTHONHASHSEED="12345", COLUMNS="20", LINES="5", TERM="dumb",
               HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "d"), NO_COLOR="1")
    res = subprocess.run([sys.executable, "-m", "pulsarctl.cli.docgen", "--check"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert docgen.files() == docgen.files()


# -- bash: a real shell completes ---------------------------------------------------------------
def _bash_complete(*words: str) -> list[str]:
    script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); '
              '_pulsarctl; printf "%s\\n" "${COMPREPLY[@]}"')
    res = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash",
                          str(BASH_SCRIPT), *words], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return [w for w in res.stdout.split("\n") if w]


@pytest.mark.parametrize("words, expected", [
    (["pulsarctl", "topi"], ["topics"]),
    (["pulsarctl", "topics", "st"], ["stats", "stats-internal"]),
    (["pulsarctl", "consume", "t", "-o", ""], ["text", "json", "ndjson"]),
    (["pulsarctl", "produce", "t", "--ord"], ["--ordering-key"]),
    (["pulsarctl", "consume", "t", "-s", "sub", "-t", ""],
     ["Exclusive", "Shared", "Failover", "Key_Shared"]),
    (["pulsarctl", "consume", "t", "--subscription-type", "K"], ["Key_Shared"]),
    (["pulsarctl", "completion", ""], ["bash", "zsh", "fish"]),
    (["pulsarctl", "perf", "consume", "-t", "F"], ["Failover"]),
    (["pulsarctl", "perf", ""], ["produce", "consume", "timers", "delayed", "compare"]),
    # global options and their values are skipped on the way to the subcommand
    (["pulsarctl", "--store", "/tmp/x", "-o", "json", "topi"], ["topics"]),
    (["pulsarctl", "-o", ""], ["text", "json", "ndjson"]),
    # bash splits --opt=value at '=' (COMP_WORDBREAKS)
    (["pulsarctl", "--output", "=", "nd"], ["ndjson"]),
    (["pulsarctl", "--output=j"], ["--output=json"]),
    (["pulsarctl", "produce", "t", "--compression", "z"], ["zlib", "zstd"]),
    (["pulsarctl", "produce", "t", "-d"], ["-db"]),
    (["pulsarctl", "no-such-command", ""], []),
    (["pulsarctl", "completion", "bash", ""], []),
])
def test_bash_completes(words, expected):
    assert _bash_complete(*words) == expected


def test_bash_completes_every_command_and_option():
    for path, cmd in COMMANDS:
        parent = list(path[:-1])
        assert path[-1] in _bash_complete("pulsarctl", *parent, ""), path
        if getattr(cmd, "commands", None) is None:
            flags = set(_option_flags(cmd))
            assert flags | {"-h", "--help"} == set(_bash_complete("pulsarctl", *path, "-")), path


def test_bash_script_parses_and_runs_only_pulsarctl___complete():
    # Commands, options and fixed values are in the script; only names from the store are
    # asked of `pulsarctl __complete` (tests/cli/test_completion_names.py), never of python.
    res = subprocess.run(["bash", "-n", str(BASH_SCRIPT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    text = _read(BASH_SCRIPT)
    assert "complete -F _pulsarctl pulsarctl" in text
    assert not re.search(r"python|pulsarctl completion|_PULSARCTL_COMPLETE", _code(text), re.I)
    assert "local -a args=(__complete)" in text and '"$prog" "${args[@]}"' in text


# -- zsh and fish: parse with the real shell when installed, check the structure always ------
def _balanced_quotes(line: str, shell: str) -> bool:
    if shell == "zsh":
        line = line.replace("'\\''", "")
    else:
        line = line.replace("\\\\", "").replace("\\'", "")
    return line.count("'") % 2 == 0


def test_zsh_script():
    text = _read(ZSH_SCRIPT)
    if shutil.which("zsh"):
        res = subprocess.run(["zsh", "-n", str(ZSH_SCRIPT)], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
    lines = text.splitlines()
    assert lines[0] == "#compdef pulsarctl"
    assert "compdef _pulsarctl pulsarctl" in text and "python" not in _code(text).lower()
    assert all(_balanced_quotes(ln, "zsh") for ln in lines), "unbalanced quote"
    assert text.count("{") - text.count("\\{") == text.count("}") - text.count("\\}")
    defined = re.findall(r"^(_pulsarctl\w*)\(\) \{$", text, re.M)
    assert defined[0] == "_pulsarctl" and len(defined) == len(COMMANDS) + 1
    called = set(re.findall(r"\) (_pulsarctl\w*) && ret=0 ;;", text))
    assert called == set(defined[1:])
    for path, cmd in COMMANDS:
        assert re.search(rf"^ +'{re.escape(path[-1])}:", text, re.M), path  # in a command list
        for f in _option_flags(cmd):  # an _arguments spec: '(excl)-f+[help]...' or '*-f+[...'
            assert re.search(rf"^ +'(\([^)]*\)|\*){re.escape(f)}[=+]?\[", text, re.M), (path, f)
    assert "(text json ndjson)" in text and "(Exclusive Shared Failover Key_Shared)" in text
    assert "'1:shell:(bash zsh fish)'" in text


def test_fish_script():
    text = _read(FISH_SCRIPT)
    if shutil.which("fish"):
        res = subprocess.run(["fish", "-n", str(FISH_SCRIPT)], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert "python" not in _code(text).lower()
    assert all(_balanced_quotes(ln, "fish") for ln in lines), "unbalanced quote"
    in_function = False
    for ln in lines:  # only the helper function and `complete` lines
        if ln.startswith("function "):
            in_function = True
        elif in_function:
            in_function = ln != "end"
        else:
            assert ln.startswith("complete -c pulsarctl "), ln
    for path, cmd in COMMANDS:
        cond = ("__pulsarctl_use_subcommand" if len(path) == 1
                else f"__fish_seen_subcommand_from {path[-2]}")
        assert re.search(rf"^complete -c pulsarctl -n '{cond}[^']*' -a '{re.escape(path[-1])}'",
                         text, re.M), path
        for f in _option_flags(cmd):
            flag = f"-l {f[2:]}" if f.startswith("--") else \
                (f"-s {f[1:]}" if len(f) == 2 else f"-o {f[1:]}")
            assert re.search(rf"__fish_seen_subcommand_from {re.escape(path[-1])}[;'].* "
                             rf"{re.escape(flag)}( |$)", text, re.M), (path, f)
    assert "-x -a 'text json ndjson'" in text
    assert "-a 'bash zsh fish'" in text


# -- `pulsarctl completion` prints the committed scripts ---------------------------------------
@pytest.mark.parametrize("shell, path", [("bash", BASH_SCRIPT), ("zsh", ZSH_SCRIPT),
                                         ("fish", FISH_SCRIPT)])
def test_completion_command_prints_the_script(cli, shell, path):
    res = cli("completion", shell)
    assert res.exit_code == 0, res.stderr
    assert res.stdout == _read(path)


def test_completion_unknown_shell_is_usage_error(cli):
    res = cli("completion", "tcsh")
    assert res.exit_code == 2
    assert res.stdout == ""
    assert "tcsh" in res.stderr and len(res.stderr.strip().splitlines()) == 1


# -- man pages ---------------------------------------------------------------------------------
def _page_for(path: tuple[str, ...]) -> Path:
    """A command is described in its parent's page: pulsarctl.1 or pulsarctl-<group>.1."""
    return MAN / ("-".join(("pulsarctl",) + path[:-1]) + ".1")


def _roff(text: str) -> str:
    return text.replace("-", "\\-")


def test_man_pages_cover_every_command_and_option():
    for path, cmd in COMMANDS:
        page = _read(_page_for(path))
        assert f'.SS "{_roff(" ".join(path))}"' in page, (path, _page_for(path).name)
        if getattr(cmd, "commands", None) is not None:
            own = _read(MAN / ("-".join(("pulsarctl",) + path) + ".1"))
            assert f'.TH "{"-".join(("PULSARCTL",) + tuple(p.upper() for p in path))}" "1"' in own
            continue
        for f in _option_flags(cmd):
            assert f"\\fB\\%{_roff(f)}\\fR" in page, (path, f)


def test_man_pages_have_the_sections_and_a_fixed_version():
    assert (MAN / "pulsarctl.1").exists()
    for page in sorted(MAN.glob("*.1")):
        text = _read(page)
        th = text.splitlines()[1]
        assert th.startswith(".TH ") and pulsarctl.__version__ in th, page.name
        assert not re.search(r"\d{4}-\d{2}-\d{2}", th)
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "EXIT STATUS",
                        "ENVIRONMENT"):
            assert f"\n.SH {section}\n" in text, (page.name, section)
        exit_status = text.split("\n.SH EXIT STATUS\n")[1].split("\n.SH ")[0] + "\n"
        for code, meaning in EXIT_CODES.items():
            assert f".TP\n\\fB\\%{code}\\fR\n{_roff(meaning)}\n" in exit_status, (page.name, code)
        for var in ("PULSARCTL_STORE", "NO_COLOR", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
            assert f"\\fB\\%{var}\\fR" in text, (page.name, var)
        assert "\n\n" not in text, page.name  # a blank line is a paragraph break in roff
        # No line of text may be taken for a request: every control line is a known macro.
        for ln in text.splitlines():
            if ln.startswith((".", "'")):
                assert ln.startswith(ROFF_MACROS), (page.name, ln)
    root = _read(MAN / "pulsarctl.1")
    for path, cmd in COMMANDS:
        if len(path) == 1 and getattr(cmd, "commands", None) is not None:
            assert f"\\fB\\%pulsarctl\\-{path[0]}\\fR(1)" in root.split("\n.SH SEE ALSO\n")[1]


def test_every_page_has_examples_from_the_table():
    pages = {("-".join(("pulsarctl",) + path) + ".1"): path for path in docgen.EXAMPLES}
    assert set(pages) == {p.name for p in MAN.glob("*.1")}  # no page without, no stale key
    for name, path in pages.items():
        text = _read(MAN / name)
        section = text.split("\n.SH EXAMPLES\n")[1].split("\n.SH ")[0]
        for what, lines in docgen.EXAMPLES[path]:
            assert docgen._roff(what) in section, (name, what)
            for ln in lines.split("\n"):
                assert f"\n{docgen._roff(ln)}\n" in section, (name, ln)
        # EXAMPLES comes after ENVIRONMENT, before SEE ALSO (man-pages(7) order)
        order = [text.index(f"\n.SH {s}\n") for s in ("ENVIRONMENT", "EXAMPLES")]
        assert order == sorted(order), name
        if "\n.SH SEE ALSO\n" in text:
            assert text.index("\n.SH EXAMPLES\n") < text.index("\n.SH SEE ALSO\n"), name


def _parse(args: list[str]):
    """Parse a command line against the command tree as click would, without running it:
    unknown commands or options, missing arguments and bad values raise."""
    root = typer.main.get_command(app)
    ctx = root.make_context("pulsarctl", list(args))
    cmd = root
    while getattr(cmd, "commands", None) is not None:
        name, cmd, rest = cmd.resolve_command(ctx, ctx._protected_args + ctx.args)
        ctx = cmd.make_context(name, rest, parent=ctx)
    return ctx


EXAMPLE_LINES = [(path, cmd) for path, exs in docgen.EXAMPLES.items() for _, text in exs
                 for cmd in docgen.example_commands(text)]


@pytest.mark.parametrize("path, args", EXAMPLE_LINES, ids=[" ".join(a) for _, a in EXAMPLE_LINES])
def test_every_example_parses_against_the_command_tree(path, args):
    ctx = _parse(args)
    assert getattr(ctx.command, "commands", None) is None  # a command, not just a group
    # an example sits on the page of the group its command belongs to (or below)
    command_path = tuple(ctx.command_path.split()[1:])
    assert command_path[:len(path)] == path, (path, command_path)


def test_every_example_line_is_a_pulsarctl_command():
    for exs in docgen.EXAMPLES.values():
        for what, text in exs:
            assert what.endswith(":") and text.strip() == text, what
            assert len(docgen.example_commands(text)) == len(text.split("\n")), text


@pytest.mark.parametrize("args", [
    ["consume", "orders"],                       # -s is required
    ["consume", "orders", "-s", "x", "--nope"],  # no such option
    ["topics", "no-such-command", "t"],
    ["topics"],                                  # a group, not a command
    ["consume", "orders", "-s", "x", "-n", "many"],
])
def test_the_example_check_catches_bad_lines(args):
    with pytest.raises(Exception):
        ctx = _parse(args)
        assert getattr(ctx.command, "commands", None) is None


def test_example_commands_are_split_as_the_shell_would():
    text = ("seq 1 3 | pulsarctl produce t --stdin\n"
            "pulsarctl receive t -s s -o ndjson > out.ndjson && pulsarctl ack t -s s - < out\n"
            "pulsarctl consume t -s s --exec 'wc -c'   # a comment")
    assert docgen.example_commands(text) == [
        ["produce", "t", "--stdin"], ["receive", "t", "-s", "s", "-o", "ndjson"],
        ["ack", "t", "-s", "s", "-"], ["consume", "t", "-s", "s", "--exec", "wc -c"]]


def test_optional_arguments_are_bracketed_once():
    # `dlq list [NS]` declares its brackets; the synopsis must not add a second pair
    text = _read(MAN / "pulsarctl-dlq.1")
    assert "\\fB\\%list\\fR [\\fIOPTIONS\\fR] \\fI[NS]\\fR\n" in text
    for page in MAN.glob("*.1"):
        assert "[\\fI[" not in _read(page), page.name


def test_roff_escaping():
    assert docgen._roff("a\\b") == "a\\eb"
    assert docgen._roff(".hidden request") == "\\&.hidden request"
    assert docgen._roff("'quote") == "\\&'quote"
    assert docgen._roff("--flag") == "\\-\\-flag"
    assert docgen._paragraphs("one\n\n.two") == "one\n.PP\n\\&.two"


# -- every command's --help works ----------------------------------------------------------
@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_every_command_help_exits_0(cli, path):
    res = cli(*path, "--help")
    assert res.exit_code == 0, res.stderr
    assert "Usage" in res.stdout and " ".join(path) in res.stdout


def test_hidden_commands_and_options_are_left_out():
    import typer

    demo = typer.Typer(context_settings={"help_option_names": ["-h", "--help"]})
    group = typer.Typer()
    demo.add_typer(group, name="grp", help="A group.")

    @demo.command(help="Shown.")
    def shown(secret: bool = typer.Option(False, "--secret-flag", hidden=True),
              level: str = typer.Option("x", "--level", help="low|high")):
        pass

    @demo.command(hidden=True)
    def invisible():
        pass

    @group.command("sub", help="Visible sub.")
    def sub():
        pass

    @group.command("ghost", hidden=True)
    def ghost():
        pass

    root = docgen.tree(demo)
    assert [n.key for n in root.walk()] == ["", "shown", "grp", "grp sub"]
    assert root.subs[0].all_flags() == ["--level", "-h", "--help"]
    assert root.subs[0].opts[0].choices == ("low", "high")
    texts = [docgen._bash(root), docgen._zsh(root), docgen._fish(root)]
    texts += [docgen._man(n, "9") for n in root.walk() if n is root or n.is_group]
    for text in texts:
        assert "invisible" not in text and "ghost" not in text and "secret" not in text
        assert "shown" in text or "sub" in text


def test_hidden_options_with_a_value_are_skipped_but_never_offered():
    """A hidden option that takes a value (the authentication flags: `pulsarctl --token T
    consume ...`) is never offered, but the scripts must know it takes a value: else its value
    counts as the command or as a positional argument, and every name after it is off by one."""
    import typer

    demo = typer.Typer(context_settings={"help_option_names": ["-h", "--help"]})

    @demo.callback()
    def root_(token: str = typer.Option(None, "--pass-phrase", metavar="TOKEN", hidden=True)):
        pass

    @demo.command(help="Shown.")
    def shown(level: str = typer.Option("x", "--level", help="low|high")):
        pass

    root = docgen.tree(demo)
    assert "--pass-phrase" in root.value_flags()
    assert "--pass-phrase" not in root.all_flags()
    bash, zsh, fish = docgen._bash(root), docgen._zsh(root), docgen._fish(root)
    assert 'gvopts="--pass-phrase"' in bash and 'vopts="--pass-phrase"' in bash
    assert re.search(r'\n +opts="[^"\n]*"', bash) and "pass-phrase" not in "".join(
        re.findall(r'\n +opts="[^"\n]*"', bash))
    assert "'!--pass-phrase=:TOKEN: '" in zsh
    assert "else if contains -- $t --pass-phrase" in fish
    assert "-l pass-phrase" not in fish
    assert "pass-phrase" not in docgen._man(root, "9")
