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
import struct

from pulsarctl.broker import policies, tenants
from pulsarctl.broker.schema_compat import compatible
from pulsarctl.errors import IncompatibleSchema, InvalidValue
from pulsarctl.names import TopicName

BYTES, STRING, JSON, KEY_VALUE = "BYTES", "STRING", "JSON", "KEY_VALUE"
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


def _text(definition, typ: str | None = None) -> str:
    if isinstance(definition, (bytes, bytearray)):
        if typ == KEY_VALUE:
            return key_value_text(bytes(definition))
        return bytes(definition).decode("utf-8", "surrogateescape")
    return definition or ""


# A KEY_VALUE schema's data on the wire is binary (KeyValueSchemaInfo): the key schema's bytes
# after their 4-byte big-endian length, then the value schema's. The registry keeps it as the
# text Pulsar's admin API shows for it (SchemaUtils.convertKeyValueSchemaInfoDataToString):
# {"key": ..., "value": ...}, each side "" for a primitive schema (no definition) or the
# schema's JSON; key_value_data turns it back into the wire's bytes.
_KV_LEN = struct.Struct(">i")


def key_value_text(data: bytes) -> str:
    parts, at = [], 0
    for _side in ("key", "value"):
        if at + 4 > len(data):
            raise InvalidValue("a KEY_VALUE schema's data is two length-prefixed schemas")
        (n,) = _KV_LEN.unpack_from(data, at)
        if n < 0 or at + 4 + n > len(data):
            raise InvalidValue("a KEY_VALUE schema's data is two length-prefixed schemas")
        parts.append(data[at + 4:at + 4 + n])
        at += 4 + n

    def side(raw: bytes):
        if not raw:
            return ""
        text = raw.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            return text
    return json.dumps({"key": side(parts[0]), "value": side(parts[1])}, separators=(",", ":"))


def key_value_data(text: str) -> bytes:
    """The wire's bytes of a KEY_VALUE schema kept as key_value_text made it."""
    try:
        doc = json.loads(text)
        sides = [doc["key"], doc["value"]]
    except (ValueError, TypeError, KeyError):
        return text.encode()
    out = b""
    for part in sides:
        raw = part.encode() if isinstance(part, str) else json.dumps(
            part, separators=(",", ":")).encode()
        out += _KV_LEN.pack(len(raw)) + raw
    return out


def wire_data(v: dict) -> bytes:
    """A registry version's schema data as a client reads it on the wire."""
    text = v.get("schema") or ""
    if v.get("type") == KEY_VALUE:
        return key_value_data(text)
    return text.encode("utf-8", "surrogateescape")


def register(ctx, topic: TopicName, typ: str, definition="", properties=None) -> int:
    """The version of this schema on the topic: the existing one if it is already there,
    else a new version after the compatibility check (IncompatibleSchema when it fails, or when
    isAllowAutoUpdateSchema is off)."""
    typ = str(typ).upper()
    if typ not in ALL_TYPES:
        raise InvalidValue(f"unknown schema type {typ!r}",
                           hint=f"use one of {', '.join(ALL_TYPES)}")
    text = _text(definition, typ)
    vs = versions(ctx, topic)
    for v in vs:
        if v["type"] == typ and (v.get("schema") or "") == text:
            return v["version"]
    if vs:
        if not ctx.setting("isAllowAutoUpdateSchema"):
            raise IncompatibleSchema(f"topic {_key(topic)} does not take new schema versions "
                                     "(isAllowAutoUpdateSchema is false)")
        why = compatible(typ, text, vs, strategy(ctx, topic))
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
    text = _text(definition, typ)
    vs = versions(ctx, topic)
    if any(v["type"] == typ and (v.get("schema") or "") == text for v in vs):
        return None
    return compatible(typ, text, vs, strategy(ctx, topic))


def strategy(ctx, topic: TopicName) -> str:
    """The compatibility strategy in force: the namespace's, else the broker's setting."""
    return policies.effective(ctx, topic.partitioned_topic_name, policies.SCHEMA_STRATEGY)


def version(ctx, topic: TopicName, number: int | None = None) -> dict | None:
    """One version (the latest when number is None), or None if there is no such version."""
    vs = versions(ctx, topic)
    if number is None:
        return vs[-1] if vs else None
    return next((v for v in vs if v["version"] == number), None)


# Strategies under which Pulsar checks a consumer's schema against the latest version only,
# as BACKWARD (SchemaRegistryServiceImpl.checkConsumerCompatibility); the others apply as they
# are, against every version.
_CONSUMER_AS_BACKWARD = ("BACKWARD", "FORWARD", "FORWARD_TRANSITIVE", "FULL")


def for_typed_consumer(ctx, topic: TopicName, typ: str, definition="", properties=None):
    """A consumer's (or reader's) schema, as Pulsar's addSchemaIfIdleOrCheckCompatible: a topic
    without a schema takes it as version 0 (pulsarctl does not track live producers or
    consumers across processes, so every topic without a schema counts as idle); otherwise it
    must be able to read the topic's data (IncompatibleSchema). Returns the version registered
    or matched, or None when it was only checked."""
    typ = str(typ).upper()
    text = _text(definition, typ)
    vs = versions(ctx, topic)
    if not vs:
        tenants.get_namespace(ctx, topic.namespace)  # no schema left behind in no namespace
        return register(ctx, topic, typ, text, properties)
    latest_ = vs[-1]
    if latest_["type"] == typ and (latest_.get("schema") or "") == text:
        return latest_["version"]
    rule = strategy(ctx, topic)
    if rule in _CONSUMER_AS_BACKWARD:
        why = compatible(typ, text, [latest_], "BACKWARD")
    else:
        why = compatible(typ, text, vs, rule)
    if why is not None:
        raise IncompatibleSchema(f"a consumer with a schema of type {typ} is incompatible with "
                                 f"topic {_key(topic)}: {why}")
    return None


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
