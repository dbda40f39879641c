"""Failover, Key_Shared, partitioned topics, multi-topic and pattern consumers, and
`subscriptions close-consumer`, through the command line (pulsar-semantics.md §3, §4, §9, §11.5,
§12; CLI.md).

Wherever more than one consumer takes part, each consumer is a real `python -m pulsarctl`
process: either a long-running one (Popen, always killed in `finally`) or a leased `receive`
that exits and stays connected by its lease. Leases end on the store's simulated clock
(`clock simulate` / `clock advance`), never by sleeping. Admin queries (stats, consumers, acks)
that involve no consumer run in-process through the `cli` fixture to keep the file fast.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from pulsarctl.broker.hashing import sticky_key_hash
from procs import reap, communicate_all

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="process liveness is read from /proc")

PREFIX = "persistent://public/default/"


# -- helpers ---------------------------------------------------------------------------------
def ok(r):
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def pok(r):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {stderr!r}"
    return lines[0]


def part(mid: str) -> int:
    """The partition index: the last field of a printed message id."""
    return int(mid.split(":")[2])


def payloads(recs) -> list[str]:
    return [m["payload"] for m in recs]


def ids(recs) -> list[str]:
    return [m["messageId"] for m in recs]


def ndjson_messages(pairs) -> str:
    """(key, payload) pairs as `produce --stdin --ndjson` input."""
    return "".join(json.dumps({"payload": p, "key": k}) + "\n" for k, p in pairs)


def produce_keyed(cli, topic, pairs) -> list[str]:
    # -db: one entry per message, so Key_Shared routes each by its own key (§9.1).
    r = ok(cli("produce", topic, "--stdin", "--ndjson", "-db", input=ndjson_messages(pairs)))
    out = r.stdout.split()
    assert len(out) == len(pairs)
    return out


def receive(run_proc, topic, sub, name, *extra, n=0, idle="300ms", expect=0):
    """A leased consumer in its own process: `receive ... --consumer-name NAME`; it stays
    connected after the process exits, until its lease ends."""
    r = run_proc("receive", topic, "-s", sub, "--consumer-name", name, "-n", str(n),
                 "--idle-timeout", idle, "-o", "ndjson", *extra)
    assert r.returncode == expect, (name, r.returncode, r.stdout, r.stderr)
    return records(r.stdout) if expect == 0 else r


def consumers_of(cli, topic, sub) -> list[dict]:
    return json.loads(ok(cli("subscriptions", "consumers", topic, sub, "-o", "json")).stdout)


def sub_stats(cli, topic, sub) -> dict:
    return json.loads(ok(cli("topics", "stats", topic, "-o", "json")).stdout)["subscriptions"][sub]


def ack_records(cli, topic, sub, recs) -> dict:
    text = "".join(json.dumps(m) + "\n" for m in recs)
    return json.loads(ok(cli("ack", topic, "-s", sub, "-", "-o", "json", input=text)).stdout)


def simulate_clock(run_proc):
    pok(run_proc("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))


def _argv(*args) -> list[str]:
    return [sys.executable, "-m", "pulsarctl", *args]


@pytest.fixture
def spawn(store_path):
    """Start `python -m pulsarctl ARGS` in the background; every process started here is killed
    and reaped when the test ends, whatever happened."""
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
    started: list[subprocess.Popen] = []

    def start(*args):
        p = subprocess.Popen(_argv(*args), env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(p)
        return p

    yield start
    reap(started)




def wait_for(predicate, what: str, timeout: float = 15.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


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


def test_failover_partitioned_active_consumer_per_partition(cli, run_proc):
    """§4 (PersistentFailoverE2ETest.testSimpleConsumerEventsWithPartition): with 4 partitions
    the active consumer is consumers[partition % count], consumers sorted by name."""
    ok(cli("topics", "create-partitioned-topic", "fo", "-p", "4"))
    fo = ("-t", "Failover", "--lease", "10m")
    assert receive(run_proc, "fo", "S", "1", *fo) == []
    assert receive(run_proc, "fo", "S", "2", *fo) == []
    assert active_per_partition(cli, "fo", "S", 4) == ["1", "2", "1", "2"]
    assert receive(run_proc, "fo", "S", "3", *fo) == []
    assert active_per_partition(cli, "fo", "S", 4) == ["1", "2", "3", "1"]
    rows = consumers_of(cli, "fo", "S")
    assert len(rows) == 12  # three consumers on each of four partitions
    assert {r["address"] for r in rows} == {"lease"}
    ok(cli("subscriptions", "close-consumer", "fo", "S", "1"))
    assert active_per_partition(cli, "fo", "S", 4) == ["2", "3", "2", "3"]
    assert sorted({r["consumerName"] for r in consumers_of(cli, "fo", "S")}) == ["2", "3"]


def test_failover_partitioned_add_and_close_consumers(cli, run_proc):
    """The rest of §4's table: add "3" -> 1,2,3,1; close "1" -> 2,3,2,3. Partitions whose
    active consumer changed deliver their unacked messages again, to the new active consumer."""
    ok(cli("topics", "create-partitioned-topic", "fo", "-p", "4"))
    fo = ("-t", "Failover", "--lease", "10m")

    def join(name):
        return receive(run_proc, "fo", "S", name, *fo)

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


def test_failover_non_partitioned_hash_ring_and_lease_end(cli, run_proc):
    """§12.5: on persistent://public/default/my-topic, {c1, c2} -> c1 and {c1, c2, c3} -> c3.
    Only the active consumer receives; when its lease ends, the next active one gets its
    unacked messages again (rewind) and the later ones. Cumulative ack works on Failover."""
    topic = PREFIX + "my-topic"
    simulate_clock(run_proc)
    fo = ("-t", "Failover", "-p", "Earliest")

    assert receive(run_proc, topic, "S", "c1", *fo, "--lease", "10m") == []
    assert receive(run_proc, topic, "S", "c2", *fo, "--lease", "10m") == []
    rows = consumers_of(cli, topic, "S")
    assert {r["consumerName"]: r["isActive"] for r in rows} == {"c1": True, "c2": False}

    msg_ids = ok(cli("produce", topic, "-m", "m0", "-m", "m1", "-m", "m2", "-m", "m3",
                     "-m", "m4", "-m", "m5")).stdout.split()
    got = receive(run_proc, topic, "S", "c1", *fo, n=2)
    assert payloads(got) == ["m0", "m1"]
    assert receive(run_proc, topic, "S", "c2", *fo) == [], "an inactive consumer received"

    # c3 joins with a short lease and becomes active: c1's unacked messages go to it.
    got3 = receive(run_proc, topic, "S", "c3", *fo, "--lease", "1m", n=3)
    rows = consumers_of(cli, topic, "S")
    assert {r["consumerName"]: r["isActive"] for r in rows} == \
        {"c1": False, "c2": False, "c3": True}
    assert payloads(got3) == ["m0", "m1", "m2"]
    assert {m["consumerName"] for m in got3} == {"c3"}
    assert receive(run_proc, topic, "S", "c1", *fo) == [], "c1 is no longer active"
    assert receive(run_proc, topic, "S", "c2", *fo) == []
    assert json.loads(ok(cli("ack", topic, "-s", "S", msg_ids[0], "-o", "json")).stdout)["acked"] == 1

    # c3's lease ends: c1 is active again and gets c3's unacked m1, m2 and the later ones.
    pok(run_proc("clock", "advance", "2m"))
    got1 = receive(run_proc, topic, "S", "c1", *fo)
    assert payloads(got1) == ["m1", "m2", "m3", "m4", "m5"]
    assert ids(got1) == msg_ids[1:]
    assert {m["consumerName"] for m in got1} == {"c1"}
    assert {m["redeliveryCount"] for m in got1} == {0}
    rows = consumers_of(cli, topic, "S")
    assert {r["consumerName"]: r["isActive"] for r in rows} == {"c1": True, "c2": False}
    assert receive(run_proc, topic, "S", "c2", *fo) == []

    # Cumulative ack is allowed on Failover.
    r = ok(cli("ack", topic, "-s", "S", "--cumulative", msg_ids[-1], "-o", "json"))
    assert json.loads(r.stdout)["cumulative"] is True
    st = sub_stats(cli, topic, "S")
    assert st["msgBacklog"] == 0 and st["unackedMessages"] == 0
    assert st["type"] == "Failover"


def _failover_c1_active_holding_two(cli, run_proc, topic, fo, c2_lease):
    receive(run_proc, topic, "S", "c1", *fo, "--lease", "10m")
    receive(run_proc, topic, "S", "c2", *fo, "--lease", c2_lease)
    rows = consumers_of(cli, topic, "S")
    assert {r["consumerName"]: r["isActive"] for r in rows} == {"c1": True, "c2": False}
    ok(cli("produce", topic, "-m", "a", "-m", "b", "-m", "c"))
    assert payloads(receive(run_proc, topic, "S", "c1", *fo, n=2)) == ["a", "b"]
    assert sub_stats(cli, topic, "S")["unackedMessages"] == 2


def test_failover_closing_an_inactive_consumer_does_not_redeliver(cli, run_proc):
    """§4: the cursor rewinds when the *active* consumer changes. Closing an inactive consumer
    changes nothing for the active one: its unacked messages stay pending for it and are not
    delivered to it a second time."""
    topic = PREFIX + "my-topic"
    fo = ("-t", "Failover", "-p", "Earliest")
    _failover_c1_active_holding_two(cli, run_proc, topic, fo, "10m")
    ok(cli("subscriptions", "close-consumer", topic, "S", "c2"))
    assert sub_stats(cli, topic, "S")["unackedMessages"] == 2, \
        "closing an inactive consumer took the active consumer's messages back"
    got = receive(run_proc, topic, "S", "c1", *fo)
    assert payloads(got) == ["c"], "closing an inactive consumer redelivered to the active one"


def test_failover_inactive_consumer_lease_end_does_not_redeliver(cli, run_proc):
    """The same when the inactive consumer's lease ends."""
    topic = PREFIX + "my-topic"
    simulate_clock(run_proc)
    fo = ("-t", "Failover", "-p", "Earliest")
    _failover_c1_active_holding_two(cli, run_proc, topic, fo, "1m")
    pok(run_proc("clock", "advance", "2m"))  # c2's lease ends; c1's has 8 minutes left
    got = receive(run_proc, topic, "S", "c1", *fo)
    assert [r["consumerName"] for r in consumers_of(cli, topic, "S")] == ["c1"]
    assert payloads(got) == ["c"], \
        "an inactive consumer's lease end redelivered the active consumer's messages"
    assert sub_stats(cli, topic, "S")["unackedMessages"] == 3


