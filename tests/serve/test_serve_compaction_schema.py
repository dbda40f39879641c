"""Through `pulsarctl serve`, with the real pulsar-client: compacted reads after `pulsarctl
topics compact`, and typed producers registering their schemas in the store's registry."""
from __future__ import annotations

import json
import subprocess

import pulsar
from pulsar.schema import Integer, JsonSchema, Record, String

from procs import PATIENCE_S, argv, pok

RECEIVE_MS = int(PATIENCE_S * 1000)
T = "persistent://public/default/serve-compact"


def cli(env, *args):
    return pok(subprocess.run(argv(*args), env=env, capture_output=True, text=True,
                              timeout=PATIENCE_S))


def test_compacted_consumer_and_reader(client, env):
    c = client.subscribe(T, "tv", is_read_compacted=True)
    c.close()
    producer = client.create_producer(T, batching_enabled=False)
    producer.send(b"hello-0", partition_key="key0")
    producer.send(b"hello-1", partition_key="key0")
    producer.send(b"gone", partition_key="key1")
    producer.send(b"", partition_key="key1")  # an empty payload: a tombstone
    producer.close()
    cli(env, "topics", "compact", T)
    c = client.subscribe(T, "tv", is_read_compacted=True)
    m = c.receive(RECEIVE_MS)
    assert m.data() == b"hello-1"
    c.acknowledge(m)
    reader = client.create_reader(T, pulsar.MessageId.earliest, is_read_compacted=True)
    assert reader.read_next(RECEIVE_MS).data() == b"hello-1"
    plain = client.create_reader(T, pulsar.MessageId.earliest)
    assert [plain.read_next(RECEIVE_MS).data() for _ in range(2)] == [b"hello-0", b"hello-1"]


class User(Record):
    name = String()
    age = Integer()


class Renamed(Record):
    _sorted_fields = True
    nickname = String(required=True)


def test_a_typed_producer_registers_its_schema(client, env):
    topic = "persistent://public/default/serve-typed"
    producer = client.create_producer(topic, schema=JsonSchema(User))
    producer.send(User(name="ada", age=36))
    doc = json.loads(cli(env, "schemas", "get", topic, "-o", "json").stdout)
    assert doc["version"] == 0 and doc["schemaInfo"]["type"] == "JSON"
    assert json.loads(doc["schemaInfo"]["schema"])["name"] == "User"
    consumer = client.subscribe(topic, "s", schema=JsonSchema(User),
                                initial_position=pulsar.InitialPosition.Earliest)
    got = consumer.receive(RECEIVE_MS).value()
    assert (got.name, got.age) == ("ada", 36)
    # FULL compatibility: a record of another name (and a required field) is refused.
    try:
        client.create_producer(topic, schema=JsonSchema(Renamed))
    except Exception as exc:  # the real client raises its own IncompatibleSchema error
        assert "ncompatible" in str(exc) or "Schema" in type(exc).__name__
    else:
        raise AssertionError("an incompatible schema was accepted")
