"""pulsar-admin topics."""
from __future__ import annotations

from typing import Annotated, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl.cli import render
from pulsarctl.cli.common import done, Force, Output, Sub, Topic, fmt, positive, state

topics = typer.Typer(help="Manage topics (pulsar-admin topics).", no_args_is_help=True)


@topics.command("list", help="List the topics of a namespace.")
def list_(ctx: typer.Context,
          namespace: Annotated[str, typer.Argument(help="tenant/namespace")] = "public/default",
          output: Output = None):
    render.names(state(ctx).broker().topics.list(namespace), fmt(ctx, output), "topic")


@topics.command(help="Create a non-partitioned topic.")
def create(ctx: typer.Context, topic: Topic, output: Output = None):
    name = state(ctx).broker().topics.create(topic)
    done(ctx, output, {"topic": name, "created": True}, f"created {name}")


@topics.command(help="Delete a topic (refused while it has subscriptions, unless --force).")
def delete(ctx: typer.Context, topic: Topic, force: Force = False, output: Output = None):
    name = state(ctx).broker().topics.delete(topic, force)
    done(ctx, output, {"topic": name, "deleted": True}, f"deleted {name}")




def _stats_text(s: dict) -> None:
    top = {k: v for k, v in s.items() if k not in ("subscriptions", "publishers", "replication")}
    render.kv(top, "topic")
    pubs = [[p.get("producerName", ""), p.get("accessMode", ""), p["msgRateIn"],
             p.get("address", ""), p.get("connectedSince", "")] for p in s["publishers"]]
    if pubs:
        render.table(["producer", "accessMode", "msgRateIn", "address", "connectedSince"], pubs,
                     "publishers")
    rows = [[name, x["type"], x["msgBacklog"], x["unackedMessages"], len(x["consumers"]),
             x["msgOutCounter"]] for name, x in s["subscriptions"].items()]
    if rows:
        render.table(["subscription", "type", "backlog", "unacked", "consumers", "out"], rows,
                     "subscriptions")


@topics.command(help="Topic statistics, with pulsar-admin's JSON keys.")
def stats(ctx: typer.Context, topic: Topic, output: Output = None):
    render.data(state(ctx).broker().topics.stats(topic), fmt(ctx, output), _stats_text)


def _internal_text(s: dict) -> None:
    if "partitions" in s:  # a partitioned topic: each partition's, one after the other
        render.kv(s["metadata"], "partitioned topic")
        for name, p in s["partitions"].items():
            render.outln("")
            render.outln(render.safe(name))
            _internal_text(p)
        return
    render.kv({k: v for k, v in s.items() if k not in ("ledgers", "cursors")}, "managed ledger")
    render.table(["ledgerId", "entries", "size"],
                 [[x["ledgerId"], x["entries"], x["size"]] for x in s["ledgers"]], "ledgers")
    if s["cursors"]:
        render.table(["cursor", "markDeletePosition", "readPosition", "individuallyDeletedMessages"],
                     [[n, c["markDeletePosition"], c["readPosition"], c["individuallyDeletedMessages"]]
                      for n, c in s["cursors"].items()], "cursors")


@topics.command("stats-internal", help="Internal stats: ledgers and cursors.")
def stats_internal(ctx: typer.Context, topic: Topic, output: Output = None):
    render.data(state(ctx).broker().topics.internal_stats(topic), fmt(ctx, output), _internal_text)


@topics.command(help="List the subscriptions of a topic.")
def subscriptions(ctx: typer.Context, topic: Topic, output: Output = None):
    render.names(state(ctx).broker().topics.subscriptions(topic), fmt(ctx, output), "subscription")


