"""Bad input never changes the store (issue 14, item 3): every argument and option is checked
before the first write. The walk gives every command of the tree one bad global option (`-o
xml`, after the subcommand) with otherwise plausible arguments, and checks that it is refused
with exit 2 and one line, and that the store is byte-for-byte what it was."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from cli_helpers import assert_error, ok
from pulsarctl.cli.app import command
from store.env import DATABASES, Env

# Plausible values for arguments and required options, by parameter name.
ARGS = {"topic": "t", "topics": "t", "target": "t", "dlq": "t-s-DLQ", "tenant": "newt",
        "namespace": "public/default", "subscription": "s", "consumer": "c", "duration": "1s",
        "shell": "bash", "ids": "1:0", "message_id": "1:0", "name": "failover"}
OPTIONS = {"subscription": "s", "count": "1", "partitions": "2", "ledger_id": "1", "entry_id": "0",
           "to": "OUT", "out": "OUT", "expire_time": "1s", "ttl": "1s",
           "time": "1h", "size": "1M", "policy": "producer_request_hold",
           "max_redeliver": "3", "n": "1", "config": "maxMessageSize", "value": "100000",
           "subject": "alice", "role": "alice", "actions": "produce",
           "output_private_key": "OUT", "output_public_key": "OUT", "topic": "t"}


def leaves(cmd, path=()):
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from leaves(sub, path + (name,))
    else:
        yield path, cmd


def command_line(path, cmd, out_dir) -> list[str]:
    argv = list(path)
    for p in cmd.params:
        if type(p).__name__ == "TyperArgument" and p.required:
            argv.append(ARGS[p.name])
        elif getattr(p, "required", False):
            value = OPTIONS[p.name.lower()]
            argv += [p.opts[0], os.path.join(out_dir, "out") if value == "OUT" else value]
    return argv + ["-o", "xml"]


def snapshot(store: str) -> str:
    """A digest of every record of every database, and of the store directory's file names."""
    h = hashlib.sha256()
    env = Env(store, readonly=True, create=False)
    try:
        with env.read() as txn:
            for name in DATABASES:
                h.update(name.encode())
                for k, v in env.cursor(txn, name):
                    h.update(len(k).to_bytes(4, "big") + k + len(v).to_bytes(4, "big") + v)
    finally:
        env.close()
    h.update(repr(sorted(os.listdir(store))).encode())
    return h.hexdigest()


ALL = sorted(" ".join(path) for path, _cmd in leaves(command()))


def test_the_walk_covers_the_whole_tree():
    assert len(ALL) > 100 and "tenants create" in ALL and "produce" in ALL


@pytest.fixture
def seeded(cli, store_path):
    ok(cli("produce", "t", "-m", "one"))
    ok(cli("topics", "create-subscription", "t", "-s", "s", "-m", "earliest"))
    ok(cli("produce", "t-s-DLQ", "-m", "dead", "-p", "REAL_TOPIC=persistent://public/default/t"))
    return snapshot(store_path)


def test_a_bad_output_option_changes_nothing_in_any_command(cli, store_path, seeded, tmp_path):
    refused = []
    for path, cmd in leaves(command()):
        argv = command_line(path, cmd, str(tmp_path))
        r = cli(*argv)
        line = assert_error(r, 2)
        assert "unknown output format 'xml'" in line, (argv, line)
        refused.append(" ".join(path))
        assert snapshot(store_path) == seeded, f"`pulsarctl {' '.join(argv)}` changed the store"
    assert sorted(refused) == ALL
    assert not os.path.exists(tmp_path / "out")


def test_tenants_create_with_a_bad_output_creates_no_tenant(cli):
    assert_error(cli("tenants", "create", "newt", "-o", "xml"), 2)
    assert "newt" not in ok(cli("tenants", "list")).stdout.split()
    assert_error(cli("-o", "xml", "tenants", "create", "newt"), 2)
    assert "newt" not in ok(cli("tenants", "list")).stdout.split()


def test_an_argument_that_is_not_utf8_is_exit_2_and_writes_nothing(store_path):
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
    base = [sys.executable, "-m", "pulsarctl"]
    for argv in (["produce", "t", "-m", b"a\xff"],            # the fast path's command line
                 ["produce", "t", "-m", b"a\xff", "--compression", "lz4"],   # the typer path
                 ["tenants", "create", b"t\xfe"]):
        r = subprocess.run(base + argv, env=env, capture_output=True, timeout=60)
        assert r.returncode == 2, (argv, r.stderr)
        lines = r.stderr.decode().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: argument"), r.stderr
        assert "not valid UTF-8" in lines[0] and "Traceback" not in lines[0]
        assert not os.path.exists(os.path.join(store_path, "data.mdb"))


# Commands left out of the value walk: they start processes, a JVM or long benchmarks.
SLOW_GROUPS = {"perf", "spark", "daemon", "serve", "completion"}
# Readers and consumers stop at once when a value is accepted.
STOPS = {"consume": ["--idle-timeout", "1ms"], "receive": ["--idle-timeout", "1ms"],
         "read": ["--idle-timeout", "1ms"]}
BAD_VALUES = ("zzz", "-5")


def test_a_bad_value_for_any_option_is_refused_before_anything_is_written(cli, store_path,
                                                                          seeded, tmp_path,
                                                                          monkeypatch):
    """Each valued option of each command in turn gets a malformed value. Whatever the command
    makes of it, a usage error (exit 2) leaves the store exactly as it was, and nothing ends
    in an internal error or a traceback. (A value may name a path, `doctor --salvage zzz`:
    the walk runs in a directory of its own.)"""
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = seeded
    usage_errors = 0
    for path, cmd in leaves(command()):
        if path[0] in SLOW_GROUPS:
            continue
        base = command_line(path, cmd, str(tmp_path))[:-2]  # without the bad -o
        for p in cmd.params:
            if type(p).__name__ == "TyperArgument" or getattr(p, "is_flag", False):
                continue
            opt = p.opts[-1]
            if opt in ("--output", "--store", "--out", "--to"):
                continue
            for bad in BAD_VALUES:
                stops = [] if opt in STOPS.get(path[0], ()) else STOPS.get(path[0], [])
                argv = [a for a in base] + stops + [f"{opt}={bad}"]
                r = cli(*argv)
                where = f"`pulsarctl {' '.join(argv)}`"
                assert "Traceback" not in r.stderr and "unexpected" not in r.stderr, \
                    (where, r.stderr)
                if r.exit_code == 2:
                    usage_errors += 1
                    assert len(r.stderr.splitlines()) == 1, (where, r.stderr)
                    now = snapshot(store_path)
                    assert now == before, f"{where} was refused but changed the store"
                else:
                    before = snapshot(store_path)  # accepted: it may change the store
    assert usage_errors > 100, usage_errors
