"""Schema compatibility, as Pulsar's SchemaCompatibilityStrategy and its checkers
(AvroSchemaBasedCompatibilityCheck for AVRO, JSON and PROTOBUF, whose definitions are Avro
schemas; a type-and-definition equality check for every other type).

BACKWARD: the new schema reads data written with the old one. FORWARD: the old one reads data
written with the new. FULL: both. *_TRANSITIVE: against every version, not only the latest.
ALWAYS_COMPATIBLE accepts anything of the same type; ALWAYS_INCOMPATIBLE refuses any change.

Avro reading rules used (the Avro specification's schema resolution, as Avro's resolving
grammar applies it, which Pulsar's check uses): a record reads a record, whatever its name,
when each reader field either exists in the writer with a readable type, or has a default;
int promotes to long, float, double; long to float, double; float to double; string and bytes
read each other; a union reads a value when one of its branches does, and a writer union is
readable when every branch is; enums read when the writer's symbols are all known; arrays and
maps by their items and values; fixed by name and size."""
from __future__ import annotations

import json

from pulsarctl.config import SCHEMA_STRATEGIES as STRATEGIES  # noqa: F401 - named here too
AVRO_BASED = ("AVRO", "JSON", "PROTOBUF")
_PROMOTIONS = {"int": {"int", "long", "float", "double"}, "long": {"long", "float", "double"},
               "float": {"float", "double"}, "double": {"double"},
               "string": {"string", "bytes"}, "bytes": {"bytes", "string"}}


def parse(definition) -> object | None:
    """An Avro schema from its JSON text (bytes or str), or None if it is none."""
    if definition in (None, "", b""):
        return None
    try:
        text = definition.decode() if isinstance(definition, bytes) else definition
        return json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return None


def _name(s) -> str | None:
    return s.get("name") if isinstance(s, dict) else None


def _kind(s):
    if isinstance(s, list):
        return "union"
    if isinstance(s, dict):
        t = s.get("type")
        return t if isinstance(t, str) else _kind(t)
    return s


def can_read(reader, writer, names: dict | None = None) -> bool:
    """Whether data written with `writer` can be read with `reader` (Avro resolution)."""
    if isinstance(writer, list):
        return all(can_read(reader, w) for w in writer)
    if isinstance(reader, list):
        return any(can_read(r, writer) for r in reader)
    if isinstance(reader, dict) and isinstance(reader.get("type"), (dict, list)):
        return can_read(reader["type"], writer)
    if isinstance(writer, dict) and isinstance(writer.get("type"), (dict, list)):
        return can_read(reader, writer["type"])
    rk, wk = _kind(reader), _kind(writer)
    if rk in _PROMOTIONS.get(wk, ()):
        return True
    if rk != wk:
        return False
    if rk == "record":
        # Fields are matched by name, not the records themselves: Pulsar's check is Avro's
        # resolving grammar (ValidateMutualRead), which reads a record of another name.
        wfields = {f["name"]: f for f in writer.get("fields", [])}
        for f in reader.get("fields", []):
            w = wfields.get(f["name"])
            if w is None:
                if "default" not in f:
                    return False
            elif not can_read(f["type"], w["type"]):
                return False
        return True
    if rk == "enum":
        return _name(reader) == _name(writer) and (
            "default" in reader or set(writer.get("symbols", [])) <= set(reader.get("symbols", [])))
    if rk == "array":
        return can_read(reader.get("items"), writer.get("items"))
    if rk == "map":
        return can_read(reader.get("values"), writer.get("values"))
    if rk == "fixed":
        return _name(reader) == _name(writer) and reader.get("size") == writer.get("size")
    return True  # the same primitive, or null


def compatible(typ: str, new, old_versions: list[dict], strategy: str) -> str | None:
    """None when the new schema (its type and definition) may follow old_versions (oldest
    first) under strategy, else the reason it may not."""
    if not old_versions or strategy == "ALWAYS_COMPATIBLE":
        return None
    latest = old_versions[-1]
    if strategy == "ALWAYS_INCOMPATIBLE":
        return "the topic's schema compatibility strategy is ALWAYS_INCOMPATIBLE"
    against = old_versions if strategy.endswith("_TRANSITIVE") else [latest]
    for old in against:
        if old["type"] != typ:
            return f"its type {typ} is not the topic's {old['type']}"
        if typ not in AVRO_BASED:
            if (old.get("schema") or "") != (new or ""):
                return (f"{'an' if typ[:1] in 'AEIOU' else 'a'} {typ} schema cannot change "
                        "its definition")
            continue
        r, w = parse(new), parse(old.get("schema"))
        if r is None or w is None:
            if (old.get("schema") or "") != (new or ""):
                return "one of the two definitions is not an Avro schema"
            continue
        base = strategy.removesuffix("_TRANSITIVE")
        if base in ("BACKWARD", "FULL") and not can_read(r, w):
            return (f"the new schema cannot read data written with version {old['version']} "
                    f"({base})")
        if base in ("FORWARD", "FULL") and not can_read(w, r):
            return (f"version {old['version']} cannot read data written with the new schema "
                    f"({base})")
    return None
