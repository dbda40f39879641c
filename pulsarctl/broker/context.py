"""Ctx: one write (or read) transaction of the broker, with the time it runs at."""
from __future__ import annotations

from store import keys
from pulsarctl.config import BROKER_DEFAULTS


class Ctx:
    __slots__ = ("broker", "txn", "now", "env", "ledgers", "cursors", "_settings", "write", "policy_cache",
                 "history", "hseq", "events", "origin")

    def __init__(self, broker, txn, now: int, write: bool):
        self.broker = broker
        self.txn = txn
        self.now = now
        self.env = broker.env
        self.ledgers = broker.ledgers
        self.cursors = broker.cursors
        self._settings = None
        self.write = write
        self.policy_cache = {}  # (topic, field) -> value, for this transaction
        # The message history (history.py): whether it records (read once), the sequence of
        # the next event, the events recorded (kept for --explain), and the (topic, message
        # id) a dead letter or retry copy being published comes from.
        self.history = None
        self.hseq = None
        self.events = None
        self.origin = None

    # -- the small tables: tuple keys in the "tables" database --------------------------------
    def get(self, *key):
        return self.env.get(self.txn, "tables", keys.tup(*key))

    def put(self, value, *key) -> None:
        self.env.put(self.txn, "tables", keys.tup(*key), value)

    def delete(self, *key) -> bool:
        return self.env.delete(self.txn, "tables", keys.tup(*key))

    def scan(self, *prefix):
        """Yield (key tuple, value) under a key prefix."""
        for k, v in self.env.scan(self.txn, "tables", keys.tup(*prefix)):
            yield keys.untup(k), v

    def setting(self, name: str):
        if self._settings is None:
            self._settings = dict(BROKER_DEFAULTS)
            self._settings.update(self.broker.conf_defaults)
            for k, v in self.scan("setting"):
                self._settings[k[1]] = v
        return self._settings[name]
