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
            from pulsarctl.broker import Broker
            from pulsarctl.config import resolve_store

            self._broker = Broker(resolve_store(self.store))
        return self._broker

    def client(self):
        from pulsarctl.client import Client

        return Client(broker=self.broker())