# == 2. Key_Shared =============================================================================
KEYS20 = [f"k{i:02d}" for i in range(20)]


def test_key_shared_two_processes_split_keys(cli, run_proc, spawn):
    """Two `consume -t Key_Shared` processes: every key goes to exactly one of them, in order,
    nothing lost or duplicated, and the hash ranges are the two halves of auto-split."""
    per_key = 60
    pairs = [(k, f"{k}:{i:04d}") for i in range(per_key) for k in KEYS20]
    ok(cli("topics", "create-subscription", "ks", "-s", "S", "-m", "earliest"))

    args = ("consume", "ks", "-s", "S", "-t", "Key_Shared", "-n", "0", "--idle-timeout", "2s",
            "-o", "ndjson")
    a, b = spawn(*args), spawn(*args)
    # Both attach before any message exists, so no key ever moves from one to the other.
    wait_for(lambda: len(sub_stats(cli, "ks", "S")["consumers"]) == 2,
             "both consumers to attach", timeout=20)
    produce_keyed(cli, "ks", pairs)
    (out_a, err_a), (out_b, err_b) = communicate_all([a, b])
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b

    everything = set(p for _, p in pairs)
    keys_of = []
    for out in (out_a, out_b):
        recs = records(out)
        seen: dict[str, int] = {}
        for m in recs:
            k, seq = m["payload"].split(":")
            assert m["key"] == k
            assert seen.get(k, -1) < int(seq), f"key {k} out of order in one process"
            seen[k] = int(seq)
        keys_of.append(set(seen))
        assert len(recs) == len(set(payloads(recs))), "a process printed a message twice"
    ka, kb = keys_of
    assert ka and kb, f"one consumer got every key ({sorted(ka)} / {sorted(kb)})"
    assert not ka & kb, f"keys received by both processes: {sorted(ka & kb)}"
    got = payloads(records(out_a)) + payloads(records(out_b))
    assert len(got) == len(pairs) and set(got) == everything

    # Auto-split with two consumers: one owns slots up to 32768, the other the rest.
    low = {k for k in KEYS20 if sticky_key_hash(k) <= 32768}
    assert {frozenset(ka), frozenset(kb)} == {frozenset(low), frozenset(set(KEYS20) - low)}

    st = sub_stats(cli, "ks", "S")
    assert st["msgBacklog"] == 0 and st["unackedMessages"] == 0
    assert st["type"] == "Key_Shared"


