"""Contexts (issue 30 item 1): `context set|use|list|current|delete`, the file they live in
(0600, secrets never printed), which target a command runs against (--context, the URL flags,
--store, the environment, the current context), and the commands that work on a local store
only refusing a remote target in one line, exit 2, with nothing done. No server is needed:
the remote URLs here are never contacted (a closed port)."""
from __future__ import annotations

import json
import os
import stat

import pytest

from pulsarctl import config

# A port nothing listens on: a command that reached for it would fail with exit 1, not 2.
DEAD = ["--service-url", "pulsar://127.0.0.1:9", "--admin-url", "http://127.0.0.1:9"]
SECRET = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.TOKEN-SECRET-VALUE"


def ok(r):
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def test_set_list_current_use_delete(cli, config_home, monkeypatch, tmp_path):
    # $PULSARCTL_STORE (which the cli fixture sets) would beat the current context
    monkeypatch.delenv("PULSARCTL_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    ok(cli("context", "set", "prod", "--service-url", "pulsar://10.0.0.1:6650",
           "--admin-url", "http://10.0.0.1:8080", "--token", SECRET))
    path = config_home / "pulsarctl" / "contexts.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    rows = json.loads(ok(cli("context", "list", "-o", "json")).stdout)
    assert [r["name"] for r in rows] == ["local", "prod"]
    assert rows[0]["current"] and not rows[1]["current"]
    assert rows[1]["token"] == "(set)" and rows[1]["auth"] == "token"
    assert rows[1]["service-url"] == "pulsar://10.0.0.1:6650"
    # local is current until `context use`
    assert json.loads(ok(cli("context", "current", "-o", "json")).stdout)["name"] == "local"
    ok(cli("context", "use", "prod"))
    cur = json.loads(ok(cli("context", "current", "-o", "json")).stdout)
    assert cur["name"] == "prod" and cur["source"].startswith("the current context")
    # set again: what is given replaces, the rest stays
    ok(cli("context", "set", "prod", "--admin-url", "http://10.0.0.2:8080"))
    cur = json.loads(ok(cli("context", "current", "-o", "json")).stdout)
    assert cur["admin-url"] == "http://10.0.0.2:8080"
    assert cur["service-url"] == "pulsar://10.0.0.1:6650" and cur["token"] == "(set)"
    r = ok(cli("context", "delete", "prod"))
    assert "the current context is local" in r.stderr
    assert json.loads(ok(cli("context", "current", "-o", "json")).stdout)["name"] == "local"
    assert cli("context", "delete", "prod").exit_code == 3
    assert cli("context", "use", "nope").exit_code == 3


def test_secrets_are_never_printed(cli):
    outputs = []
    for args in (["context", "set", "s", *DEAD[:2], "--token", SECRET],
                 ["context", "set", "s", "--auth-plugin", "AuthenticationBasic",
                  "--auth-params", '{"userId":"u","password":"' + SECRET + '"}', "-o", "json"],
                 ["context", "list"], ["context", "list", "-o", "json"],
                 ["--context", "s", "context", "current"],
                 ["--context", "s", "context", "current", "-o", "json"],
                 ["--context", "s", "clock", "show"]):
        r = cli(*args)
        outputs.append(r.stdout + r.stderr)
    assert all(SECRET not in o for o in outputs), outputs


def test_local_is_reserved_and_values_are_checked(cli):
    assert cli("context", "set", "local", *DEAD[:2]).exit_code == 2
    r = cli("context", "set", "x", "--service-url", "http://h:6650")
    assert r.exit_code == 2 and "invalid service URL" in r.stderr
    assert cli("context", "set", "x", "--admin-url", "pulsar://h:1").exit_code == 2
    r = cli("context", "set", "x", "--token", "t")
    assert r.exit_code == 2 and "--service-url or --admin-url" in r.stderr
    assert cli("context", "set", "a b", *DEAD[:2]).exit_code in (0, 2)  # a space is allowed
    assert cli("context", "set", 'bad"name', *DEAD[:2]).exit_code == 2


def test_client_conf_is_read(cli, tmp_path):
    conf = tmp_path / "client.conf"
    conf.write_text("# a comment\nwebServiceUrl=http://broker:8080/\n"
                    "brokerServiceUrl=pulsar://broker:6650/\n"
                    "authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\n"
                    "authParams=token:abc\ntlsAllowInsecureConnection=true\n")
    ok(cli("context", "set", "c", "--client-conf", str(conf)))
    cur = json.loads(ok(cli("--context", "c", "context", "current", "-o", "json")).stdout)
    assert cur["admin-url"] == "http://broker:8080/"
    assert cur["service-url"] == "pulsar://broker:6650/"
    assert cur["auth-params"] == "(set)" and cur["tls-allow-insecure"] is True


