"""`topics cursor` of a remote subscription (issue 30 item 3), here on a real `pulsarctl serve`
whose store the same command reads locally: entry by entry the remote picture says what the
local one says (acked, pending, backlog) where internal stats tell it, and leaves unknown what
they do not (who holds a pending entry: null, said so in the text)."""
from __future__ import annotations

import json

import pulsar

from procs import wait_for


def ok(r):
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def states(doc: dict) -> dict:
    """messageId (ledger:entry) -> state, runs expanded."""
    out = {}
    for e in doc["entries"]:
        lid, first = (int(x) for x in e["messageId"].split(":")[:2])
        last = int(e.get("lastMessageId", e["messageId"]).split(":")[1])
        for eid in range(first, last + 1):
            out[f"{lid}:{eid}"] = e["state"]
    return out


def test_cursor_of_a_remote_subscription_matches_the_local_picture(rcli, lcli, remote, name):
    ok(rcli("produce", name, *[a for i in range(8) for a in ("-m", str(i))]))
    topic = f"persistent://public/default/{name}"
    client = pulsar.Client(remote.service_url, logger=pulsar.FileLogger(
        pulsar.LoggerLevel.Error, "/dev/null"))
    try:
        c = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                             initial_position=pulsar.InitialPosition.Earliest,
                             receiver_queue_size=1)
        got = [c.receive(30_000) for _ in range(5)]
        for i in (0, 1, 3):  # 0-1 move the mark-delete position; 3 is an acked hole
            c.acknowledge(got[i])
        # 2 and 4 are pending (delivered, not acked); 5.. are backlog
        docs = []

        def all_acked():  # acks are grouped by the library: wait until the broker has them
            docs.append(json.loads(ok(rcli("topics", "cursor", name, "-s", "s",
                                           "-o", "json")).stdout))
            return list(states(docs[-1]).values()).count("acked") == 3
        wait_for(all_acked, "the three acks", interval=0.1)
        remote_doc = docs[-1]
        local_doc = json.loads(ok(lcli("topics", "cursor", name, "-s", "s", "-o", "json")).stdout)
        assert states(remote_doc) == states(local_doc)
        seq = list(states(remote_doc).values())
        assert seq[:2] == ["acked", "acked"] and seq[3] == "acked"
        assert seq[2] == "pending" and "backlog" in seq[5:]
        assert remote_doc["markDeletePosition"] == local_doc["markDeletePosition"]
        assert remote_doc["msgBacklog"] == local_doc["msgBacklog"]
        pending = [e for e in remote_doc["entries"] if e["state"] == "pending"]
        assert all(e["consumerName"] is None for e in pending)
        text = ok(rcli("topics", "cursor", name, "-s", "s")).stdout
        assert "mark-delete" in text and "not known remotely" in text
        c.close()
    finally:
        client.close()
    assert rcli("topics", "cursor", name, "-s", "nope").exit_code == 3
