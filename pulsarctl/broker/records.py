"""The broker's stored records, named: what each list or map that a subscription keeps holds,
field by field, as it lies on disk.

Each type reads a stored value with from_stored (which also takes the shorter lists an older
release wrote, filling the fields it did not have with their defaults) and gives the value to
store with to_stored: exactly the list or map this release writes, so a store written before
these names existed opens and reads as it did, byte for byte. store/codec.py encodes what
to_stored gives; nothing else here touches bytes. (The entries of a ledger, the messages, are
named elsewhere: see pulsarctl/messages.py and pulsarctl/broker/batches.py.)

The records are built with tuple.__new__ rather than the NamedTuple constructor: dispatch and
acks read pending records per message, and this keeps them as cheap as the lists they were.
"""
from __future__ import annotations

from typing import NamedTuple

# The kinds of timer (Timer.kind): a nack's redelivery delay (nacks.py) and an ack timeout
# (unacked.py), by the one vocabulary's names (the history's ackTimeout event is the same word).
from pulsarctl.message_events import ACK_TIMEOUT, NACK  # noqa: F401

_new = tuple.__new__



class Pending(NamedTuple):
    """A delivered message not acknowledged yet: database "pending", key (cursor id, offset).

    Stored as a list of three to five items:
      [0] consumer          the name of the consumer it was delivered to
      [1] delivered_at      when (ms on the broker's clock); with [0] it names the delivery
      [2] redelivery_count  its redelivery count when delivered (0 when absent)
      [3] nacked            1 once the consumer nacked it (which voids its ack timeout), 0 when
                            not; written only when set or when [4] follows (0 when absent)
      [4] size              a batch entry's message count (the unacked limits count messages);
                            absent for an entry that is one message (None)
    So a delivery writes [consumer, delivered at, count], or for a batch entry
    [consumer, delivered at, count, 0, size]; a nack writes [consumer, delivered at, count, 1]
    or [consumer, delivered at, count, 1, size]."""
    consumer: str | None
    delivered_at: int | None
    redelivery_count: int = 0
    nacked: int = 0
    size: int | None = None

    @classmethod
    def from_stored(cls, value) -> Pending:
        n = len(value)
        if n == 3:  # the common case: one message, never nacked
            return _new(cls, (value[0], value[1], value[2], 0, None))
        return _new(cls, (*value[:5], *_PENDING_DEFAULTS[n:]))

    @classmethod
    def delivered(cls, consumer: str, delivered_at: int, count: int, size: int = 1) -> Pending:
        """The record a delivery writes; size: the entry's message count (a batch's)."""
        return _new(cls, (consumer, delivered_at, count, 0, size if size > 1 else None))

    def to_stored(self) -> list:
        consumer, at, count, nacked, size = self
        if size is not None:
            return [consumer, at, count, nacked, size]
        if nacked:
            return [consumer, at, count, nacked]
        return [consumer, at, count]


_PENDING_DEFAULTS = (None, None, 0, 0, None)


class Timer(NamedTuple):
    """A nack delay or an ack timeout waiting to fire: database "timers", key (cursor id, due
    ms, offset), so the timers of a subscription lie in the order they come due.

    Stored as a list of five items:
      [0] kind          NACK or ACK_TIMEOUT
      [1] ml_id         the managed-ledger id of the subscription's topic (partition)
      [2] subscription  the subscription's name (with [1]: where to fire it from a scan)
      [3] consumer      the consumer of the delivery it was set for (Pending.consumer)
      [4] delivered_at  that delivery's time (Pending.delivered_at)
    A timer written by an older release may end after [2]: its consumer and delivery time are
    None (a timer without a consumer matches no pending delivery)."""
    kind: str
    ml_id: int
    subscription: str
    consumer: str | None = None
    delivered_at: int | None = None

    @classmethod
    def from_stored(cls, value) -> Timer:
        n = len(value)
        if n == 5:
            return _new(cls, value)
        return _new(cls, (*value[:5], *_TIMER_DEFAULTS[n:]))

    def to_stored(self) -> list:
        return list(self)

    def same_delivery(self, pending: Pending | None) -> bool:
        """Whether the timer was set for the delivery that is pending now: the same consumer
        and, when the timer knows it, the same delivery time (a redelivery since voids it)."""
        if pending is None or pending.consumer != self.consumer:
            return False
        return self.delivered_at is None or pending.delivered_at == self.delivered_at


_TIMER_DEFAULTS = (None, None, None, None, None)


# The keys of a stored consumer record, in the order this release writes them, with the field
# each one is; "since" and "policy" are left out when they are None (see Consumer).
_CONSUMER_KEYS = (("name", "name"), ("since", "since"), ("priority", "priority"),
                  ("pid", "pid"), ("pidStart", "pid_start"), ("leaseMs", "lease_ms"),
                  ("lastActive", "last_active"), ("leaseUntil", "lease_until"),
                  ("policy", "policy"))


class Consumer(NamedTuple):
    """A consumer connected to a subscription: table "consumer", key ("consumer", cursor id,
    consumer name) in the "tables" database (Ctx.get/put).

    Stored as a map, its keys in this order:
      name        the consumer's name
      since       when it first connected (ms); kept across reconnections
      priority    its priority level (0 is the highest; Failover and Shared order by it)
      pid         the process that holds it, or None (a lease only)
      pidStart    that process's start time (clock ticks since boot), against pid reuse
      leaseMs     its lease, or None (a process only)
      lastActive  when it last fetched, acked or renewed (ms)
      leaseUntil  when its lease ends (ms), or None without a lease
      policy      its consumer flags (the Key_Shared policy, sticky ranges...); only present
                  when a consumer gave some
    A record from an older release may lack "since": it stays absent when written back."""
    name: str
    since: int | None = None
    priority: int = 0
    pid: int | None = None
    pid_start: int | None = None
    lease_ms: int | None = None
    last_active: int | None = None
    lease_until: int | None = None
    policy: dict | None = None

    @classmethod
    def from_stored(cls, value: dict) -> Consumer:
        get = value.get
        return _new(cls, (value["name"], get("since"), get("priority", 0), get("pid"),
                          get("pidStart"), get("leaseMs"), get("lastActive"),
                          get("leaseUntil"), get("policy")))

    @classmethod
    def of(cls, value) -> Consumer:
        """value as a Consumer: itself, or read from its stored map."""
        return value if isinstance(value, cls) else cls.from_stored(value)

    def to_stored(self) -> dict:
        out = {}
        for (key, _field), value in zip(_CONSUMER_KEYS, self):
            if value is None and key in ("since", "policy"):
                continue
            out[key] = value
        return out
