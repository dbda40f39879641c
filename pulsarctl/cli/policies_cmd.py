"""Namespace and topic policies: pulsar-admin's set-/get-/remove- commands, once for
`namespaces NS` and once for `topics TOPIC` (topic values override the namespace's)."""

from typing import Annotated, Optional

import typer

from pulsarctl.broker import policies as P
from pulsarctl.cli import render
from pulsarctl.cli.common import Output, done, fmt, state
from pulsarctl.cli.tenants_cmd import namespaces
from pulsarctl.cli.topics_cmd import topics
from pulsarctl.errors import InvalidValue
from pulsarctl.units import parse_duration_ms, parse_size

_Target = {
    "namespace": Annotated[str, typer.Argument(metavar="NAMESPACE", help="tenant/namespace",
                                               show_default=False)],
    "topic": Annotated[str, typer.Argument(metavar="TOPIC", help="Topic name.",
                                           show_default=False)],
}
Applied = Annotated[bool, typer.Option("-ap", "--applied",
                                       help="Show the value in force (topic, else namespace, "
                                       "else broker default).")]
Enable = Annotated[bool, typer.Option("-e", "--enable", help="Enable it.")]
Disable = Annotated[bool, typer.Option("-d", "--disable", help="Disable it.")]
QuotaType = Annotated[str, typer.Option("-t", "--type",
                                        help="destination_storage or message_age.")]


def _seconds(text: str, what: str) -> int:
    """A policy kept in whole seconds (as Pulsar's): 1500ms is refused rather than cut to 1 s
    (and 500ms to 0, which would switch a TTL off)."""
    ms = parse_duration_ms(text, what)
    if ms % 1000:
        raise InvalidValue(f"the {what} is kept in whole seconds, not {text!r}",
                           hint="e.g. 1s, 90s, 5m")
    return ms // 1000


def _on_off(enable: bool, disable: bool) -> bool:
    if enable == disable:
        raise InvalidValue("give exactly one of --enable and --disable")
    return enable


def _retention(time: str, size: str) -> dict:
    t = -1 if time.strip() == "-1" else _seconds(time, "retention time") // 60
    s = -1 if size.strip() == "-1" else parse_size(size, "retention size") // (1024 * 1024)
    return {"retentionTimeInMinutes": t, "retentionSizeInMB": s}


def _noun(scope: str) -> str:
    return "namespace" if scope == "namespace" else "topic"


def _setter(scope: str):
    """set_(ctx, target, field, value, output, line): set the policy, say what was set."""
    def set_(ctx, target, field, value, output, line):
        v = state(ctx).admin().policies.set(scope, target, field, value)
        done(ctx, output, {_noun(scope): target, field: v}, line)
    return set_


def _register(group: typer.Typer, scope: str) -> None:
    """Every policy command of the namespaces or topics group, in the order of their help."""
    _register_get_remove(group, scope)
    _register_ttl_retention_dedup(group, scope)
    _register_quota_delayed_dlp(group, scope)
    _register_max_unacked(group, scope)


def _register_get_remove(group: typer.Typer, scope: str) -> None:
    Target, noun = _Target[scope], _noun(scope)

    # Each command is made by a function of its field: a parameter with a default (the usual
    # loop-variable trick) would become a command-line option (---field) of the command.
    def get_command(field):
        if scope == "namespace":
            def get_cmd(ctx: typer.Context, target: Target, output: Output = None):
                render.data(state(ctx).admin().policies.get(scope, target, field),
                            fmt(ctx, output))
        else:
            def get_cmd(ctx: typer.Context, target: Target, output: Output = None,
                        applied: Applied = False):
                render.data(state(ctx).admin().policies.get(scope, target, field, applied),
                            fmt(ctx, output))
        return get_cmd

    def remove_command(field, cli_name):
        def remove_cmd(ctx: typer.Context, target: Target, output: Output = None):
            state(ctx).admin().policies.remove(scope, target, field)
            done(ctx, output, {noun: target, "removed": field}, f"removed {cli_name} on {target}")
        return remove_cmd

    for cli_name, field in P.NAMES.items():
        name = "backlog-quotas" if cli_name == "backlog-quota" else cli_name
        group.command(f"get-{name}", help=f"Show the {noun}'s {cli_name} policy (null: not set)."
                      )(get_command(field))
        if cli_name == "backlog-quota":
            continue
        group.command(f"remove-{cli_name}", help=f"Remove the {noun}'s {cli_name} policy."
                      )(remove_command(field, cli_name))


def _register_ttl_retention_dedup(group: typer.Typer, scope: str) -> None:
    Target, set_ = _Target[scope], _setter(scope)
    ttl_flags = ("-ttl", "--messageTTL") if scope == "namespace" else ("-t", "--ttl")

    @group.command("set-message-ttl", help="Expire messages older than TTL on every "
                   "subscription (0: never).")
    def set_ttl(ctx: typer.Context, target: Target,
                ttl: Annotated[str, typer.Option(*ttl_flags, help="TTL: seconds or a duration "
                                                 "(1h).", show_default=False)],
                output: Output = None):
        secs = _seconds(ttl, "message TTL")
        set_(ctx, target, P.TTL, secs, output, f"message TTL of {target} is {secs} s")

    @group.command("set-retention", help="Keep acknowledged messages for TIME and up to SIZE "
                   "(-1: no limit; 0: none).")
    def set_retention(ctx: typer.Context, target: Target,
                      time: Annotated[str, typer.Option("-t", "--time", help="Retention time: "
                                                        "seconds or 100m, 3h, 2d; -1 forever.",
                                                        show_default=False)],
                      size: Annotated[str, typer.Option("-s", "--size", help="Retention size: "
                                                        "bytes or 10M, 1G; -1 no limit.",
                                                        show_default=False)],
                      output: Output = None):
        v = _retention(time, size)
        set_(ctx, target, P.RETENTION, v, output,
             f"retention of {target}: {v['retentionTimeInMinutes']} min, "
             f"{v['retentionSizeInMB']} MB")

    @group.command("set-deduplication", help="Drop messages whose producer sequence id was "
                   "already stored.")
    def set_dedup(ctx: typer.Context, target: Target, enable: Enable = False,
                  disable: Disable = False, output: Output = None):
        on = _on_off(enable, disable)
        set_(ctx, target, P.DEDUP, on, output,
             f"deduplication {'enabled' if on else 'disabled'} on {target}")


