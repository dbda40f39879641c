"""pulsar-admin schemas, and the check a consumer's schema meets."""
from __future__ import annotations

from pulsarctl.broker import schemas
from pulsarctl.broker.admin.base import Noun
from pulsarctl.broker.nonpersistent import routed
from pulsarctl.broker.targets import expand, topic_name
from pulsarctl.errors import MessageNotFound


class Schemas(Noun):
    __slots__ = ()

    @routed
    def get(self, name, version=None):
        """pulsar-admin schemas get: the latest version (or the given one)."""
        def run(ctx):
            t = topic_name(name)
            vs = schemas.versions(ctx, t)
            pick = vs[-1] if vs and version is None else next(
                (v for v in vs if v["version"] == version), None)
            if pick is None:
                raise MessageNotFound(f"topic {t} has no schema"
                                      + ("" if version is None else f" version {version}"),
                                      hint="a producer with --value-schema string|json sets one")
            return {"version": pick["version"], "schemaInfo": {
                "name": t.local_name, "schema": pick["schema"], "type": pick["type"],
                "properties": pick["properties"], "timestamp": pick["timestamp"]}}
        return self._broker._read(run)

    @routed
    def versions(self, name) -> list[dict]:
        """Every version of the topic's schema, oldest first (pulsar-admin schemas get --all)."""
        return self._broker._read(lambda ctx: schemas.versions(ctx, topic_name(name)))

    @routed
    def register(self, name, typ: str, definition="", properties=None) -> int:
        """Register a schema (a producer's, or pulsar-admin schemas upload): its version, new
        or existing; IncompatibleSchema when the compatibility strategy refuses it."""
        return self._broker._write(lambda ctx: schemas.register(ctx, topic_name(name), typ,
                                                                definition, properties))

    @routed
    def check(self, name, typ: str, definition="") -> str | None:
        """Whether a schema would be accepted: None, or why not (schemas compatibility)."""
        return self._broker._read(lambda ctx: schemas.check(ctx, topic_name(name), typ,
                                                            definition))

    @routed
    def delete(self, name) -> bool:
        return self._broker._write(lambda ctx: schemas.delete(ctx, topic_name(name)))

    @routed
    def strategy(self, name) -> str:
        """The compatibility strategy in force on the topic (its namespace's, or the setting)."""
        return self._broker._read(lambda ctx: schemas.strategy(ctx, topic_name(name)))

    @routed
    def version(self, name, number: int | None = None) -> dict | None:
        """One version of the topic's schema (the latest when number is None), or None."""
        return self._broker._read(lambda ctx: schemas.version(ctx, topic_name(name), number))

    @routed
    def for_typed_consumer(self, name, typ: str, definition="", properties=None):
        """A typed consumer's schema: registered on a topic without one, else checked
        (IncompatibleSchema); broker/schemas.for_typed_consumer."""
        return self._broker._write(lambda ctx: schemas.for_typed_consumer(
            ctx, topic_name(name), typ, definition, properties))

    @routed
    def check_consumer(self, names, schema) -> None:
        typ = schemas.check_type(schema)

        def run(ctx):
            for p in expand(ctx, names):
                schemas.for_consumer(ctx, p, typ)
        self._broker._read(run)