# -- which target ------------------------------------------------------------------------------
def test_resolution_order(cli, monkeypatch):
    ok(cli("context", "set", "a", "--service-url", "pulsar://a:6650"))
    ok(cli("context", "set", "b", "--service-url", "pulsar://b:6650", "--use"))
    monkeypatch.delenv("PULSARCTL_STORE", raising=False)
    r = config.resolve_target
    assert r().name == "b"                                  # the current context
    assert r(context="a").name == "a"                       # --context wins
    assert r(context="local") is None                       # local, whatever is current
    assert r(store="/tmp/s") is None                        # --store is the local store
    t = r(flags={"service-url": "pulsar://f:1"})
    assert t.service_url == "pulsar://f:1" and t.source.startswith("--service-url")
    monkeypatch.setenv("PULSARCTL_STORE", "/tmp/s")
    assert r() is None                                      # $PULSARCTL_STORE beats current
    monkeypatch.setenv("PULSAR_SERVICE_URL", "pulsar://env:6650")
    assert r().service_url == "pulsar://env:6650"           # the environment's URL beats both
    assert r(store="/tmp/s") is None                        # --store beats the environment
    assert r(context="a").name == "a"
    # auth flags ride on the chosen remote target, and are refused with the local store
    assert r(flags={"token": "x"}).get("token") == "x"
    with pytest.raises(Exception) as e:
        r(store="/tmp/s", flags={"token": "x"})
    assert getattr(e.value, "exit_code", None) == 2
    with pytest.raises(Exception) as e:
        r(store="/tmp/s", flags={"service-url": "pulsar://f:1"})
    assert getattr(e.value, "exit_code", None) == 2


def test_use_warns_when_the_environment_overrides(cli, monkeypatch):
    ok(cli("context", "set", "a", "--service-url", "pulsar://a:6650"))
    r = ok(cli("context", "use", "a"))   # the cli fixture sets PULSARCTL_STORE
    assert "PULSARCTL_STORE is set and takes precedence" in r.stderr


def test_unknown_context_is_not_found(cli):
    r = cli("--context", "nope", "topics", "list")
    assert r.exit_code == 3 and "context 'nope' not found" in r.stderr


# -- what works on a local store only ------------------------------------------------------------
LOCAL_ONLY = [
    ["clock", "show"], ["clock", "advance", "5s"], ["explain", "1:0", "-t", "t"],
    ["daemon", "status"], ["daemon", "run-once"], ["lesson", "run", "failover", "--yes"],
    ["receive", "t", "-s", "s"], ["ack", "t", "-s", "s", "1:0"], ["nack", "t", "-s", "s", "1:0"],
    ["redeliver-unacked", "t", "-s", "s"], ["subscriptions", "pending", "t", "s"],
    ["subscriptions", "close-consumer", "t", "s", "c"], ["top", "--once"],
    ["perf", "produce", "t", "-n", "1"], ["topics", "offload", "t", "--to", "/tmp/x"],
    ["subscriptions", "describe", "t", "s"], ["serve", "--port", "0"],
]


@pytest.mark.parametrize("args", LOCAL_ONLY, ids=lambda a: " ".join(a[:2]))
def test_local_only_commands_refuse_a_remote_target(cli, store_path, args):
    r = cli(*DEAD, *args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "works on a local store only" in lines[0], r.stderr
    assert not os.path.exists(store_path)   # nothing was done to the local store either


def test_a_context_in_use_reaches_the_fast_paths(cli, monkeypatch, store_path):
    """The everyday commands and plain produce skip typer (fast_run.py, fast.py); a target
    chosen by the environment reaches them too: clock show refuses, produce goes remote."""
    from pulsarctl.cli import fast, fast_run

    monkeypatch.setenv("PULSAR_SERVICE_URL", "pulsar://127.0.0.1:9")
    monkeypatch.setenv("PULSAR_ADMIN_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("PULSARCTL_STORE")
    assert fast_run.parse(["clock", "show"]) is not None   # the fast path takes the line
    assert fast_run.try_run(["clock", "show"]) == 2
    assert fast.parse(["produce", "t", "-m", "x"]) is not None
    assert fast.try_run(["produce", "t", "-m", "x"]) == 1    # remote: nothing listens there
    assert not os.path.exists(store_path)
