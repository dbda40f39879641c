"""Producer access modes (issue 7.4, issue 27.1), as Pulsar's AbstractTopic decides every pair:
a Shared producer is refused (ProducerBusy) while an exclusive one holds the topic, an
Exclusive one (ProducerFenced) while any producer is connected, WaitForExclusive waits and then
becomes the single writer, ExclusiveWithFencing takes over and fences the others, and a crashed
producer (kill -9) counts as gone."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

import pytest

import pulsarctl
from pulsarctl.client import ProducerAccessMode
from pulsarctl.errors import InvalidValue, ProducerBusy, ProducerFenced

from procs import PATIENCE_S

MODES = ("Shared", "Exclusive", "WaitForExclusive", "ExclusiveWithFencing")


def _payloads(broker, topic="t"):
    msgs, _, _ = broker.read_entries(topic, None, 1000, pulsarctl.MessageId.earliest)
    return [m.data() for m in msgs]


def _attach(broker, name, mode, token=None, topic="t", epoch=None):
    """A producer attached as a long-lived one would be (the broker's own call)."""
    who = {"token": token or f"tok-{name}", "pid": os.getpid(), "pidStart": 0}
    return broker.producer_acquire(topic, name, mode, who, topic_epoch=epoch)[1]


# What a producer of the second mode gets while one of the first holds (or shares) the topic:
# AbstractTopic.incrementTopicEpochIfNeeded, case by case.
PAIRS = {
    ("Shared", "Shared"): "ready",
    ("Shared", "Exclusive"): (ProducerFenced, "Topic has existing shared producers"),
    ("Shared", "WaitForExclusive"): "waiting",
    ("Shared", "ExclusiveWithFencing"): "fences",
    **{(held, "Shared"): (ProducerBusy, "Topic has an existing exclusive producer: a")
       for held in MODES[1:]},
    **{(held, "Exclusive"): (ProducerFenced, "Topic has an existing exclusive producer: a")
       for held in MODES[1:]},
    **{(held, "WaitForExclusive"): "waiting" for held in MODES[1:]},
    **{(held, "ExclusiveWithFencing"): "fences" for held in MODES[1:]},
}


@pytest.mark.parametrize("held,new", sorted(PAIRS))
def test_every_pair_of_access_modes_as_pulsar(broker, held, new):
    assert _attach(broker, "a", held)["state"] == "ready"
    want = PAIRS[(held, new)]
    if isinstance(want, tuple):
        with pytest.raises(want[0], match=f"^{want[1]}$"):
            _attach(broker, "b", new)
        assert [p["producerName"] for p in broker.topics.stats("t")["publishers"]] == ["a"]
        return
    got = _attach(broker, "b", new)
    if want == "fences":
        assert got["state"] == "ready"
        assert [f[1] for f in got["fenced"]] == ["a"]
        assert [p["producerName"] for p in broker.topics.stats("t")["publishers"]] == ["b"]
    else:
        assert got["state"] == want and not got["fenced"]
        stats = broker.topics.stats("t")
        assert stats["waitingPublishers"] == (want == "waiting")


def test_a_queued_producer_keeps_shared_and_exclusive_ones_out_until_fencing_clears_it(broker):
    _attach(broker, "a", "Exclusive")
    assert _attach(broker, "w", "WaitForExclusive")["state"] == "waiting"
    broker.producer_release("t", "a", "tok-a")   # w takes the topic
    assert _attach(broker, "w", "WaitForExclusive")["state"] == "ready"
    assert _attach(broker, "w2", "WaitForExclusive")["state"] == "waiting"
    with pytest.raises(ProducerBusy):
        _attach(broker, "s", "Shared")
    with pytest.raises(ProducerFenced):
        _attach(broker, "x", "Exclusive")
    got = _attach(broker, "f", "ExclusiveWithFencing")
    assert sorted(f[1] for f in got["fenced"]) == ["w", "w2"]
    assert _attach(broker, "w2", "WaitForExclusive")["state"] == "fenced"   # "Fenced out"


def test_a_producer_back_with_an_old_topic_epoch_is_fenced(broker):
    first = _attach(broker, "a", "Exclusive")
    broker.producer_release("t", "a", "tok-a")
    _attach(broker, "b", "Exclusive")
    broker.producer_release("t", "b", "tok-b")
    with pytest.raises(ProducerFenced, match="^Topic epoch has already moved. Current epoch: "
                                             "1, Producer epoch: 0$"):
        _attach(broker, "a", "Exclusive", token="again", epoch=first["epoch"])
    assert _attach(broker, "a", "Exclusive", token="again", epoch=1)["epoch"] == 1
    assert broker.topics.stats("t")["topicEpoch"] == 1


def test_a_second_live_producer_of_a_name_is_refused(broker):
    _attach(broker, "a", "Shared")
    with pytest.raises(ProducerBusy, match="Producer with name 'a' is already connected"):
        _attach(broker, "a", "Shared", token="other")
    client = pulsarctl.Client(broker=broker)
    with pytest.raises(ProducerBusy):   # a one-shot send by that name too
        broker.publish("t", [pulsarctl.messages.OutgoingMessage(b"x")], "a")
    client.close()


def test_exclusive_producer_refuses_shared_and_exclusive_ones_until_it_closes(broker):
    client = pulsarctl.Client(broker=broker)
    a = client.create_producer("t", producer_name="a", access_mode=ProducerAccessMode.Exclusive)
    a.send(b"a1")
    with pytest.raises(ProducerBusy):   # Shared: refused when it is created
        client.create_producer("t", producer_name="b")
    with pytest.raises(ProducerFenced):
        client.create_producer("t", producer_name="c", access_mode="Exclusive")
    a.send(b"a2")
    a.close()
    b = client.create_producer("t", producer_name="b")
    b.send(b"b1")
    with pytest.raises(ProducerFenced, match="existing shared producers"):
        client.create_producer("t", producer_name="c", access_mode="Exclusive")
    b.close()
    c = client.create_producer("t", producer_name="c", access_mode="Exclusive")
    c.send(b"c1")
    assert _payloads(broker) == [b"a1", b"a2", b"b1", b"c1"]
    client.close()


def test_exclusive_with_fencing_takes_over_and_the_old_holder_is_fenced(broker):
    client = pulsarctl.Client(broker=broker)
    a = client.create_producer("t", producer_name="a", access_mode="Exclusive")
    a.send(b"a1")
    f = client.create_producer("t", producer_name="f", access_mode="ExclusiveWithFencing")
    with pytest.raises(ProducerFenced):
        a.send(b"a2")
    f.send(b"f1")
    assert _payloads(broker) == [b"a1", b"f1"]


def test_exclusive_with_fencing_fences_shared_producers_too(broker):
    client = pulsarctl.Client(broker=broker)
    s = client.create_producer("t", producer_name="s")
    s.send(b"s1")
    client.create_producer("t", producer_name="f", access_mode="ExclusiveWithFencing")
    with pytest.raises(ProducerFenced):
        s.send(b"s2")
    s.close()   # a fenced producer closes quietly


def test_partitions_share_one_holder(broker):
    broker.topics.create_partitioned("pt", 2)
    client = pulsarctl.Client(broker=broker)
    client.create_producer("pt", producer_name="a", access_mode="Exclusive")
    with pytest.raises(ProducerBusy):
        client.create_producer("pt-partition-1", producer_name="b")
    with pytest.raises(ProducerBusy):   # a one-shot send to a partition: admitted, refused
        broker.publish("pt-partition-1", [pulsarctl.messages.OutgoingMessage(b"x")], "b")


def test_unknown_access_mode(broker, cli):
    with pytest.raises(InvalidValue):
        pulsarctl.Client(broker=broker).create_producer("t", access_mode="Sometimes")
    r = cli("produce", "t", "-m", "x", "--access-mode", "Sometimes")
    assert r.exit_code == 2 and "WaitForExclusive" in r.stderr


def test_a_producer_queued_behind_shared_ones_takes_the_topic_when_they_are_gone(broker):
    # Pulsar 4.x leaves it queued for good (apache/pulsar#24516); we do not.
    _attach(broker, "s1", "Shared")
    _attach(broker, "s2", "Shared")
    assert _attach(broker, "w", "WaitForExclusive")["state"] == "waiting"
    broker.producer_release("t", "s1", "tok-s1")
    assert _attach(broker, "w", "WaitForExclusive")["state"] == "waiting"
    assert [t[1] for t in broker.producer_release("t", "s2", "tok-s2")] == ["w"]
    assert _attach(broker, "w", "WaitForExclusive")["state"] == "ready"


def _holder(store_path, *extra):
    """A `produce --stdin` process holding the topic exclusively until its stdin closes."""
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
    p = subprocess.Popen([sys.executable, "-m", "pulsarctl", "produce", "t", "--stdin",
                          "--producer-name", "leader", *extra],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    p.stdin.write("from the leader\n")
    p.stdin.flush()
    assert p.stdout.readline().strip()  # its first id: it holds the topic now
    return p


def test_kill_9_of_an_exclusive_producer_releases_the_topic(run_proc, store_path):
    p = _holder(store_path, "--access-mode", "Exclusive")
    try:
        r = run_proc("produce", "t", "-m", "x", "--access-mode", "Exclusive")
        assert r.returncode == 4, r.stderr
        assert "leader" in r.stderr and len(r.stderr.splitlines()) == 1
        assert run_proc("produce", "t", "-m", "x").returncode == 4
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        r = run_proc("produce", "t", "-m", "after", "--access-mode", "Exclusive")
        assert r.returncode == 0, r.stderr
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(10)
        for f in (p.stdin, p.stdout, p.stderr):
            f.close()


# `pulsarctl produce ...` that says "waiting" on stderr the first time it waits for the topic (a
# WaitForExclusive producer waits on the store's wake file while another holds the topic).
_SAYS_WHEN_WAITING = r"""
import sys
from pulsarctl import wake
sleep = wake.Waiter.sleep
def sleep_and_say(self, seconds):
    if not getattr(sleep_and_say, "said", False):
        sleep_and_say.said = True
        sys.stderr.write("waiting\n")
        sys.stderr.flush()
    return sleep(self, seconds)
wake.Waiter.sleep = sleep_and_say
from pulsarctl.cli.entry import main
main(sys.argv[1:])
"""


def test_wait_for_exclusive_waits_for_the_holder_then_writes(run_proc, store_path, broker):
    p = _holder(store_path, "--access-mode", "WaitForExclusive")
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
    w = subprocess.Popen([sys.executable, "-c", _SAYS_WHEN_WAITING, "produce", "t", "-m",
                          "second", "--access-mode", "WaitForExclusive"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        ready, _, _ = select.select([w.stderr], [], [], PATIENCE_S)
        line = w.stderr.readline() if ready else ""
        assert line == "waiting\n", f"the producer did not wait: {line!r}, exit {w.poll()}"
        assert w.poll() is None, w.communicate()  # still waiting for the leader
        p.stdin.write("leader again\n")
        p.stdin.close()  # the leader finishes and lets go
        assert p.wait(PATIENCE_S) == 0
        out, err = w.communicate(timeout=PATIENCE_S)
        assert w.returncode == 0, err
        assert _payloads(broker) == [b"from the leader", b"leader again", b"second"]
    finally:
        for q in (p, w):
            if q.poll() is None:
                q.kill()
            q.wait(10)
        p.stdout.close()
        p.stderr.close()


def test_a_running_shared_produce_refuses_an_exclusive_one_until_killed(run_proc, store_path):
    p = _holder(store_path)   # `produce --stdin`, Shared: a connected producer while it runs
    try:
        r = run_proc("produce", "t", "-m", "x", "--access-mode", "Exclusive")
        assert r.returncode == 4, r.stderr
        assert "Topic has existing shared producers" in r.stderr
        assert len(r.stderr.splitlines()) == 1
        assert run_proc("produce", "t", "-m", "shared too").returncode == 0
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        r = run_proc("produce", "t", "-m", "after", "--access-mode", "Exclusive")
        assert r.returncode == 0, r.stderr
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(10)
        for f in (p.stdin, p.stdout, p.stderr):
            f.close()
