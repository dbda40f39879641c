"""Schemas at the level the seeds use them (BYTES, STRING, JSON): a topic's schema registry
holds versions; a producer with a schema registers it on first use (version 0) or writes with
the version already there, and each message records that version (Message.schema_version()).
A producer or consumer whose schema type differs from the topic's is refused, as Pulsar's
IncompatibleSchemaException; BYTES (no schema, the default) is always allowed, as Pulsar
allows it while schemaValidationEnforced is false (its default). STRING payloads must be UTF-8
and JSON payloads valid JSON; JSON schemas carry no record definition here."""
from __future__ import annotations

import json

from pulsarctl.errors import IncompatibleSchema, InvalidValue
from pulsarctl.names import TopicName

BYTES, STRING, JSON = "BYTES", "STRING", "JSON"
TYPES = (BYTES, STRING, JSON)


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
    """The schema version a producer writes with; registers the schema on first use."""
    if typ == BYTES:
        return None
    have = latest(ctx, topic)
    if have is None:
        ctx.put([{"version": 0, "type": typ, "schema": "", "properties": {},
                  "timestamp": ctx.now}], "schema", _key(topic))
        return 0
    if have["type"] != typ:
        raise _incompatible(topic, have, typ, "a producer")
    return have["version"]


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
