"""Consumers in separate processes at the same time, through the command line: two Key_Shared
consumers split the keys (pulsar-semantics.md §9), and a pattern consumer picks up a topic
created while it runs (§11.5).

The consumers run without an idle timeout: a test never expects something to arrive within a
window of real time. They are stopped with Ctrl-C once every message is acked (a consumer
acks exactly what it printed, then exits 130), or by -n."""
from __future__ import annotations

import json
import signal
import sys

import pytest

from pulsarctl.broker.dispatch.selectors import sticky_key_hash
from cli_helpers import ok, one_error_line, rows
from consumer_helpers import payloads, produce_keyed, sub_stats
from procs import Collector, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="process liveness is read from /proc")

PREFIX = "persistent://public/default/"
KEYS20 = [f"k{i:02d}" for i in range(20)]


def _interrupt_when_all_acked(cli, topic, running: Collector) -> list:
    """Wait until subscription S of topic has nothing left (every message printed and acked),
    then Ctrl-C each consumer: [(stdout, stderr), ...], each having exited 130."""
    def drained():
        st = sub_stats(cli, topic, "S")
        return st["msgBacklog"] == 0 and st["unackedMessages"] == 0

    wait_for(drained, f"the consumers to ack every message of {topic}")
    for p in running.procs:
        assert p.poll() is None, f"a consumer exited early: {p.returncode}"
        p.send_signal(signal.SIGINT)
    results = running.results()
    for p, (_out, err) in zip(running.procs, results):
        assert p.returncode == 130, (p.returncode, err)
        assert one_error_line(err) == "interrupted"
    return results


# == Key_Shared ===============================================================================
def test_key_shared_two_processes_split_keys(cli, spawn):
    """Two `consume -t Key_Shared` processes: every key goes to exactly one of them, in order,
    nothing lost or duplicated, and the hash ranges are the two halves of auto-split."""
    per_key = 60
    pairs = [(k, f"{k}:{i:04d}") for i in range(per_key) for k in KEYS20]
    ok(cli("topics", "create-subscription", "ks", "-s", "S", "-m", "earliest"))

    args = ("consume", "ks", "-s", "S", "-t", "Key_Shared", "-n", "0", "-o", "ndjson")
    a, b = spawn(*args), spawn(*args)
    # Both attach before any message exists, so no key ever moves from one to the other.
    wait_for(lambda: len(sub_stats(cli, "ks", "S")["consumers"]) == 2, "both consumers to attach")
    running = Collector([a, b])
    produce_keyed(cli, "ks", pairs)
    (out_a, err_a), (out_b, err_b) = _interrupt_when_all_acked(cli, "ks", running)

    everything = set(p for _, p in pairs)
    keys_of = []
    for out in (out_a, out_b):
        recs = rows(out)
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
    got = payloads(rows(out_a)) + payloads(rows(out_b))
    assert len(got) == len(pairs) and set(got) == everything

    # Auto-split with two consumers: one owns slots up to 32768, the other the rest.
    low = {k for k in KEYS20 if sticky_key_hash(k) <= 32768}
    assert {frozenset(ka), frozenset(kb)} == {frozenset(low), frozenset(set(KEYS20) - low)}

    st = sub_stats(cli, "ks", "S")
    assert st["msgBacklog"] == 0 and st["unackedMessages"] == 0
    assert st["type"] == "Key_Shared"


def test_key_shared_two_processes_with_a_backlog(cli, spawn):
    """The same with the messages already there: whichever process attaches first may take
    keys that move to the other when it arrives. A key is still never with both at once: per
    key, everything one process got comes before everything the other got, and nothing is
    lost or duplicated."""
    per_key = 100
    pairs = [(k, f"{k}:{i:04d}") for i in range(per_key) for k in KEYS20]
    produce_keyed(cli, "kb", pairs)
    ok(cli("topics", "create-subscription", "kb", "-s", "S", "-m", "earliest"))
    args = ("consume", "kb", "-s", "S", "-t", "Key_Shared", "-n", "0", "-o", "ndjson")
    a, b = spawn(*args), spawn(*args)
    # Nobody reads their output until both are attached: the first one fills its pipe and
    # blocks with at most a receiver queue (1000) pending.
    wait_for(lambda: len(sub_stats(cli, "kb", "S")["consumers"]) == 2, "both consumers to attach")
    (out_a, err_a), (out_b, err_b) = _interrupt_when_all_acked(cli, "kb", Collector([a, b]))
    seqs = []
    for out in (out_a, out_b):
        got: dict[str, list[int]] = {}
        for m in rows(out):
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



# == pattern consumers ========================================================================
def test_regex_consumer_picks_up_new_topic(cli, spawn):
    """A pattern consumer picks up a matching topic created after it subscribed (it looks
    again about once a second while idle), and only a matching one. It stops after the three
    messages it should get: nothing here depends on how long anything takes."""
    ok(cli("produce", "mt-first", "-m", "f1"))
    p = spawn("consume", "--regex", PREFIX + "mt-.*", "-s", "S", "-p", "Earliest", "-n", "3",
              "--idle-timeout", "60s", "-o", "ndjson")

    def attached():
        r = cli("topics", "stats", "mt-first", "-o", "json")
        sub = json.loads(r.stdout)["subscriptions"].get("S") if r.exit_code == 0 else None
        return bool(sub and sub["consumers"])

    wait_for(attached, "the regex consumer to attach")
    assert p.poll() is None, "the regex consumer ended early"
    # Both topics appear after the consumer subscribed; the one that does not match first, so
    # the look that finds mt-new would have found it too.
    ok(cli("produce", "not-mt", "-m", "x"))
    ok(cli("produce", "mt-new", "-m", "n1", "-m", "n2"))
    (out, err), = Collector([p], timeout=120).results()
    assert p.returncode == 0, err
    recs = rows(out)
    assert sorted(payloads(recs)) == ["f1", "n1", "n2"], "the new matching topic was not picked up"
    assert [m["payload"] for m in recs if m["topic"] == PREFIX + "mt-new"] == ["n1", "n2"]
    r = ok(cli("topics", "stats", "mt-new", "-o", "json"))
    assert json.loads(r.stdout)["subscriptions"]["S"]["msgBacklog"] == 0
    r = ok(cli("topics", "subscriptions", "not-mt", "-o", "json"))
    assert json.loads(r.stdout) == []
