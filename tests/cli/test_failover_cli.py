"""Failover through the command line, each consumer a leased `receive` (tied to no process, so
it stays connected between commands as a separate process's would); and `subscriptions
close-consumer` (pulsar-semantics.md §4, §12). Leases end on the simulated clock, never by
sleeping."""
from __future__ import annotations

import json

from cli_helpers import ok, one_error_line
from consumer_helpers import (ack_records, consumers_of, ids, part, payloads, receive,
                              simulate_clock, sub_stats)

PREFIX = "persistent://public/default/"


# == 1. Failover ===============================================================================
def active_per_partition(cli, topic, sub, n) -> list[str | None]:
    """The active consumer of each partition, from `subscriptions consumers -o json`."""
    rows = consumers_of(cli, topic, sub)
    active: dict[int, str] = {}
    for r in rows:
        i = int(r["topic"].rsplit("-partition-", 1)[1])
        if r["isActive"]:
            assert i not in active, f"two active consumers on partition {i}: {rows}"
            active[i] = r["consumerName"]
    return [active.get(i) for i in range(n)]


def test_failover_partitioned_active_consumer_per_partition(cli):
    """§4 (PersistentFailoverE2ETest.testSimpleConsumerEventsWithPartition): with 4 partitions
    the active consumer is consumers[partition % count], consumers sorted by name."""
    ok(cli("topics", "create-partitioned-topic", "fo", "-p", "4"))
    fo = ("-t", "Failover", "--lease", "10m")
    assert receive(cli, "fo", "S", "1", *fo) == []
    assert receive(cli, "fo", "S", "2", *fo) == []
    assert active_per_partition(cli, "fo", "S", 4) == ["1", "2", "1", "2"]
    assert receive(cli, "fo", "S", "3", *fo) == []
    assert active_per_partition(cli, "fo", "S", 4) == ["1", "2", "3", "1"]
    rows = consumers_of(cli, "fo", "S")
    assert len(rows) == 12  # three consumers on each of four partitions
    assert {r["address"] for r in rows} == {"lease"}
    ok(cli("subscriptions", "close-consumer", "fo", "S", "1"))
    assert active_per_partition(cli, "fo", "S", 4) == ["2", "3", "2", "3"]
    assert sorted({r["consumerName"] for r in consumers_of(cli, "fo", "S")}) == ["2", "3"]


def test_failover_partitioned_add_and_close_consumers(cli):
    """The rest of §4's table: add "3" -> 1,2,3,1; close "1" -> 2,3,2,3. Partitions whose
    active consumer changed deliver their unacked messages again, to the new active consumer."""
    ok(cli("topics", "create-partitioned-topic", "fo", "-p", "4"))
    fo = ("-t", "Failover", "--lease", "10m")

    def join(name):
        return receive(cli, "fo", "S", name, *fo)

    join("1")
    join("2")
    msg_ids = ok(cli("produce", "fo", "-m", "x", "-n", "8")).stdout.split()
    on = {i: sorted(m for m in msg_ids if part(m) == i) for i in range(4)}
    assert sorted(ids(join("1"))) == sorted(on[0] + on[2])
    assert sorted(ids(join("2"))) == sorted(on[1] + on[3])

    # "3" joins: p2 goes from 1 to 3, p3 from 2 to 1.
    got3 = join("3")
    assert active_per_partition(cli, "fo", "S", 4) == ["1", "2", "3", "1"]
    assert sorted(ids(got3)) == on[2], "p2's unacked messages did not go to its new active consumer"
    assert sorted(ids(join("1"))) == on[3], "p3's unacked messages did not go to consumer 1"
    assert join("2") == []  # 2 still holds p1's messages, and p3 is no longer its

    r = ok(cli("subscriptions", "close-consumer", "fo", "S", "1", "-o", "json"))
    doc = json.loads(r.stdout)
    assert doc["closed"] is True
    assert doc["pendingReturned"] == 4  # p0 and p3
    assert active_per_partition(cli, "fo", "S", 4) == ["2", "3", "2", "3"]
    assert sorted({r["consumerName"] for r in consumers_of(cli, "fo", "S")}) == ["2", "3"]

    # Every partition changed hands: each new active consumer gets all its unacked messages.
    got2, got3 = join("2"), join("3")
    assert sorted(ids(got2)) == sorted(on[0] + on[2])
    assert sorted(ids(got3)) == sorted(on[1] + on[3])
    assert {m["redeliveryCount"] for m in got2 + got3} == {0}
    ack_records(cli, "fo", "S", got2 + got3)
    assert sub_stats(cli, "fo", "S")["msgBacklog"] == 0


