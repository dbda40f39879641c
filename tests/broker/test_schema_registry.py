"""The schema registry (broker/schemas.py) and Pulsar's compatibility strategies
(broker/schema_compat.py)."""
import json

import pytest

from pulsarctl.broker.schema_compat import can_read, compatible
from pulsarctl.errors import IncompatibleSchema, InvalidValue

T = "persistent://public/default/typed"


def record(*fields, name="User"):
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


NAME = {"name": "name", "type": "string"}
AGE = {"name": "age", "type": "int"}
AGE_DEFAULT = {"name": "age", "type": "int", "default": 0}
EMAIL_OPTIONAL = {"name": "email", "type": ["null", "string"], "default": None}


def test_versions_start_at_0_and_the_same_schema_is_the_same_version(broker):
    s = broker.schemas
    assert s.register(T, "AVRO", record(NAME)) == 0
    assert s.register(T, "AVRO", record(NAME)) == 0
    assert s.register(T, "AVRO", record(NAME, EMAIL_OPTIONAL)) == 1  # FULL: a field with a default
    assert s.register(T, "AVRO", record(NAME)) == 0  # an old version is still that version
    assert [v["version"] for v in s.versions(T)] == [0, 1]
    assert s.get(T)["version"] == 1 and s.get(T, 0)["schemaInfo"]["type"] == "AVRO"


def test_full_refuses_a_field_without_a_default_and_a_type_change(broker):
    s = broker.schemas
    s.register(T, "JSON", record(NAME))
    with pytest.raises(IncompatibleSchema, match="cannot read data written with version 0"):
        s.register(T, "JSON", record(NAME, AGE))
    with pytest.raises(IncompatibleSchema, match="type AVRO is not the topic's JSON"):
        s.register(T, "AVRO", record(NAME))
    assert [v["version"] for v in s.versions(T)] == [0]  # nothing was added


def test_the_strategy_setting_decides(broker):
    s = broker.schemas
    s.register(T, "AVRO", record(NAME, AGE))
    broker.policies.update_setting("schemaCompatibilityStrategy", "backward")
    assert s.register(T, "AVRO", record(NAME)) == 1  # dropping a field reads old data: BACKWARD
    broker.policies.update_setting("schemaCompatibilityStrategy", "FORWARD")
    assert s.check(T, "AVRO", record(NAME, AGE)) is None  # old readers read the new one
    broker.policies.update_setting("schemaCompatibilityStrategy", "ALWAYS_INCOMPATIBLE")
    with pytest.raises(IncompatibleSchema, match="ALWAYS_INCOMPATIBLE"):
        s.register(T, "AVRO", record(NAME, AGE_DEFAULT))
    broker.policies.update_setting("isAllowAutoUpdateSchema", "false")
    broker.policies.update_setting("schemaCompatibilityStrategy", "ALWAYS_COMPATIBLE")
    with pytest.raises(IncompatibleSchema, match="isAllowAutoUpdateSchema"):
        s.register(T, "AVRO", record(NAME, AGE_DEFAULT))
    with pytest.raises(InvalidValue, match="schema compatibility strategy"):
        broker.policies.update_setting("schemaCompatibilityStrategy", "SOMETIMES")


def test_a_namespace_strategy_comes_before_the_setting(broker):
    s = broker.schemas
    s.register(T, "AVRO", record(NAME))
    with pytest.raises(IncompatibleSchema, match="FULL"):
        s.register(T, "AVRO", record(NAME, AGE))
    broker.policies.set("namespace", "public/default", "schema_compatibility_strategy", "forward")
    assert s.register(T, "AVRO", record(NAME, AGE)) == 1   # old readers ignore the new field
    with pytest.raises(InvalidValue, match="schema compatibility strategy"):
        broker.policies.set("namespace", "public/default", "schema_compatibility_strategy", "x")


def test_a_consumer_schema_is_registered_first_then_checked_as_backward(broker):
    s = broker.schemas
    assert s.for_typed_consumer(T, "AVRO", record(NAME, AGE)) == 0   # no schema yet: it is one
    assert s.for_typed_consumer(T, "AVRO", record(NAME, AGE)) == 0
    # FULL checks a consumer as BACKWARD against the latest: it must read the topic's data
    assert s.for_typed_consumer(T, "AVRO", record(NAME)) is None     # checked, not registered
    with pytest.raises(IncompatibleSchema, match="consumer"):
        s.for_typed_consumer(T, "AVRO", record(NAME, AGE, {"name": "x", "type": "int"}))
    with pytest.raises(IncompatibleSchema, match="type STRING"):
        s.for_typed_consumer(T, "STRING", "")
    assert [v["version"] for v in s.versions(T)] == [0]


def test_transitive_checks_every_version():
    v0 = {"version": 0, "type": "AVRO", "schema": record(NAME, AGE)}
    v1 = {"version": 1, "type": "AVRO", "schema": record(NAME, AGE_DEFAULT)}
    new = record(NAME)  # without age: reads v1 and v0 (BACKWARD); v0 cannot read it (no default)
    assert compatible("AVRO", new, [v0, v1], "BACKWARD_TRANSITIVE") is None
    assert compatible("AVRO", new, [v0, v1], "FORWARD") is None  # v1 has a default for age
    assert "version 0" in compatible("AVRO", new, [v0, v1], "FORWARD_TRANSITIVE")


def test_primitive_types_never_change_and_avro_promotions():
    assert compatible("STRING", "", [{"version": 0, "type": "STRING", "schema": ""}], "FULL") is None
    assert "INT64" in compatible("INT64", "", [{"version": 0, "type": "INT32", "schema": ""}],
                                 "FULL")
    assert can_read("long", "int") and not can_read("int", "long")
    assert can_read(["null", "string"], "string") and not can_read("string", ["null", "string"])
    assert can_read({"type": "array", "items": "double"}, {"type": "array", "items": "float"})
    # Avro's resolving grammar (Pulsar's check) matches a record's fields, not its name.
    assert can_read(json.loads(record(NAME, name="A")), json.loads(record(NAME, name="B")))
    assert not can_read(json.loads(record(NAME, AGE, name="A")),
                        json.loads(record(NAME, name="B")))


def test_the_command_line_type_only_producer_still_works(broker):
    from pulsarctl.messages import OutgoingMessage

    broker.publish(T, [OutgoingMessage(b'{"a": 1}')], schema="JSON")
    assert broker.schemas.get(T)["schemaInfo"]["type"] == "JSON"
    with pytest.raises(IncompatibleSchema):
        broker.publish(T, [OutgoingMessage(b"x")], schema="STRING")
