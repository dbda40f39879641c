"""A subscription's type, as its cursor keeps it: the one place that reads and writes it.

The type lives in the cursor's properties (store/cursor.py's props, a map stored with the
cursor) under "type", absent while no consumer ever attached: Pulsar reports "None" for a
subscription without a dispatcher (PersistentSubscription.getTypeString), and the semantics read
such a subscription as Exclusive until then. Every module asks these functions rather than the
map, so the key, the default and "None" are said once. A leaf module (it imports nothing of the
broker), so the history and the dispatchers read it without an import cycle.
"""
from __future__ import annotations

EXCLUSIVE, SHARED, FAILOVER, KEY_SHARED = "Exclusive", "Shared", "Failover", "Key_Shared"
TYPES = (EXCLUSIVE, SHARED, FAILOVER, KEY_SHARED)
SINGLE_ACTIVE = (EXCLUSIVE, FAILOVER)

_TYPE = "type"  # the key in the cursor's properties


def stored_type(c) -> str | None:
    """The type subscription c's consumers gave it; None while none ever attached."""
    return c.props.get(_TYPE)


def type_of(c) -> str:
    """The type the semantics read: the stored one, Exclusive while there is none."""
    return c.props.get(_TYPE, EXCLUSIVE)


def shown_type(c) -> str:
    """The type a subscription reports (stats, describe, the cursor picture, top): its
    consumers' type, or "None" while no consumer ever attached."""
    return c.props.get(_TYPE) or "None"


def set_type(c, sub_type: str) -> None:
    """Subscription c is of sub_type from now on (its first consumer's, or a new one's once
    the old consumers are gone); saved with the cursor."""
    c.props[_TYPE] = sub_type


def clear_type(c) -> None:
    """Subscription c has no type (made with no consumer: "None" until one comes)."""
    c.props.pop(_TYPE, None)


def single_active(c) -> bool:
    """Whether subscription c is Exclusive or Failover (one untyped yet reads as Exclusive)."""
    return type_of(c) in SINGLE_ACTIVE