def test_failover_non_partitioned_hash_ring_and_lease_end(cli):
    """§12.5: on persistent://public/default/my-topic, {c1, c2} -> c1 and {c1, c2, c3} -> c3.
    Only the active consumer receives; when its lease ends, the next active one gets its
    unacked messages again (rewind) and the later ones. Cumulative ack works on Failover."""
    topic = PREFIX + "my-topic"
    simulate_clock(cli)
    fo = ("-t", "Failover", "-p", "Earliest")

    assert receive(cli, topic, "S", "c1", *fo, "--lease", "10m") == []
    assert receive(cli, topic, "S", "c2", *fo, "--lease", "10m") == []
    rows = consumers_of(cli, topic, "S")
    assert {r["consumerName"]: r["isActive"] for r in rows} == {"c1": True, "c2": False}

    msg_ids = ok(cli("produce", topic, "-m", "m0", "-m", "m1", "-m", "m2", "-m", "m3",
                     "-m", "m4", "-m", "m5")).stdout.split()
    got = receive(cli, topic, "S", "c1", *fo, n=2)
    assert payloads(got) == ["m0", "m1"]
    assert receive(cli, topic, "S", "c2", *fo) == [], "an inactive consumer received"

    # c3 joins with a short lease and becomes active: c1's unacked messages go to it.
    got3 = receive(cli, topic, "S", "c3", *fo, "--lease", "1m", n=3)
    rows = consumers_of(cli, topic, "S")
    assert {r["consumerName"]: r["isActive"] for r in rows} == \
        {"c1": False, "c2": False, "c3": True}
    assert payloads(got3) == ["m0", "m1", "m2"]
    assert {m["consumerName"] for m in got3} == {"c3"}
    assert receive(cli, topic, "S", "c1", *fo) == [], "c1 is no longer active"
    assert receive(cli, topic, "S", "c2", *fo) == []
    assert json.loads(ok(cli("ack", topic, "-s", "S", msg_ids[0], "-o", "json")).stdout)["acked"] == 1

    # c3's lease ends: c1 is active again and gets c3's unacked m1, m2 and the later ones.
    ok(cli("clock", "advance", "2m"))
    got1 = receive(cli, topic, "S", "c1", *fo)
    assert payloads(got1) == ["m1", "m2", "m3", "m4", "m5"]
    assert ids(got1) == msg_ids[1:]
    assert {m["consumerName"] for m in got1} == {"c1"}
    assert {m["redeliveryCount"] for m in got1} == {0}
    rows = consumers_of(cli, topic, "S")
    assert {r["consumerName"]: r["isActive"] for r in rows} == {"c1": True, "c2": False}
    assert receive(cli, topic, "S", "c2", *fo) == []

    # Cumulative ack is allowed on Failover.
    r = ok(cli("ack", topic, "-s", "S", "--cumulative", msg_ids[-1], "-o", "json"))
    assert json.loads(r.stdout)["cumulative"] is True
    st = sub_stats(cli, topic, "S")
    assert st["msgBacklog"] == 0 and st["unackedMessages"] == 0
    assert st["type"] == "Failover"


def _failover_c1_active_holding_two(cli, topic, fo, c2_lease):
    receive(cli, topic, "S", "c1", *fo, "--lease", "10m")
    receive(cli, topic, "S", "c2", *fo, "--lease", c2_lease)
    rows = consumers_of(cli, topic, "S")
    assert {r["consumerName"]: r["isActive"] for r in rows} == {"c1": True, "c2": False}
    ok(cli("produce", topic, "-m", "a", "-m", "b", "-m", "c"))
    assert payloads(receive(cli, topic, "S", "c1", *fo, n=2)) == ["a", "b"]
    assert sub_stats(cli, topic, "S")["unackedMessages"] == 2


