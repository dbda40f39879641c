"""`topics stats` lists the connected producers as Pulsar's PublisherStats (issue 27.2): the
Python API's and a running `produce`'s (serve's wire producers: tests/serve), with rates from
what the store counted, in partitioned stats too; a one-shot `produce` leaves none behind."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pulsarctl

from procs import PATIENCE_S

# PublisherStatsImpl's JSON fields in 4.x, in its order (null ones are left out).
FIELDS = ["accessMode", "msgRateIn", "msgThroughputIn", "averageMsgSize", "chunkedMessageRate",
          "producerId", "supportsPartialProducer", "producerName", "address", "connectedSince",
          "clientVersion", "metadata"]


def _publishers(broker, topic="t"):
    return broker.topics.stats(topic)["publishers"]


def test_an_open_producer_is_a_publisher_with_pulsars_fields_and_rates(broker, clock):
    client = pulsarctl.Client(broker=broker)
    p = client.create_producer("t", producer_name="p1")
    [s] = _publishers(broker)
    assert list(s) == FIELDS
    assert (s["producerName"], s["accessMode"], s["msgRateIn"]) == ("p1", "Shared", 0.0)
    assert s["address"] == f"pid:{os.getpid()}" and s["connectedSince"] == "2026-01-01T00:00:00.000Z"
    assert s["metadata"] == {} and s["supportsPartialProducer"] is False
    for _ in range(10):
        p.send(b"0123456789")
    clock.advance(2000)
    [s] = _publishers(broker)
    stats = broker.topics.stats("t")
    size = stats["bytesInCounter"] / 10   # what the topic counts per message, stored
    assert s["msgRateIn"] == 5.0 and s["averageMsgSize"] == size
    assert s["msgThroughputIn"] == 5.0 * size
    # a window later the old one still counts, then falls off
    clock.advance(60_000)
    p.send(b"0123456789")
    assert _publishers(broker)[0]["msgRateIn"] == 11 / 62
    clock.advance(60_000)
    assert _publishers(broker)[0]["msgRateIn"] == 1 / 60
    p.close()
    assert _publishers(broker) == []
    client.close()


def test_publishers_are_sorted_by_name_and_waiting_ones_counted(broker):
    client = pulsarctl.Client(broker=broker)
    client.create_producer("t", producer_name="b")
    client.create_producer("t", producer_name="a")
    who = {"token": "w", "pid": os.getpid(), "pidStart": 0}
    broker.producer_acquire("t", "w", "WaitForExclusive", who)
    stats = broker.topics.stats("t")
    assert [s["producerName"] for s in stats["publishers"]] == ["a", "b"]
    assert stats["waitingPublishers"] == 1
    client.close()
    broker.producer_release("t", "w", "w")


def test_a_one_shot_produce_leaves_no_publisher(broker, cli):
    assert cli("produce", "t", "-m", "x").exit_code == 0
    assert _publishers(broker) == []


def test_partitioned_stats_add_publishers_up_by_index_as_pulsar(broker, clock):
    broker.topics.create_partitioned("pt", 2)
    client = pulsarctl.Client(broker=broker)
    p = client.create_producer("pt", producer_name="p")
    for i in range(4):
        p.send(b"x" * 10)
    clock.advance(1000)
    whole = broker.topics.partitioned_stats("pt", per_partition=True)
    parts = whole["partitions"]
    assert [[s["producerName"] for s in x["publishers"]] for x in parts.values()] == [["p"], ["p"]]
    [agg] = whole["publishers"]
    # PublisherStatsImpl.add keeps rates and the mean of the averages, and names no producer
    assert set(agg) == {"msgRateIn", "msgThroughputIn", "averageMsgSize", "chunkedMessageRate",
                        "producerId", "supportsPartialProducer"}
    assert agg["msgRateIn"] == sum(x["publishers"][0]["msgRateIn"] for x in parts.values()) == 4.0
    client.close()


def test_a_running_produce_is_listed_until_it_ends(store_path, run_proc):
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
    p = subprocess.Popen([sys.executable, "-m", "pulsarctl", "produce", "t", "--stdin",
                          "--producer-name", "piped"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        p.stdin.write("one\n")
        p.stdin.flush()
        assert p.stdout.readline().strip()   # its first id: it is producing

        def stats():
            r = run_proc("topics", "stats", "t", "-o", "json")
            return json.loads(r.stdout)["publishers"]
        [s] = stats()
        assert (s["producerName"], s["address"]) == ("piped", f"pid:{p.pid}")
        p.stdin.close()
        assert p.wait(PATIENCE_S) == 0
        assert stats() == []
        p.stdout.close()
        p.stderr.close()
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(10)


def test_a_killed_produce_is_not_listed(store_path, run_proc):
    env = dict(os.environ, PULSARCTL_STORE=store_path, NO_COLOR="1")
    p = subprocess.Popen([sys.executable, "-m", "pulsarctl", "produce", "t", "--stdin"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=env)
    p.stdin.write("one\n")
    p.stdin.flush()
    assert p.stdout.readline().strip()
    p.send_signal(signal.SIGKILL)
    p.wait(10)
    p.stdin.close()
    p.stdout.close()
    assert json.loads(run_proc("topics", "stats", "t", "-o", "json").stdout)["publishers"] == []
