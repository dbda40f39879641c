"""A message a real client sends and consumes through `pulsarctl serve` has the same history as
one the CLI handles (issue 17, item 2): `explain` tells its life, delivered to the wire
consumer by name, nacked and redelivered with the reason, acked — and so does one the Python
API handles."""
from __future__ import annotations

import json
import subprocess

import pulsar

from procs import PATIENCE_S, argv, pok, wait_for

T = "persistent://public/default/told"


def explain(env, mid, *extra) -> list[dict]:
    r = pok(subprocess.run(argv("explain", mid, "-t", T, "-o", "json", *extra), env=env,
                           capture_output=True, text=True, timeout=PATIENCE_S))
    return json.loads(r.stdout)["events"]


def _id(m) -> str:
    mid = m.message_id()
    return f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}"


def test_explain_tells_the_life_of_a_message_of_a_real_client(client, env):
    producer = client.create_producer(T, producer_name="app")
    producer.send(b"job-1")
    consumer = client.subscribe(T, "jobs", consumer_type=pulsar.ConsumerType.Shared,
                                consumer_name="worker-1",
                                initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=100)
    m = consumer.receive(int(PATIENCE_S * 1000))
    consumer.negative_acknowledge(m)
    again = consumer.receive(int(PATIENCE_S * 1000))
    assert again.redelivery_count() == 1
    consumer.acknowledge(again)
    mid = _id(again)

    def acked():
        events = explain(env, mid)
        return events if any(e["event"] == "acked" for e in events) else None
    events = wait_for(acked, "the ack to reach the history")  # acks are grouped by the client
    kinds = [e["event"] for e in events]
    assert kinds[0] == "published" and events[0]["producer"] == "app"
    assert kinds[1:3] == ["delivered", "nacked"]
    assert events[1]["consumerName"] == "worker-1" and events[1]["subscription"] == "jobs"
    redelivered = [e for e in events if e["event"] == "delivered"][1]
    assert redelivered["redeliveryCount"] == 1 and "nacked at" in redelivered["reason"]
    assert kinds[-1] == "acked"


def test_explain_tells_the_life_of_a_message_of_the_python_api(store_path):
    from pulsarctl.client import Client, ConsumerType, InitialPosition
    from pulsarctl.broker import Broker

    client = Client(store=store_path)
    p = client.create_producer(T, producer_name="lib")
    mid = p.send(b"x")
    c = client.subscribe(T, "s", consumer_type=ConsumerType.Shared,
                         initial_position=InitialPosition.Earliest, consumer_name="api")
    c.acknowledge(c.receive(1000))
    client.close()
    b = Broker(store_path)
    try:
        events = b.explain(T, mid)["events"]
    finally:
        b.close()
    assert [e["event"] for e in events] == ["published", "delivered", "acked"]
    assert events[0]["producer"] == "lib" and events[1]["consumerName"] == "api"
