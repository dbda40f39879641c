"""Through `pulsarctl serve`, with the real pulsar-client: typed consumers and readers
(SUBSCRIBE's schema registered or checked), GET_SCHEMA (a consumer decoding with the writer's
schema), schema evolution under a namespace's strategy set over REST, and a TableView over a
topic that does not exist yet (a reader auto-creates it)."""
from __future__ import annotations

import json
import time
import urllib.request

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String, StringSchema

from procs import PATIENCE_S

RECEIVE_MS = int(PATIENCE_S * 1000)
NS = "public/default"


class Example(Record):
    a = Integer()
    b = Integer()


class BadExample(Record):   # a is a string: cannot read Example's data
    a = String()
    b = Integer()


class User1(Record):
    name = String()
    age = Integer()


class User2(Record):
    _sorted_fields = True
    name = String()
    age = Integer(required=True)


class Other(Record):        # Example's fields under another record name, with defaults
    _sorted_fields = True
    a = Integer(required_default=True)
    b = Integer(required_default=True)


def test_an_avro_consumer_decodes_with_the_writers_schema(client):
    topic = "persistent://public/default/serve-avro"
    producer = client.create_producer(topic, schema=AvroSchema(Example))
    consumer = client.subscribe(topic, "s", schema=AvroSchema(Example))
    producer.send(Example(a=1, b=2))
    msg = consumer.receive(RECEIVE_MS)
    assert msg.schema_version().encode() == b"\0" * 8
    assert msg.value() == Example(a=1, b=2)


def test_a_consumer_with_an_incompatible_schema_is_refused(client):
    topic = "persistent://public/default/serve-json-consumers"
    producer = client.create_producer(topic, schema=JsonSchema(Example))
    for schema in (JsonSchema(BadExample), StringSchema(), AvroSchema(BadExample)):
        with pytest.raises(pulsar.IncompatibleSchema):
            client.subscribe(topic, "sub-1", schema=schema)
    # the refused consumers left nothing behind: the same exclusive subscription is free
    consumer = client.subscribe(topic, "sub-1", schema=JsonSchema(Example))
    producer.send(Example(a=3, b=4))
    assert consumer.receive(RECEIVE_MS).value() == Example(a=3, b=4)


def test_a_consumer_first_registers_the_schema(client, env):
    topic = "persistent://public/default/serve-consumer-first"
    consumer = client.subscribe(topic, "s", schema=AvroSchema(Example))
    producer = client.create_producer(topic, schema=AvroSchema(Example))
    producer.send(Example(a=5, b=6))
    msg = consumer.receive(RECEIVE_MS)
    assert msg.schema_version().encode() == b"\0" * 8   # the consumer's version, reused
    assert msg.value() == Example(a=5, b=6)
    # a producer of another type is refused by the consumer's registered schema
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=StringSchema())


def test_a_record_of_another_name_with_defaults_is_compatible(client):
    topic = "persistent://public/default/serve-renamed-record"
    client.create_producer(topic, schema=AvroSchema(Example)).close()
    client.create_producer(topic, schema=AvroSchema(Other)).close()   # FULL: accepted


def _put_json(url, value):
    req = urllib.request.Request(url, data=json.dumps(value).encode(), method="PUT",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=PATIENCE_S) as r:
        return r.status


def _get_json(url):
    with urllib.request.urlopen(url, timeout=PATIENCE_S) as r:
        return json.loads(r.read())


def test_schema_evolution_under_the_namespaces_strategy(client, served):
    url = f"{served.http_url}/admin/v2/namespaces/{NS}/schemaCompatibilityStrategy"
    # The namespace sets none: UNDEFINED, as Pulsar answers (the broker's FULL applies).
    assert _get_json(url) == "UNDEFINED"
    topic = "persistent://public/default/serve-evolve"
    producer1 = client.create_producer(topic, schema=AvroSchema(User1))
    consumer = client.subscribe(topic, "sub", schema=AvroSchema(User1))
    reader = client.create_reader(topic, pulsar.MessageId.earliest, schema=AvroSchema(User1))
    with pytest.raises(pulsar.IncompatibleSchema):   # FULL: User1 cannot read a missing age
        client.create_producer(topic, schema=AvroSchema(User2))
    assert _put_json(url, "FORWARD") == 204
    assert _get_json(url) == "FORWARD"
    check = urllib.request.Request(
        f"{served.http_url}/admin/v2/schemas/{NS}/serve-evolve/compatibility", method="POST",
        data=json.dumps({"type": "AVRO", "schema": json.dumps(User2.schema()),
                         "properties": {}}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(check, timeout=PATIENCE_S) as r:
        assert json.loads(r.read()) == {"isCompatibility": True,
                                        "schemaCompatibilityStrategy": "FORWARD"}
    producer2 = client.create_producer(topic, schema=AvroSchema(User2))
    for i in range(3):
        producer1.send(User1(name=f"one {i}", age=100 + i))
        producer2.send(User2(name=f"two {i}", age=200 + i))
    want = [(f"one {i}", 100 + i) if k == 0 else (f"two {i}", 200 + i)
            for i in range(3) for k in (0, 1)]
    got = [consumer.receive(RECEIVE_MS) for _ in want]
    assert [(m.value().name, m.value().age) for m in got] == want
    assert [m.schema_version().encode() for m in got[:2]] == [b"\0" * 8, b"\0" * 7 + b"\1"]
    read = [reader.read_next(RECEIVE_MS).value() for _ in want]
    assert [(v.name, v.age) for v in read] == want
    assert _put_json(url, "UNDEFINED") == 204
    assert _get_json(url) == "UNDEFINED"


def test_a_table_view_over_a_new_topic(client):
    topic = f"persistent://public/default/serve-table-view-{time.time_ns()}"
    view = client.create_table_view(topic, schema=StringSchema())
    assert len(view) == 0
    producer = client.create_producer(topic, schema=StringSchema())
    producer.send("v0", partition_key="k")
    producer.send("v1", partition_key="k")
    deadline = time.monotonic() + PATIENCE_S
    while view.get("k") != "v1" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert view.get("k") == "v1"
    assert view.get("missing") is None
    view.close()
