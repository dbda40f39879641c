"""The remote commands (issue 30) against the real Apache Pulsar standalone of the oracle lane:
the scenarios tests/remote runs against `pulsarctl serve`, asked of Pulsar itself: produce,
read and consume through the real pulsar-client library, the admin commands' JSON, a produce to
a terminated topic refused (exit 4), dlq drain and replay, the cursor picture, and migrate up
and down, with its rate beside the real `pulsar-client produce` of as many messages."""
from __future__ import annotations

import json
import time
import uuid

import pytest


def ok(r):
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def doc(r):
    return json.loads(ok(r).stdout)


@pytest.fixture
def rcli(cli, real_pulsar, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    ok(cli("context", "set", "real", "--service-url", real_pulsar.service_url, "--admin-url",
           real_pulsar.web_url))

    def run(*args, input=None):
        return cli("--context", "real", *args, input=input)
    return run


@pytest.fixture
def name():
    return f"r-{uuid.uuid4().hex[:10]}"


def test_data_and_admin_against_real_pulsar(rcli, name):
    ids = ok(rcli("produce", name, "-m", "a", "-m", "b", "-k", "k", "-p", "x=1")).stdout.split()
    got = [json.loads(x) for x in ok(rcli("read", name, "-m", "earliest", "-n", "2",
                                          "-o", "ndjson")).stdout.splitlines()]
    assert [g["messageId"] for g in got] == ids and got[0]["properties"] == {"x": "1"}
    r = ok(rcli("consume", name, "-s", "s", "-p", "Earliest", "-n", "0", "--idle-timeout", "3s",
                "-o", "ndjson"))
    assert len(r.stdout.splitlines()) == 2
    st = doc(rcli("topics", "stats", name, "-o", "json"))
    assert st["subscriptions"]["s"]["msgBacklog"] == 0 and st["msgInCounter"] == 2
    internal = doc(rcli("topics", "stats-internal", name, "-o", "json"))
    assert "s" in internal["cursors"]
    peek = doc(rcli("topics", "peek-messages", name, "-s", "s", "-n", "1", "-o", "json")) \
        if rcli("topics", "peek-messages", name, "-s", "s").exit_code == 0 else []
    assert peek == []
    d = doc(rcli("topics", "reset-cursor", name, "-s", "s", "-m", ids[0], "-o", "json"))
    assert d["msgBacklog"] == 2
    pic = doc(rcli("topics", "cursor", name, "-s", "s", "-o", "json"))
    assert [e["state"] for e in pic["entries"]] == ["backlog"]
    ok(rcli("topics", "terminate", name))
    r = rcli("produce", name, "-m", "late")
    assert r.exit_code == 4 and r.stderr.count("\n") == 1, (r.exit_code, r.stderr)


def test_dlq_drain_and_replay_against_real_pulsar(rcli, name, tmp_path):
    dlq = f"{name}-s-DLQ"
    for i in range(3):
        ok(rcli("produce", dlq, "-m", f"d{i}", "-p",
                f"REAL_TOPIC=persistent://public/default/{name}"))
    assert doc(rcli("dlq", "stats", dlq, "-o", "json"))["total"] == 3
    ok(rcli("dlq", "drain", dlq, "--out", str(tmp_path / "d.ndjson"), "--max", "1"))
    r = ok(rcli("dlq", "replay", dlq))
    assert "replayed 2" in r.stderr
    back = [json.loads(x) for x in ok(rcli("read", name, "-m", "earliest", "-n", "2",
                                           "-o", "ndjson")).stdout.splitlines()]
    assert [b["properties"]["REPLAY_COUNT"] for b in back] == ["1", "1"]


def test_migrate_rate_beside_pulsar_client_produce(cli, rcli, real_pulsar, tmp_path, name):
    n = 1000  # pulsar-client produce sends at most 1000 messages a run
    store = str(tmp_path / "up")
    ok(cli("--store", store, "produce", name, "--stdin",
           input="".join(f"message-{i:06d}\n" for i in range(n))))
    ok(cli("--store", store, "topics", "create-subscription", name, "-s", "s", "-m", "earliest"))
    up = doc(cli("--store", store, "migrate", "--to", "real", f"public/default/{name}",
                 "-o", "json"))
    assert up["messages"] == n
    assert doc(cli("--store", store, "migrate", "--to", "real", f"public/default/{name}",
                   "-o", "json"))["messages"] == 0
    down = doc(cli("--store", str(tmp_path / "down"), "migrate", "--from", "real", name,
                   "-o", "json"))
    assert down["messages"] == n
    t0 = time.monotonic()
    real_pulsar.client("produce", f"persistent://public/default/{name}-client", "-m",
                       "message-000000", "-n", str(n))
    client_s = time.monotonic() - t0
    print(f"\nmigrate up {n} messages: {up['seconds']} s ({up['messagesPerSecond']} msg/s); "
          f"down: {down['seconds']} s ({down['messagesPerSecond']} msg/s); "
          f"pulsar-client produce -n {n}: {client_s:.1f} s ({n / client_s:.1f} msg/s, "
          f"JVM start included)")
