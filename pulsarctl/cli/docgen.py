"""Shell completion scripts and man pages, generated from the typer command tree.

`python -m pulsarctl.cli.docgen` writes completions/ and man/ at the repository root;
`--check` only compares (exit 1 naming the stale files). tests/cli/test_docgen.py regenerates and
compares, so a command added without regenerating fails the tests.

This module is an entry point: it imports the root app (pulsarctl.cli.app) to walk its tree,
and nothing in pulsarctl/cli imports it. The tree is made by command_tree.py and the completion
scripts by completion_gen.py (which `pulsarctl completion` uses without the root app), the man
pages here; they carry an EXAMPLES section from EXAMPLES below. Output is byte-for-byte
deterministic: tree order is kept, nothing depends on the terminal, the environment or the date.
"""
from __future__ import annotations

import os
import re
import sys

from pulsarctl.cli import render
from pulsarctl.cli.command_tree import PROG, Node, short_help
from pulsarctl.cli.command_tree import tree as _tree
from pulsarctl.cli.completion_gen import (  # noqa: F401 - the generators, named here too
    GENERATED, _bash, _fish, _zsh)


# Examples for the man pages, by page (() is pulsarctl.1, ("dlq",) is pulsarctl-dlq.1): what it
# does, and the command lines (most from README.md, whose examples a test runs).
# tests/cli/test_docgen.py parses every pulsarctl command here against the command tree.
EXAMPLES: dict[tuple[str, ...], list[tuple[str, str]]] = {
    (): [
        ("Produce two messages with a key and a property, then consume them from the start "
         "(acking each one):",
         'pulsarctl produce orders -m "order 1" -m "order 2" -k customer-7 -p source=web\n'
         "pulsarctl consume orders -s billing -p Earliest -n 2"),
        ("Receive without acking, then ack from another command (ids on stdin):",
         "pulsarctl receive jobs -s workers -o ndjson > job.ndjson\n"
         "pulsarctl ack jobs -s workers - < job.ndjson"),
        ("One message per line on stdin, stored in batches; read the first three back:",
         "seq 1 1000 | pulsarctl produce numbers --stdin\n"
         "pulsarctl read numbers -m earliest -n 3 -o ndjson"),
        ("Shared subscriptions spread messages over consumers:",
         "pulsarctl receive orders -s audit -t Shared -p Earliest --consumer-name a "
         "--idle-timeout 1s"),
        ("Hand each message to a command; exit 0 acks, anything else nacks:",
         "pulsarctl consume invoices -s mailer -p Earliest -n 1 --exec 'wc -c'"),
        ("Install bash completion (zsh and fish likewise):",
         "pulsarctl completion bash > ~/.local/share/bash-completion/completions/pulsarctl"),
        ("Use another store for one command:",
         "pulsarctl --store /tmp/pulsar-play topics list public/default"),
        ("A message's life, oldest first, and every change of a command on stderr:",
         "pulsarctl explain 1:0:-1 -t jobs -s workers\n"
         "pulsarctl --explain clock advance 1m"),
        ("A live dashboard of a namespace, or one snapshot for scripts:",
         "pulsarctl top public/default\n"
         "pulsarctl top --once -o json"),
    ],
    ("topics",): [
        ("List the topics of a namespace, look inside one:",
         "pulsarctl topics list public/default\n"
         "pulsarctl topics stats orders -o json\n"
         "pulsarctl topics peek-messages orders -s audit -n 2"),
        ("A partitioned topic with four partitions, and its stats per partition:",
         "pulsarctl topics create-partitioned-topic clicks -p 4\n"
         "pulsarctl topics partitioned-stats clicks --per-partition -o json"),
        ("Create a subscription at the start, rewind another by ten minutes:",
         "pulsarctl topics create-subscription jobs -s workers -m earliest\n"
         "pulsarctl topics reset-cursor orders -s billing -t 10m"),
        ("Policies on one topic, and what is in force:",
         "pulsarctl topics set-deduplication public/orders/created --enable\n"
         "pulsarctl topics policies public/orders/created -o json"),
        ("Offload what is older than a week to another disk:",
         "pulsarctl topics offload orders --older-than 7d --to /mnt/shared/pulsar-tier\n"
         "pulsarctl topics offload-status orders"),
        ("The picture of a subscription's cursor, around one message:",
         "pulsarctl topics cursor jobs -s workers\n"
         "pulsarctl topics cursor jobs -s workers --around 1:40:-1 -n 20 -o json"),
    ],
    ("lesson",): [
        ("The guided scenarios, and one run without waiting for Enter:",
         "pulsarctl lesson list\n"
         "pulsarctl lesson run nack-backoff-and-dlq --yes"),
    ],
    ("context",): [
        ("A cluster as a context (its token kept 0600, never printed), made the current one; "
         "`--context local` runs a command on the store again:",
         "pulsarctl context set prod --service-url pulsar://broker:6650 --admin-url "
         "http://broker:8080 --token-file ~/.pulsar/token\n"
         "pulsarctl context use prod\n"
         "pulsarctl context current"),
    ],
    ("tenants",): [
        ("Create a tenant with an admin role, list them:",
         "pulsarctl tenants create acme -r ops\n"
         "pulsarctl tenants list"),
    ],
    ("namespaces",): [
        ("A namespace whose messages expire after an hour and are retained two hours:",
         "pulsarctl namespaces create public/orders\n"
         "pulsarctl namespaces set-message-ttl public/orders -ttl 1h\n"
         "pulsarctl namespaces set-retention public/orders --time 2h --size 1G"),
        ("Refuse producers past a backlog of 100 MB; show the policies:",
         "pulsarctl namespaces set-backlog-quota public/orders --limit 100M "
         "--policy producer_exception\n"
         "pulsarctl namespaces policies public/orders"),
        ("Let the role app produce and consume on the namespace's topics; list the grants:",
         "pulsarctl namespaces grant-permission public/orders --role app "
         "--actions produce,consume\n"
         "pulsarctl namespaces permissions public/orders"),
    ],
    ("tokens",): [
        ("A secret key, a token for the role app that expires in 30 days, and a check of it:",
         "pulsarctl tokens create-secret-key --output my-secret.key\n"
         "pulsarctl tokens create --secret-key file:///$PWD/my-secret.key --subject app "
         "--expiry-time 30d > app.token\n"
         "pulsarctl tokens validate --secret-key file:///$PWD/my-secret.key -f app.token"),
    ],
    ("brokers",): [
        ("Turn batch-index acknowledgement on for the whole store:",
         "pulsarctl brokers update-dynamic-config --config acknowledgmentAtBatchIndexLevelEnabled "
         "--value true\n"
         "pulsarctl brokers get-all-dynamic-config"),
    ],
    ("clock",): [
        ("Run the store on a simulated clock, move it on, and go back to real time:",
         "pulsarctl clock simulate --at 2026-01-01T00:00:00Z\n"
         "pulsarctl clock advance 10m\n"
         "pulsarctl clock real"),
    ],
    ("subscriptions",): [
        ("Who consumes, and what a subscription holds:",
         "pulsarctl subscriptions consumers orders audit\n"
         "pulsarctl subscriptions describe payments charger\n"
         "pulsarctl subscriptions pending payments charger -o json"),
    ],
    ("schemas",): [
        ("Show a topic's schema:",
         "pulsarctl schemas get orders -o json"),
    ],
    ("perf",): [
        ("Produce 200,000 messages of 100 bytes, then consume them:",
         "pulsarctl perf produce -n 200000 -s 100\n"
         "pulsarctl perf consume -n 200000"),
    ],
    ("daemon",): [
        ("Start the timer daemon and check on it, or tick once from cron:",
         "pulsarctl daemon start\n"
         "pulsarctl daemon status -o json\n"
         "pulsarctl daemon run-once"),
    ],
    ("dlq",): [
        ("See every dead letter topic, and what waits in one:",
         "pulsarctl dlq list\n"
         "pulsarctl dlq peek payments-charger-DLQ\n"
         "pulsarctl dlq stats payments-charger-DLQ --by-property REAL_SUBSCRIPTION -o json"),
        ("Replay to where the messages came from: first what would happen, then for real:",
         "pulsarctl dlq replay payments-charger-DLQ --to-origin --dry-run\n"
         "pulsarctl dlq replay payments-charger-DLQ --to-origin -y"),
        ("From cron: 500 at most, 50 a second, never waiting for another run:",
         "pulsarctl dlq replay orders-billing-DLQ --to-origin --max 500 --rate 50 --no-wait -y"),
        ("Archive what is left, then empty the DLQ:",
         "pulsarctl dlq drain orders-billing-DLQ --out /var/archive/orders-dlq.ndjson -y\n"
         "pulsarctl dlq purge orders-billing-DLQ -y"),
    ],
    ("spark",): [
        ("Export a topic to Parquet; report on a DLQ; reprocess it through a transform:",
         "pulsarctl spark export orders --format parquet --out /data/orders-export\n"
         "pulsarctl spark dlq-report orders-billing-DLQ --png dlq.png\n"
         "pulsarctl spark dlq-reprocess orders-billing-DLQ --transform fixes:repair"),
    ],
}

