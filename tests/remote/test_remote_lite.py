"""The remote data commands against pulsar-lite (issue 30 item 5: "pulsar-lite where it
applies"), a Pulsar broker in Rust shipped in the PyPI wheel `pulsar-lite` (a test dependency):
its binary is found in that package, or at $PULSAR_LITE_BINARY; without it the module is
skipped, saying so.

pulsar-lite speaks Pulsar's binary protocol and has no admin REST API, so what applies is what
runs over the binary protocol alone: produce (keys, properties, event times, --stdin), read,
consume (--exec too), and the dlq commands drain and replay (a target with a service URL only).
What it does not do, found by hand with 0.2.0 and left out here: anything over the admin API
(admin commands, `topics cursor`, migrate, `dlq list`), a --regex consumer (its lookup of a
namespace's topics fails), redelivery counts (always 0: a consumer's nacks never reach
--max-redeliver-count), sequence ids in received messages (null).

It runs on 127.0.0.1 only: its metrics endpoint (0.0.0.0:8080 by default) is turned off in its
config, and its broker listens on a free port of 127.0.0.1."""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from procs import reap, wait_for


def _binary() -> str | None:
    env = os.environ.get("PULSAR_LITE_BINARY")
    if env and os.access(env, os.X_OK):
        return env
    spec = importlib.util.find_spec("pulsar_lite")
    if spec is None or not spec.origin:
        return None
    exe = Path(spec.origin).parent / "bin" / "pulsar-lite"
    return str(exe) if os.access(exe, os.X_OK) else None


BINARY = _binary()
pytestmark = pytest.mark.skipif(
    BINARY is None, reason="pulsar-lite is not installed (pip install pulsar-lite, or set "
                           "PULSAR_LITE_BINARY to its binary)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lite(tmp_path_factory):
    """A running pulsar-lite on 127.0.0.1 for the module's tests: its service URL."""
    d = tmp_path_factory.mktemp("lite")
    (d / "lite.toml").write_text("[metrics]\nenabled = false\n")
    log = d / "lite.log"
    for _attempt in range(3):  # a free port can be taken by another process before it binds
        port = _free_port()
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [BINARY, "--addr", f"127.0.0.1:{port}", "--config", str(d / "lite.toml"),
                 "--db-path", str(d / f"db{port}")], stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, cwd=d)
        ready = wait_for(lambda: proc.poll() is not None
                         or f"listening on 127.0.0.1:{port}" in log.read_text(errors="replace"),
                         "pulsar-lite to listen", diag=lambda: log.read_text(errors="replace"))
        if ready and proc.poll() is None:
            break
    else:
        pytest.fail(f"pulsar-lite did not start: {log.read_text(errors='replace')}")
    yield f"pulsar://127.0.0.1:{port}"
    proc.terminate()
    reap([proc])


@pytest.fixture
def lcli(cli, lite):
    def run(*args, input=None):
        return cli("--service-url", lite, *args, input=input)
    return run


def ok(r):
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_produce_then_read(lcli, name):
    ok(lcli("produce", name, "-m", "a", "-m", "b", "-k", "K", "-p", "x=1",
            "--event-time", "2026-01-01T00:00:00Z"))
    ok(lcli("produce", name, "--stdin", input="c\nd\n"))
    got = records(ok(lcli("read", name, "-m", "earliest", "-n", "0", "--until-end",
                          "-o", "ndjson")).stdout)
    assert [g["payload"] for g in got] == ["a", "b", "c", "d"]
    assert got[0]["key"] == "K" and got[0]["properties"] == {"x": "1"}
    assert got[0]["eventTime"] == "2026-01-01T00:00:00.000Z"
    assert got[0]["topic"] == f"persistent://public/default/{name}"


def test_consume_acks(lcli, name, tmp_path):
    ok(lcli("produce", name, "-m", "one", "-m", "two", "-m", "three"))
    seen = tmp_path / "seen"
    got = records(ok(lcli("consume", name, "-s", "work", "-p", "Earliest", "-n", "2",
                          "-o", "ndjson")).stdout)
    assert [g["payload"] for g in got] == ["one", "two"] and got[0]["subscription"] == "work"
    # --exec: exit 0 acks the message
    ok(lcli("consume", name, "-s", "work", "-n", "1", "--exec", f"cat >> {seen}"))
    assert seen.read_text() == "three"
    r = lcli("consume", name, "-s", "work", "-n", "0", "--idle-timeout", "1s",
             "--fail-if-empty")
    assert r.exit_code == 6, (r.stdout, r.stderr)


def test_dlq_drain_and_replay(lcli, name, tmp_path):
    dlq = f"{name}-s-DLQ"
    for i in range(3):
        ok(lcli("produce", dlq, "-m", f"d{i}", "-p", f"REAL_TOPIC=persistent://public/default/"
                f"{name}", "-p", "REAL_SUBSCRIPTION=s", "-p", f"ORIGIN_MESSAGE_ID=1:{i}:-1"))
    out = tmp_path / "drained.ndjson"
    ok(lcli("dlq", "drain", dlq, "--max", "2", "--out", str(out)))
    assert [r["payload"] for r in records(out.read_text())] == ["d0", "d1"]
    ok(lcli("dlq", "replay", dlq, "--yes"))
    assert lcli("dlq", "drain", dlq, "--fail-if-empty").exit_code == 6
    back = records(ok(lcli("read", name, "-m", "earliest", "-n", "1", "-o", "ndjson")).stdout)
    assert back[0]["payload"] == "d2"
    assert back[0]["properties"]["REPLAY_COUNT"] == "1"
    assert back[0]["properties"]["ORIGIN_MESSAGE_ID"] == "1:2:-1"


def test_what_needs_the_admin_api_says_so(lcli):
    r = lcli("topics", "list", "public/default")
    assert r.exit_code == 2 and "no admin URL" in r.stderr
