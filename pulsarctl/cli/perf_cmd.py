"""pulsarctl perf produce|consume: throughput and latency on this store."""
from __future__ import annotations

import sys
from typing import Annotated

import typer

from pulsarctl.cli import render
from pulsarctl.cli.common import Output, fmt, positive, state

perf = typer.Typer(help="Benchmarks in the spirit of pulsar-perf.", no_args_is_help=True)


def _text(r: dict) -> None:
    lat = r.get("latencyMs", {})
    render.outln(f"{r['messages']} msgs in {r['seconds']} s: {r['msgPerSec']:,.0f} msg/s, "
                 f"{r['mbPerSec']:.2f} MB/s")
    if lat:
        render.outln("latency ms: " + ", ".join(f"{k} {v}" for k, v in lat.items()))
    if "storedBytesPerMessage" in r:
        how = (f"batches of {r['batchingMaxMessages']}" if r.get("batching")
               else "no batching")
        render.outln(f"stored {r['storedBytesPerMessage']} bytes per {r['size']}-byte message "
                     f"({r['compression']}, {how})")


def _progress(total: int, label: str):
    if not sys.stderr.isatty():
        return None, None
    # lazy: loaded when the command runs, not when the command tree is built
    from rich.progress import Progress

    p = Progress(transient=True, console=render._console(stderr=True))
    task = p.add_task(label, total=total or None)
    p.start()
    return p, (lambda done: p.update(task, completed=done))


@perf.command("produce", help="Produce N messages of S bytes, -b per transaction, in batch "
              "entries unless -db; print msg/s, MB/s, latency, stored bytes per message.")