# Shell words that end a command, and redirections (whose next word is a file).
_SHELL_ENDS = ("|", "||", "&&", ";", "&")
_REDIRECTS = ("<", ">", ">>")


def example_commands(text: str) -> list[list[str]]:
    """The pulsarctl command lines of an example, each as its arguments (after `pulsarctl`):
    pipes, `&&`, `;`, redirections and comments are the shell's."""
    import shlex  # lazy: loaded when the command runs, not when the command tree is built

    out = []
    for line in text.split("\n"):
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        words, skip = [], False
        for w in list(lex) + [";"]:
            if skip:
                skip = False
            elif w in _REDIRECTS:
                skip = True
            elif w in _SHELL_ENDS:
                if words[:1] == [PROG]:
                    out.append(words[1:])
                words = []
            else:
                words.append(w)
    return out


ENVIRONMENT = (
    ("PULSARCTL_STORE", "Store directory, used when --store is not given."),
    ("NO_COLOR", "When set (to anything), text output has no colour."),
    ("XDG_DATA_HOME", "The default store is $XDG_DATA_HOME/pulsarctl/store "
                      "(~/.local/share/pulsarctl/store when unset)."),
    ("XDG_CONFIG_HOME", "The config file is $XDG_CONFIG_HOME/pulsarctl/config.toml "
                        "(~/.config/pulsarctl/config.toml when unset); its key store names "
                        "the store when neither --store nor PULSARCTL_STORE is given."),
)


