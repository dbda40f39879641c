"""pulsarctl migrate (issue 30 item 4) between a local store and a real `pulsarctl serve` on
127.0.0.1 (a context of its own): up, the tenants, namespaces, policies, topics, partitions,
subscriptions at their cursor positions and the unacknowledged backlog; down, a remote topic,
or what a subscription has not acknowledged, into a local store. A second run copies nothing."""
from __future__ import annotations

import json

import pytest


def ok(r):
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def doc(r):
    return json.loads(ok(r).stdout)


def test_migrate_up_then_down_is_idempotent(cli, remote, tmp_path, name):
    ok(cli("context", "set", "srv", "--service-url", remote.service_url, "--admin-url",
           remote.admin_url))
    up = str(tmp_path / "up")
    down = str(tmp_path / "down")
    ten, ns = name, f"{name}/app"
    orders = f"persistent://{ns}/orders"

    def local(*a, store=up):
        return cli("--store", store, *a)

    ok(local("tenants", "create", ten))
    ok(local("namespaces", "create", ns))
    ok(local("namespaces", "set-retention", ns, "-t", "1h", "-s", "10M"))
    ok(local("produce", orders, "-m", "o1", "-m", "o2", "-m", "o3", "-m", "o4", "-k", "K",
             "-p", "a=1", "--event-time", "2026-01-01T00:00:00Z"))
    ok(local("topics", "create-subscription", orders, "-s", "billing", "-m", "earliest"))
    ok(local("topics", "create-subscription", orders, "-s", "audit", "-m", "earliest"))
    ok(local("topics", "skip", orders, "-s", "billing", "-n", "2"))
    ok(local("topics", "create-partitioned-topic", f"{ns}/pp", "-p", "2"))

    first = doc(cli("--store", up, "migrate", "--to", "srv", "-o", "json"))
    assert first["tenants"] == 1 and first["namespaces"] == 1 and first["messages"] == 4
    assert first["subscriptions"] == 2 and first["policies"] == 1
    again = doc(cli("--store", up, "migrate", "--to", "srv", "-o", "json"))
    assert again["messages"] == 0 and again["subscriptions"] == 0 and again["tenants"] == 0

    r = ["--context", "srv"]
    stats = doc(cli(*r, "topics", "stats", orders, "-o", "json"))["subscriptions"]
    assert stats["billing"]["msgBacklog"] == 2 and stats["audit"]["msgBacklog"] == 4
    assert doc(cli(*r, "namespaces", "get-retention", ns, "-o", "json")) == \
        {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    assert doc(cli(*r, "topics", "get-partitioned-topic-metadata", f"{ns}/pp",
                   "-o", "json"))["partitions"] == 2
    got = [json.loads(x) for x in ok(cli(*r, "read", orders, "-m", "earliest", "-n", "4",
                                         "-o", "ndjson")).stdout.splitlines()]
    assert [g["payload"] for g in got] == ["o1", "o2", "o3", "o4"]
    assert got[0]["key"] == "K" and got[0]["properties"]["a"] == "1"
    assert got[0]["eventTime"] == "2026-01-01T00:00:00.000Z"
    assert got[0]["properties"]["MIGRATED_FROM"].count(":") >= 2

    # down: what billing has not acknowledged, into another store; twice
    d = doc(cli("--store", down, "migrate", "--from", "srv", orders, "-s", "billing",
                "-o", "json"))
    assert d["messages"] == 2 and d["tenants"] == 1
    # the whole topic now: it goes on after the last one copied (o4), so nothing is added
    assert doc(cli("--store", down, "migrate", "--from", "srv", orders,
                   "-o", "json"))["messages"] == 0
    back = [json.loads(x) for x in ok(local("read", orders, "-m", "earliest", "-n", "0",
                                            "--until-end", "-o", "ndjson",
                                            store=down)).stdout.splitlines()]
    assert [b["payload"] for b in back] == ["o3", "o4"]


def test_migrate_says_what_is_wrong(cli, remote, tmp_path):
    store = str(tmp_path / "s")
    assert cli("--store", store, "migrate").exit_code == 2
    assert cli("--store", store, "migrate", "--from", "nope", "t").exit_code == 3
    assert cli("--store", store, "migrate", "--to", "local").exit_code == 2


@pytest.mark.parametrize("batched", [False, True], ids=["entries", "one-batch"])
def test_migrate_up_keeps_individual_acks(cli, remote, tmp_path, name, batched):
    """A subscription with messages acknowledged one by one past its mark-delete position comes
    out on the target with exactly the same messages unacknowledged (the target's ids are the
    copy's own), and a second run changes nothing. In one batch (--stdin), the acks are of
    batch indexes and the mark-delete position stays before the batch."""
    ok(cli("context", "set", "srv", "--service-url", remote.service_url, "--admin-url",
           remote.admin_url))
    up = str(tmp_path / "up")
    ns = f"{name}/app"
    topic = f"persistent://{ns}/jobs"

    def local(*a):
        return cli("--store", up, *a)

    ok(local("tenants", "create", name))
    ok(local("namespaces", "create", ns))
    if batched:
        ok(cli("--store", up, "produce", topic, "--stdin",
               input="".join(f"m-{i}\n" for i in range(10))))
    else:
        ok(local("produce", topic, *[x for i in range(10) for x in ("-m", f"m-{i}")]))
    ok(local("topics", "create-subscription", topic, "-s", "work", "-m", "earliest"))
    got = [json.loads(x) for x in ok(local("receive", topic, "-s", "work", "-t", "Shared",
                                           "-n", "10", "-o", "ndjson")).stdout.splitlines()]
    ids = {g["payload"]: g["messageId"] for g in got}
    ok(local("ack", topic, "-s", "work", *[ids[p] for p in ("m-0", "m-1", "m-2", "m-5",
                                                             "m-7")]))
    cur = doc(local("topics", "stats-internal", topic, "-o", "json"))["cursors"]["work"]
    if batched:
        assert len({i.rsplit(":", 2)[0] for i in ids.values()}) == 1
        assert cur["markDeletePosition"].endswith(":-1")
    else:
        assert cur["markDeletePosition"] == ":".join(ids["m-2"].split(":")[:2])
        assert cur["totalNonContiguousDeletedMessagesRange"] == 2

    first = doc(cli("--store", up, "migrate", "--to", "srv", "-o", "json"))
    # what the mark-delete position does not cover, m-5 and m-7 included (m-3..m-9 one by one;
    # the whole batch)
    assert first["messages"] == (10 if batched else 7) and first["subscriptions"] == 1
    r = ["--context", "srv"]

    def backlog():
        return doc(cli(*r, "topics", "stats", topic, "-o", "json"))["subscriptions"]["work"][
            "msgBacklog"]

    assert backlog() == 5
    again = doc(cli("--store", up, "migrate", "--to", "srv", "-o", "json"))
    assert again["messages"] == 0 and again["subscriptions"] == 0
    assert backlog() == 5
    left = [json.loads(x)["payload"] for x in ok(cli(
        *r, "consume", topic, "-s", "work", "-t", "Shared", "-n", "0", "--idle-timeout", "2s",
        "-o", "ndjson")).stdout.splitlines()]
    assert left == ["m-3", "m-4", "m-6", "m-8", "m-9"]
