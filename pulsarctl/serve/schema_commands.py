"""The schema registry's commands on the wire: GET_SCHEMA (a client asks for the schema a
message was written with, by version, to decode it), GET_OR_CREATE_SCHEMA, and the schema a
consumer or reader brings in its SUBSCRIBE.

Schema versions travel as 8 big-endian bytes (Pulsar's LongSchemaVersion). As Pulsar's
ServerCnx answers: a topic without a schema (or without that version) is error_code
TopicNotFound, "Topic not found or no-schema <topic>"; an empty version is IncompatibleSchema;
a consumer whose schema cannot read the topic's gets ERROR IncompatibleSchema (its SUBSCRIBE
fails, and no subscription or consumer is made)."""
from __future__ import annotations

import struct

from pulsarctl.broker import schemas
from pulsarctl.serve import frames
from pulsarctl.serve import pulsar_api_pb2 as api
from pulsarctl.serve.wire_errors import error_text, server_error

T = api.BaseCommand
_U64 = struct.Struct(">q")
# Schema.type on the wire (PulsarApi.proto's Schema.Type numbering), as the registry names them.
WIRE_TYPES = ("NONE", "STRING", "JSON", "PROTOBUF", "AVRO", "BOOLEAN", "INT8", "INT16",
              "INT32", "INT64", "FLOAT", "DOUBLE", "DATE", "TIME", "TIMESTAMP", "KEY_VALUE",
              "INSTANT", "LOCAL_DATE", "LOCAL_TIME", "LOCAL_DATE_TIME", "PROTOBUF_NATIVE")


def wire_type(schema: api.Schema) -> str | None:
    """The registry's name of a command's schema type; None for no schema (bytes) or a number
    this server does not know."""
    if 0 < schema.type < len(WIRE_TYPES):
        return WIRE_TYPES[schema.type]
    return None


def _properties(schema: api.Schema) -> dict:
    return {kv.key: kv.value for kv in schema.properties}


def _fill(out: api.Schema, topic: str, v: dict) -> None:
    """A registry version as the wire's Schema (its name is the topic's, as Pulsar's)."""
    out.name = topic
    out.schema_data = schemas.wire_data(v)
    out.type = WIRE_TYPES.index(v["type"]) if v["type"] in WIRE_TYPES else 0
    for k, val in (v.get("properties") or {}).items():
        out.properties.add(key=str(k), value=str(val))


def _short(topic: str) -> str:
    return topic.split("://", 1)[-1]


async def on_get_schema(conn, cmd, meta, payload):
    g = cmd.getSchema
    s = conn.server

    def error(code, text):
        r = api.BaseCommand(type=T.GET_SCHEMA_RESPONSE)
        r.getSchemaResponse.request_id = g.request_id
        r.getSchemaResponse.error_code = code
        r.getSchemaResponse.error_message = text
        conn.send(frames.command(r))

    if not await conn.allowed(g.topic, "lookup"):
        error(api.AuthorizationError, "Client is not authorized to GetSchema")
        return
    number = None
    if g.HasField("schema_version"):
        if len(g.schema_version) == 0:
            error(api.IncompatibleSchema, "Empty schema version")
            return
        if len(g.schema_version) != 8:
            error(api.IncompatibleSchema, f"Invalid schema version {g.schema_version.hex()}")
            return
        number = _U64.unpack(g.schema_version)[0]
    try:
        v = await s.call(s.broker.schemas.version, g.topic, number)
    except Exception as exc:
        error(server_error(exc), error_text(exc))
        return
    if v is None:
        error(api.TopicNotFound, f"Topic not found or no-schema {g.topic}")
        return
    r = api.BaseCommand(type=T.GET_SCHEMA_RESPONSE)
    r.getSchemaResponse.request_id = g.request_id
    _fill(r.getSchemaResponse.schema, _short(g.topic), v)
    r.getSchemaResponse.schema_version = _U64.pack(v["version"])
    conn.send(frames.command(r))


async def on_get_or_create_schema(conn, cmd, meta, payload):
    g = cmd.getOrCreateSchema
    s = conn.server

    def answer(**fields):
        r = api.BaseCommand(type=T.GET_OR_CREATE_SCHEMA_RESPONSE)
        r.getOrCreateSchemaResponse.request_id = g.request_id
        for k, val in fields.items():
            setattr(r.getOrCreateSchemaResponse, k, val)
        conn.send(frames.command(r))

    if not await conn.allowed(g.topic, "produce"):
        answer(error_code=api.AuthorizationError,
               error_message="Client is not authorized to GetOrCreateSchema")
        return
    typ = wire_type(g.schema)
    if typ is None and g.schema.type != 0:
        answer(error_code=api.IncompatibleSchema,
               error_message=f"schema type {g.schema.type} is not a registry type")
        return
    try:
        exists = await s.call(s.broker.topics.exists, g.topic)
        if not exists and not await s.call(s.broker.partitions_of, g.topic):
            answer(error_code=api.TopicNotFound, error_message=f"Topic not found {g.topic}")
            return
        if typ is None:
            # NONE, a bytes schema (the Java client's retry and dead letter producers send
            # one for a message without a schema): nothing to register, the empty version,
            # as Pulsar's addSchema answers for no schema.
            answer(schema_version=b"")
            return
        version = await s.call(s.broker.schemas.register, g.topic, typ, g.schema.schema_data,
                               _properties(g.schema))
    except Exception as exc:
        answer(error_code=server_error(exc), error_message=error_text(exc))
        return
    answer(schema_version=_U64.pack(version))


async def subscribe_schema(conn, c) -> bool:
    """A SUBSCRIBE's schema, registered on a topic without one or checked against the
    topic's (broker/schemas.for_typed_consumer). False when the SUBSCRIBE was refused (its
    ERROR is sent); True when it may go on (no schema, bytes, or accepted)."""
    if not c.HasField("schema"):
        return True
    typ = wire_type(c.schema)
    if typ is None:
        return True
    s = conn.server
    try:
        await s.call(s.broker.schemas.for_typed_consumer, c.topic, typ, c.schema.schema_data,
                     _properties(c.schema))
    except Exception as exc:
        conn.error(c.request_id, exc)
        return False
    return True


async def reader_topic(conn, c) -> None:
    """A reader's topic, created if it does not exist yet, as Pulsar auto-creates a topic on a
    subscription (allowAutoTopicCreation); a partitioned topic, or a refusal, is left alone
    (the reader then waits for the topic)."""
    s = conn.server
    try:
        if await s.call(s.broker.topics.exists, c.topic):
            return
        if await s.call(s.broker.partitions_of, c.topic):
            return
        await s.call(s.broker.topics.create, c.topic)
    except Exception as exc:
        s.log(f"reader of {c.topic}: the topic was not created: {error_text(exc)}")