def global_options_text() -> str:
    """Where the global options may go, said from what decides it (app.hoist_globals and the
    root's options): the man pages print this text, and README.md carries it word for word
    (tests/cli/test_papercuts.py compares them)."""
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli import app

    hoisted = set(app._GLOBAL_VALUED + app._GLOBAL_FLAGS)
    after, before = [], []
    for p in app.command().params:
        opts = [o for o in p.opts if o.startswith("-")]
        if not opts or "--help" in opts:
            continue
        word = "/".join(f"`{o}`" for o in opts)
        (after if set(opts) <= hoisted else before).append(word)
    listed = ", ".join(after[:-1]) + f" and {after[-1]}" if len(after) > 1 else after[0]
    return ("Global options go before the command (`pulsarctl --store PATH topics list`). "
            f"{listed} may also follow it, anywhere among its arguments up to a `--` "
            "(`pulsarctl topics list --store PATH`), unless the command has an option of that "
            "name itself (then it is the command's); "
            + " and ".join(before) + (" only go" if len(before) > 1 else " only goes")
            + " before it.")


def tree(typer_app=None) -> Node:
    """The command tree of `pulsarctl` (or of typer_app), hidden commands and options left out."""
    if typer_app is None:
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.cli.app import app as typer_app

    return _tree(typer_app)