def perf_produce(
    ctx: typer.Context,
    topic: Annotated[str, typer.Argument(help="Topic.")] = "perf",
    num: Annotated[int, typer.Option("-n", "--num-messages", help="Messages.")] = 100_000,
    size: Annotated[int, typer.Option("-s", "--size", help="Payload bytes.")] = 100,
    batch: Annotated[int, typer.Option("-b", "--batch", help="Messages per transaction.")] = 1000,
    compression: Annotated[str, typer.Option("--compression",
                                             help="none|lz4|zlib|zstd|snappy")] = "none",
    disable_batching: Annotated[bool, typer.Option(
        "-db", "--disable-batching", help="Store every message as its own entry (batching is "
        "on by default, as in pulsar-perf).")] = False,
    batching_max_messages: Annotated[int, typer.Option(
        "--batching-max-messages", help="Messages per batch.")] = 1000,
    batching_max_bytes: Annotated[str, typer.Option(
        "--batching-max-bytes", help="Payload bytes per batch (0: only maxMessageSize).")] = "128K",
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import perf as bench
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.broker.batches import check
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.compression import code_of
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_size

    code_of(compression)

    positive(num, "-n", allow_zero=False)
    positive(size, "-s")
    positive(batch, "-b", allow_zero=False)
    max_bytes = parse_size(batching_max_bytes, "--batching-max-bytes")
    check(batching_max_messages, max_bytes, 0, names=(
        "--batching-max-messages", "--batching-max-bytes", "", ""))
    p, cb = _progress(num, "producing")
    try:
        r = bench.produce(state(ctx).client(), topic, num, size, batch, cb, compression,
                          not disable_batching, batching_max_messages, max_bytes)
    finally:
        if p:
            p.stop()
    render.data(r, fmt(ctx, output), _text)


@perf.command("consume", help="Consume and ack (per message) N messages from the earliest.")
def perf_consume(
    ctx: typer.Context,
    topic: Annotated[str, typer.Argument(help="Topic.")] = "perf",
    subscription: Annotated[str, typer.Option("-s", "--subscription", help="Subscription.")] = "perf",
    num: Annotated[int, typer.Option("-n", "--num-messages", help="Messages (0: until idle 1s).")] = 0,
    sub_type: Annotated[str, typer.Option("-t", "--subscription-type", help="Type.")] = "Exclusive",
    queue: Annotated[int, typer.Option("-q", "--receiver-queue-size", help="Prefetch.")] = 1000,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import perf as bench
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.broker.subscriptions import normalize_type

    positive(num, "-n")
    positive(queue, "-q", allow_zero=False)
    p, cb = _progress(num, "consuming")
    try:
        r = bench.consume(state(ctx).client(), topic, subscription, num, normalize_type(sub_type),
                          queue, cb)
    finally:
        if p:
            p.stop()
    render.data(r, fmt(ctx, output), _text)


@perf.command("timers", help="Fire N due nack timers at once (as `daemon run-once` does), on a "
              "scratch store with a simulated clock; print timers/s.")
def perf_timers(
    ctx: typer.Context,
    num: Annotated[int, typer.Option("-n", "--num-timers", help="Timers.")] = 100_000,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import perf as bench

    positive(num, "-n", allow_zero=False)
    p, cb = _progress(num, "setting up")
    try:
        r = bench.timers(num, cb)
    finally:
        if p:
            p.stop()
    render.data(r, fmt(ctx, output), lambda d: render.outln(
        f"fired {d['fired']:,} timers in {d['fireSeconds']} s: {d['timersPerSec']:,} timers/s "
        f"(nack of {d['timers']:,} ids: {d['nackSeconds']} s)"))


@perf.command("delayed", help="Dispatch due messages while N delayed ones wait, on a scratch "
              "store with a simulated clock.")
def perf_delayed(
    ctx: typer.Context,
    num: Annotated[int, typer.Option("-n", "--num-delayed", help="Delayed messages.")] = 1_000_000,
    due: Annotated[int, typer.Option("--due", help="Messages due now.")] = 1000,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import perf as bench

    positive(num, "-n", allow_zero=False)
    positive(due, "--due", allow_zero=False)
    p, cb = _progress(num, "publishing")
    try:
        r = bench.delayed(num, due, cb)
    finally:
        if p:
            p.stop()
    render.data(r, fmt(ctx, output), lambda d: render.outln(
        f"{d['due']} due messages dispatched in {d['dueDispatchMs']} ms while {d['delayed']:,} "
        f"wait (one-time indexing {d['indexingSeconds']} s; the first 1,000 once due: "
        f"{d['firstThousandOnceDueMs']} ms)"))


@perf.command("compare", help="Run pulsarctl's main paths side by side with their limits in one "
              "run, on a scratch store: `produce --stdin` and `consume` + ack (whole commands) "
              "against raw LMDB appends and read + ack, the library API's send() against raw "
              "one-message commits, its batched send_async and receive + acknowledge against "
              "the real pulsar-client at --service-url (pulsar-lite or serve), and with --spark "
              "the Spark read against a data source doing no work. Prints each rate, its limit "
              "and the ratio; -o json: {\"rows\": [{\"workload\", \"pulsarctl\", \"limit\", "
              "\"limitIs\", \"ratio\", \"goal\", ...}]}.")
def perf_compare(
    ctx: typer.Context,
    num: Annotated[int, typer.Option("-n", "--num-messages",
                                     help="Messages for produce --stdin and consume.")] = 200_000,
    size: Annotated[int, typer.Option("-s", "--size", help="Payload bytes.")] = 100,
    api_num: Annotated[int, typer.Option("--api-messages",
                                         help="Messages for the library API runs.")] = 50_000,
    sends: Annotated[int, typer.Option("--sends", help="One-at-a-time send()s.")] = 2000,
    rounds: Annotated[int, typer.Option("-r", "--rounds",
                                        help="Alternating rounds (each figure: the median).")] = 1,
    service_url: Annotated[str, typer.Option(
        "--service-url", help="A Pulsar service URL for the peer of the library API runs "
        "(needs pulsar-client).", show_default=False)] = "",
    spark: Annotated[bool, typer.Option("--spark", help="Also the Spark read (needs the spark "
                                                        "extra; starts a local session).")] = False,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import perf_compare

    for value, name in ((num, "-n"), (size, "-s"), (api_num, "--api-messages"),
                        (sends, "--sends"), (rounds, "--rounds")):
        positive(value, name, allow_zero=name == "-s")
    say = (lambda label: render.err(f"perf compare: {label}")) if sys.stderr.isatty() else None
    r = perf_compare.compare(num, size, api_num, sends, rounds, service_url or None, spark,
                             progress=say)
    render.data(r, fmt(ctx, output), _compare_text)


def _compare_text(d: dict) -> None:
    render.outln(f"{'workload':<15} {'pulsarctl':>11} {'limit':>11} {'ratio':>6} {'goal':>6}  "
                 f"limit is")
    for row in d["rows"]:
        goal = row.get("goal")
        if row.get("goalRate"):
            goal_text = f"{row['goalRate']:,}/s"
        elif row.get("goalMs"):
            goal_text = f"<{row['goalMs']}ms"
        else:
            goal_text = f"{goal:.2f}" if goal else "-"
        limit = f"{row['limit']:,}" if row["limit"] else "-"
        ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "-"
        render.outln(f"{row['workload']:<15} {row['pulsarctl']:>11,} {limit:>11} {ratio:>6} "
                     f"{goal_text:>6}  {row['limitIs']}")
    units = ", ".join(dict.fromkeys(r["unit"] for r in d["rows"])) or "msg/s"
    render.outln(f"({d['rounds']} round(s); {units}; ratio = pulsarctl / limit; "
                 "start-up rows: lower is better, the goal a maximum)")
