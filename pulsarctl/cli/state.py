"""Global command-line state: the store, the output format, --traceback, and the target (the
local store, or a remote Pulsar named by --context, --service-url/--admin-url, the
PULSAR_SERVICE_URL/PULSAR_ADMIN_URL environment or the current context). Light to import: the
target is resolved (pulsarctl/config.py) when a command first asks for it."""
from __future__ import annotations

from pulsarctl.cli import render

_UNRESOLVED = object()


class State:
    def __init__(self, store: str | None = None, output: str = render.TEXT,
                 traceback: bool = False, context: str | None = None,
                 target_flags: dict | None = None):
        self.store = store
        self.output = output
        self.traceback = traceback
        self.context = context
        self.target_flags = target_flags or {}
        self.command = None  # "pulsarctl topics stats": common.state() records it
        self._broker = None
        self._remote = _UNRESOLVED
        self._admin = None

    @property
    def remote(self):
        """The remote target (config.Context) of this command, or None for the local store."""
        if self._remote is _UNRESOLVED:
            # lazy: loaded when the command runs, not when the command tree is built
            from pulsarctl.config import resolve_target

            self._remote = resolve_target(self.store, self.context, self.target_flags)
        return self._remote

    def local_only(self, what: str | None = None) -> None:
        """Refuse, in one line (exit 2), what works on a local store only when the target is
        remote; nothing has been done yet."""
        target = self.remote
        if target is None:
            return
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.errors import LocalOnly

        what = what or (f"`{self.command}`" if self.command else "this command")
        raise LocalOnly(f"{what} works on a local store only, and the target is the remote "
                        f"context {target.name} (chosen by {target.source})")

    def broker(self):
        if self._broker is None:
            # Every command that reaches the local broker with a remote target is refused
            # here: a command not taught to work remotely says so, never acts on the local
            # store instead.
            self.local_only()
            # lazy: loaded when the command runs, not when the command tree is built
            from pulsarctl.broker import Broker
            # lazy: loaded when the command runs, not when the command tree is built
            from pulsarctl.config import resolve_store

            self._broker = Broker(resolve_store(self.store))
        return self._broker

    def client(self):
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.client import Client

        return Client(broker=self.broker())

    def admin(self):
        """What administration commands act on: the local Broker, or for a remote target a
        RemoteBroker (pulsarctl/remote/admin.py) with the same nouns over the admin REST API."""
        if self.remote is None:
            return self.broker()
        if self._admin is None:
            # lazy: loaded when the command runs, not when the command tree is built
            from pulsarctl.remote.broker import RemoteBroker

            self._admin = RemoteBroker(self.remote, self.command)
        return self._admin

    def close(self) -> None:
        """End of the command: close the remote admin client, if one was opened."""
        if self._admin is not None:
            self._admin.close()
            self._admin = None