def test_key_shared_two_processes_with_a_backlog(cli, run_proc, spawn):
    """The same with the messages already there: whichever process attaches first may take
    keys that move to the other when it arrives. A key is still never with both at once: per
    key, everything one process got comes before everything the other got, and nothing is
    lost or duplicated."""
    per_key = 100
    pairs = [(k, f"{k}:{i:04d}") for i in range(per_key) for k in KEYS20]
    produce_keyed(cli, "kb", pairs)
    ok(cli("topics", "create-subscription", "kb", "-s", "S", "-m", "earliest"))
    args = ("consume", "kb", "-s", "S", "-t", "Key_Shared", "-n", "0", "--idle-timeout", "2s",
            "-o", "ndjson")
    a, b = spawn(*args), spawn(*args)
    # Nobody reads their output until both are attached: the first one fills its pipe and
    # blocks with at most a receiver queue (1000) pending.
    wait_for(lambda: len(sub_stats(cli, "kb", "S")["consumers"]) == 2,
             "both consumers to attach", timeout=20)
    (out_a, err_a), (out_b, err_b) = communicate_all([a, b])
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b
    seqs = []
    for out in (out_a, out_b):
        got: dict[str, list[int]] = {}
        for m in records(out):
            k, seq = m["payload"].split(":")
            got.setdefault(k, []).append(int(seq))
        for k, v in got.items():
            assert v == sorted(v) and len(v) == len(set(v)), f"key {k} out of order or twice"
        seqs.append(got)
    ga, gb = seqs
    assert ga and gb, "one consumer got everything"
    for k in KEYS20:
        sa, sb = ga.get(k, []), gb.get(k, [])
        assert sorted(sa + sb) == list(range(per_key)), f"key {k}: lost or duplicated"
        if sa and sb:
            assert max(sa) < min(sb) or max(sb) < min(sa), \
                f"key {k} went back and forth between the consumers"
    st = sub_stats(cli, "kb", "S")
    assert st["msgBacklog"] == 0 and st["unackedMessages"] == 0


