"""pulsarctl spark export|dlq-report|dlq-reprocess|bench: Spark jobs over the store's topics
(pulsarctl/spark). pyspark is imported only inside the commands; without it they exit 1 with
one line saying to install pulsarctl[spark]."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsarctl.cli import render
from pulsarctl.cli.common import Output, fmt, positive, state
from pulsarctl.errors import InvalidValue, PulsarctlError

spark_app = typer.Typer(short_help="Spark jobs over topics: export, dead letter reports and "
                        "reprocessing.", help="Spark jobs over topics: export, dead letter reports and "
                        "reprocessing (needs pyspark: install the spark extra of pulsarctl).",
                        no_args_is_help=True)

Master = Annotated[Optional[str], typer.Option(
    "--master", help="Spark master (default local[*]).", metavar="URL", show_default=False)]
Topic = Annotated[str, typer.Argument(help="Topic: t, tenant/ns/t or persistent://tenant/ns/t.",
                                      show_default=False)]
Dlq = Annotated[str, typer.Argument(metavar="DLQ", help="The dead letter topic.",
                                    show_default=False)]


def _store(ctx) -> str:
    import os  # lazy: loaded when the command runs, not when the command tree is built

    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.config import resolve_store

    return os.path.abspath(resolve_store(state(ctx).store))


def _session(master: str | None, quiet: bool):
    """A Spark session (the one already running in this process, if any) and whether we made
    it (then we stop it when the command ends). Quiet: Spark logs nothing (an error is our one
    line on stderr); --traceback keeps its ERROR lines."""
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import spark as ps

    ps.require()
    # lazy: loaded when the command runs, not when the command tree is built
    from pyspark.sql import SparkSession

    running = SparkSession.getActiveSession()
    if running is not None:
        ps.register(running)
        return running, False
    return ps.session("pulsarctl", master=master, log_level="OFF" if quiet else "ERROR"), True


class _Spark:
    def __init__(self, ctx, master):
        self.master = master
        self.quiet = not state(ctx).traceback

    def __enter__(self):
        self.spark, self.own = _session(self.master, self.quiet)
        return self.spark

    def __exit__(self, *exc):
        if self.own:
            self.spark.stop()
        return False


def _require() -> None:
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import spark as ps

    ps.require()


@spark_app.command("export", help="Write a topic's messages to Parquet or JSON files (the "
                   "bounds are fixed when the job starts).")
def export_cmd(
    ctx: typer.Context,
    topic: Topic,
    out: Annotated[str, typer.Option("--out", help="Output directory.", metavar="DIR",
                                     show_default=False)],
    format_: Annotated[str, typer.Option("--format", help="parquet or json.",
                                         metavar="FORMAT")] = "parquet",
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace DIR if it exists.")]
    = False,
    start: Annotated[Optional[str], typer.Option(
        "--starting-offsets", help="earliest, or JSON of topic to message id (inclusive).",
        show_default=False)] = None,
    end: Annotated[Optional[str], typer.Option(
        "--ending-offsets", help="latest, or JSON of topic to message id (exclusive).",
        show_default=False)] = None,
    start_time: Annotated[Optional[str], typer.Option(
        "--start-time", help="Publish time from (epoch ms or ISO 8601).", show_default=False)]
    = None,
    end_time: Annotated[Optional[str], typer.Option(
        "--end-time", help="Publish time before (epoch ms or ISO 8601).", show_default=False)]
    = None,
    master: Master = None,
    output: Output = None,
):
    if format_ not in ("parquet", "json"):
        raise InvalidValue(f"unknown --format {format_!r}", hint="use parquet or json")
    _require()
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.spark import jobs

    store = _store(ctx)
    jobs.precheck(store, topic)
    with _Spark(ctx, master) as spark:
        r = jobs.export(spark, store, topic, format_, out, overwrite, start, end, start_time,
                        end_time)
    of = fmt(ctx, output)
    if of == render.TEXT:
        render.err(render.safe(f"exported {r['rows']} message(s) of {r['topic']} to {r['out']} "
                               f"({r['format']})"))
    else:
        render.data(r, of)


def _report_text(r: dict) -> None:
    render.table(["hour", "REAL_TOPIC", "REAL_SUBSCRIPTION", r["reasonProperty"], "count"],
                 [[x["hour"], x["realTopic"], x["realSubscription"], x["reason"], x["count"]]
                  for x in r["rows"]],
                 title=f"{r['topic']}: {r['messages']} dead letter(s)")


@spark_app.command("dlq-report", help="Count a DLQ's waiting dead letters by REAL_TOPIC, "
                   "REAL_SUBSCRIPTION, a reason property and hour.")
def dlq_report_cmd(
    ctx: typer.Context,
    dlq: Dlq,
    reason: Annotated[str, typer.Option(
        "--reason-property", help="The property holding the failure reason.", metavar="NAME")]
    = "reason",
    everything: Annotated[bool, typer.Option(
        "--all", help="Every stored dead letter, also the handled ones.")] = False,
    png: Annotated[Optional[str], typer.Option(
        "--png", help="Also draw a bar chart to FILE (needs matplotlib).", metavar="FILE",
        show_default=False)] = None,
    master: Master = None,
    output: Output = None,
):
    _require()
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.spark import jobs

    if png:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise PulsarctlError("--png needs matplotlib, which is not installed",
                                      hint="pip install matplotlib, or leave out --png") from None
    store = _store(ctx)
    jobs.precheck(store, dlq, dlq=True)
    with _Spark(ctx, master) as spark:
        r = jobs.dlq_report(spark, store, dlq, reason, everything)
    if png:
        jobs.chart(r, png)
    of = fmt(ctx, output)
    render.data(r if of == render.JSON else r["rows"] if of == render.NDJSON else r, of,
                _report_text)


@spark_app.command("dlq-reprocess", short_help="Pass a DLQ's waiting dead letters through a "
                   "transform and write them to their topics.", help="Pass a DLQ's waiting dead letters through a "
                   "transform and write them to their REAL_TOPIC (or the __topic the transform "
                   "sets), then acknowledge them on pulsarctl-dlq.")
def dlq_reprocess_cmd(
    ctx: typer.Context,
    dlq: Dlq,
    transform: Annotated[Optional[str], typer.Option(
        "--transform", help="module:function taking and returning a DataFrame; the module "
        "may sit in the current directory (default: the messages as they are).",
        metavar="MODULE:FUNCTION", show_default=False)] = None,
    no_wait: Annotated[bool, typer.Option(
        "--no-wait", help="Exit 5 at once when another dlq command holds this DLQ's lock.")]
    = False,
    master: Master = None,
    output: Output = None,
):
    _require()
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.spark import jobs

    store = _store(ctx)
    jobs.precheck(store, dlq, dlq=True)
    if transform:
        jobs.find_transform(transform)  # a missing module fails before Spark starts
    with _Spark(ctx, master) as spark:
        r = jobs.dlq_reprocess(spark, store, dlq, transform, wait=not no_wait)
    of = fmt(ctx, output)
    if of == render.TEXT:
        where = ", ".join(f"{v} to {k}" for k, v in r["topics"].items()) or "nothing written"
        render.err(render.safe(f"reprocessed {r['read']} dead letter(s) of {r['topic']}: "
                               f"{where}; {r['acknowledged']} acknowledged on pulsarctl-dlq"))
    else:
        render.data(r, of)


@spark_app.command("bench", help="Read N messages through the data source, through a data "
                   "source that does no work, and from Parquet; write N rows; print rows per "
                   "second.")
def bench_cmd(
    ctx: typer.Context,
    num: Annotated[int, typer.Option("-n", "--num-messages", help="Messages.")] = 1_000_000,
    size: Annotated[int, typer.Option("-s", "--size", help="Payload bytes.")] = 100,
    repeat: Annotated[int, typer.Option("--repeat", help="Timed rounds of every read after "
                                        "two warm-up rounds.")] = 3,
    master: Master = None,
    output: Output = None,
):
    positive(num, "-n", allow_zero=False)
    positive(size, "-s")
    positive(repeat, "--repeat", allow_zero=False)
    _require()
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.spark import bench

    with _Spark(ctx, master) as spark:
        r = bench.run(num, size, None, repeat, master, spark=spark)

    def text(d):
        n = f"{d['messages']:,}"
        for key, label in (("read", f"read    {n} msgs"),
                           ("readTwoColumns", f"read    {n} msgs, value + __publishTime only"),
                           ("readBatched", f"read    {n} msgs in batches of 1000"),
                           ("readCeiling", f"ceiling {n} rows (a source doing no work)"),
                           ("parquet", f"parquet {n} rows")):
            t = d[key]
            render.outln(f"{label}: {t['seconds']} s best, {t['medianSeconds']} s median, "
                         f"{t['rowsPerSec']:,} rows/s")
        render.outln(f"source at {d['readVsParquet']:.0%} of Parquet "
                     f"({d['readVsParquetMedian']:.0%} by medians); ceiling at "
                     f"{d['ceilingVsParquet']:.0%} ({d['ceilingVsParquetMedian']:.0%})")
        render.outln(f"write   {d['write']['rows']:,} rows: {d['write']['seconds']} s, "
                     f"{d['write']['rowsPerSec']:,} rows/s")
    render.data(r, fmt(ctx, output), text)