# -- man pages ---------------------------------------------------------------------------------
def _roff(text: str) -> str:
    """Escape text for roff; a line may not start with a control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-").replace('"', "\\(dq")
    return "\n".join("\\&" + ln if ln.startswith((".", "'")) else ln for ln in text.split("\n"))


def _paragraphs(text: str) -> str:
    """Help text as roff paragraphs; click's \\b marks a paragraph not to be refilled."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        if not para.strip():
            continue
        if out:
            out.append(".PP")
        if para.startswith("\b"):
            out += [".nf", _roff(para[1:].strip("\n")), ".fi"]
        else:
            out.append(_roff(" ".join(para.split())))
    return "\n".join(out)


def _b(text: str) -> str:
    return f"\\fB\\%{_roff(text)}\\fR"  # \% keeps names and flags unhyphenated


def _i(text: str) -> str:
    return f"\\fI{_roff(text)}\\fR"


def _usage(n: Node, global_opts: bool = False) -> str:
    parts = [_b(PROG)]
    if global_opts:
        parts.append("[" + _i("GLOBAL OPTIONS") + "]")
    parts += [_b(p) for p in n.path]
    if n.opts:
        parts.append("[" + _i("OPTIONS") + "]")
    if n.is_group:
        parts.append(_i("COMMAND") + " [" + _i("ARGS") + "]...")
    for a in n.args:
        word = _i(a.metavar) + ("..." if a.variadic else "")
        parts.append(word if a.required or a.metavar.startswith("[") else f"[{word}]")
    return " ".join(parts)


def _options(n: Node) -> list[str]:
    out = []
    for o in n.opts:
        head = ", ".join(_b(f) for f in o.flags)
        if o.nvals:
            head += " " + " ".join([_i(o.metavar)] * o.nvals)
        notes = []
        if o.choices and not all(c in o.help for c in o.choices):
            notes.append("One of: " + ", ".join(o.choices) + ".")
        if o.multiple and "repeatable" not in o.help.lower():
            notes.append("Repeatable.")
        if o.required:
            notes.append("Required.")
        if o.default is not None:
            notes.append(f"Default: {o.default}.")
        out += [".TP", head, _roff(" ".join([o.help] + notes).strip()) or "\\&"]
    return out


def _arguments(n: Node) -> list[str]:
    out = []
    for a in n.args:
        notes = " One of: " + ", ".join(a.choices) + "." if a.choices and not all(
            c in a.help for c in a.choices) else ""
        out += [".TP", _i(a.metavar) + ("..." if a.variadic else ""),
                _roff((a.help + notes).strip()) or "\\&"]  # a blank line would break the list
    return out


def _examples(n: Node) -> list[str]:
    """The EXAMPLES section of n's page: each example's words, then its command lines."""
    out = []
    for what, lines in EXAMPLES.get(n.path, ()):
        out += [".PP" if out else ".SH EXAMPLES", _roff(what), ".PP", ".RS", ".nf"]
        out += [_roff(ln) for ln in lines.split("\n")]
        out += [".fi", ".RE"]
    return out


def _page_name(n: Node) -> str:
    return "-".join((PROG,) + n.path)


def _command_entry(n: Node) -> list[str]:
    """A command described inside its parent's page (a group gets its own page)."""
    out = [f'.SS "{_roff(n.key)}"']
    if n.is_group:
        out += [_roff(n.summary),
                f"See {_b(_page_name(n))}(1). Commands: "
                + ", ".join(_b(s.path[-1]) for s in n.subs) + "."]
        return out
    out += [_usage(n), ".PP", _paragraphs(n.help) or _roff(n.key)]
    if n.args:
        out += [".PP", "Arguments:", ".RS"] + _arguments(n) + [".RE"]
    if n.opts:
        out += [".PP", "Options:", ".RS"] + _options(n) + [".RE"]
    return out