def test_key_shared_draining_when_a_consumer_joins(cli, run_proc):
    """PIP-379 (§9.2): B joins while A holds unacked messages of every key it has seen. B gets
    nothing of a key A still holds, even when the key is now B's; keys A never held it gets at
    once. After A acks, B gets the rest of its keys, in order."""
    ks = ("-t", "Key_Shared", "-p", "Earliest", "--lease", "10m")
    first_keys, later_keys = KEYS20[:10], KEYS20[10:]
    b_half = {k for k in KEYS20 if sticky_key_hash(k) <= 32768}  # B joins second: lower half
    assert first_keys and set(first_keys) & b_half and set(first_keys) - b_half
    assert set(later_keys) & b_half and set(later_keys) - b_half

    round1 = [(k, f"{k}:{i}") for i in range(2) for k in first_keys]
    produce_keyed(cli, "kd", round1)
    held_by_a = receive(run_proc, "kd", "S", "A", *ks)
    assert sorted(payloads(held_by_a)) == sorted(p for _, p in round1)

    round2 = [(k, f"{k}:{i}") for i in range(2, 5) for k in KEYS20]
    produce_keyed(cli, "kd", round2)

    got_b = receive(run_proc, "kd", "S", "B", *ks)
    b_keys = {m["key"] for m in got_b}
    held = {m["key"] for m in held_by_a}
    assert not b_keys & held, f"B got keys A still holds: {sorted(b_keys & held)}"
    assert sorted(payloads(got_b)) == sorted(p for k, p in round2 if k in b_half - held)
    assert b_keys  # B is not blocked as a whole, only the keys that moved

    got_a = receive(run_proc, "kd", "S", "A", *ks)
    assert {m["key"] for m in got_a} <= set(KEYS20) - b_half, "A got a key that is now B's"
    assert sorted(payloads(got_a)) == sorted(p for k, p in round2 if k not in b_half)

    assert receive(run_proc, "kd", "S", "B", *ks) == [], "B got a held key before A acked"
    assert ack_records(cli, "kd", "S", held_by_a + got_a)["acked"] == len(held_by_a + got_a)

    rest_b = receive(run_proc, "kd", "S", "B", *ks)
    assert sorted(payloads(rest_b)) == sorted(p for k, p in round2 if k in b_half & held)
    for k in b_half & held:  # per-key order
        seqs = [int(m["payload"].split(":")[1]) for m in rest_b if m["key"] == k]
        assert seqs == sorted(seqs) == [2, 3, 4]
    everything = held_by_a + got_a + got_b + rest_b
    assert sorted(payloads(everything)) == sorted(p for _, p in round1 + round2)
    ack_records(cli, "kd", "S", got_b + rest_b)
    st = sub_stats(cli, "kd", "S")
    assert st["msgBacklog"] == 0 and st["unackedMessages"] == 0


def test_key_shared_sticky_ranges(cli, run_proc):
    """Sticky policy (§9.2): consumers bring fixed ranges; a key goes to the consumer whose
    range holds its slot; an overlap is refused (exit 4, "Range conflict"); a slot nobody
    covers waits until a consumer covers it."""
    keys = [f"k{i:02d}" for i in range(20, 40)]
    slot = {k: sticky_key_hash(k) for k in keys}
    x_keys = {k for k in keys if slot[k] <= 32767}
    gap_keys = {k for k in keys if 32768 <= slot[k] <= 39999}
    y_keys = {k for k in keys if slot[k] >= 40000}
    assert x_keys and gap_keys and y_keys

    def sticky(ranges):
        return ("-t", "Key_Shared", "-p", "Earliest", "--lease", "10m",
                "--key-shared-policy", "sticky", "--sticky-ranges", ranges)

    assert receive(run_proc, "st", "S", "X", *sticky("0-32767")) == []
    assert receive(run_proc, "st", "S", "Y", *sticky("40000-65535")) == []
    r = receive(run_proc, "st", "S", "Z", *sticky("30000-35000"), expect=4)
    assert "Range conflict" in one_error_line(r.stderr)
    assert r.stdout == ""
    rows = consumers_of(cli, "st", "S")
    assert {c["consumerName"]: c["keyHashRanges"] for c in rows} == \
        {"X": ["[0, 32767]"], "Y": ["[40000, 65535]"]}

    pairs = [(k, f"{k}:{i}") for i in range(3) for k in keys]
    produce_keyed(cli, "st", pairs)
    got_x = receive(run_proc, "st", "S", "X", *sticky("0-32767"))
    got_y = receive(run_proc, "st", "S", "Y", *sticky("40000-65535"))
    assert sorted(payloads(got_x)) == sorted(p for k, p in pairs if k in x_keys)
    assert sorted(payloads(got_y)) == sorted(p for k, p in pairs if k in y_keys)
    # Slots 32768..39999 belong to nobody: their messages wait.
    st = sub_stats(cli, "st", "S")
    assert st["msgBacklog"] == len(pairs)
    assert st["unackedMessages"] == len(got_x) + len(got_y)
    # Left out, the policy flags keep the consumer's stored ranges.
    assert receive(run_proc, "st", "S", "X", "-t", "Key_Shared", "--lease", "10m") == []

    got_w = receive(run_proc, "st", "S", "W", *sticky("32768-39999"))
    assert sorted(payloads(got_w)) == sorted(p for k, p in pairs if k in gap_keys)
    for k in gap_keys:
        assert [m["payload"] for m in got_w if m["key"] == k] == [f"{k}:{i}" for i in range(3)]
    ack_records(cli, "st", "S", got_x + got_y + got_w)
    assert sub_stats(cli, "st", "S")["msgBacklog"] == 0


