"""Smoke tests of the oracle itself: the real standalone serves the real Python client and the
real command-line tools, and listens on loopback only."""
from __future__ import annotations

import json
import re
import uuid

import pulsar

from procs import PATIENCE_S

PATIENCE_MS = int(PATIENCE_S * 1000)


def topic(name: str) -> str:
    return f"persistent://public/default/{name}-{uuid.uuid4().hex[:8]}"


def test_produce_consume_one_message_with_the_python_client(real_pulsar):
    t = topic("smoke")
    client = pulsar.Client(real_pulsar.service_url, operation_timeout_seconds=int(PATIENCE_S))
    try:
        consumer = client.subscribe(t, "smoke-sub")
        producer = client.create_producer(t)
        msg_id = producer.send(b"hello oracle", properties={"k": "v"})
        got = consumer.receive(timeout_millis=PATIENCE_MS)
        assert got.data() == b"hello oracle"
        assert got.properties() == {"k": "v"}
        assert got.message_id() == msg_id
        consumer.acknowledge(got)
    finally:
        client.close()


def test_pulsar_admin_topics_stats_is_json(real_pulsar):
    t = topic("stats")
    client = pulsar.Client(real_pulsar.service_url, operation_timeout_seconds=int(PATIENCE_S))
    try:
        client.subscribe(t, "stats-sub")
        client.create_producer(t).send(b"12345")
    finally:
        client.close()
    stats = json.loads(real_pulsar.admin("topics", "stats", t).stdout)
    assert stats["msgInCounter"] == 1
    assert stats["bytesInCounter"] > 0
    assert list(stats["subscriptions"]) == ["stats-sub"]
    assert stats["subscriptions"]["stats-sub"]["msgBacklog"] == 1


def test_pulsar_client_produce_then_consume(real_pulsar):
    t = topic("cli")
    real_pulsar.client("produce", t, "-m", "from-pulsar-client", "-n", "2")
    out = real_pulsar.client("consume", t, "-s", "cli-sub", "-p", "Earliest", "-n", "2").stdout
    assert out.count("content:from-pulsar-client") == 2


def test_pulsar_perf_produces(real_pulsar):
    t = topic("perf")
    proc = real_pulsar.perf("produce", t, "-r", "100", "-m", "20")
    # pulsar-perf reports through its logger, on stderr here; it may overshoot -m by the
    # messages already in flight when it counts 20.
    sent = re.search(r"Aggregated throughput stats --- (\d+) records sent", proc.stderr)
    assert sent, proc.stderr[-3000:]
    assert int(sent.group(1)) >= 20
    stats = json.loads(real_pulsar.admin("topics", "stats", t).stdout)
    assert stats["msgInCounter"] == int(sent.group(1))


def test_listens_on_loopback_only(real_pulsar):
    proc = real_pulsar.script("listeners", check=False)
    assert proc.returncode == 0, proc.stderr
    ports = {line.split()[4].rsplit(":", 1)[1] for line in proc.stdout.splitlines() if line}
    assert {"6650", "8080", "3181"} <= ports