def test_failover_closing_an_inactive_consumer_does_not_redeliver(cli):
    """§4: the cursor rewinds when the *active* consumer changes. Closing an inactive consumer
    changes nothing for the active one: its unacked messages stay pending for it and are not
    delivered to it a second time."""
    topic = PREFIX + "my-topic"
    fo = ("-t", "Failover", "-p", "Earliest")
    _failover_c1_active_holding_two(cli, topic, fo, "10m")
    ok(cli("subscriptions", "close-consumer", topic, "S", "c2"))
    assert sub_stats(cli, topic, "S")["unackedMessages"] == 2, \
        "closing an inactive consumer took the active consumer's messages back"
    got = receive(cli, topic, "S", "c1", *fo)
    assert payloads(got) == ["c"], "closing an inactive consumer redelivered to the active one"


def test_failover_inactive_consumer_lease_end_does_not_redeliver(cli):
    """The same when the inactive consumer's lease ends."""
    topic = PREFIX + "my-topic"
    simulate_clock(cli)
    fo = ("-t", "Failover", "-p", "Earliest")
    _failover_c1_active_holding_two(cli, topic, fo, "1m")
    ok(cli("clock", "advance", "2m"))  # c2's lease ends; c1's has 8 minutes left
    got = receive(cli, topic, "S", "c1", *fo)
    assert [r["consumerName"] for r in consumers_of(cli, topic, "S")] == ["c1"]
    assert payloads(got) == ["c"], \
        "an inactive consumer's lease end redelivered the active consumer's messages"
    assert sub_stats(cli, topic, "S")["unackedMessages"] == 3


# == 5. subscriptions close-consumer ==========================================================
def test_close_consumer_shared_gives_pending_to_another(cli):
    sh = ("-t", "Shared", "-p", "Earliest", "--lease", "10m")
    assert receive(cli, "cc", "S", "A", *sh) == []
    assert receive(cli, "cc", "S", "B", *sh) == []
    msg_ids = ok(cli("produce", "cc", "--stdin", "-db",  # one entry per message
                     input="".join(f"m{i}\n" for i in range(10)))).stdout.split()
    got_a = receive(cli, "cc", "S", "A", *sh, n=4)
    got_b = receive(cli, "cc", "S", "B", *sh, n=2)
    assert not set(ids(got_a)) & set(ids(got_b))

    r = ok(cli("subscriptions", "close-consumer", "cc", "S", "A", "-o", "json"))
    assert json.loads(r.stdout)["pendingReturned"] == 4
    assert [c["consumerName"] for c in consumers_of(cli, "cc", "S")] == ["B"]
    rest = receive(cli, "cc", "S", "B", *sh)
    assert set(ids(got_a)) <= set(ids(rest)), "A's pending messages did not go to B"
    assert sorted(ids(got_b + rest)) == sorted(msg_ids)
    assert {m["redeliveryCount"] for m in rest} == {0}
    assert {m["consumerName"] for m in rest} == {"B"}
    st = sub_stats(cli, "cc", "S")
    assert st["unackedMessages"] == 10
    r = cli("ack", "cc", "-s", "S", *ids(got_a))  # acking the closed consumer's ids still works
    assert r.exit_code == 0


def test_close_consumer_exclusive_rewinds(cli):
    ex = ("-p", "Earliest", "--lease", "10m")
    msg_ids = ok(cli("produce", "ce", "-m", "a", "-m", "b", "-m", "c", "-m", "d")).stdout.split()
    got = receive(cli, "ce", "S", "X", *ex, n=3)
    assert payloads(got) == ["a", "b", "c"]
    r = receive(cli, "ce", "S", "Y", *ex, expect=4)  # ConsumerBusy while X is there
    assert "Exclusive consumer is already connected" in one_error_line(r.stderr)

    r = ok(cli("subscriptions", "close-consumer", "ce", "S", "X"))
    assert "3" in r.stderr
    got = receive(cli, "ce", "S", "Y", *ex)
    assert payloads(got) == ["a", "b", "c", "d"]
    assert ids(got) == msg_ids


def test_close_consumer_unknown_exits_3(cli):
    ok(cli("receive", "cu", "-s", "S", "-p", "Earliest", "-n", "0", "--idle-timeout", "100ms"))
    for args in (("cu", "S", "nobody"), ("cu", "nosub", "cli"), ("no-such-topic", "S", "cli")):
        r = cli("subscriptions", "close-consumer", *args)
        assert r.exit_code == 3, (args, r.exit_code, r.stdout, r.stderr)
        one_error_line(r.stderr)
        assert r.stdout == ""
    ok(cli("subscriptions", "close-consumer", "cu", "S", "cli"))
    r = cli("subscriptions", "close-consumer", "cu", "S", "cli")  # already gone
    assert r.exit_code == 3