@pytest.mark.parametrize("ranges", ["10-5", "70000-70001", "", "0-100,50-150", "abc"])
def test_key_shared_malformed_sticky_ranges_exit_2(cli, ranges):
    r = cli("receive", "st", "-s", "S", "-t", "Key_Shared", "--key-shared-policy", "sticky",
            "--sticky-ranges", ranges, "-n", "0", "--idle-timeout", "100ms")
    assert r.exit_code == 2, (ranges, r.exit_code, r.stdout, r.stderr)
    one_error_line(r.stderr)
    assert r.stdout == ""
    # Nothing was left behind: no consumer attached.
    r = cli("subscriptions", "consumers", "st", "S", "-o", "json")
    assert r.exit_code == 3 or json.loads(r.stdout) == []


def test_key_shared_consistent_hashing_and_policy_mismatch(cli, run_proc):
    """--key-shared-policy consistent-hashing splits the keys between consumers (slot h % 65535
    + 1, §9.1); a consumer with another policy cannot join the subscription (exit 4), and the
    other way round too."""
    from pulsarctl.broker.dispatch.selectors import ConsistentHashingSelector

    ch = ("-t", "Key_Shared", "-p", "Earliest", "--lease", "10m",
          "--key-shared-policy", "consistent-hashing")
    assert receive(run_proc, "chx", "S", "P", *ch) == []
    assert receive(run_proc, "chx", "S", "Q", *ch) == []
    pairs = [(k, f"{k}:{i}") for i in range(3) for k in KEYS20]
    produce_keyed(cli, "chx", pairs)
    got_p = receive(run_proc, "chx", "S", "P", *ch)
    got_q = receive(run_proc, "chx", "S", "Q", *ch)
    kp, kq = {m["key"] for m in got_p}, {m["key"] for m in got_q}
    assert kp and kq and not kp & kq
    assert sorted(payloads(got_p + got_q)) == sorted(p for _, p in pairs)

    sel = ConsistentHashingSelector()
    sel.add_consumer("P")
    sel.add_consumer("Q")
    expected_p = {k for k in KEYS20 if sel.select(sticky_key_hash(k, 1, 65535)) == "P"}
    assert kp == expected_p

    auto = ("-t", "Key_Shared", "-p", "Earliest", "--lease", "10m")
    r = receive(run_proc, "chx", "S", "R", *auto, expect=4)
    assert "consistent-hashing" in one_error_line(r.stderr)
    r = receive(run_proc, "chx", "S", "R", *auto, "--key-shared-policy", "sticky",
                "--sticky-ranges", "0-100", expect=4)
    one_error_line(r.stderr)
    assert sorted(c["consumerName"] for c in consumers_of(cli, "chx", "S")) == ["P", "Q"]

    # The other way round: an auto-split subscription refuses a consistent-hashing consumer.
    assert receive(run_proc, "chy", "S", "P", *auto) == []
    r = receive(run_proc, "chy", "S", "Q", *ch, expect=4)
    assert "auto-split" in one_error_line(r.stderr)


# == 3. Partitioned topics through the CLI ====================================================
def test_partitioned_topic_admin(cli):
    ok(cli("topics", "create-partitioned-topic", "pt", "-p", "3"))
    r = ok(cli("topics", "get-partitioned-topic-metadata", "pt", "-o", "json"))
    assert json.loads(r.stdout) == {"partitions": 3}
    ok(cli("produce", "plain", "-m", "x"))
    r = ok(cli("topics", "get-partitioned-topic-metadata", "plain", "-o", "json"))
    assert json.loads(r.stdout) == {"partitions": 0}

    r = cli("topics", "create-partitioned-topic", "pt", "-p", "3")
    assert r.exit_code == 4, (r.exit_code, r.stderr)
    r = cli("topics", "create-partitioned-topic", "bad", "-p", "0")
    assert r.exit_code == 2, (r.exit_code, r.stderr)

    listed = json.loads(ok(cli("topics", "list", "public/default", "-o", "json")).stdout)
    assert {f"{PREFIX}pt-partition-{i}" for i in range(3)} <= set(listed)
    assert f"{PREFIX}plain" in listed
    r = ok(cli("topics", "list-partitioned-topics", "public/default", "-o", "json"))
    assert json.loads(r.stdout) == [f"{PREFIX}pt"]

    # A subscription on the partitioned topic; growing gives new partitions the subscription.
    ok(cli("topics", "create-subscription", "pt", "-s", "S", "-m", "earliest"))
    r = cli("topics", "update-partitioned-topic", "pt", "-p", "2")
    assert r.exit_code == 4, (r.exit_code, r.stderr)
    one_error_line(r.stderr)
    ok(cli("topics", "update-partitioned-topic", "pt", "-p", "5"))
    r = ok(cli("topics", "get-partitioned-topic-metadata", "pt", "-o", "json"))
    assert json.loads(r.stdout) == {"partitions": 5}
    for i in (3, 4):
        subs = json.loads(ok(cli("topics", "subscriptions", f"pt-partition-{i}", "-o",
                                 "json")).stdout)
        assert subs == ["S"]
    listed = json.loads(ok(cli("topics", "list", "public/default", "-o", "json")).stdout)
    assert {f"{PREFIX}pt-partition-{i}" for i in range(5)} <= set(listed)
    msg_ids = ok(cli("produce", "pt", "-m", "y", "-n", "10")).stdout.split()
    assert {part(m) for m in msg_ids} == set(range(5))
    r = ok(cli("consume", "pt", "-s", "S", "-n", "0", "--idle-timeout", "500ms", "-o", "ndjson"))
    assert sorted(ids(records(r.stdout))) == sorted(msg_ids), "a new partition's messages were missed"

    # Deleting is refused while there are subscriptions, unless --force.
    r = cli("topics", "delete-partitioned-topic", "pt")
    assert r.exit_code == 4, (r.exit_code, r.stderr)
    one_error_line(r.stderr)
    r = ok(cli("topics", "get-partitioned-topic-metadata", "pt", "-o", "json"))
    assert json.loads(r.stdout) == {"partitions": 5}
    ok(cli("topics", "delete-partitioned-topic", "pt", "--force"))
    r = ok(cli("topics", "get-partitioned-topic-metadata", "pt", "-o", "json"))
    assert json.loads(r.stdout) == {"partitions": 0}
    listed = json.loads(ok(cli("topics", "list", "public/default", "-o", "json")).stdout)
    assert not [t for t in listed if "pt-partition-" in t]
    r = ok(cli("topics", "list-partitioned-topics", "public/default", "-o", "json"))
    assert json.loads(r.stdout) == []


