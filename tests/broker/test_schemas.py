"""Schemas (issue 7.6): a producer with a schema registers it and stamps its version on each
message; other schema types are refused for producers and consumers; payloads are checked."""
from __future__ import annotations

import pytest

import pulsarctl
from pulsarctl.broker.schemas import IncompatibleSchema
from pulsarctl.errors import InvalidValue

from cli_helpers import assert_error, ok, pjson, rows


def test_first_schema_producer_registers_version_0_and_messages_carry_it(broker):
    client = pulsarctl.Client(broker=broker)
    p = client.create_producer("t", schema="json")
    p.send({"order": 1})
    p.send(b'{"order": 2}')
    client.create_producer("t").send(b"raw")  # bytes: no schema, always allowed
    r = client.create_reader("t", pulsarctl.MessageId.earliest)
    got = [r.read_next(1000) for _ in range(3)]
    assert [m.data() for m in got] == [b'{"order": 1}', b'{"order": 2}', b"raw"]
    assert [m.schema_version() for m in got] == [0, 0, None]
    assert broker.schemas.get("t")["schemaInfo"]["type"] == "JSON"


def test_incompatible_producer_and_consumer_are_refused(broker):
    client = pulsarctl.Client(broker=broker)
    client.create_producer("t", schema="string").send("héllo")
    with pytest.raises(IncompatibleSchema):
        client.create_producer("t", schema="json").send(b"{}")
    with pytest.raises(IncompatibleSchema):
        client.subscribe("t", "s", schema="json")
    client.subscribe("t", "s", schema="string")
    client.subscribe("t", "s2", schema="bytes")


def test_payloads_must_match_the_schema(broker):
    client = pulsarctl.Client(broker=broker)
    with pytest.raises(InvalidValue):
        client.create_producer("t", schema="json").send(b"not json")
    with pytest.raises(InvalidValue):
        client.create_producer("u", schema="string").send(b"\xff\xfe")
    with pytest.raises(InvalidValue):
        client.create_producer("v", schema="avro")
    # nothing was stored, and no schema registered by a refused send
    with pytest.raises(pulsarctl.errors.PulsarctlError):
        broker.schemas.get("t")


def test_schema_on_the_command_line(cli):
    ok(cli("produce", "t", "-m", '{"a": 1}', "--value-schema", "json"))
    assert_error(cli("produce", "t", "-m", "x", "--value-schema", "string"), 4)
    assert_error(cli("produce", "t", "-m", "x", "--value-schema", "json"), 2)
    (m,) = rows(ok(cli("read", "t", "-m", "earliest", "-o", "ndjson",
                       "--value-schema", "json")).stdout)
    assert m["schemaVersion"] == 0
    assert_error(cli("consume", "t", "-s", "s", "--value-schema", "string"), 4)
    doc = pjson(cli("schemas", "get", "t", "-o", "json"))
    assert doc["version"] == 0 and doc["schemaInfo"]["type"] == "JSON"
    ok(cli("schemas", "delete", "t"))
    assert_error(cli("schemas", "get", "t"), 3)
    ok(cli("produce", "t", "-m", "now a string", "--value-schema", "string"))
