"""pulsar-admin topics: skip, clear-backlog, reset-cursor, expire-messages, terminate,
examine-message (the semantics are in pulsarctl/broker/cursor_admin.py)."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsarctl.cli import render
from pulsarctl.cli.common import done, Output, Sub, Topic, fmt, positive, state
from pulsarctl.cli.topics_cmd import topics




def _messages(n: int) -> str:
    return f"{n} message{'' if n == 1 else 's'}"


@topics.command(help="Skip the next N unacknowledged messages of a subscription (acknowledge "
                     "them).")
def skip(
    ctx: typer.Context, topic: Topic, subscription: Sub,
    count: Annotated[int, typer.Option("-n", "--count", help="How many messages to skip.",
                                       show_default=False)],
    output: Output = None,
):
    positive(count, "-n/--count", allow_zero=False)
    d = state(ctx).broker().subscription(topic, subscription).skip(count)
    done(ctx, output, d, f"skipped {_messages(d['skipped'])} on {subscription}; "
                             f"backlog now {d['msgBacklog']}")


@topics.command("clear-backlog", help="Acknowledge everything in a subscription's backlog "
                                      "(mark-delete to the last message).")
def clear_backlog(ctx: typer.Context, topic: Topic, subscription: Sub, output: Output = None):
    d = state(ctx).broker().subscription(topic, subscription).clear_backlog()
    done(ctx, output, d, f"cleared {_messages(d['cleared'])} on {subscription}; "
                             f"backlog now {d['msgBacklog']}")


@topics.command("reset-cursor", help="Move a subscription back or forward: to the messages "
                                     "published after a time (-t), or to a message id (-m), "
                                     "which is delivered next. Pending redeliveries are dropped.")
def reset_cursor(
    ctx: typer.Context, topic: Topic, subscription: Sub,
    time: Annotated[Optional[str], typer.Option(
        "-t", "--time", help="A duration ago (10m, 2h, 1d; a bare number is seconds), ISO 8601 "
        "or epoch ms: messages published after it are delivered again.",
        show_default=False)] = None,
    message_id: Annotated[Optional[str], typer.Option(
        "-m", "--messageId", "--message-id", help="The message id to deliver next (ledgerId:"
        "entryId[:partition]), or earliest or latest.", show_default=False)] = None,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.errors import InvalidValue
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.messages import parse_message_id

    if (time is None) == (message_id is None):
        raise InvalidValue("reset-cursor needs exactly one of -t/--time and -m/--messageId",
                           hint="e.g. `-t 10m` or `-m 7:12`")
    mid = parse_message_id(message_id) if message_id is not None else None
    d = state(ctx).broker().subscription(topic, subscription).reset_cursor(time_ms=time, message_id=mid)
    nxt = d.get("nextMessageId")
    where = (f"to {nxt}" if nxt else "past the last message" if "partitions" not in d
             else f"on {len(d['partitions'])} partition(s)")
    done(ctx, output, d, f"reset {subscription} {where}; backlog now {d['msgBacklog']}")


@topics.command("expire-messages", help="Acknowledge the messages of a subscription published "
                                        "longer ago than the expiry time.")
def expire_messages(
    ctx: typer.Context, topic: Topic, subscription: Sub,
    expire_time: Annotated[str, typer.Option(
        "-t", "--expireTime", "--expire-time", help="Expire messages older than this (10s, 5m, "
        "2h, 1d; a bare number is seconds; 0 expires every message published until "
        "now, as in Pulsar).",
        show_default=False)],
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_duration_ms

    ttl = parse_duration_ms(expire_time, "expiry time")
    d = state(ctx).broker().subscription(topic, subscription).expire_messages(ttl)
    done(ctx, output, d, f"expired {_messages(d['expired'])} on {subscription}; "
                             f"backlog now {d['msgBacklog']}")


@topics.command(help="Terminate a topic: it takes no more messages. Prints the last message id.")
def terminate(ctx: typer.Context, topic: Topic, output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.names import parse_topic

    mid = state(ctx).broker().topics.terminate(topic)
    name = str(parse_topic(topic))
    out = fmt(ctx, output)
    # A partitioned topic answers with each partition's last message id.
    last = {k: str(v) for k, v in mid.items()} if isinstance(mid, dict) else str(mid)
    if out == render.TEXT:
        render.outln("\n".join(last.values()) if isinstance(last, dict) else last)
        render.err(render.safe(f"terminated {name}; it accepts no more messages"))
    else:
        render.data({"topic": name, "terminated": True, "lastMessageId": last}, out)


@topics.command("examine-message", help="Show the Nth message counted from the earliest or the "
                                        "latest one; changes nothing.")
def examine_message(
    ctx: typer.Context, topic: Topic,
    initial_position: Annotated[str, typer.Option(
        "-i", "--initialPosition", "--initial-position",
        help="latest|earliest (default latest, as pulsar-admin): count from the last or the "
        "first message.")] = "latest",
    position: Annotated[int, typer.Option(
        "-m", "--messagePosition", "--message-position",
        help="Which message: 1 is the last (latest) or the first (earliest).")] = 1,
    output: Output = None,
):
    m = state(ctx).broker().topics.examine_message(topic, initial_position, position)
    out = fmt(ctx, output)
    if out == render.JSON:
        render.json_doc(m.record())
    else:
        render.message(m, out, with_id=True, metadata=True)


@topics.command(help="Compact a topic now: keep the latest message of each key (an empty "
                     "payload removes its key) for readers and consumers that read compacted.")
def compact(ctx: typer.Context, topic: Topic, output: Output = None):
    d = state(ctx).broker().topics.compact(topic)
    done(ctx, output, d, f"compacted {topic}: {d['compactedMessages']} message(s) kept up to "
                         f"{d.get('compactionHorizon', 'the start')}")


@topics.command("compaction-status", help="The status of the topic's last compaction: "
                                          "NOT_RUN or SUCCESS, with its horizon.")
def compaction_status(ctx: typer.Context, topic: Topic, output: Output = None):
    render.data(state(ctx).broker().topics.compaction_status(topic), fmt(ctx, output))
