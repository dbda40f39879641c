"""Global command-line state: the store, the output format, --traceback. Light to import."""
from __future__ import annotations

from pulsarctl.cli import render


class State:
    def __init__(self, store: str | None = None, output: str = render.TEXT,
                 traceback: bool = False):
        self.store = store
        self.output = output
        self.traceback = traceback
        self._broker = None

    def broker(self):
        if self._broker is None:
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