def _register_quota_delayed_dlp(group: typer.Typer, scope: str) -> None:
    Target, noun, set_ = _Target[scope], _noun(scope), _setter(scope)

    @group.command("set-backlog-quota", help="Limit the backlog by size or age, with what "
                   "happens when it is reached.")
    def set_quota(ctx: typer.Context, target: Target,
                  policy: Annotated[str, typer.Option("-p", "--policy", help="producer_request_"
                                                      "hold, producer_exception or consumer_"
                                                      "backlog_eviction.", show_default=False)],
                  limit: Annotated[Optional[str], typer.Option("-l", "--limit",
                                                               help="Size limit (10M, 2G).")]
                  = None,
                  limit_time: Annotated[Optional[str], typer.Option(
                      "-lt", "--limitTime", help="Age limit: seconds or a duration.")] = None,
                  type_: QuotaType = "destination_storage", output: Output = None):
        q = {"policy": policy,
             "limitSize": parse_size(limit, "backlog quota limit") if limit else -1,
             "limitTime": _seconds(limit_time, "backlog quota time") if limit_time else -1}
        set_(ctx, target, P.BACKLOG_QUOTA, {type_: q}, output,
             f"backlog quota {type_} on {target}: {policy}")

    @group.command("remove-backlog-quota", help="Remove one backlog quota.")
    def remove_quota(ctx: typer.Context, target: Target, type_: QuotaType = "destination_storage",
                     output: Output = None):
        state(ctx).admin().policies.remove(scope, target, P.BACKLOG_QUOTA, type_)
        done(ctx, output, {noun: target, "removed": type_},
             f"removed backlog quota {type_} on {target}")

    @group.command("set-delayed-delivery", help="Switch delayed delivery on or off, with its "
                   "tick time.")
    def set_delayed(ctx: typer.Context, target: Target, enable: Enable = False,
                    disable: Disable = False,
                    tick: Annotated[str, typer.Option("-t", "--time", help="Tick: a duration.")]
                    = "1s",
                    max_delay: Annotated[str, typer.Option("-md", "--maxDelay",
                                                           help="Longest delay allowed (0: "
                                                           "no limit).")] = "0",
                    output: Output = None):
        on = _on_off(enable, disable)
        v = {"active": on, "tickTime": parse_duration_ms(tick, "tick time"),
             "maxDeliveryDelayInMillis": parse_duration_ms(max_delay, "maximum delay")}
        set_(ctx, target, P.DELAYED, v, output,
             f"delayed delivery {'enabled' if on else 'disabled'} on {target}")

    @group.command("set-dead-letter-policy", help="Dead letter policy given to new "
                   "subscriptions that bring none of their own.")
    def set_dlp(ctx: typer.Context, target: Target,
                max_redeliver: Annotated[int, typer.Option(
                    "-m", "--max-redeliver-count", help="Deliveries before the DLQ, minus one.",
                    show_default=False)],
                dlq: Annotated[Optional[str], typer.Option("--dead-letter-topic",
                                                           help="DLQ topic name.")] = None,
                init: Annotated[Optional[str], typer.Option(
                    "--initial-subscription-name", help="Subscription created on the DLQ.")]
                = None,
                output: Output = None):
        v = {"maxRedeliverCount": max_redeliver, "deadLetterTopic": dlq,
             "initialSubscriptionName": init}
        set_(ctx, target, P.DEAD_LETTER, v, output, f"dead letter policy set on {target}")


def _register_max_unacked(group: typer.Typer, scope: str) -> None:
    Target, set_ = _Target[scope], _setter(scope)

    def set_max_command(field, cli_name):
        def set_max(ctx: typer.Context, target: Target,
                    n: Annotated[int, typer.Option("-m", "--max", help="Most unacked messages "
                                                   "(0: no limit).", show_default=False)],
                    output: Output = None):
            set_(ctx, target, field, n, output, f"{cli_name} of {target} is {n}")
        return set_max

    for cli_name, field, alias in (
            ("max-unacked-messages-per-consumer", P.MAX_UNACKED_CONSUMER,
             "max-unacked-messages-on-consumer"),
            ("max-unacked-messages-per-subscription", P.MAX_UNACKED_SUBSCRIPTION,
             "max-unacked-messages-on-subscription")):
        set_max = set_max_command(field, cli_name)
        help_ = ("Stop dispatching to a Shared or Key_Shared " +
                 ("consumer" if "consumer" in cli_name else "subscription") +
                 " with this many unacked messages, until half are acked.")
        group.command(f"set-{cli_name}", help=help_)(set_max)
        if scope == "topic":  # pulsar-admin topics spells these -on-
            group.command(f"set-{alias}", help=help_, hidden=True)(set_max)


_register(namespaces, "namespace")
_register(topics, "topic")


@topics.command("policies", help="Every policy in force on a topic (its own, else its "
                "namespace's, else the broker default).")
def topic_policies(ctx: typer.Context, topic: _Target["topic"], output: Output = None):
    render.data(state(ctx).admin().policies.applied(topic), fmt(ctx, output))
