"""The admin commands against a remote Pulsar (issue 30 item 2), here a real `pulsarctl serve`
on 127.0.0.1 over the admin REST API: tenants, namespaces and their policies, topics and
partitions, subscriptions, stats, stats-internal, peek, examine, get-message-by-id,
reset-cursor, skip, clear-backlog, expire, permissions, compaction and schemas.

The JSON both targets print: a read prints Pulsar's REST JSON remotely; every key the local
store prints for the same data is in it (serve shares its store, so both are asked about the
same topics), but for the few the local store adds on its own (LOCAL_ONLY_KEYS). A change prints
the same document either way."""
from __future__ import annotations

import json

import pytest


def ok(r):
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def doc(r):
    return json.loads(ok(r).stdout)


def paths(x, prefix="") -> set[str]:
    """The key paths of a JSON document; a list's items merge; the names under
    "subscriptions", "cursors" and "partitions" (data, not keys) become *. A key whose value is
    null is left out: the local store says null for a policy not set, Pulsar leaves it out of
    its answer, and a script (jq .x) reads both as null."""
    out: set[str] = set()
    if isinstance(x, dict):
        named = prefix.rsplit(".", 1)[-1] in ("subscriptions", "cursors", "partitions")
        for k, v in x.items():
            if v is None:
                continue
            p = f"{prefix}.{'*' if named else k}" if prefix else k
            out.add(p)
            out |= paths(v, p)
    elif isinstance(x, list):
        for v in x:
            out |= paths(v, prefix + "[]")
    return out


# Keys the local store prints that Pulsar's REST has no word for: a consumer's process and
# lease (pulsarctl's consumers live in processes and leases), pulsarctl's redelivery replay
# and delayed counts.
LOCAL_ONLY_KEYS = {
    "subscriptions.*.consumers[].leaseUntil", "subscriptions.*.consumers[].alive",
    "subscriptions.*.replayCount", "subscriptions.*.delayedMessages",
}


def same_keys(local: dict, remote: dict, also=()) -> None:
    missing = paths(local) - paths(remote) - LOCAL_ONLY_KEYS - set(also)
    assert not missing, sorted(missing)


def test_tenants_and_namespaces(rcli, lcli, name):
    t = name
    created = doc(rcli("tenants", "create", t, "-r", "ops", "-o", "json"))
    assert created == {"tenant": t, "adminRoles": ["ops"], "allowedClusters": ["standalone"]}
    assert t in doc(rcli("tenants", "list", "-o", "json"))
    assert doc(rcli("tenants", "get", t, "-o", "json")) == doc(lcli("tenants", "get", t, "-o", "json"))
    upd = doc(rcli("tenants", "update", t, "-r", "ops,dev", "-o", "json"))
    assert upd["adminRoles"] == ["ops", "dev"]
    ok(rcli("namespaces", "create", f"{t}/ns"))
    assert doc(rcli("namespaces", "list", t, "-o", "json")) == [f"{t}/ns"]
    r = rcli("namespaces", "create", f"{t}/ns")
    assert r.exit_code == 4 and r.stderr.count("\n") == 1
    same_keys(doc(lcli("namespaces", "policies", f"{t}/ns", "-o", "json")),
              doc(rcli("namespaces", "policies", f"{t}/ns", "-o", "json")))
    g = doc(rcli("namespaces", "grant-permission", f"{t}/ns", "--role", "app", "--actions",
                 "consume,produce", "-o", "json"))
    assert g["actions"] == ["produce", "consume"]
    assert doc(rcli("namespaces", "permissions", f"{t}/ns", "-o", "json")) == \
        {"app": ["produce", "consume"]}
    assert doc(rcli("namespaces", "revoke-permission", f"{t}/ns", "--role", "app",
                    "-o", "json"))["revoked"] is True
    assert rcli("tenants", "delete", t).exit_code == 4     # not empty
    ok(rcli("namespaces", "delete", f"{t}/ns"))
    ok(rcli("tenants", "delete", t))
    assert rcli("tenants", "get", t).exit_code == 3


def test_namespace_policies(rcli, lcli, name):
    ns = f"public/{name}"
    ok(rcli("namespaces", "create", ns))
    ok(rcli("namespaces", "set-message-ttl", ns, "--messageTTL", "2m"))
    assert doc(rcli("namespaces", "get-message-ttl", ns, "-o", "json")) == 120
    ok(rcli("namespaces", "set-retention", ns, "-t", "1h", "-s", "10M"))
    ret = doc(rcli("namespaces", "get-retention", ns, "-o", "json"))
    assert ret == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    assert ret == doc(lcli("namespaces", "get-retention", ns, "-o", "json"))
    ok(rcli("namespaces", "set-deduplication", ns, "--enable"))
    assert doc(rcli("namespaces", "get-deduplication", ns, "-o", "json")) is True
    ok(rcli("namespaces", "set-backlog-quota", ns, "-p", "producer_exception", "-l", "1M"))
    q = doc(rcli("namespaces", "get-backlog-quotas", ns, "-o", "json"))
    assert q["destination_storage"]["policy"] == "producer_exception"
    same_keys(doc(lcli("namespaces", "get-backlog-quotas", ns, "-o", "json")), q)
    ok(rcli("namespaces", "remove-message-ttl", ns))
    assert doc(rcli("namespaces", "get-message-ttl", ns, "-o", "json")) is None
    r = rcli("namespaces", "set-dead-letter-policy", ns, "-m", "3")
    assert r.exit_code == 2 and "works on a local store only" in r.stderr


