"""The schema registry: a topic's schemas as versions (0, 1, ...), each a type, a definition
(an Avro schema for AVRO, JSON and PROTOBUF; empty for the primitive types) and properties.

A producer with a schema registers it (register): a schema already among the versions is that
version; a new one must be compatible with the versions before it under the store's
schemaCompatibilityStrategy (FULL by default, as broker.conf's; schema_compat.py), and is
added when isAllowAutoUpdateSchema is on (its default). Each message records the version it was
written with (Message.schema_version()). A producer or consumer whose schema type differs from
the topic's is refused, as Pulsar's IncompatibleSchemaException; BYTES (no schema, the
default) is always allowed, as Pulsar allows it while schemaValidationEnforced is false (its
default). The command line's --value-schema names a type only (string, json): it writes with
the topic's latest version of that type, and checks STRING payloads are UTF-8 and JSON ones
valid JSON."""
from __future__ import annotations

import json

from pulsarctl.broker.schema_compat import compatible
from pulsarctl.errors import IncompatibleSchema, InvalidValue
from pulsarctl.names import TopicName

BYTES, STRING, JSON = "BYTES", "STRING", "JSON"
TYPES = (BYTES, STRING, JSON)  # what the command line's --value-schema takes
# Every SchemaType of Pulsar's protocol a registry can hold (PulsarApi.proto's Schema.Type).
ALL_TYPES = ("NONE", "STRING", "JSON", "PROTOBUF", "AVRO", "BOOLEAN", "INT8", "INT16", "INT32",
             "INT64", "FLOAT", "DOUBLE", "DATE", "TIME", "TIMESTAMP", "KEY_VALUE", "INSTANT",
             "LOCAL_DATE", "LOCAL_TIME", "LOCAL_DATE_TIME", "PROTOBUF_NATIVE", "BYTES",
             "AUTO_CONSUME", "AUTO_PUBLISH")


def check_type(value) -> str:
    """bytes|string|json (any case), or pulsar-client's schema objects (StringSchema(), ...)."""
    if value is None:
        return BYTES
    name = value if isinstance(value, str) else type(value).__name__.removesuffix("Schema")
    t = str(name).upper()
    if t not in TYPES:
        raise InvalidValue(f"unknown schema {value!r}", hint="use bytes, string or json")
    return t


def _key(topic: TopicName) -> str:
    return str(topic.partitioned_topic_name)


def versions(ctx, topic: TopicName) -> list[dict]:
    return ctx.get("schema", _key(topic)) or []


def latest(ctx, topic: TopicName) -> dict | None:
    v = versions(ctx, topic)
    return v[-1] if v else None


def _incompatible(topic: TopicName, have: dict, typ: str, who: str) -> IncompatibleSchema:
    return IncompatibleSchema(f"{who} with schema {typ} is incompatible with topic "
                              f"{_key(topic)}, which has schema {have['type']} "
                              f"(version {have['version']})")


def for_producer(ctx, topic: TopicName, typ: str) -> int | None:
    """The schema version a command-line producer writes with (a type, no definition): the
    latest version, which must be of that type; registers the type on first use."""
    if typ == BYTES:
        return None
    have = latest(ctx, topic)
    if have is None:
        return register(ctx, topic, typ, "", {})
    if have["type"] != typ:
        raise _incompatible(topic, have, typ, "a producer")
    return have["version"]


def _text(definition) -> str:
    if isinstance(definition, (bytes, bytearray)):
        return bytes(definition).decode("utf-8", "surrogateescape")
    return definition or ""


def register(ctx, topic: TopicName, typ: str, definition="", properties=None) -> int:
    """The version of this schema on the topic: the existing one if it is already there,
    else a new version after the compatibility check (IncompatibleSchema when it fails, or when
    isAllowAutoUpdateSchema is off)."""
    typ = str(typ).upper()
    if typ not in ALL_TYPES:
        raise InvalidValue(f"unknown schema type {typ!r}",
                           hint=f"use one of {', '.join(ALL_TYPES)}")
    text = _text(definition)
    vs = versions(ctx, topic)
    for v in vs:
        if v["type"] == typ and (v.get("schema") or "") == text:
            return v["version"]
    if vs:
        if not ctx.setting("isAllowAutoUpdateSchema"):
            raise IncompatibleSchema(f"topic {_key(topic)} does not take new schema versions "
                                     "(isAllowAutoUpdateSchema is false)")
        why = compatible(typ, text, vs, ctx.setting("schemaCompatibilityStrategy"))
        if why is not None:
            raise IncompatibleSchema(f"a schema of type {typ} is incompatible with topic "
                                     f"{_key(topic)}: {why}")
    version = vs[-1]["version"] + 1 if vs else 0
    vs = vs + [{"version": version, "type": typ, "schema": text,
                "properties": dict(properties or {}), "timestamp": ctx.now}]
    ctx.put(vs, "schema", _key(topic))
    return version


def check(ctx, topic: TopicName, typ: str, definition="") -> str | None:
    """Whether a schema would be accepted (pulsar-admin schemas compatibility): None, or why
    not. Changes nothing."""
    typ = str(typ).upper()
    text = _text(definition)
    vs = versions(ctx, topic)
    if any(v["type"] == typ and (v.get("schema") or "") == text for v in vs):
        return None
    return compatible(typ, text, vs, ctx.setting("schemaCompatibilityStrategy"))


def for_consumer(ctx, topic: TopicName, typ: str) -> None:
    have = latest(ctx, topic)
    if typ != BYTES and have is not None and have["type"] != typ:
        raise _incompatible(topic, have, typ, "a consumer")


def validate(typ: str, payloads) -> None:
    for i, p in enumerate(payloads):
        try:
            text = p.decode("utf-8")
            if typ == JSON:
                json.loads(text)
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidValue(f"message {i + 1} is not valid {typ} for the producer's schema: "
                               f"{exc}", hint="fix the payload, or produce without a schema")


def delete(ctx, topic: TopicName) -> bool:
    return ctx.delete("schema", _key(topic))
