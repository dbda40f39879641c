"""Key_Shared through the command line: consumers in separate processes split the keys,
draining, sticky ranges and consistent hashing (pulsar-semantics.md §9)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from pulsarctl.broker.hashing import sticky_key_hash
from procs import reap, communicate_all
from consumer_helpers import *  # noqa: F401,F403

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="process liveness is read from /proc")

PREFIX = "persistent://public/default/"


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
