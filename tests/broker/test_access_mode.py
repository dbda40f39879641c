"""Producer access modes (issue 7.4): an exclusive producer fences the others, WaitForExclusive
waits and then becomes the single writer, ExclusiveWithFencing takes over, and a crashed
exclusive producer (kill -9) releases the topic."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

import pytest

import pulsarctl
from pulsarctl.client import ProducerAccessMode
from pulsarctl.errors import InvalidValue, ProducerFenced

from procs import PATIENCE_S


def _payloads(broker, topic="t"):
    msgs, _, _ = broker.read_entries(topic, None, 1000, pulsarctl.MessageId.earliest)
    return [m.data() for m in msgs]


def test_exclusive_producer_fences_shared_and_exclusive_ones_until_it_closes(broker):
    client = pulsarctl.Client(broker=broker)
    a = client.create_producer("t", producer_name="a", access_mode=ProducerAccessMode.Exclusive)
    a.send(b"a1")
    b = client.create_producer("t", producer_name="b")  # Shared: fenced when it sends
    with pytest.raises(ProducerFenced):
        b.send(b"b1")
    with pytest.raises(ProducerFenced):
        client.create_producer("t", producer_name="c", access_mode="Exclusive")
    a.send(b"a2")
    a.close()
    b.send(b"b2")
    c = client.create_producer("t", producer_name="c", access_mode="Exclusive")
    c.send(b"c1")
    assert _payloads(broker) == [b"a1", b"a2", b"b2", b"c1"]
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


def test_partitions_share_one_holder(broker):
    broker.topics.create_partitioned("pt", 2)
    client = pulsarctl.Client(broker=broker)
    client.create_producer("pt", producer_name="a", access_mode="Exclusive")
    with pytest.raises(ProducerFenced):
        client.create_producer("pt-partition-1", producer_name="b").send(b"x")


def test_unknown_access_mode(broker, cli):
    with pytest.raises(InvalidValue):
        pulsarctl.Client(broker=broker).create_producer("t", access_mode="Sometimes")
    r = cli("produce", "t", "-m", "x", "--access-mode", "Sometimes")
    assert r.exit_code == 2 and "WaitForExclusive" in r.stderr


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
