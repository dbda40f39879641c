"""README.md's serve quick start runs as it is: its ```python block (the real pulsar-client's,
with the URL of a serve on a free port instead of 6650), then the `pulsarctl topics stats` and
`pulsarctl dlq drain` it shows, whose output must still be what the README pastes (up to what
changes from run to run: times, pids, sizes that hold a pid)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from procs import PATIENCE_S, argv, pok

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
URL = "pulsar://127.0.0.1:6650"


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Real Pulsar clients: `pulsarctl serve`")
    return text[start:text.index("\n## ", start + 1)]


def _blocks(lang: str) -> list[str]:
    return [body for kind, body in FENCE.findall(_section()) if kind == lang]


def _shown(command: str) -> list[str]:
    """The output the README pastes under `$ COMMAND`."""
    for body in _blocks("text"):
        lines = body.splitlines()
        if lines and lines[0] == f"$ {command}":
            return lines[1:]
    raise AssertionError(f"README's serve section shows no `$ {command}`")


def _run(env, *args) -> subprocess.CompletedProcess:
    return pok(subprocess.run(argv(*args), env=env, capture_output=True, text=True,
                              timeout=PATIENCE_S))


def _varying(line: str) -> str:
    """A line with what differs between runs masked: times, pids (in producer names), and the
    byte counts and average size, which hold the producer name's length."""
    line = re.sub(r'"publishTime":"[^"]*"', '"publishTime":T', line)
    line = re.sub(r"standalone-\d+-", "standalone-PID-", line)
    return re.sub(r"^(bytesInCounter|averageMsgSize|storageSize)(\s+)\S+$", r"\1\2N", line)


def test_the_quick_start_runs_against_serve_as_the_readme_shows(served, env):
    (code,) = [b for b in _blocks("python") if URL in b]
    assert code.count(URL) == 1
    r = subprocess.run([sys.executable, "-c", code.replace(URL, served.url)],
                       capture_output=True, text=True, env=env, timeout=PATIENCE_S)
    assert r.returncode == 0, r.stdout + r.stderr

    stats = _run(env, "topics", "stats", "orders")
    assert [_varying(ln) for ln in stats.stdout.splitlines()] == \
        [_varying(ln) for ln in _shown("pulsarctl topics stats orders")]
    as_json = json.loads(_run(env, "topics", "stats", "orders", "-o", "json").stdout)
    assert as_json["msgInCounter"] == 1
    assert as_json["subscriptions"]["audit"]["msgOutCounter"] == 2
    assert as_json["subscriptions"]["audit"]["msgBacklog"] == 0

    drained = _run(env, "dlq", "drain", "orders-audit-DLQ")
    got = drained.stdout.splitlines() + drained.stderr.splitlines()
    assert [_varying(ln) for ln in got] == \
        [_varying(ln) for ln in _shown("pulsarctl dlq drain orders-audit-DLQ")]
    (record,) = [json.loads(ln) for ln in drained.stdout.splitlines()]
    assert record["payload"] == "order 4"
    assert record["properties"]["REAL_TOPIC"] == "persistent://public/default/orders"
    assert "drained 0" in _run(env, "dlq", "drain", "orders-audit-DLQ").stderr