# §12.2: key -> partition for n = 3, 4, 5.
ROUTING = {
    "JavaStringHash": {
        "key1": (0, 2, 3), "key2": (1, 3, 4), "Order-3459134": (2, 2, 1), "my-key": (2, 2, 1),
        "test-key": (2, 0, 0), "hello": (1, 2, 2), "a": (1, 1, 2),
    },
    "Murmur3_32Hash": {
        "key1": (0, 1, 1), "key2": (0, 0, 0), "Order-3459134": (0, 3, 2), "my-key": (1, 1, 3),
        "test-key": (2, 3, 3), "hello": (1, 3, 1), "a": (2, 2, 0),
    },
}


@pytest.mark.parametrize("scheme", ["JavaStringHash", "Murmur3_32Hash"])
def test_produce_routes_keys_as_pulsar(cli, scheme):
    for j, n in enumerate((3, 4, 5)):
        topic = f"r{n}"
        ok(cli("topics", "create-partitioned-topic", topic, "-p", str(n)))
        for key, want in ROUTING[scheme].items():
            args = ("produce", topic, "-m", "x", "-k", key)
            if scheme != "JavaStringHash" or key == "a":
                args += ("--hashing-scheme", scheme)  # JavaStringHash is also the default
            r = ok(cli(*args))
            (mid,) = r.stdout.split()
            assert part(mid) == want[j], f"{scheme}: key {key!r} on {n} partitions"


def test_produce_unkeyed_round_robin_and_single_partition(cli):
    ok(cli("topics", "create-partitioned-topic", "rr", "-p", "4"))
    msg_ids = ok(cli("produce", "rr", "-m", "x", "-n", "8")).stdout.split()
    assert len(msg_ids) == 8
    parts = [part(m) for m in msg_ids]
    assert sorted(parts) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert all((b - a) % 4 == 1 for a, b in zip(parts, parts[1:])), parts  # one after another

    for _ in range(3):
        msg_ids = ok(cli("produce", "rr", "-m", "y", "-n", "6", "--routing-mode",
                         "SinglePartition")).stdout.split()
        assert len({part(m) for m in msg_ids}) == 1
    # A key still wins over SinglePartition.
    r = ok(cli("produce", "rr", "-m", "z", "-k", "key2", "--routing-mode", "SinglePartition"))
    assert part(r.stdout.strip()) == 3
    r = cli("produce", "rr", "-m", "z", "--routing-mode", "Sideways")
    assert r.exit_code == 2
    r = cli("produce", "rr", "-m", "z", "--hashing-scheme", "BoostHash")
    assert r.exit_code == 2


