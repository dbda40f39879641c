"""RemoteBroker: a remote Pulsar's administration, shaped as the local Broker's nouns
(`tenants`, `namespaces`, `topics`, `policies`, `schemas`, `subscription(t, s)`), over its
admin REST API (admin.py, topics.py). A noun or method it does not have is a command that works
on a local store only: LocalOnly, said in one line, naming the command and the target."""
from __future__ import annotations

from pulsarctl.errors import LocalOnly
from pulsarctl.remote.admin import Namespaces, Policies, Schemas, Tenants
from pulsarctl.remote.rest import Admin
from pulsarctl.remote.topics import Subscription, Topics


class RemoteBroker:
    """The remote target's administration, shaped as the local Broker's nouns."""

    def __init__(self, target, command: str | None = None):
        self.target = target
        self.command = command
        self._rest = None
        self.tenants = Tenants(self)
        self.namespaces = Namespaces(self)
        self.policies = Policies(self)
        self.schemas = Schemas(self)
        self.topics = Topics(self)
        self._dlqs: dict = {}

    @property
    def rest(self) -> Admin:
        """The admin REST client, made at the first call that needs it: the dlq commands work
        over the binary protocol alone (a target without an admin API, as pulsar-lite), and
        what needs one says so then, in one line."""
        if self._rest is None:
            self._rest = Admin(self.target)
        return self._rest

    def subscription(self, topic, name: str):
        return Subscription(self, topic, name)

    def dlq(self, topic):
        """The dead letter topic's handle, the same one for the whole command (it holds the
        consumer of pulsarctl-dlq while a drain, replay or purge runs)."""
        # lazy: only the dlq commands need it
        from pulsarctl.names import parse_topic
        # lazy: only the dlq commands need it
        from pulsarctl.remote.dlq import RemoteDlq

        key = str(parse_topic(str(topic)))
        if key not in self._dlqs:
            self._dlqs[key] = RemoteDlq(self, key)
        return self._dlqs[key]

    def dlqs(self, namespace=None):
        # lazy: only dlq list needs it
        from pulsarctl.remote.dlq import list_dlqs

        return list_dlqs(self, namespace)

    def local_only(self, what: str | None = None) -> LocalOnly:
        what = what or (f"`{self.command}`" if self.command else "this command")
        return LocalOnly(f"{what} works on a local store only, and the target is the remote "
                         f"context {self.target.name} (chosen by {self.target.source})")

    def close(self) -> None:
        if self._rest is not None:
            self._rest.close()

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise self.local_only()