def test_topics_partitions_and_stats(rcli, lcli, name):
    assert doc(rcli("topics", "create", name, "-o", "json"))["created"] is True
    assert f"persistent://public/default/{name}" in doc(rcli("topics", "list", "-o", "json"))
    ok(rcli("produce", name, "-m", "a", "-m", "b"))
    ok(rcli("topics", "create-subscription", name, "-s", "s", "-m", "earliest"))
    assert doc(rcli("topics", "subscriptions", name, "-o", "json")) == ["s"]
    same_keys(doc(lcli("topics", "stats", name, "-o", "json")),
              doc(rcli("topics", "stats", name, "-o", "json")))
    local = doc(lcli("topics", "stats-internal", name, "-o", "json"))
    remote = doc(rcli("topics", "stats-internal", name, "-o", "json"))
    same_keys(local, remote)
    assert remote["cursors"]["s"]["markDeletePosition"] == local["cursors"]["s"]["markDeletePosition"]
    text = ok(rcli("topics", "stats", name)).stdout
    assert "msgInCounter" in text and "subscriptions" in text
    p = f"{name}-p"
    ok(rcli("topics", "create-partitioned-topic", p, "-p", "2"))
    assert doc(rcli("topics", "get-partitioned-topic-metadata", p, "-o", "json"))["partitions"] == 2
    assert f"persistent://public/default/{p}" in doc(rcli("topics", "list-partitioned-topics",
                                                          "-o", "json"))
    ok(rcli("topics", "update-partitioned-topic", p, "-p", "3"))
    ok(rcli("produce", p, "-m", "x", "-k", "a"))
    # the whole of a partitioned topic has no deduplicationStatus in Pulsar (TopicStatsImpl.add)
    same_keys(doc(lcli("topics", "stats", p, "-o", "json")),
              doc(rcli("topics", "stats", p, "-o", "json")), also={"deduplicationStatus"})
    per = doc(rcli("topics", "partitioned-stats", p, "--per-partition", "-o", "json"))
    assert len(per["partitions"]) == 3 and per["metadata"]["partitions"] == 3
    internal = doc(rcli("topics", "stats-internal", p, "-o", "json"))
    assert len(internal["partitions"]) == 3
    ok(rcli("topics", "delete-partitioned-topic", p, "--force"))
    assert doc(rcli("topics", "get-partitioned-topic-metadata", p, "-o", "json"))["partitions"] == 0
    ok(rcli("topics", "unsubscribe", name, "-s", "s"))
    assert rcli("topics", "subscriptions", name, "-o", "json").stdout.strip() == "[]"
    ok(rcli("topics", "delete", name))
    assert f"persistent://public/default/{name}" not in doc(rcli("topics", "list", "-o", "json"))


def test_messages_peek_examine_by_id_last(rcli, lcli, name):
    ids = ok(rcli("produce", name, "-m", "p1", "-m", "p2", "-k", "k", "-p", "a=1")).stdout.split()
    # a batch of three: peek and get-message-by-id split it as pulsar-admin does
    ok(rcli("produce", name, "--stdin", input="b1\nb2\nb3\n"))
    ok(rcli("topics", "create-subscription", name, "-s", "s", "-m", "earliest"))
    remote = doc(rcli("topics", "peek-messages", name, "-s", "s", "-n", "5", "-o", "json"))
    local = doc(lcli("topics", "peek-messages", name, "-s", "s", "-n", "5", "-o", "json"))
    keys = ("messageId", "payload", "key", "properties", "publishTime", "producerName",
            "sequenceId")
    assert [{k: m[k] for k in keys} for m in remote] == [{k: m[k] for k in keys} for m in local]
    assert [m["payload"] for m in remote] == ["p1", "p2", "b1", "b2", "b3"]
    assert remote[2]["messageId"].count(":") == 3        # a batch index
    one = doc(rcli("topics", "get-message-by-id", name, "-l", ids[0].split(":")[0], "-e",
                   ids[0].split(":")[1], "-o", "json"))
    assert one["payload"] == "p1" and one["properties"] == {"a": "1"}
    ex = doc(rcli("topics", "examine-message", name, "-i", "earliest", "-m", "2", "-o", "json"))
    assert ex["payload"] == "p2"
    last = doc(rcli("topics", "last-message-id", name, "-o", "json"))
    assert last == doc(lcli("topics", "last-message-id", name, "-o", "json"))
    assert rcli("topics", "peek-messages", name, "-s", "nope").exit_code == 3
    text = ok(rcli("topics", "peek-messages", name, "-s", "s")).stdout
    assert "content:p1" in text


