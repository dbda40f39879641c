"""A subscription's state, as its cursor keeps it: one named record, the one place that reads
and writes the cursor's stored map.

store/cursor.py keeps, with each cursor, an opaque map (CursorState.props) that it saves with
the cursor and never looks into. The broker keeps its subscription's state there: counters that
Pulsar's SubscriptionStats report (msgOutCounter, lastAckedTimestamp, ...), the consumers' policy,
the type, the Failover active consumer, the unacked-limit blocks, and flags that say whether some
other table holds anything for the subscription (so the hot paths look nothing up when not).

SubscriptionState names each of those entries. It is a view over the stored map, not a copy:
state(c) wraps c.props, its attributes read and write the map's keys, and ctx.cursors.save(c)
stores the map as it always has. So the on-disk format is the one every release wrote (the same
msgpack map, the same keys, in the order they were set), a key this release does not know (one a
newer release wrote) stays in the map and is saved back, and nothing is decoded twice. Every
module reads the state through this record (tests/broker/test_subscription_state.py checks that
no other module touches the map), so each key, its default and its meaning are said once.

The type's rules live here too: absent while no consumer ever attached, as Pulsar reports "None"
for a subscription without a dispatcher (PersistentSubscription.getTypeString), and read as
Exclusive by the semantics until then. A leaf module (it imports nothing of the broker), so the
history and the dispatchers read it without an import cycle.
"""
from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

EXCLUSIVE, SHARED, FAILOVER, KEY_SHARED = "Exclusive", "Shared", "Failover", "Key_Shared"
TYPES = (EXCLUSIVE, SHARED, FAILOVER, KEY_SHARED)
SINGLE_ACTIVE = (EXCLUSIVE, FAILOVER)

T = TypeVar("T")
_KEEP = object()  # no value that removes the key: every value assigned is stored


class _Key(Generic[T]):
    """One entry of the stored map, read and written as an attribute.

    Reading gives the stored value, or the default when the key is absent (or holds None, as
    the readers before this record did with `or`); a mutable default is made fresh each time, so
    changing it changes nothing stored. Assigning stores the value, except that assigning
    `absent` removes the key: such an entry is stored only while it says something (a flag
    while it is True, an offset while there is one), as the map has always been written.
    `del state.x` removes the key too. doc: what the entry holds, and the name Pulsar gives
    it where Pulsar has one."""
    __slots__ = ("key", "default", "doc", "absent", "name")

    def __init__(self, key: str, default: T, doc: str, absent: Any = _KEEP):
        self.key, self.default, self.doc, self.absent = key, default, doc, absent

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, state: None, owner=None) -> _Key[T]: ...

    @overload
    def __get__(self, state: SubscriptionState, owner=None) -> T: ...

    def __get__(self, state, owner=None):
        if state is None:
            return self
        v = state.stored.get(self.key)
        if v is None:
            d = self.default
            return d.copy() if isinstance(d, (list, dict)) else d
        return v

    def __set__(self, state: SubscriptionState, value: T) -> None:
        if self.absent is not _KEEP and value == self.absent:
            state.stored.pop(self.key, None)
        else:
            state.stored[self.key] = value

    def __delete__(self, state: SubscriptionState) -> None:
        state.stored.pop(self.key, None)


