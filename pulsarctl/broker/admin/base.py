"""What every admin noun shares: the Broker it works on."""
from __future__ import annotations


class Noun:
    __slots__ = ("_broker",)

    def __init__(self, broker):
        self._broker = broker

    def _on(self, broker):
        """The same noun on another Broker (the one that owns a non-persistent topic)."""
        return type(self)(broker)