def test_cursor_administration(rcli, lcli, name):
    ids = ok(rcli("produce", name, "-m", "1", "-m", "2", "-m", "3", "-m", "4")).stdout.split()
    ok(rcli("topics", "create-subscription", name, "-s", "s", "-m", "earliest"))
    d = doc(rcli("topics", "skip", name, "-s", "s", "-n", "1", "-o", "json"))
    assert d["skipped"] == 1 and d["msgBacklog"] == 3
    same_keys(doc(lcli("topics", "skip", name, "-s", "s", "-n", "1", "-o", "json")), d)
    d = doc(rcli("topics", "reset-cursor", name, "-s", "s", "-m", ids[0], "-o", "json"))
    assert d["msgBacklog"] == 4 and d["messageId"] == ids[0]
    d = doc(rcli("topics", "clear-backlog", name, "-s", "s", "-o", "json"))
    assert d["cleared"] == 4 and d["msgBacklog"] == 0
    d = doc(rcli("topics", "reset-cursor", name, "-s", "s", "-t", "1h", "-o", "json"))
    assert d["msgBacklog"] == 4
    d = doc(rcli("topics", "expire-messages", name, "-s", "s", "-t", "0", "-o", "json"))
    assert d["expired"] == 4 and d["msgBacklog"] == 0
    # nothing left to expire: Pulsar would refuse (409); the local answer is "expired 0"
    d = doc(rcli("topics", "expire-messages", name, "-s", "s", "-t", "0", "-o", "json"))
    assert d["expired"] == 0
    r = ok(rcli("topics", "skip", name, "-s", "s", "-n", "1"))
    assert "skipped 0 messages on s; backlog now 0" in r.stderr
    term = doc(rcli("topics", "terminate", name, "-o", "json"))
    assert term["lastMessageId"] == ids[-1]
    # a terminated topic refuses the producer when it is created, as real Pulsar does
    # (tests/oracle/test_remote_pulsar.py): one line, exit 4
    r = rcli("produce", name, "-m", "late")
    assert r.exit_code == 4 and r.stderr.count("\n") == 1, (r.exit_code, r.stderr)


def test_compaction_and_schemas(rcli, name):
    ok(rcli("produce", name, "-m", "v1", "-k", "a"))
    ok(rcli("produce", name, "-m", "v2", "-k", "a"))
    d = doc(rcli("topics", "compact", name, "-o", "json"))
    assert d["topic"] == f"persistent://public/default/{name}" and "status" in d
    assert doc(rcli("topics", "compaction-status", name, "-o", "json"))["status"] in (
        "RUNNING", "SUCCESS")
    assert rcli("schemas", "get", name).exit_code == 3
    s = f"{name}-s"
    ok(rcli("produce", s, "-m", "text", "--value-schema", "string"))
    got = doc(rcli("schemas", "get", s, "-o", "json"))
    assert got["type"] == "STRING"
    assert doc(rcli("schemas", "delete", s, "-o", "json"))["deleted"] is True
    assert doc(rcli("schemas", "delete", s, "-o", "json"))["deleted"] is False


def test_subscription_consumers(rcli, name):
    ok(rcli("produce", name, "-m", "x"))
    ok(rcli("topics", "create-subscription", name, "-s", "s"))
    assert doc(rcli("subscriptions", "consumers", name, "s", "-o", "json")) == []
    ok(rcli("subscriptions", "consumers", name, "s"))
    assert rcli("subscriptions", "consumers", name, "nope").exit_code == 3


@pytest.mark.parametrize("args", [["topics", "policies", "t"],
                                  ["brokers", "get-all-dynamic-config"]])
def test_remote_only_differences_are_said(rcli, args):
    """What serve's REST does not offer answers in one line, with Pulsar's reason."""
    r = rcli(*args)
    assert r.exit_code != 0 and r.stderr.count("\n") == 1, r.stderr


def _established_to(port: int) -> int:
    """This process's established TCP connections to 127.0.0.1:port (from /proc)."""
    import os

    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            mine.add(link[8:-1])
    n = 0
    with open("/proc/self/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if cols[3] == "01" and int(cols[2].split(":")[1], 16) == port and cols[9] in mine:
                n += 1
    return n


def test_each_command_closes_its_admin_connections(rcli, remote):
    """A command's HTTP keep-alive connections end with it: left to the garbage collector,
    many commands in one process (these tests) held one server thread each until serve
    answered no more."""
    port = int(remote.admin_url.rsplit(":", 1)[1])
    before = _established_to(port)
    for _ in range(5):
        ok(rcli("tenants", "list"))
    assert _established_to(port) <= before