def test_partitioned_consume_stats_and_ack_by_id(cli):
    ok(cli("topics", "create-partitioned-topic", "pc", "-p", "4"))
    keyed = ok(cli("produce", "pc", "-m", "k1", "-m", "k2", "-k", "hello")).stdout.split()
    assert {part(m) for m in keyed} == {2}
    plain = ok(cli("produce", "pc", "-m", "p", "-n", "6")).stdout.split()
    everything = keyed + plain

    r = ok(cli("consume", "pc", "-s", "all", "-p", "Earliest", "-n", "0", "--idle-timeout",
               "500ms", "-o", "ndjson"))
    recs = records(r.stdout)
    assert sorted(ids(recs)) == sorted(everything)
    assert {m["topic"] for m in recs} <= {f"{PREFIX}pc-partition-{i}" for i in range(4)}
    for m in recs:
        assert m["topic"].endswith(f"-partition-{part(m['messageId'])}")
    # Per-key order across the partitioned topic: a key lives on one partition.
    assert [m["payload"] for m in recs if m["key"] == "hello"] == ["k1", "k2"]

    r = ok(cli("topics", "partitioned-stats", "pc", "--per-partition", "-o", "json"))
    st = json.loads(r.stdout)
    assert st["metadata"] == {"partitions": 4}
    assert st["msgInCounter"] == len(everything)
    assert set(st["partitions"]) == {f"{PREFIX}pc-partition-{i}" for i in range(4)}
    assert sum(p["msgInCounter"] for p in st["partitions"].values()) == len(everything)
    assert st["partitions"][f"{PREFIX}pc-partition-2"]["msgInCounter"] == \
        2 + sum(1 for m in plain if part(m) == 2)
    assert st["subscriptions"]["all"]["msgBacklog"] == 0
    r = ok(cli("topics", "partitioned-stats", "pc", "-o", "json"))
    assert "partitions" not in json.loads(r.stdout)
    r = cli("topics", "partitioned-stats", "plain-one", "-o", "json")
    assert r.exit_code == 3

    # receive + ack by id with the partitioned topic's name.
    got = records(ok(cli("receive", "pc", "-s", "w", "-p", "Earliest", "-n", "5", "-o",
                         "ndjson")).stdout)
    assert len(got) == 5
    assert sub_stats(cli, "pc", "w")["unackedMessages"] == 5
    r = ok(cli("ack", "pc", "-s", "w", *ids(got[:2]), "-o", "json"))
    assert json.loads(r.stdout)["acked"] == 2
    assert ack_records(cli, "pc", "w", got[2:])["acked"] == 3
    st = sub_stats(cli, "pc", "w")
    assert st["unackedMessages"] == 0 and st["msgBacklog"] == len(everything) - 5
    r = cli("ack", "pc", "-s", "w", "999999:0:0")
    assert r.exit_code == 3


def test_cursor_admin_applies_to_every_partition(cli):
    ok(cli("topics", "create-partitioned-topic", "ca", "-p", "4"))
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    ok(cli("topics", "create-subscription", "ca", "-s", "S", "-m", "earliest"))
    ok(cli("produce", "ca", "-m", "x", "-n", "12"))  # 3 per partition

    def backlogs():
        st = json.loads(ok(cli("topics", "partitioned-stats", "ca", "--per-partition", "-o",
                               "json")).stdout)
        return [st["partitions"][f"{PREFIX}ca-partition-{i}"]["subscriptions"]["S"]["msgBacklog"]
                for i in range(4)]

    assert backlogs() == [3, 3, 3, 3]
    r = ok(cli("topics", "skip", "ca", "-s", "S", "-n", "1", "-o", "json"))
    assert json.loads(r.stdout)["skipped"] == 4
    assert backlogs() == [2, 2, 2, 2]
    r = ok(cli("topics", "clear-backlog", "ca", "-s", "S", "-o", "json"))
    assert json.loads(r.stdout)["cleared"] == 8
    assert backlogs() == [0, 0, 0, 0]

    ok(cli("clock", "advance", "1h"))
    ok(cli("produce", "ca", "-m", "late", "-n", "4"))  # 1 per partition, an hour later
    ok(cli("topics", "clear-backlog", "ca", "-s", "S"))
    ok(cli("topics", "reset-cursor", "ca", "-s", "S", "-t", "30m"))  # only the late ones
    assert backlogs() == [1, 1, 1, 1]
    ok(cli("topics", "reset-cursor", "ca", "-s", "S", "-t", "2h"))  # everything again
    assert backlogs() == [4, 4, 4, 4]
    r = ok(cli("consume", "ca", "-s", "S", "-n", "0", "--idle-timeout", "300ms", "-o", "ndjson"))
    assert len(records(r.stdout)) == 16

    r = ok(cli("topics", "terminate", "ca", "-o", "json"))
    doc = json.loads(r.stdout)
    assert doc["terminated"] is True
    assert set(doc["lastMessageId"]) == {f"{PREFIX}ca-partition-{i}" for i in range(4)}
    for i in range(4):
        r = cli("produce", f"ca-partition-{i}", "-m", "after")
        assert r.exit_code == 4, (i, r.exit_code, r.stderr)
    r = cli("produce", "ca", "-m", "after", "-n", "4")
    assert r.exit_code == 4


# == 4. Multi-topic and pattern consumers =====================================================
def test_consume_several_topics(cli):
    a = ok(cli("produce", "ma", "-m", "a1", "-m", "a2")).stdout.split()
    b = ok(cli("produce", "mb", "-m", "b1")).stdout.split()
    ok(cli("topics", "create-partitioned-topic", "mc", "-p", "2"))
    c = ok(cli("produce", "mc", "-m", "c1", "-m", "c2")).stdout.split()
    r = ok(cli("consume", "ma", "mb", "mc", "-s", "S", "-p", "Earliest", "-n", "0",
               "--idle-timeout", "1s", "-o", "ndjson"))
    recs = records(r.stdout)
    assert sorted(ids(recs)) == sorted(a + b + c)
    assert [m["payload"] for m in recs if m["topic"] == PREFIX + "ma"] == ["a1", "a2"]
    for t in ("ma", "mb"):
        assert sub_stats(cli, t, "S")["msgBacklog"] == 0
    r = ok(cli("consume", "ma", "mb", "-s", "S", "-n", "0", "--idle-timeout", "200ms"))
    assert r.stdout == ""


