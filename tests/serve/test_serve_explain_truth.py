"""`explain` tells the truth about what real clients do (issue 27 item 5), with the real
pulsar-client against a real `pulsarctl serve`:

- a nack travels as CommandRedeliverUnacknowledgedMessages once the client's own nack delay ran
  out (NegativeAcksTracker): the history says the client held the message, and for how long,
  then asked for it again; the broker redelivers it at once, counted;
- past max_redeliver_count the client itself publishes the dead letter (REAL_TOPIC,
  ORIGIN_MESSAGE_ID) and acks the original: the original's life ends dead-lettered to the
  copy, and the copy's life (explained by its id alone) starts with the original's."""
from __future__ import annotations

import json
import subprocess

import pulsar

from procs import PATIENCE_S, argv, pok, wait_for

T = "persistent://public/default/truth"
DLQ = T + "-work-DLQ"
RECEIVE_MS = int(PATIENCE_S * 1000)


def explain(env, *args) -> dict:
    r = pok(subprocess.run(argv("explain", *args, "-o", "json"), env=env, capture_output=True,
                           text=True, timeout=PATIENCE_S))
    return json.loads(r.stdout)


def _id(m) -> str:
    mid = m.message_id()
    return f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}"


def test_a_client_dead_letter_and_its_nacks_are_told_as_the_client_made_them(client, env):
    client.create_producer(T, producer_name="app").send(b"poison")
    consumer = client.subscribe(T, "work", consumer_type=pulsar.ConsumerType.Shared,
                                consumer_name="w1",
                                initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=100,
                                dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
                                    max_redeliver_count=2))
    counts = []
    for _ in range(3):   # counts 0, 1, 2: the third nack sends it to the DLQ
        m = consumer.receive(RECEIVE_MS)
        counts.append(m.redelivery_count())
        consumer.negative_acknowledge(m)
    assert counts == [0, 1, 2]
    original = _id(m)

    def dead_lettered():
        events = explain(env, original, "-t", T)["events"]
        return events if any(e["event"] == "acked" for e in events) else None
    events = wait_for(dead_lettered, "the client to dead-letter the message and ack it")
    kinds = [e["event"] for e in events]
    assert kinds == ["published", "delivered", "nacked", "redelivered", "delivered", "nacked",
                     "redelivered", "delivered", "deadLettered", "acked"]
    for nack in (e for e in events if e["event"] == "nacked"):
        # The client held it for its 100 ms nack delay, then asked: no broker timer.
        assert nack["byClient"] is True and nack["held"] >= 100, nack
        assert nack.get("delay") is None and "beyondPulsar" not in nack
    again = [e for e in events if e["event"] == "delivered"][1]
    assert again["redeliveryCount"] == 1 and "by its client, after holding it" in again["reason"]
    dead = events[-2]
    assert (dead["subscription"], dead["consumerName"], dead["redeliveryCount"]) == \
        ("work", "w1", 2)
    assert dead["byClient"] is True and dead["toTopic"] == DLQ
    copy = dead["toMessageId"]

    # The copy, named by its id alone: its life starts with the original's.
    doc = explain(env, copy)
    assert doc["topic"] == DLQ
    life = [(e["topic"], e["event"]) for e in doc["events"]]
    assert life[0] == (T, "published") and life[-1] == (DLQ, "published")
    assert (T, "deadLettered") in life
    assert doc["events"][-1]["fromMessageId"] == original
    text = pok(subprocess.run(argv("explain", original, "-t", T), env=env, capture_output=True,
                              text=True, timeout=PATIENCE_S)).stdout
    assert "its client held it" in text and "then asked for its redelivery" in text
    assert f"dead-lettered from subscription work to truth-work-DLQ as {copy}, by the client " \
           "of consumer w1 at redelivery count 2" in text
