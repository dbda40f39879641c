"""Namespace and topic policies, and the store-wide broker settings (broker.conf's names)."""
from __future__ import annotations

from pulsarctl.broker import policies
from pulsarctl.broker.admin.base import Noun
from pulsarctl.broker.targets import topic_name
from pulsarctl.config import BROKER_DEFAULTS, coerce_setting


class Policies(Noun):
    __slots__ = ()

    def set(self, scope, target, field, value):
        if scope == "namespace":
            return self._broker._write(policies.set_ns, target, field, value)
        return self._broker._write(policies.set_topic, topic_name(target), field, value)

    def get(self, scope, target, field, applied=False):
        if scope == "namespace":
            return self._broker._read(policies.get_ns, target, field)
        return self._broker._read(policies.get_topic, topic_name(target), field, applied)

    def remove(self, scope, target, field, part=None):
        if scope == "namespace":
            return self._broker._write(policies.remove_ns, target, field, part)
        return self._broker._write(policies.remove_topic, topic_name(target), field, part)

    def applied(self, topic):
        """The value of every policy in force on the topic."""
        def run(ctx):
            t = topic_name(topic)
            policies.get_topic(ctx, t, policies.TTL)  # the topic must exist
            return policies.applied(ctx, t)
        return self._broker._read(run)

    # -- store-wide settings -------------------------------------------------------------------
    def settings(self) -> dict:
        return self._broker._read(lambda ctx: {k: ctx.setting(k) for k in BROKER_DEFAULTS})

    def update_setting(self, name: str, value: str):
        v = coerce_setting(name, value)
        b = self._broker
        b._write(lambda ctx: ctx.put(v, "setting", name))
        if name == "managedLedgerMaxEntriesPerLedger":
            b.ledgers.rollover_entries = v  # other processes: see producers.publish
        return v