class SubscriptionState:
    """The state of one subscription (one cursor), field by field, with the stored key each
    field is. Build it with state(c); new() gives the map a new subscription starts with."""
    __slots__ = ("stored",)

    # -- what Pulsar's stats report (SubscriptionStats, ManagedCursor's internal stats) ----------
    created: _Key[int] = _Key(
        "created", 0,
        """when the subscription was made (ms on the broker's clock).""")
    out: _Key[int] = _Key(
        "out", 0,
        """messages delivered, a batch's each: msgOutCounter (and the internal stats'
        messagesConsumedCounter).""")
    out_bytes: _Key[int] = _Key(
        "outBytes", 0,
        """payload bytes delivered: bytesOutCounter.""")
    last_ack: _Key[int] = _Key(
        "lastAck", 0,
        """when an ack last acknowledged something (ms): lastAckedTimestamp.""")
    last_consumed: _Key[int] = _Key(
        "lastConsumed", 0,
        """when a fetch last delivered something (ms): lastConsumedTimestamp.""")
    last_expire: _Key[int] = _Key(
        "lastExpire", 0,
        """when expire-messages last looked at a backlog (ms): lastExpireTimestamp.""")
    last_mark_delete_advanced: _Key[int] = _Key(
        "lastMarkDeleteAdvanced", 0,
        """when an ack or an expiry last moved the mark-delete position
        (ms; not skip, clear-backlog or a reset): lastMarkDeleteAdvancedTimestamp.""")
    expired: _Key[int] = _Key(
        "expired", 0,
        """messages expired by TTL or expire-messages: totalMsgExpired.""")
    redelivered: _Key[int] = _Key(
        "redelivered", 0,
        """messages redelivered (a nack, an ack timeout, an explicit redelivery,
        each message once per redelivery); pulsarctl's counter, whose growth `top` shows as
        redeliveries per minute.""")

    # -- who consumes and how ------------------------------------------------------------------
    type: _Key[str | None] = _Key(
        "type", None,
        """the subscription type its consumers gave it (EXCLUSIVE ... KEY_SHARED); absent
        while no consumer ever attached (read it through type_of, stored_type, shown_type).""",
        absent=None)
    policy: _Key[dict] = _Key(
        "policy", {},
        """the consumers' policy, Pulsar's ConsumerConfigurationData by its Java names
        (negativeAckRedeliveryDelayMs, ackTimeoutMs, maxRedeliverCount, deadLetterTopic,
        retryLetterTopic, ...): pulsarctl/consumer_policy.py's ConsumerPolicy.to_store. Reading an
        absent one gives a fresh {}: assign a changed policy back.""")
    active: _Key[str | None] = _Key(
        "active", None,
        """the consumer an Exclusive or Failover subscription last made active (the
        dispatcher's activeConsumer: activeConsumerName); None once there was none.""")
    key_shared: _Key[dict | None] = _Key(
        "ks", None,
        """the Key_Shared selector as stored (dispatch/key_shared.py): its "policy"
        (auto-split, sticky...), "members" in order of arrival, the selector's "state" and
        "draining" while a newcomer waits for messages held by others to be acked.""")

    # -- the unacked limits (maxUnackedMessagesPerSubscription / PerConsumer) -------------------
    blocked_subscription: _Key[bool] = _Key(
        "blockedSub", False,
        """the subscription reached maxUnackedMessagesPerSubscription and gets nothing
        until its unacked messages fall to half: blockedSubscriptionOnUnackedMsgs.""",
        absent=False)
    blocked_consumers: _Key[list] = _Key(
        "blocked", [],
        """the consumers that reached maxUnackedMessagesPerConsumer, each until its
        unacked messages fall to half (each one's blockedConsumerOnUnackedMsgs).""",
        absent=[])

    # -- what other tables hold for the subscription, so the hot paths look only when so -------
    counted: _Key[bool] = _Key(
        "counted", False,
        """some message was redelivered, so redelivery counts exist and acks forget
        them (redelivery_state); never cleared.""",
        absent=False)
    nacked: _Key[bool] = _Key(
        "nacked", False,
        """some pending record may be nacked; a rewind keeps those held.""",
        absent=False)
    held_to: _Key[int | None] = _Key(
        "heldTo", None,
        """the highest offset at or past the read position that a held nack or the
        delayed index keeps (subscriptions.rewind); absent when there is none.""",
        absent=None)
    batch_acks: _Key[bool] = _Key(
        "batchAcks", False,
        """some batch entry has indexes acked one by one (batch-index acks,
        acknowledgmentAtBatchIndexLevelEnabled).""",
        absent=False)
    batch_queued: _Key[bool] = _Key(
        "batchQueued", False,
        """a receive stopped inside a batch and queued its other messages for the
        same consumer (batches.take_queued).""",
        absent=False)

    # -- dead letters and retries (deadletter.py) ----------------------------------------------
    letter_producers: _Key[dict] = _Key(
        "dlqProducers", {},
        """dead letter topic -> the name of the producer that publishes there, kept
        from one move to the next as the client's dead letter producer is.""")
    letter_round_robin: _Key[int] = _Key(
        "letterRR", 0,
        """the letter producers' round-robin counter over a partitioned letter topic's
        partitions.""")

    def __init__(self, stored: dict):
        self.stored = stored  # the cursor's own map: what is assigned here is saved with it

    def __repr__(self) -> str:
        return f"SubscriptionState({self.stored!r})"

    @classmethod
    def from_stored(cls, stored: dict) -> SubscriptionState:
        """The record over a stored map (kept as it is, unknown keys included)."""
        return cls(stored)

    def to_stored(self) -> dict:
        """The map to store: the very one read, with every change made through the record."""
        return self.stored

    @classmethod
    def new(cls, now: int, policy: dict) -> SubscriptionState:
        """A new subscription's state: its counters at zero, made at now, with policy (where
        the namespace's or topic's dead letter policy starts it)."""
        return cls({cls.created.key: now, cls.out.key: 0, cls.out_bytes.key: 0,
                    cls.last_ack.key: 0, cls.last_consumed.key: 0, cls.policy.key: policy})


def state(c) -> SubscriptionState:
    """The state of subscription c (a cursor), read and written in its stored map; saved with
    the cursor (ctx.cursors.save)."""
    return SubscriptionState(c.props)


def start(c, now: int, policy: dict) -> SubscriptionState:
    """Give the new subscription c its first state (SubscriptionState.new)."""
    s = SubscriptionState.new(now, policy)
    c.props = s.stored
    return s


# -- the type ------------------------------------------------------------------------------------
# Read per fetch: these look the key up directly rather than build a record each time.
_TYPE = SubscriptionState.type.key


def stored_type(c) -> str | None:
    """The type subscription c's consumers gave it; None while none ever attached."""
    return c.props.get(_TYPE)


def type_of(c) -> str:
    """The type the semantics read: the stored one, Exclusive while there is none."""
    return c.props.get(_TYPE) or EXCLUSIVE


def shown_type(c) -> str:
    """The type a subscription reports (stats, describe, the cursor picture, top): its
    consumers' type, or "None" while no consumer ever attached."""
    return c.props.get(_TYPE) or "None"


def set_type(c, sub_type: str) -> None:
    """Subscription c is of sub_type from now on (its first consumer's, or a new one's once
    the old consumers are gone); saved with the cursor."""
    state(c).type = sub_type


def clear_type(c) -> None:
    """Subscription c has no type (made with no consumer: "None" until one comes)."""
    del state(c).type


def single_active(c) -> bool:
    """Whether subscription c is Exclusive or Failover (one untyped yet reads as Exclusive)."""
    return type_of(c) in SINGLE_ACTIVE
