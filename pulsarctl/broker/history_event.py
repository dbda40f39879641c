"""The stored history event (history.py's "history" database), with its fields named.

store/codec.py packs an event as a msgpack list (positional, so a message's life costs few
bytes). Here are its fields, in stored order:

    index  field             on disk                                               default
    0      kind              str: what happened, one of EVENTS (below)             (always)
    1      at                int, epoch ms on the broker's clock                   (always)
    2      subscription      str or nil (a publish names none)                     None
    3      consumer          str or nil                                            None
    4      redelivery_count  int or nil                                            None
    5      extra             map of what the kind needs (producer and sequence    None
                             id, the delay, a reason, where a dead letter went,
                             fromOffset/toOffset of a range event...), or nil
    6      span              only on a span record (history.py's span events):     None
                             the offsets it holds, or [first, last] when they
                             run on by one

Every writer stores fields 0..5 (nil where it has nothing); a span record adds field 6. So
Event.to_stored gives the six-item list, or seven with a span, exactly as stores written
before these names hold them (tests/store/test_old_store.py reads one byte for byte).
"""
from __future__ import annotations

from typing import NamedTuple


class Event(NamedTuple):
    """One stored event, every field named (see the module's table)."""
    kind: str
    at: int
    subscription: str | None = None
    consumer: str | None = None
    redelivery_count: int | None = None
    extra: dict | None = None
    span: list | None = None

    @classmethod
    def from_stored(cls, value) -> "Event":
        """The event of a decoded list (or an Event already)."""
        return value if type(value) is cls else cls(*value)

    def to_stored(self) -> list:
        """The list the writers store for this event, byte for byte."""
        return list(self) if self.span is not None else list(self[:6])

    @property
    def detail(self) -> dict:
        """The extra, {} when there is none."""
        return self.extra or {}

    @property
    def reason(self) -> str | None:
        return (self.extra or {}).get("reason")

    def without_span(self) -> "Event":
        """The event a span record holds for each of its entries."""
        return self._replace(span=None) if self.span is not None else self


(E_KIND, E_AT, E_SUBSCRIPTION, E_CONSUMER, E_REDELIVERY_COUNT, E_EXTRA,
 E_SPAN) = range(len(Event._fields))
assert Event._fields[E_SPAN] == "span"  # the table and the tuple