def _man(n: Node, version: str) -> str:
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.errors import EXIT_CODES

    page = _page_name(n)
    out = [f'.\\" {GENERATED}',
           f'.TH "{page.upper()}" "1" "version {version}" "{PROG} {version}" "User Commands"',
           ".SH NAME", f"{_roff(page)} \\- {_roff(n.summary or short_help(n.help))}",
           ".SH SYNOPSIS", _usage(n, global_opts=bool(n.path)),
           ".SH DESCRIPTION", _paragraphs(n.help)]
    out += [".PP", _roff(global_options_text())
            + (f" The global options are listed in {_b(PROG)}(1)." if n.path else "")]
    if n.opts:
        out += [".SH OPTIONS"] + _options(n)
    out.append(".SH COMMANDS")
    for s in n.subs:
        out += _command_entry(s)
    out += [".SH EXIT STATUS"]
    for code, text in EXIT_CODES.items():
        out += [".TP", _b(str(code)), _roff(text)]
    out += [".SH ENVIRONMENT"]
    for name, text in ENVIRONMENT:
        out += [".TP", _b(name), _roff(text)]
    out += _examples(n)
    # The parent's page, then the pages of the groups below this one.
    see = [_page_name(Node(n.path[:-1], ""))] if n.path else []
    see += [_page_name(g) for g in n.walk() if g.is_group and g is not n]
    if see:
        out += [".SH SEE ALSO", ", ".join(f"{_b(x)}(1)" for x in see)]
    return "\n".join(out) + "\n"


# -- entry points ------------------------------------------------------------------------------
def man_pages() -> dict[str, str]:
    """File name -> roff text: pulsarctl.1 (root and its leaf commands) and a page per group."""
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import __version__

    root = tree()
    return {_page_name(n) + ".1": _man(n, __version__) for n in root.walk()
            if n is root or n.is_group}


def files() -> dict[str, str]:
    """Every generated file, by path relative to the repository root."""
    root = tree()
    out = {f"completions/{PROG}.bash": _bash(root), f"completions/_{PROG}": _zsh(root),
           f"completions/{PROG}.fish": _fish(root)}
    out.update({f"man/{name}": text for name, text in man_pages().items()})
    return out


def _is_ours(rel: str) -> bool:
    """Files the generator owns: a page or script it no longer makes is stale, not foreign."""
    d, name = os.path.split(rel)
    return (d == "man" and name.startswith(PROG) and name.endswith(".1")) or (
        d == "completions" and name in (f"{PROG}.bash", f"_{PROG}", f"{PROG}.fish"))


def _existing(root: str) -> list[str]:
    found = []
    for d in ("completions", "man"):
        full = os.path.join(root, d)
        if os.path.isdir(full):
            found += [f"{d}/{name}" for name in sorted(os.listdir(full))]
    return found


def stale(root: str) -> list[str]:
    """Generated files under root that are missing, differ, or should no longer exist."""
    want = files()
    bad = []
    for rel, text in want.items():
        try:
            with open(os.path.join(root, rel), encoding="utf-8", newline="") as f:
                if f.read() == text:
                    continue
        except FileNotFoundError:
            pass
        bad.append(rel)
    bad += [rel for rel in _existing(root) if rel not in want and _is_ours(rel)]
    return bad


def write_all(root: str) -> list[str]:
    """Write every generated file under root, remove ones no longer generated; return paths."""
    want = files()
    for rel, text in want.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    for rel in _existing(root):
        if rel not in want and _is_ours(rel):
            os.remove(os.path.join(root, rel))
    return list(want)


def repo_root() -> str:
    """The directory holding pyproject.toml, above this file."""
    d = os.path.dirname(os.path.abspath(__file__))
    while not os.path.exists(os.path.join(d, "pyproject.toml")):
        parent = os.path.dirname(d)
        if parent == d:
            raise SystemExit("docgen: no pyproject.toml above " + __file__)
        d = parent
    return d


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--check"]):
        render.err("usage: python -m pulsarctl.cli.docgen [--check]")
        return 2
    root = repo_root()
    if argv == ["--check"]:
        bad = stale(root)
        for rel in bad:
            render.err(f"stale: {rel}")
        if bad:
            render.err("regenerate with `python -m pulsarctl.cli.docgen`")
        return 1 if bad else 0
    for rel in write_all(root):
        render.err(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
