"""The comparer: the two runs' normalised answers, command by command, as a list of
differences (a path into the answer, what the real Pulsar said, what serve said), the ones an
allow-list explains set apart, and a table of them to read."""
from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from pathlib import Path

from admin_script.normalise import Context, normalise

MISSING = "<missing>"


@dataclass
class Run:
    """One target's recorded answers (script.Result as dicts) and what normalises them."""

    records: list[dict]
    ctx: Context


@dataclass(frozen=True)
class Diff:
    line: int        # the command's line in commands.txt
    command: str
    path: str        # rc, stderr, http, stdout, or stdout.key[0].key...
    real: object
    serve: object


@dataclass(frozen=True)
class Allowed:
    """A difference that is deliberate, a storage-layout fact or a quirk of the real Pulsar:
    the commands it applies to (a regular expression searched in the command as commands.txt
    spells it), the paths (shell-style patterns), and why."""

    command: str
    path: str
    reason: str
    # True where the real Pulsar itself answers one way or the other from run to run (it
    # updates the field asynchronously): the entry need not find a difference every run.
    sometimes: bool = False

    def covers(self, d: Diff) -> bool:
        return bool(re.search(self.command, d.command)) and fnmatch.fnmatchcase(d.path, self.path)


def record_of(result) -> dict:
    return {"line": result.step.line, "command": result.command, "rc": result.rc,
            "stdout": result.stdout, "stderr": result.stderr, "http": result.http}


def load(path: Path) -> Run:
    doc = json.loads(path.read_text())
    return Run(doc["results"], Context(doc["tenant"], doc["work"], doc["web_port"],
                                       doc["broker_port"]))


def _walk(path: str, a, b, out: list) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            _walk(f"{path}.{k}", a[k], b.get(k, MISSING) if k in b else MISSING, out)
        for k in b:
            if k not in a:
                out.append((f"{path}.{k}", MISSING, b[k]))
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(f"{path}[{i}]", x, y, out)
        return
    if a == b and type(a) is type(b) or (a == b and {type(a), type(b)} <= {int, float}):
        return
    out.append((path, a, b))


def _text_diff(a: str, b: str) -> tuple[str, str]:
    """The first line where two texts part, each side's."""
    la, lb = a.splitlines(), b.splitlines()
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else MISSING
        y = lb[i] if i < len(lb) else MISSING
        if x != y:
            return f"line {i + 1}: {x}", f"line {i + 1}: {y}"
    return a, b


def differences(real: Run, serve: Run) -> list[Diff]:
    if [r["line"] for r in real.records] != [r["line"] for r in serve.records]:
        raise AssertionError("the two runs ran different commands")
    diffs = []
    for a, b in zip(real.records, serve.records):
        a, b = normalise(a, real.ctx), normalise(b, serve.ctx)
        found = []
        for key in ("rc", "http", "stderr"):
            if a[key] != b[key]:
                found.append((key, a[key], b[key]))
        x, y = a["stdout"], b["stdout"]
        if isinstance(x, str) and isinstance(y, str):
            if x != y:
                found.append(("stdout", *_text_diff(x, y)))
        else:
            _walk("stdout", x, y, found)
        diffs += [Diff(a["line"], a["command"], p, x, y) for p, x, y in found]
    return diffs


def unexplained(diffs: list[Diff], allowed: list[Allowed]) -> tuple[list[Diff], set]:
    """The differences no allow-list entry covers, and the entries that covered one."""
    left, used = [], set()
    for d in diffs:
        hit = next((a for a in allowed if a.covers(d)), None)
        if hit is None:
            left.append(d)
        else:
            used.add(hit)
    return left, used


def _short(v, width: int) -> str:
    s = v if isinstance(v, str) else json.dumps(v)
    return s if len(s) <= width else s[:width - 1] + "…"


def table(diffs: list[Diff]) -> str:
    if not diffs:
        return "no differences\n"
    rows = [f"{'line':>4}  {'command':<58}  {'path':<44}  {'real':<34}  serve"]
    for d in diffs:
        rows.append(f"{d.line:>4}  {_short(d.command, 58):<58}  {_short(d.path, 44):<44}  "
                    f"{_short(d.real, 34):<34}  {_short(d.serve, 60)}")
    commands = len({d.line for d in diffs})
    rows.append(f"{len(diffs)} differences in {commands} commands")
    return "\n".join(rows) + "\n"
