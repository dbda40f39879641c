"""A consumer's policy, Pulsar's ConsumerConfigurationData as the subscription keeps it: the
negative-ack delay and backoff, the ack timeout with its tick and backoff, the dead letter
policy (maxRedeliverCount, deadLetterTopic, initialSubscriptionName) and retry (enableRetry,
retryLetterTopic).

One record, three ways in and one way out:
- from_flags: the command line's text (`consume`/`receive` --nack-delay ... --retry-letter-topic),
  parsed and checked;
- from_client: the Python API's arguments (pulsar-client's negative_ack_redelivery_delay_ms,
  dead_letter_policy, unacked_messages_timeout_ms, ...), checked;
- from_store: the dict stored in the subscription cursor's props["policy"], trusted (it was
  checked on the way in);
- to_store: that dict, by Pulsar's Java names, exactly as it has always been stored. The
  broker's trackers (nacks, unacked, deadletter, retry) read the stored dict.

Every check of a value happens here, once (validate, and the parsers from_flags calls), with
the messages and exit codes the command line and the Python API have always given. A field left
out (None) keeps the stored value: the latest consumer's flags win, field by field (merge).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from pulsarctl.errors import InvalidPolicy
from pulsarctl.broker.nacks import MIN_NACK_DELAY_MS
from pulsarctl.broker.backoff import parse_backoff
from pulsarctl.names import parse_topic
from pulsarctl.units import parse_duration_ms
from pulsarctl.broker import unacked

# (field, stored name), in the order the command line has always stored them.
STORED = (
    ("nack_delay_ms", "negativeAckRedeliveryDelayMs"),
    ("nack_backoff", "negativeAckBackoff"),
    ("max_redeliver_count", "maxRedeliverCount"),
    ("dead_letter_topic", "deadLetterTopic"),
    ("initial_subscription_name", "initialSubscriptionName"),
    ("ack_timeout_ms", "ackTimeoutMs"),
    ("ack_timeout_tick_ms", "ackTimeoutTickMs"),
    ("ack_timeout_backoff", "ackTimeoutBackoff"),
    ("enable_retry", "enableRetry"),
    ("retry_letter_topic", "retryLetterTopic"),
    ("read_compacted", "readCompacted"),
)
_FIELD = {stored: name for name, stored in STORED}
# The Python API has always stored the ack timeout after the retry settings.
_CLIENT_ORDER = tuple(s for _, s in STORED if s not in ("ackTimeoutMs", "ackTimeoutTickMs",
                                                       "ackTimeoutBackoff")) + ("ackTimeoutMs",)

# How each side names the max redeliver count in its messages.
FLAG_NAMES = {"max_redeliver_count": "--max-redeliver-count"}
CLIENT_NAMES = {"max_redeliver_count": "max_redeliver_count"}


def check_max_redeliver_count(n, name: str) -> int:
    """maxRedeliverCount must be greater than 0 (ConsumerBuilder's deadLetterPolicy check)."""
    if n is None or int(n) < 1:
        raise InvalidPolicy(f"{name} must be greater than 0")
    return int(n)


def clamp_nack_delay(ms: int) -> int:
    """The nack delay, raised to NegativeAcksTracker's minimum (100 ms)."""
    return max(int(ms), MIN_NACK_DELAY_MS)


@dataclass(frozen=True)
class ConsumerPolicy:
    nack_delay_ms: int | None = None
    nack_backoff: tuple | None = None           # (min ms, max ms, multiplier)
    max_redeliver_count: int | None = None
    dead_letter_topic: str | None = None
    initial_subscription_name: str | None = None
    ack_timeout_ms: int | None = None
    ack_timeout_tick_ms: int | None = None
    ack_timeout_backoff: tuple | None = None    # (min ms, max ms, multiplier)
    enable_retry: bool | None = None
    retry_letter_topic: str | None = None
    read_compacted: bool | None = None          # read the compacted view (compaction.py)
    # The stored names in the order they were first given: to_store keeps it, so a
    # subscription's policy reads (`subscriptions describe`) as it always has.
    order: tuple = field(default=(), compare=False, repr=False)

    # -- in ----------------------------------------------------------------------------------
    @classmethod
    def from_flags(cls, *, nack_delay=None, nack_backoff=None, max_redeliver_count=None,
                   dead_letter_topic=None, initial_subscription_name=None, ack_timeout=None,
                   ack_timeout_tick=None, ack_timeout_backoff=None, enable_retry=False,
                   retry_letter_topic=None) -> "ConsumerPolicy":
        """The policy flags of consume and receive (text as typed), parsed and checked; a flag
        left out stays None (the stored value is kept)."""
        def duration(text, flag):
            return parse_duration_ms(text, flag) if text else None

        def backoff(text):
            return tuple(parse_backoff(text)) if text else None

        def topic(name):
            return str(parse_topic(name)) if name else None

        nack = duration(nack_delay, "--nack-delay")
        return cls(
            nack_delay_ms=clamp_nack_delay(nack) if nack is not None else None,
            nack_backoff=backoff(nack_backoff),
            max_redeliver_count=max_redeliver_count,
            dead_letter_topic=str(parse_topic(dead_letter_topic))  # "" is refused too
            if dead_letter_topic is not None else None,
            initial_subscription_name=initial_subscription_name,
            ack_timeout_ms=duration(ack_timeout, "--ack-timeout"),
            ack_timeout_tick_ms=duration(ack_timeout_tick, "--ack-timeout-tick"),
            ack_timeout_backoff=backoff(ack_timeout_backoff),
            enable_retry=True if enable_retry or retry_letter_topic else None,
            retry_letter_topic=topic(retry_letter_topic),
        ).validate(FLAG_NAMES)

    @classmethod
    def from_client(cls, *, negative_ack_redelivery_delay_ms=None, negative_ack_backoff=None,
                    dead_letter_policy=None, unacked_messages_timeout_ms=None,
                    enable_retry=False, retry_letter_topic=None,
                    read_compacted=False) -> "ConsumerPolicy":
        """The Python API's subscribe() arguments, as pulsar-client names them, checked.
        dead_letter_policy is a ConsumerDeadLetterPolicy (checked when it was made)."""
        dlp = dead_letter_policy
        policy = cls(
            nack_delay_ms=clamp_nack_delay(negative_ack_redelivery_delay_ms)
            if negative_ack_redelivery_delay_ms is not None else None,
            nack_backoff=tuple(negative_ack_backoff) if negative_ack_backoff is not None else None,
            max_redeliver_count=dlp.max_redeliver_count if dlp is not None else None,
            dead_letter_topic=dlp.dead_letter_topic if dlp is not None else None,
            initial_subscription_name=dlp.initial_subscription_name if dlp is not None else None,
            enable_retry=True if enable_retry or retry_letter_topic else None,
            retry_letter_topic=retry_letter_topic or None,
            ack_timeout_ms=int(unacked_messages_timeout_ms)
            if unacked_messages_timeout_ms is not None else None,
            read_compacted=True if read_compacted else None,
            order=_CLIENT_ORDER)
        policy.validate(CLIENT_NAMES)
        return policy

    @classmethod
    def from_store(cls, stored: dict | None) -> "ConsumerPolicy":
        """The policy a subscription stores (its cursor's props["policy"]); names this record
        does not know are left out."""
        stored = stored or {}
        values = {}
        for key, v in stored.items():
            name = _FIELD.get(key)
            if name is not None and v is not None:
                values[name] = tuple(v) if name in ("nack_backoff", "ack_timeout_backoff") else v
        return cls(**values, order=tuple(k for k in stored if k in _FIELD))

    # -- checks ------------------------------------------------------------------------------
    def validate(self, names: dict = FLAG_NAMES) -> "ConsumerPolicy":
        """Check every value set, as Pulsar's ConsumerBuilder does; names says how the caller
        spells the settings in its messages (the flags, or the Python API's arguments)."""
        unacked.check(self.ack_timeout_ms, self.ack_timeout_tick_ms)
        if self.max_redeliver_count is not None:
            check_max_redeliver_count(self.max_redeliver_count, names["max_redeliver_count"])
        return self

    # -- out ---------------------------------------------------------------------------------
    def merge(self, other: "ConsumerPolicy | dict | None") -> "ConsumerPolicy":
        """This policy with every value other sets (a dict is a stored one) put over it."""
        if other is None:
            return self
        if isinstance(other, dict):
            other = ConsumerPolicy.from_store(other)
        given = {f.name: getattr(other, f.name) for f in fields(other)
                 if f.name != "order" and getattr(other, f.name) is not None}
        mine = self.stored_names()
        order = mine + tuple(k for k in other.stored_names() if k not in mine)
        return replace(self, **given, order=order)

    def stored_names(self) -> tuple:
        """The stored names of the values set, in to_store's order."""
        ranked = {k: i for i, k in enumerate(self.order)}
        ranked.update({s: len(self.order) + i for i, (_, s) in enumerate(STORED)
                       if s not in ranked})
        return tuple(sorted((s for n, s in STORED if getattr(self, n) is not None),
                            key=ranked.__getitem__))

    def to_store(self) -> dict:
        """The dict the subscription stores, by Pulsar's Java names; values left out (None)
        are not in it, so the stored ones stay."""
        out = {}
        for key in self.stored_names():
            v = getattr(self, _FIELD[key])
            out[key] = list(v) if isinstance(v, tuple) else v
        return out