@topics.command("create-subscription", help="Create a durable subscription.")
def create_subscription(
    ctx: typer.Context, topic: Topic, subscription: Sub,
    message_id: Annotated[str, typer.Option("-m", "--messageId", "--message-id",
                                            help="latest, earliest or a message id to start at.")] = "latest",
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.messages import parse_message_id
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.names import check_subscription

    check_subscription(subscription)
    pos = parse_message_id(message_id)
    state(ctx).broker().subscription(topic, subscription).create(pos)
    done(ctx, output, {"topic": topic, "subscription": subscription, "created": True},
          f"created subscription {subscription} on {topic}")


@topics.command(help="Delete a subscription (refused while consumers are connected, unless --force).")
def unsubscribe(ctx: typer.Context, topic: Topic, subscription: Sub, force: Force = False,
                output: Output = None):
    state(ctx).broker().subscription(topic, subscription).unsubscribe(force)
    done(ctx, output, {"topic": topic, "subscription": subscription, "deleted": True},
          f"deleted subscription {subscription} on {topic}")


def _messages(msgs, out, show_id=True) -> None:
    if out == render.JSON:
        render.json_doc([m.record() for m in msgs])
        return
    for m in msgs:
        render.message(m, out, with_id=show_id, metadata=True)


@topics.command("peek-messages", help="Show the next messages of a subscription; changes nothing.")
def peek_messages(
    ctx: typer.Context, topic: Topic, subscription: Sub,
    count: Annotated[int, typer.Option("-n", "--count", help="How many.")] = 1,
    output: Output = None,
):
    positive(count, "-n/--count", allow_zero=False)
    _messages(state(ctx).broker().subscription(topic, subscription).peek(count), fmt(ctx, output))


@topics.command("get-message-by-id", help="Get one message by ledger and entry id.")
def get_message_by_id(
    ctx: typer.Context, topic: Topic,
    ledger_id: Annotated[int, typer.Option("-l", "--ledgerId", "--ledger-id", help="Ledger id.")],
    entry_id: Annotated[int, typer.Option("-e", "--entryId", "--entry-id", help="Entry id.")],
    output: Output = None,
):
    m = state(ctx).broker().topics.get_message_by_id(topic, ledger_id, entry_id)
    out = fmt(ctx, output)
    if out == render.JSON:
        render.json_doc(m.record())
    else:
        render.message(m, out, with_id=True, metadata=True)


@topics.command("last-message-id", help="The id of the last message of a topic.")
def last_message_id(ctx: typer.Context, topic: Topic, output: Output = None):
    mid = state(ctx).broker().topics.last_message_id(topic)
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.outln(str(mid))
    else:
        render.data({"ledgerId": mid.ledger_id, "entryId": mid.entry_id,
                     "partitionIndex": mid.partition, "messageId": str(mid)}, out)


Partitions = Annotated[int, typer.Option("-p", "--partitions", help="Number of partitions.",
                                         show_default=False)]


@topics.command("create-partitioned-topic", help="Create a partitioned topic of N partitions.")
def create_partitioned_topic(ctx: typer.Context, topic: Topic, partitions: Partitions,
                             output: Output = None):
    name = state(ctx).broker().topics.create_partitioned(topic, partitions)
    done(ctx, output, {"topic": name, "partitions": partitions},
          f"created {name} with {partitions} partitions")


@topics.command("update-partitioned-topic", help="Grow a partitioned topic (never shrinks).")
def update_partitioned_topic(ctx: typer.Context, topic: Topic, partitions: Partitions,
                             output: Output = None):
    n = state(ctx).broker().topics.update_partitioned(topic, partitions)
    done(ctx, output, {"topic": topic, "partitions": n}, f"{topic} now has {n} partitions")


@topics.command("get-partitioned-topic-metadata",
                help="Number of partitions (0 for a topic that is not partitioned).")
def get_partitioned_topic_metadata(ctx: typer.Context, topic: Topic, output: Output = None):
    render.data(state(ctx).broker().topics.partitioned_metadata(topic), fmt(ctx, output))


@topics.command("delete-partitioned-topic", help="Delete a partitioned topic and its partitions.")
def delete_partitioned_topic(ctx: typer.Context, topic: Topic, force: Force = False,
                             output: Output = None):
    name = state(ctx).broker().topics.delete(topic, force)
    done(ctx, output, {"topic": name, "deleted": True}, f"deleted {name}")


@topics.command("list-partitioned-topics", help="List the partitioned topics of a namespace.")
def list_partitioned_topics(ctx: typer.Context,
                            namespace: Annotated[str, typer.Argument(help="tenant/namespace")] = "public/default",
                            output: Output = None):
    render.names(state(ctx).broker().topics.list_partitioned(namespace), fmt(ctx, output), "topic")


@topics.command("partitioned-stats", help="Stats of a partitioned topic, added up over its "
                "partitions (--per-partition: each too).")
def partitioned_stats(ctx: typer.Context, topic: Topic,
                      per_partition: Annotated[bool, typer.Option("--per-partition",
                                                                  help="Show each partition.")] = False,
                      output: Output = None):
    def text(s):
        _stats_text(s)
        for name, p in s.get("partitions", {}).items():
            render.outln("")
            render.outln(render.safe(name))
            _stats_text(p)
    render.data(state(ctx).broker().topics.partitioned_stats(topic, per_partition), fmt(ctx, output), text)


def _offload_text(r: dict) -> None:
    if not r["ledgers"]:
        render.outln(f"nothing to offload in {r['topic']}")
        return
    render.table(["topic", "ledgerId", "entries", "size", "file"],
                 [[x["topic"], x["ledgerId"], x["entries"], x["size"], x["file"]]
                  for x in r["ledgers"]], "offloaded")
    render.outln(f"offloaded {len(r['ledgers'])} ledger(s), {r['entries']:,} entries, "
                 f"{r['bytes']:,} bytes to {r['directory']}")


@topics.command(help="Offload a topic's oldest closed ledgers to Parquet files (tiered "
                "storage): the files are written and synced, then the ledgers leave the store. "
                "Readers and consumers go on seeing them. Needs pyarrow (the spark extra).")
def offload(ctx: typer.Context, topic: Topic,
            to: Annotated[str, typer.Option("--to", help="Directory for the Parquet files and "
                                            "their manifest.json.", metavar="DIR",
                                            show_default=False)],
            size_threshold: Annotated[Optional[str], typer.Option(
                "--size-threshold", "-s", help="Keep at most this many bytes in the store "
                "(e.g. 10M); older ledgers are offloaded.", metavar="SIZE",
                show_default=False)] = None,
            older_than: Annotated[Optional[str], typer.Option(
                "--older-than", help="Offload ledgers whose messages are all older than this "
                "(e.g. 7d).", metavar="DURATION", show_default=False)] = None,
            output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_duration_ms, parse_size

    size = parse_size(size_threshold, "--size-threshold") if size_threshold is not None else None
    age = parse_duration_ms(older_than, "--older-than") if older_than is not None else None
    r = state(ctx).broker().topics.offload(topic, to, size, age)
    render.data(r, fmt(ctx, output), _offload_text)


def _offload_status_text(r: dict) -> None:
    render.table(["topic", "offloadedLedgers", "offloadedEntries", "offloadedSize",
                  "localLedgers", "localSize"],
                 [[p["topic"], len(p["offloadedLedgers"]), p["offloadedEntries"],
                   p["offloadedSize"], p["localLedgers"], p["localSize"]]
                  for p in r["partitions"]], "offload")


@topics.command("offload-status", help="What of a topic is offloaded, and where.")
def offload_status(ctx: typer.Context, topic: Topic, output: Output = None):
    render.data(state(ctx).broker().topics.offload_status(topic), fmt(ctx, output),
                _offload_status_text)
