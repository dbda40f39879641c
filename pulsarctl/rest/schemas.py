"""Schemas over REST (/admin/v2/schemas/{tenant}/{ns}/{topic}): get (the latest or a
version), all versions, upload, the compatibility check, delete."""
from __future__ import annotations

from aiohttp import web

from pulsarctl.errors import InvalidValue
from pulsarctl.rest.base import body, ok, whole, worker
from pulsarctl.rest.errors import reason


def _schema_topic(request) -> str:
    m = request.match_info
    return f"persistent://{m['tenant']}/{m['ns']}/{m['topic']}"


def _schema_response(v: dict) -> dict:
    return {"version": v["version"], "type": v["type"], "timestamp": v["timestamp"],
            "data": v.get("schema") or "", "properties": v.get("properties") or {}}


async def schema_get(request):
    t = _schema_topic(request)
    version = request.match_info.get("version")
    if version is not None:
        version = whole(version, "the schema version")

    def run(b):
        vs = b.schemas.versions(t)
        pick = vs[-1] if vs and version is None else next(
            (v for v in vs if v["version"] == version), None)
        return pick
    pick = await worker(request).run(run)
    if pick is None:
        return reason(404, "Schema not found")
    return ok(_schema_response(pick))


async def schemas_all(request):
    t = _schema_topic(request)
    vs = await worker(request).run(lambda b: b.schemas.versions(t))
    return ok({"getSchemaResponses": [_schema_response(v) for v in vs]})


def _schema_payload(doc) -> tuple[str, str, dict]:
    if not isinstance(doc, dict) or "type" not in doc:
        raise InvalidValue("a schema is a JSON object with type, schema and properties")
    props = doc.get("properties") or {}
    if not isinstance(props, dict):
        raise InvalidValue("a schema's properties are a JSON object")
    return str(doc["type"]), doc.get("schema") or "", props


async def schema_post(request):
    t = _schema_topic(request)
    typ, definition, props = _schema_payload(await body(request))
    version = await worker(request).run(lambda b: b.schemas.register(t, typ, definition, props))
    return ok({"version": version})


async def schema_compatibility(request):
    t = _schema_topic(request)
    typ, definition, _props = _schema_payload(await body(request))

    def run(b):
        return b.schemas.check(t, typ, definition), b.schemas.strategy(t)
    why, strategy = await worker(request).run(run)
    # Pulsar answers the check 202 Accepted, with the answer in the body.
    return ok({"isCompatibility": why is None, "schemaCompatibilityStrategy": strategy},
              status=202)


async def schema_delete(request):
    t = _schema_topic(request)

    def run(b):
        vs = b.schemas.versions(t)
        b.schemas.delete(t)
        return vs[-1]["version"] if vs else None
    version = await worker(request).run(run)
    if version is None:
        return reason(404, "Schema not found")
    return ok({"version": version})


def routes(schema_path: str) -> list:
    return [
        web.get(schema_path + "/schema", schema_get),
        web.get(schema_path + "/schema/{version}", schema_get),
        web.get(schema_path + "/schemas", schemas_all),
        web.post(schema_path + "/schema", schema_post),
        web.post(schema_path + "/compatibility", schema_compatibility),
        web.delete(schema_path + "/schema", schema_delete),
    ]
