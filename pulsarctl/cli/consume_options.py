"""The options of consume and receive, declared once: the flags both commands take (each
command's list below, in the order --help shows them) and ConsumeOptions, the one value their
loop (consume_run.run_consume) takes, every flag parsed and checked before anything is written.
The policy flags become a ConsumerPolicy (pulsarctl/consumer_policy.py)."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Annotated, List, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl.cli.common import Output, Sub, fmt, positive
from pulsarctl.consumer_policy import ConsumerPolicy
from pulsarctl.errors import InvalidValue, UsageError

SUB_TYPES = "Exclusive|Shared|Failover|Key_Shared"

# -- the flags -------------------------------------------------------------------------------
ValueSchema = Annotated[Optional[str], typer.Option(
    "--value-schema", help="bytes|string|json: the topic's schema type (a producer registers "
    "it; a different type is refused with exit 4).", show_default=False)]
SubType = Annotated[str, typer.Option("-t", "--subscription-type", help=SUB_TYPES)]
Position = Annotated[str, typer.Option("-p", "--subscription-position", help="Latest|Earliest "
                                       "(for a new subscription)")]
Mode = Annotated[str, typer.Option("-m", "--subscription-mode", help="Durable|NonDurable")]
IdleTimeout = Annotated[Optional[str], typer.Option("--idle-timeout", help="Exit when nothing "
                                                    "arrives for this long (real time).")]
FailIfEmpty = Annotated[bool, typer.Option("--fail-if-empty", help="Exit 6 if no message was "
                                           "received.")]
HideContent = Annotated[bool, typer.Option("--hide-content", help="Do not print payloads.")]
Hex = Annotated[bool, typer.Option("--hex", help="Print payloads as hex.")]
Metadata = Annotated[bool, typer.Option("-mp", "--print-metadata", help="Print message metadata.")]
Regex = Annotated[bool, typer.Option("--regex", help="TOPIC is a regular expression over full "
                                     "topic names of one namespace; new matches are picked up.")]
Topics = Annotated[List[str], typer.Argument(help="One or more topics (or one pattern with "
                                             "--regex).", show_default=False)]
NackDelay = Annotated[Optional[str], typer.Option(
    "--nack-delay", help="Redeliver a nacked message after this long (default 1m, minimum 100ms).")]
NackBackoff = Annotated[Optional[str], typer.Option(
    "--nack-backoff", help="MIN:MAX[:MULTIPLIER]: the nack delay grows with the redelivery count.")]
MaxRedeliver = Annotated[Optional[int], typer.Option(
    "--max-redeliver-count", help="Deliver a message at most N+1 times, then dead-letter it.")]
DeadLetterTopic = Annotated[Optional[str], typer.Option(
    "--dead-letter-topic", help="Dead letter topic (default <topic>-<subscription>-DLQ).")]
InitialSub = Annotated[Optional[str], typer.Option(
    "--initial-subscription-name", help="Create this subscription on the dead letter topic "
    "when it is created, so dead letters are retained.")]
EnableRetry = Annotated[bool, typer.Option(
    "--enable-retry", help="Also consume the retry letter topic; reconsume-later moves messages "
    "there.")]
RetryTopic = Annotated[Optional[str], typer.Option(
    "--retry-letter-topic", help="Retry letter topic (default <topic>-<subscription>-RETRY).")]
AckTimeout = Annotated[Optional[str], typer.Option(
    "--ack-timeout", help="Redeliver a message not acked this long after delivery (0: off).")]
AckTimeoutTick = Annotated[Optional[str], typer.Option(
    "--ack-timeout-tick", help="Ack timeout precision (default 1s, minimum 100ms).")]
AckTimeoutBackoff = Annotated[Optional[str], typer.Option(
    "--ack-timeout-backoff", help="MIN:MAX[:MULTIPLIER] added to the ack timeout by redelivery count.")]
KeySharedPolicy = Annotated[Optional[str], typer.Option(
    "--key-shared-policy", help="auto-split|consistent-hashing|sticky (Key_Shared).")]
StickyRanges = Annotated[Optional[str], typer.Option(
    "--sticky-ranges", help="Hash ranges A-B,C-D for --key-shared-policy sticky.")]
Priority = Annotated[int, typer.Option("--priority", help="Consumer priority level (0 is highest).")]


def _flag(name: str, annotation, default=inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                             default=default)


def _num(verb: str) -> inspect.Parameter:
    return _flag("num_messages", Annotated[int, typer.Option(
        "-n", "--num-messages", help=f"How many to {verb} (0: forever).")], 1)


_SUBSCRIPTION = [
    _flag("topics", Topics), _flag("subscription", Sub),
    _flag("sub_type", SubType, "Exclusive"), _flag("position", Position, "Latest"),
    _flag("mode", Mode, "Durable"),
]
_CONSUMER = [
    _flag("priority", Priority, 0), _flag("idle_timeout", IdleTimeout, None),
    _flag("fail_if_empty", FailIfEmpty, False), _flag("hide_content", HideContent, False),
    _flag("hex_", Hex, False), _flag("metadata", Metadata, False), _flag("regex", Regex, False),
    _flag("key_shared_policy", KeySharedPolicy, None), _flag("sticky_ranges", StickyRanges, None),
]
# The ConsumerPolicy's flags: their names are ConsumerPolicy.from_flags's arguments.
POLICY = [
    _flag("nack_delay", NackDelay, None), _flag("nack_backoff", NackBackoff, None),
    _flag("max_redeliver_count", MaxRedeliver, None),
    _flag("dead_letter_topic", DeadLetterTopic, None),
    _flag("initial_subscription_name", InitialSub, None),
    _flag("ack_timeout", AckTimeout, None), _flag("ack_timeout_tick", AckTimeoutTick, None),
    _flag("ack_timeout_backoff", AckTimeoutBackoff, None),
    _flag("enable_retry", EnableRetry, False), _flag("retry_letter_topic", RetryTopic, None),
]
_LAST = [_flag("value_schema", ValueSchema, None), _flag("output", Output, None)]

CONSUME = [
    *_SUBSCRIPTION, _num("consume"),
    _flag("consumer_name", Annotated[Optional[str], typer.Option(
        "--consumer-name", help="Consumer name (default: generated).")], None),
    *_CONSUMER, *POLICY,
    _flag("exec_retry_delay", Annotated[Optional[str], typer.Option(
        "--exec-retry-delay", help="With --exec and --enable-retry: how long an exit 75 waits "
        "(default the nack delay).")], None),
    _flag("exec_cmd", Annotated[Optional[str], typer.Option(
        "--exec", help="Run CMD per message (payload on stdin, metadata in PULSAR_* variables): "
        "exit 0 acks, 75 reconsumes later (nack without a retry topic), anything else nacks.")],
        None),
    *_LAST,
]
RECEIVE = [
    *_SUBSCRIPTION, _num("receive"),
    _flag("consumer_name", Annotated[str, typer.Option(
        "--consumer-name", help="Consumer name.")], "cli"),
    _flag("lease", Annotated[str, typer.Option(
        "--lease", help="How long the consumer stays connected after its last command.")], "5m"),
    *_CONSUMER, *POLICY, *_LAST,
]


def takes(flags: list[inspect.Parameter]):
    """Give a command body `def command(ctx, **flags)` these flags, as if each were written
    out in its signature: typer reads the signature."""
    def give(body):
        # The body's own annotation of ctx, still text: asking for typer.Context here would
        # load typer whenever this module is imported (declare.py).
        ctx = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=body.__annotations__["ctx"])
        body.__signature__ = inspect.Signature([ctx, *flags])
        return body
    return give


# -- the one value ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ConsumeOptions:
    """What consume (ack=True) and receive (ack=False) take, parsed and checked."""
    topic: object                 # a name, a list of names, or a compiled pattern (--regex)
    subscription: str
    sub_type: str                 # Exclusive|Shared|Failover|Key_Shared
    position: str                 # Latest|Earliest
    durable: bool                 # -m Durable (else a NonDurable reader of one topic)
    num: int                      # 0: forever
    consumer_name: str | None
    priority: int
    idle_timeout: str | None      # as given: said while waiting
    idle_ms: int | None
    fail_if_empty: bool
    hide_content: bool
    hex_: bool
    metadata: bool
    out: str                      # text|json|ndjson
    key_shared: dict | None       # the consumer's Key_Shared policy record
    policy: ConsumerPolicy
    ack: bool                     # consume acks each message; receive leaves it pending
    lease_ms: int | None = None   # receive: the consumer stays connected this long
    exec_cmd: str | None = None
    exec_retry_delay_ms: int | None = None

    @classmethod
    def from_flags(cls, ctx, *, ack: bool, topics, subscription, sub_type, position, mode,
                   num_messages, consumer_name, priority, idle_timeout, fail_if_empty,
                   hide_content, hex_, metadata, regex, key_shared_policy, sticky_ranges,
                   output, value_schema=None, lease=None, exec_cmd=None, exec_retry_delay=None,
                   **policy_flags) -> "ConsumeOptions":
        """Every check, in the order the command has always made them; nothing is written."""
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.broker.subscriptions import normalize_type
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.names import check_subscription
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.units import parse_duration_ms

        policy = ConsumerPolicy.from_flags(**policy_flags)
        out = fmt(ctx, output)
        positive(num_messages, "-n/--num-messages")
        topic = topic_arg(topics, regex)
        check_subscription(subscription)
        sub_type = normalize_type(sub_type)
        position = parse_position(position)
        idle_ms = parse_duration_ms(idle_timeout, "--idle-timeout") if idle_timeout else None
        lease_ms = parse_duration_ms(lease, "--lease") if lease else None
        if lease_ms is not None and lease_ms <= 0:
            raise InvalidValue("--lease must be positive")
        key_shared = key_shared_record(sub_type, key_shared_policy, sticky_ranges)
        durable = parse_mode(mode) == "Durable"
        if not durable and not isinstance(topic, str):
            raise InvalidValue("a NonDurable consumer reads one topic",
                               hint="name one topic, or use a Durable subscription")
        retry_delay = (parse_duration_ms(exec_retry_delay, "--exec-retry-delay")
                       if exec_cmd is not None and exec_retry_delay else None)
        return cls(topic, subscription, sub_type, position, durable, num_messages, consumer_name,
                   priority, idle_timeout, idle_ms, fail_if_empty, hide_content, hex_, metadata,
                   out, key_shared, policy, ack, lease_ms, exec_cmd, retry_delay)

    def show(self, with_id: bool) -> dict:
        """How render.message prints each message."""
        return dict(hide_content=self.hide_content, hex_=self.hex_, metadata=self.metadata,
                    with_id=with_id)


def topic_arg(topics: list[str], regex: bool):
    """One topic, several, or (with --regex) one pattern, as the client takes them."""
    if regex:
        if len(topics) != 1:
            raise UsageError("--regex takes exactly one pattern",
                             hint="e.g. --regex 'persistent://public/default/orders-.*'")
        import re  # lazy: loaded when the command runs, not when the command tree is built

        try:
            return re.compile(topics[0])
        except re.error as exc:
            raise InvalidValue(f"invalid topic pattern {topics[0]!r}: {exc}") from None
    return topics[0] if len(topics) == 1 else list(topics)


def parse_mode(mode: str) -> str:
    for m in ("Durable", "NonDurable"):
        if mode.lower() == m.lower():
            return m
    raise InvalidValue(f"unknown subscription mode {mode!r}", hint="use Durable or NonDurable")


def parse_position(position: str) -> str:
    for p in ("Latest", "Earliest"):
        if position.lower() == p.lower():
            return p
    raise InvalidValue(f"unknown subscription position {position!r}", hint="use Latest or Earliest")


def key_shared_record(sub_type, policy, ranges):
    """--key-shared-policy / --sticky-ranges as the consumer's policy record."""
    if policy is None and ranges is None:
        return None
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.broker.dispatch.selectors import parse_sticky_ranges

    names = ("auto-split", "consistent-hashing", "sticky")
    policy = policy or ("sticky" if ranges else "auto-split")
    if policy not in names:
        raise InvalidValue(f"unknown --key-shared-policy {policy!r}",
                           hint="use auto-split, consistent-hashing or sticky")
    if sub_type != "Key_Shared":
        raise InvalidValue("--key-shared-policy and --sticky-ranges need -t Key_Shared")
    if policy == "sticky":
        if not ranges:
            raise InvalidValue("Ranges for KeyShared policy must not be empty.",
                               hint="give --sticky-ranges A-B,C-D within 0-65535")
        return {"keySharedPolicy": "sticky", "ranges": [list(r) for r in parse_sticky_ranges(ranges)]}
    if ranges:
        raise InvalidValue("--sticky-ranges needs --key-shared-policy sticky")
    return {"keySharedPolicy": policy}