def test_consume_regex_matches_topics(cli):
    ok(cli("produce", "mt-one", "-m", "1"))
    ok(cli("produce", "mt-two", "-m", "2a", "-m", "2b"))
    ok(cli("produce", "other", "-m", "no"))
    ok(cli("produce", "my-tenant-less", "-m", "no"))
    r = ok(cli("consume", "--regex", PREFIX + "mt-.*", "-s", "S", "-p", "Earliest", "-n", "0",
               "--idle-timeout", "1s", "-o", "ndjson"))
    recs = records(r.stdout)
    assert sorted(payloads(recs)) == ["1", "2a", "2b"]
    assert {m["topic"] for m in recs} == {PREFIX + "mt-one", PREFIX + "mt-two"}
    subs = json.loads(ok(cli("topics", "subscriptions", "other", "-o", "json")).stdout)
    assert subs == []


@pytest.mark.parametrize("pattern", [PREFIX + "mt-(", "mt-[", PREFIX + "mt-**",
                                     "persistent://public/def.*/mt-.*"])
def test_consume_regex_malformed_pattern_exit_2(cli, pattern):
    r = cli("consume", "--regex", pattern, "-s", "S", "-n", "0", "--idle-timeout", "100ms")
    assert r.exit_code == 2, (pattern, r.exit_code, r.stdout, r.stderr)
    one_error_line(r.stderr)


def test_regex_consumer_picks_up_new_topic(run_proc, spawn):
    pok(run_proc("produce", "mt-first", "-m", "f1"))
    p = spawn("consume", "--regex", PREFIX + "mt-.*", "-s", "S", "-p", "Earliest", "-n", "0",
              "--idle-timeout", "4s", "-o", "ndjson")

    def attached():
        r = run_proc("topics", "stats", "mt-first", "-o", "json")
        sub = json.loads(r.stdout)["subscriptions"].get("S") if r.returncode == 0 else None
        return bool(sub and sub["consumers"])

    wait_for(attached, "the regex consumer to attach")
    time.sleep(1.0)  # the new topic comes well after the consumer subscribed (~1.5 s in all)
    assert p.poll() is None, "the regex consumer ended early"
    pok(run_proc("produce", "mt-new", "-m", "n1", "-m", "n2"))
    pok(run_proc("produce", "not-mt", "-m", "x"))
    (out, err), = communicate_all([p], timeout=30)
    assert p.returncode == 0, err
    recs = records(out)
    assert sorted(payloads(recs)) == ["f1", "n1", "n2"], "the new matching topic was not picked up"
    assert [m["payload"] for m in recs if m["topic"] == PREFIX + "mt-new"] == ["n1", "n2"]
    r = pok(run_proc("topics", "stats", "mt-new", "-o", "json"))
    assert json.loads(r.stdout)["subscriptions"]["S"]["msgBacklog"] == 0
    r = pok(run_proc("topics", "subscriptions", "not-mt", "-o", "json"))
    assert json.loads(r.stdout) == []


# == 5. subscriptions close-consumer ==========================================================
def test_close_consumer_shared_gives_pending_to_another(cli, run_proc):
    sh = ("-t", "Shared", "-p", "Earliest", "--lease", "10m")
    assert receive(run_proc, "cc", "S", "A", *sh) == []
    assert receive(run_proc, "cc", "S", "B", *sh) == []
    msg_ids = ok(cli("produce", "cc", "--stdin", "-db",  # one entry per message
                     input="".join(f"m{i}\n" for i in range(10)))).stdout.split()
    got_a = receive(run_proc, "cc", "S", "A", *sh, n=4)
    got_b = receive(run_proc, "cc", "S", "B", *sh, n=2)
    assert not set(ids(got_a)) & set(ids(got_b))

    r = ok(cli("subscriptions", "close-consumer", "cc", "S", "A", "-o", "json"))
    assert json.loads(r.stdout)["pendingReturned"] == 4
    assert [c["consumerName"] for c in consumers_of(cli, "cc", "S")] == ["B"]
    rest = receive(run_proc, "cc", "S", "B", *sh)
    assert set(ids(got_a)) <= set(ids(rest)), "A's pending messages did not go to B"
    assert sorted(ids(got_b + rest)) == sorted(msg_ids)
    assert {m["redeliveryCount"] for m in rest} == {0}
    assert {m["consumerName"] for m in rest} == {"B"}
    st = sub_stats(cli, "cc", "S")
    assert st["unackedMessages"] == 10
    r = cli("ack", "cc", "-s", "S", *ids(got_a))  # acking the closed consumer's ids still works
    assert r.exit_code == 0


def test_close_consumer_exclusive_rewinds(cli, run_proc):
    ex = ("-p", "Earliest", "--lease", "10m")
    msg_ids = ok(cli("produce", "ce", "-m", "a", "-m", "b", "-m", "c", "-m", "d")).stdout.split()
    got = receive(run_proc, "ce", "S", "X", *ex, n=3)
    assert payloads(got) == ["a", "b", "c"]
    r = receive(run_proc, "ce", "S", "Y", *ex, expect=4)  # ConsumerBusy while X is there
    assert "Exclusive consumer is already connected" in one_error_line(r.stderr)

    r = ok(cli("subscriptions", "close-consumer", "ce", "S", "X"))
    assert "3" in r.stderr
    got = receive(run_proc, "ce", "S", "Y", *ex)
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
