"""Key_Shared through the command line: draining, sticky ranges and consistent hashing, with
leased `receive` consumers (pulsar-semantics.md §9). Two consumers in separate processes
splitting the keys: tests/processes/test_consumers_procs.py."""
from __future__ import annotations

import json

import pytest

from pulsarctl.broker.dispatch.selectors import sticky_key_hash
from cli_helpers import one_error_line
from consumer_helpers import ack_records, consumers_of, payloads, produce_keyed, receive, sub_stats

PREFIX = "persistent://public/default/"


# == 2. Key_Shared =============================================================================
KEYS20 = [f"k{i:02d}" for i in range(20)]


def test_key_shared_draining_when_a_consumer_joins(cli):
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
    held_by_a = receive(cli, "kd", "S", "A", *ks)
    assert sorted(payloads(held_by_a)) == sorted(p for _, p in round1)

    round2 = [(k, f"{k}:{i}") for i in range(2, 5) for k in KEYS20]
    produce_keyed(cli, "kd", round2)

    got_b = receive(cli, "kd", "S", "B", *ks)
    b_keys = {m["key"] for m in got_b}
    held = {m["key"] for m in held_by_a}
    assert not b_keys & held, f"B got keys A still holds: {sorted(b_keys & held)}"
    assert sorted(payloads(got_b)) == sorted(p for k, p in round2 if k in b_half - held)
    assert b_keys  # B is not blocked as a whole, only the keys that moved

    got_a = receive(cli, "kd", "S", "A", *ks)
    assert {m["key"] for m in got_a} <= set(KEYS20) - b_half, "A got a key that is now B's"
    assert sorted(payloads(got_a)) == sorted(p for k, p in round2 if k not in b_half)

    assert receive(cli, "kd", "S", "B", *ks) == [], "B got a held key before A acked"
    assert ack_records(cli, "kd", "S", held_by_a + got_a)["acked"] == len(held_by_a + got_a)

    rest_b = receive(cli, "kd", "S", "B", *ks)
    assert sorted(payloads(rest_b)) == sorted(p for k, p in round2 if k in b_half & held)
    for k in b_half & held:  # per-key order
        seqs = [int(m["payload"].split(":")[1]) for m in rest_b if m["key"] == k]
        assert seqs == sorted(seqs) == [2, 3, 4]
    everything = held_by_a + got_a + got_b + rest_b
    assert sorted(payloads(everything)) == sorted(p for _, p in round1 + round2)
    ack_records(cli, "kd", "S", got_b + rest_b)
    st = sub_stats(cli, "kd", "S")
    assert st["msgBacklog"] == 0 and st["unackedMessages"] == 0


def test_key_shared_sticky_ranges(cli):
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

    assert receive(cli, "st", "S", "X", *sticky("0-32767")) == []
    assert receive(cli, "st", "S", "Y", *sticky("40000-65535")) == []
    r = receive(cli, "st", "S", "Z", *sticky("30000-35000"), expect=4)
    assert "Range conflict" in one_error_line(r.stderr)
    assert r.stdout == ""
    rows = consumers_of(cli, "st", "S")
    assert {c["consumerName"]: c["keyHashRanges"] for c in rows} == \
        {"X": ["[0, 32767]"], "Y": ["[40000, 65535]"]}

    pairs = [(k, f"{k}:{i}") for i in range(3) for k in keys]
    produce_keyed(cli, "st", pairs)
    got_x = receive(cli, "st", "S", "X", *sticky("0-32767"))
    got_y = receive(cli, "st", "S", "Y", *sticky("40000-65535"))
    assert sorted(payloads(got_x)) == sorted(p for k, p in pairs if k in x_keys)
    assert sorted(payloads(got_y)) == sorted(p for k, p in pairs if k in y_keys)
    # Slots 32768..39999 belong to nobody: their messages wait.
    st = sub_stats(cli, "st", "S")
    assert st["msgBacklog"] == len(pairs)
    assert st["unackedMessages"] == len(got_x) + len(got_y)
    # Left out, the policy flags keep the consumer's stored ranges.
    assert receive(cli, "st", "S", "X", "-t", "Key_Shared", "--lease", "10m") == []

    got_w = receive(cli, "st", "S", "W", *sticky("32768-39999"))
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


def test_key_shared_consistent_hashing_and_policy_mismatch(cli):
    """--key-shared-policy consistent-hashing splits the keys between consumers (slot h % 65535
    + 1, §9.1); a consumer with another policy cannot join the subscription (exit 4), and the
    other way round too."""
    from pulsarctl.broker.dispatch.selectors import ConsistentHashingSelector

    ch = ("-t", "Key_Shared", "-p", "Earliest", "--lease", "10m",
          "--key-shared-policy", "consistent-hashing")
    assert receive(cli, "chx", "S", "P", *ch) == []
    assert receive(cli, "chx", "S", "Q", *ch) == []
    pairs = [(k, f"{k}:{i}") for i in range(3) for k in KEYS20]
    produce_keyed(cli, "chx", pairs)
    got_p = receive(cli, "chx", "S", "P", *ch)
    got_q = receive(cli, "chx", "S", "Q", *ch)
    kp, kq = {m["key"] for m in got_p}, {m["key"] for m in got_q}
    assert kp and kq and not kp & kq
    assert sorted(payloads(got_p + got_q)) == sorted(p for _, p in pairs)

    sel = ConsistentHashingSelector()
    sel.add_consumer("P")
    sel.add_consumer("Q")
    expected_p = {k for k in KEYS20 if sel.select(sticky_key_hash(k, 1, 65535)) == "P"}
    assert kp == expected_p

    auto = ("-t", "Key_Shared", "-p", "Earliest", "--lease", "10m")
    r = receive(cli, "chx", "S", "R", *auto, expect=4)
    assert "consistent-hashing" in one_error_line(r.stderr)
    r = receive(cli, "chx", "S", "R", *auto, "--key-shared-policy", "sticky",
                "--sticky-ranges", "0-100", expect=4)
    one_error_line(r.stderr)
    assert sorted(c["consumerName"] for c in consumers_of(cli, "chx", "S")) == ["P", "Q"]

    # The other way round: an auto-split subscription refuses a consistent-hashing consumer.
    assert receive(cli, "chy", "S", "P", *auto) == []
    r = receive(cli, "chy", "S", "Q", *ch, expect=4)
    assert "auto-split" in one_error_line(r.stderr)
