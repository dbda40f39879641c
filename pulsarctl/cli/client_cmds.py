"""pulsar-client's commands: produce, consume, read; and [new] receive, ack, nack."""
from __future__ import annotations

import sys
from typing import Annotated, List, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl.cli import render
from pulsarctl.cli.common import Output, Sub, Topic, fmt, positive, state
from pulsarctl.cli.consume_options import (
    CONSUME, RECEIVE, ConsumeOptions, FailIfEmpty, Hex, HideContent, IdleTimeout, Metadata, Regex,
    ValueSchema, takes,
)
from pulsarctl.errors import InvalidValue, UsageError

# The top-level commands this module owns; pulsarctl/cli/app.py joins them onto the root.
top = typer.Typer()


def _check_schema(ctx, topics, value_schema, regex=False) -> None:
    if value_schema is not None and not regex:
        state(ctx).broker().schemas.check_consumer(topics, value_schema)


@top.command(help="Produce messages to a topic (pulsar-client produce). Prints the message ids.")
def produce(
    ctx: typer.Context,
    topic: Topic,
    messages: Annotated[Optional[List[str]], typer.Option(
        "-m", "--messages", help="A message to send (repeatable; split with -s only).")] = None,
    files: Annotated[Optional[List[str]], typer.Option(
        "-f", "--files", help="A file per message (repeatable or comma-separated); - reads "
        "stdin, one message per line.")] = None,
    stdin: Annotated[bool, typer.Option("--stdin", help="Read messages from stdin, one per line.")] = False,
    ndjson: Annotated[bool, typer.Option("--ndjson", help="With --stdin: each line is a JSON "
                                         "message record.")] = False,
    separator: Annotated[Optional[str], typer.Option("-s", "--separator", help="Split each -m "
                                                     "value on this string.")] = None,
    num_produce: Annotated[int, typer.Option("-n", "--num-produce", help="Send the messages this "
                                             "many times.")] = 1,
    rate: Annotated[float, typer.Option("-r", "--rate", help="Messages per second at most "
                                        "(0: no limit).")] = 0.0,
    key: Annotated[Optional[str], typer.Option("-k", "--key", help="Partition key.")] = None,
    ordering_key: Annotated[Optional[str], typer.Option("--ordering-key", help="Ordering key "
                                                        "(Key_Shared).")] = None,
    properties: Annotated[Optional[List[str]], typer.Option(
        "-p", "--properties", help="Property key=value (repeatable; split on the first =).")] = None,
    event_time: Annotated[Optional[str], typer.Option("--event-time", help="Event time: ISO 8601 "
                                                      "or epoch ms.")] = None,
    deliver_after: Annotated[Optional[str], typer.Option("--deliver-after", help="Deliver after "
                                                         "this duration (Shared, Key_Shared).")] = None,
    deliver_at: Annotated[Optional[str], typer.Option("--deliver-at", help="Deliver at this time.")] = None,
    producer_name: Annotated[Optional[str], typer.Option("--producer-name", help="Producer name "
                                                         "(sequence ids continue per name).")] = None,
    sequence_id: Annotated[Optional[int], typer.Option("--sequence-id", help="Sequence id of the "
                                                       "first message; then +1 each.")] = None,
    chunking: Annotated[bool, typer.Option("-c", "--chunking", help="Split messages over the "
                                           "maximum size into chunks.")] = False,
    disable_batching: Annotated[bool, typer.Option(
        "-db", "--disable-batching", help="Send every message as its own entry (batching is on "
        "for --stdin, as in pulsar-client).")] = False,
    batching_max_messages: Annotated[Optional[int], typer.Option(
        "--batching-max-messages", help="[new] At most N messages per batch (default 1000); "
        "with -m/-f, asks for batches.", show_default=False)] = None,
    batching_max_bytes: Annotated[Optional[str], typer.Option(
        "--batching-max-bytes", help="[new] At most this many payload bytes per batch (default "
        "128K; 0: only maxMessageSize).", show_default=False)] = None,
    batching_max_publish_delay: Annotated[Optional[str], typer.Option(
        "--batching-max-publish-delay", help="[new] A batch waits at most this long for more "
        "messages (default 1ms).", show_default=False)] = None,
    batching_type: Annotated[Optional[str], typer.Option(
        "--batching-type", help="[new] default|key-based: key-based batches per key (for "
        "Key_Shared subscriptions).", show_default=False)] = None,
    compression: Annotated[str, typer.Option("--compression", help="none|lz4|zlib|zstd|snappy")] = "none",
    access_mode: Annotated[str, typer.Option("--access-mode", help="Shared|Exclusive|"
                                             "WaitForExclusive|ExclusiveWithFencing")] = "Shared",
    routing_mode: Annotated[str, typer.Option("--routing-mode", help="RoundRobinPartition|"
                                              "SinglePartition (partitioned topics)")] = "RoundRobinPartition",
    hashing_scheme: Annotated[str, typer.Option("--hashing-scheme", help="JavaStringHash|"
                                                "Murmur3_32Hash (partitioned topics)")] = "JavaStringHash",
    value_schema: ValueSchema = None,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.produce_run import produce_main

    return produce_main(
        state(ctx), topic, fmt(ctx, output), messages=messages, files=files, stdin=stdin,
        ndjson=ndjson, separator=separator, num_produce=num_produce, rate=rate, key=key,
        ordering_key=ordering_key, properties=properties, event_time=event_time,
        deliver_after=deliver_after, deliver_at=deliver_at, producer_name=producer_name,
        sequence_id=sequence_id, chunking=chunking, disable_batching=disable_batching,
        batching_max_messages=batching_max_messages, batching_max_bytes=batching_max_bytes,
        batching_max_publish_delay=batching_max_publish_delay, batching_type=batching_type,
        compression=compression, access_mode=access_mode, routing_mode=routing_mode,
        hashing_scheme=hashing_scheme, value_schema=value_schema)


@top.command(help="Consume messages and ack each one after printing it (pulsar-client consume).")
@takes(CONSUME)
def consume(ctx: typer.Context, **flags):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.consume_run import run_consume

    _check_schema(ctx, flags["topics"], flags["value_schema"], flags["regex"])
    return run_consume(state(ctx), ConsumeOptions.from_flags(ctx, ack=True, **flags))


@top.command(help="Receive messages without acking them: they stay pending for the consumer "
             "(default name cli) until ack, nack or the end of its lease.")
@takes(RECEIVE)
def receive(ctx: typer.Context, **flags):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.consume_run import run_consume

    _check_schema(ctx, flags["topics"], flags["value_schema"], flags["regex"])
    return run_consume(state(ctx), ConsumeOptions.from_flags(ctx, ack=False, **flags))


def _ids_from(args: list[str]) -> list:
    """Message ids from arguments; '-' reads stdin: plain ids or message records."""
    import json  # lazy: loaded when the command runs, not when the command tree is built

    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.messages import parse_message_id

    ids = []
    for a in args:
        if a != "-":
            ids.append(parse_message_id(a))
            continue
        for n, line in enumerate(sys.stdin, 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    rec = json.loads(line)
                    text = rec["messageId"]
                except (ValueError, KeyError, TypeError):
                    raise InvalidValue(f"stdin line {n}: not a message record with a messageId") from None
                ids.append(parse_message_id(str(text)))
            else:
                ids.append(parse_message_id(line))
    return ids


@top.command(help="Acknowledge messages by id (individually, or --cumulative ID).")
def ack(
    ctx: typer.Context,
    topic: Topic,
    subscription: Sub,
    ids: Annotated[Optional[List[str]], typer.Argument(help="Message ids; - reads them from "
                                                       "stdin.", show_default=False)] = None,
    cumulative: Annotated[Optional[str], typer.Option("--cumulative", help="Ack everything up to "
                                                      "and including this id (Exclusive, Failover).")] = None,
    regex: Regex = False,
    output: Output = None,
):
    out = fmt(ctx, output)
    if cumulative and ids:
        raise UsageError("give message ids or --cumulative ID, not both")
    if cumulative:
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.messages import parse_message_id

        targets, cum = [parse_message_id(cumulative)], True
    else:
        targets, cum = _ids_from(ids or []), False
        if not targets:
            raise UsageError("no message ids to ack", hint="give ids as arguments or - for stdin")
    st = state(ctx)
    where = topic
    if regex:
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.client.client import _Pattern

        where = _Pattern(topic).matches(st.broker()) or [topic]
    n = st.broker().ack(where, subscription, targets, cumulative=cum)
    if out == render.TEXT:
        render.err(f"acked {n} message(s)" + (f" ({len(targets) - n} already acked)"
                                              if not cum and len(targets) > n else ""))
    else:
        render.data({"acked": n, "messageIds": [str(t) for t in targets],
                     "cumulative": cum}, out)


@top.command(help="Negatively acknowledge messages: redelivered after the nack delay or "
             "backoff, or moved to the dead letter topic past --max-redeliver-count.")
def nack(
    ctx: typer.Context, topic: Topic, subscription: Sub,
    ids: Annotated[Optional[List[str]], typer.Argument(help="Message ids; - reads them from "
                                                       "stdin.", show_default=False)] = None,
    regex: Regex = False,
    output: Output = None,
):
    out = fmt(ctx, output)
    targets = _ids_from(ids or [])
    if not targets:
        raise UsageError("no message ids to nack", hint="give ids as arguments or - for stdin")
    st = state(ctx)
    where = topic
    if regex:
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.client.client import _Pattern

        where = _Pattern(topic).matches(st.broker()) or [topic]
    n = st.broker().nack(where, subscription, targets)
    if out == render.TEXT:
        render.err(f"nacked {n} message(s)" + (f" ({len(targets) - n} not held by a consumer)"
                                               if len(targets) > n else ""))
    else:
        render.data({"nacked": n, "messageIds": [str(t) for t in targets]}, out)


@top.command(help="Read messages with a non-durable reader; leaves nothing behind. On a "
             "partitioned topic it reads every partition, as Pulsar's multi-topic reader does: "
             "each partition's messages in their order, the partitions merged by publish time "
             "(then partition index); -m is earliest or latest there (a message id is one "
             "partition's: read that partition), and --until-end stops at each partition's "
             "last message.")
def read(
    ctx: typer.Context,
    topic: Topic,
    start: Annotated[str, typer.Option("-m", "--start-message-id", help="latest, earliest or a "
                                       "message id.")] = "latest",
    inclusive: Annotated[bool, typer.Option("-i", "--start-message-id-inclusive",
                                            help="Include the start message.")] = False,
    num_messages: Annotated[int, typer.Option("-n", "--num-messages", help="How many to read "
                                              "(0: forever, following new messages).")] = 1,
    until_end: Annotated[bool, typer.Option("--until-end", help="Stop at the last message present "
                                            "when the command started (of each partition).")] = False,
    idle_timeout: IdleTimeout = None,
    fail_if_empty: FailIfEmpty = False,
    hide_content: HideContent = False,
    hex_: Hex = False,
    metadata: Metadata = False,
    value_schema: ValueSchema = None,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.consume_run import run_read

    _check_schema(ctx, topic, value_schema)
    out = fmt(ctx, output)
    positive(num_messages, "-n/--num-messages")
    return run_read(state(ctx), topic, start, inclusive, num_messages, until_end, idle_timeout,
                    fail_if_empty, hide_content, hex_, metadata, out)


@top.command("redeliver-unacked", help="Redeliver a consumer's (or every consumer's) unacked "
             "messages now, counted as redeliveries.")
def redeliver_unacked(
    ctx: typer.Context, topic: Topic, subscription: Sub,
    consumer_name: Annotated[Optional[str], typer.Option("--consumer-name", help="Only this "
                                                         "consumer's messages.")] = None,
    output: Output = None,
):
    n = state(ctx).broker().redeliver_unacked(topic, subscription, consumer_name)
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.err(f"redelivering {n} message(s)")
    else:
        render.data({"redelivered": n}, out)


@top.command("reconsume-later", short_help="Move messages to the retry letter topic, delivered "
             "again after --delay (needs --enable-retry).", help="Move messages to the retry letter topic, delivered again "
             "after --delay (past the limit: to the dead letter topic); needs --enable-retry.")
def reconsume_later(
    ctx: typer.Context, topic: Topic, subscription: Sub,
    ids: Annotated[Optional[List[str]], typer.Argument(help="Message ids; - reads them from "
                                                       "stdin.", show_default=False)] = None,
    delay: Annotated[Optional[str], typer.Option("--delay", help="Deliver again after this "
                                                 "long (default 0).")] = None,
    delay_level: Annotated[Optional[int], typer.Option(
        "--delay-level", help="Wait TDMQ delay level N (1-based) of the store's messageDelayLevel "
        "list (default 1s 5s 10s 30s 1m ... 2h).")] = None,
    level_increment: Annotated[bool, typer.Option(
        "--delay-level-increment", help="Each retry waits one level longer (level = "
        "RECONSUMETIMES).")] = False,
    properties: Annotated[Optional[List[str]], typer.Option(
        "-p", "--properties", help="Property key=value to add (repeatable).")] = None,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_duration_ms, parse_property

    out = fmt(ctx, output)
    targets = _ids_from(ids or [])
    if not targets:
        raise UsageError("no message ids to reconsume", hint="give ids as arguments or - for stdin")
    if sum(x is not None and x is not False for x in (delay, delay_level, level_increment or None)) > 1:
        raise UsageError("give one of --delay, --delay-level and --delay-level-increment")
    delay_ms = parse_duration_ms(delay, "--delay") if delay else 0
    props = dict(parse_property(p) for p in properties or [])
    res = state(ctx).broker().reconsume_later(topic, subscription, targets, delay_ms, props,
                                              delay_level, level_increment)
    if out == render.TEXT:
        render.err(f"{res['retry']} message(s) to the retry topic, {res['dlq']} to the dead "
                   f"letter topic")
    else:
        render.data(res, out)
