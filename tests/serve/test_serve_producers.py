"""Producers over the wire (issue 27, items 1 and 2): access modes decided at creation as
Pulsar's AbstractTopic decides them, with its error types (ProducerBusy, ProducerFenced) in the
real pulsar-client, the CLI's and the wire's producers judged together; and the connected
producers listed by `topics stats` and GET .../stats as Pulsar's PublisherStats."""
from __future__ import annotations

import json
import subprocess
import threading
import urllib.request

import pulsar
import pytest

from procs import PATIENCE_S, argv, wait_for
from serve_procs import quiet_logger

pytestmark = pytest.mark.serve

TOPIC = "persistent://public/default/modes"


def _client(served):
    return pulsar.Client(served.url, operation_timeout_seconds=30, logger=quiet_logger())


def _stats(env, topic=TOPIC):
    r = subprocess.run(argv("topics", "stats", topic, "-o", "json"), env=env,
                       capture_output=True, text=True, timeout=PATIENCE_S)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _cli(env, *args):
    return subprocess.run(argv(*args), env=env, capture_output=True, text=True,
                          timeout=PATIENCE_S)


def test_a_shared_producer_is_refused_busy_while_an_exclusive_one_holds(served, env):
    c = _client(served)
    try:
        x = c.create_producer(TOPIC, producer_name="x",
                              access_mode=pulsar.ProducerAccessMode.Exclusive)
        with pytest.raises(pulsar.ProducerBusy):
            c.create_producer(TOPIC)   # Pulsar refuses it at creation, not at its first send
        with pytest.raises(pulsar.ProducerFenced):
            c.create_producer(TOPIC, access_mode=pulsar.ProducerAccessMode.Exclusive)
        r = _cli(env, "produce", TOPIC, "-m", "from the CLI")
        assert r.returncode == 4 and "Topic has an existing exclusive producer: x" in r.stderr
        x.send(b"mine")
        x.close()
        s = c.create_producer(TOPIC)
        s.send(b"shared")
        s.close()
    finally:
        c.close()


def test_an_exclusive_producer_is_refused_while_shared_ones_are_connected(served, env):
    c = _client(served)
    try:
        s = c.create_producer(TOPIC, producer_name="s")
        with pytest.raises(pulsar.ProducerFenced):
            c.create_producer(TOPIC, access_mode=pulsar.ProducerAccessMode.Exclusive)
        r = _cli(env, "produce", TOPIC, "-m", "x", "--access-mode", "Exclusive")
        assert r.returncode == 4 and "Topic has existing shared producers" in r.stderr
        s.close()
        c.create_producer(TOPIC, access_mode=pulsar.ProducerAccessMode.Exclusive).send(b"now")
    finally:
        c.close()


def test_wait_for_exclusive_waits_over_the_wire_then_holds(served, env):
    c = _client(served)
    try:
        holder = c.create_producer(TOPIC, producer_name="holder",
                                   access_mode=pulsar.ProducerAccessMode.Exclusive)
        got = {}

        def wait():
            try:
                got["p"] = c.create_producer(
                    TOPIC, producer_name="next",
                    access_mode=pulsar.ProducerAccessMode.WaitForExclusive)
            except Exception as exc:   # noqa: BLE001 - the test reports it
                got["error"] = exc
        t = threading.Thread(target=wait, daemon=True)
        t.start()
        wait_for(lambda: _stats(env)["waitingPublishers"] == 1, "the producer to queue")
        assert t.is_alive() and not got
        holder.close()
        t.join(PATIENCE_S)
        assert "p" in got, got
        got["p"].send(b"next leads")
        stats = _stats(env)
        assert [(p["producerName"], p["accessMode"]) for p in stats["publishers"]] == [
            ("next", "WaitForExclusive")]
        assert stats["topicEpoch"] == 1
    finally:
        c.close()


def test_exclusive_with_fencing_fences_the_wire_holder(served):
    c = _client(served)
    try:
        old = c.create_producer(TOPIC, producer_name="old",
                                access_mode=pulsar.ProducerAccessMode.Exclusive)
        old.send(b"before")
        new = c.create_producer(TOPIC, producer_name="new",
                                access_mode=pulsar.ProducerAccessMode.ExclusiveWithFencing)
        new.send(b"after")
        with pytest.raises(pulsar.ProducerFenced):
            old.send(b"fenced")
    finally:
        try:
            c.close()
        except pulsar.AlreadyClosed:   # the client's own close of its fenced producer
            pass


def test_wire_producers_are_publishers_in_topic_stats(served, env):
    c = _client(served)
    try:
        p = c.create_producer(TOPIC, producer_name="wired", properties={"app": "billing"})
        for _ in range(3):
            p.send(b"0123456789")
        [s] = _stats(env)["publishers"]
        assert (s["producerName"], s["accessMode"], s["metadata"]) == (
            "wired", "Shared", {"app": "billing"})
        assert s["address"].startswith("/127.0.0.1:") and s["clientVersion"]
        assert s["msgRateIn"] > 0 and s["averageMsgSize"] > 0
        with urllib.request.urlopen(served.http_url + "/admin/v2/persistent/public/default/modes"
                                    "/stats", timeout=PATIENCE_S) as r:
            [over_rest] = json.load(r)["publishers"]
        assert over_rest["producerName"] == "wired" and over_rest["producerId"] == s["producerId"]
        p.close()
        assert _stats(env)["publishers"] == []
    finally:
        c.close()


def test_a_partitioned_wire_producer_in_partitioned_stats(served, env):
    topic = "persistent://public/default/parted"
    assert _cli(env, "topics", "create-partitioned-topic", topic, "-p", "2").returncode == 0
    c = _client(served)
    try:
        p = c.create_producer(topic, producer_name="pp")
        for i in range(4):
            p.send(b"x", partition_key=str(i))
        r = _cli(env, "topics", "partitioned-stats", topic, "--per-partition", "-o", "json")
        whole = json.loads(r.stdout)
        assert len(whole["publishers"]) == 1 and "producerName" not in whole["publishers"][0]
        for part in whole["partitions"].values():
            assert [s["producerName"] for s in part["publishers"]] == ["pp"]
    finally:
        c.close()
