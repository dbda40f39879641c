"""Jobs built on the data source: export a topic to files, report on a dead letter topic, and
reprocess a dead letter topic into the topics its messages came from.

Each job takes a SparkSession (with the source registered) and a store path, checks what it
can before Spark starts working (so bad input is one clear error), and returns a document for
the CLI to render. Nothing here prints.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from contextlib import contextmanager

import importlib
import importlib.util
from pulsarctl.errors import (
    InvalidValue, JobFailed, PulsarctlError, TopicNotFound, UsageError,
)
from pulsarctl.names import REAL_SUBSCRIPTION, REAL_TOPIC, parse_topic
from pulsarctl.spark import _access as access

EXPORT_FORMATS = ("parquet", "json")
DLQ_SUBSCRIPTION = "pulsarctl-dlq"
NO_VALUE = "(none)"          # as `dlq stats` shows a missing property
DEFAULT_REASON = "reason"    # the property a dead letter's failure reason is read from


@contextmanager
def spark_errors(what: str):
    """Turn an error Spark raises into one pulsarctl error: ours when a task raised one (its
    class and message are in Spark's text), else Spark's first line."""
    try:
        yield
    except PulsarctlError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyspark and py4j raise many kinds
        mod = type(exc).__module__ or ""
        if not (mod.startswith("pyspark") or mod.startswith("py4j")):
            raise
        text = str(exc)

        m = re.search(r"(pulsarctl(?:\.\w+)*)\.(\w+): (.+?)(?:\n|$)", text)
        if m:
            try:
                cls = getattr(importlib.import_module(m.group(1)), m.group(2), None)
            except ImportError:
                cls = None
            if isinstance(cls, type) and issubclass(cls, PulsarctlError):
                raise cls(m.group(3)) from None
        raise JobFailed(f"{what} failed: {summary(text, type(exc).__name__)[:300]}") from None


_PY_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b.*)$")
_JAVA_RAISED = re.compile(r"^(?:Caused by: |: )?((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*"
                          r"(?:Exception|Error)\b.*)$")


def summary(text: str, fallback: str) -> str:
    """The line of a Spark error that says what went wrong: the exception a Python worker's
    traceback ends with (a transform's own error), else the innermost Java cause (Caused by:),
    else the first Java exception, else the first line. Spark's own first lines ("An error
    occurred while calling o65.parquet.", "An exception was thrown from the Python worker:")
    say only where it went wrong."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    raised = []
    for i, ln in enumerate(lines):
        if "Traceback (most recent call last):" in ln:
            # What the traceback ends with: its first line that is not a frame (indented).
            end = next((x for x in lines[i + 1:] if not x[0].isspace()), "")
            if (m := _PY_RAISED.match(end)) and "Traceback (most recent" not in end:
                raised.append(m.group(1))
    if raised:
        return raised[-1]  # of chained exceptions, the last one raised
    java = [(ln.startswith("Caused by: "), m.group(1)) for ln in lines
            if (m := _JAVA_RAISED.match(ln.strip()))]
    causes = [c for is_cause, c in java if is_cause]
    if causes:
        return causes[-1]
    if java:
        return java[0][1]
    return lines[0].strip() if lines else fallback


def _load(spark, store: str, **options):
    """The topic as a DataFrame; offloaded ledgers through Spark's Parquet reader."""
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.spark.tiered import read_topic

    return read_topic(spark, store, **options)


# -- export ------------------------------------------------------------------------------------
def export(spark, store: str, topic: str, fmt: str, out: str, overwrite: bool = False,
           starting_offsets=None, ending_offsets=None, starting_time=None,
           ending_time=None) -> dict:
    """Write a topic's messages (bounds fixed when the job starts) as Parquet or JSON files
    under out. JSON writes value as base64, as Spark writes binary columns."""
    if fmt not in EXPORT_FORMATS:
        raise InvalidValue(f"unknown export format {fmt!r}", hint="use parquet or json")
    t = parse_topic(topic)
    b = access.broker(store)
    access.resolve_parts(b, "names", [t])  # TopicNotFound now, not inside a Spark task
    if os.path.exists(out) and not overwrite and (not os.path.isdir(out) or os.listdir(out)):
        raise InvalidValue(f"{out} exists", hint="remove it, or pass --overwrite")
    with spark_errors("export"):
        df = _load(spark, store, topic=str(t), startingOffsets=starting_offsets,
                   endingOffsets=ending_offsets, startingTime=starting_time,
                   endingTime=ending_time)
        w = df.write.mode("overwrite" if overwrite or os.path.isdir(out) else "errorifexists")
        (w.parquet if fmt == "parquet" else w.json)(out)
        rows = spark.read.format(fmt).load(out).count() if fmt == "parquet" else \
            spark.read.text(out).count()
    return {"topic": str(t), "format": fmt, "out": os.path.abspath(out), "rows": rows}


# -- the waiting dead letters --------------------------------------------------------------------
def _dlq_frame(spark, store: str, dlq: str, everything: bool = False, split_entries=None):
    """The DLQ's waiting dead letters (all stored ones with everything) as a DataFrame, with
    bounds fixed now. Returns (DataFrame, part, runs)."""
    from pyspark.sql import functions as F  # lazy: pyspark is costly to import or optional

    b = access.broker(store)
    part, runs = access.dlq_waiting(b, dlq)
    if everything:
        runs = [(part.first, part.next)] if part.next > part.first else []
    if not runs:
        return None, part, runs
    lo, hi = runs[0][0], runs[-1][1]
    options = {"topic": part.name,
               "startingOffsets": json.dumps({part.name: access.boundary_id(part, lo)}),
               "endingOffsets": json.dumps({part.name: access.boundary_id(part, hi)})}
    if split_entries:
        options["splitEntries"] = str(split_entries)
    # The data source itself (offloaded ledgers included, read in its workers): its fixed
    # splits are what makes a rerun's producers and sequence ids the same.
    r = spark.read.format("pulsarctl").option("store", store)
    for k, v in options.items():
        r = r.option(k, v)
    df = r.load()
    # Offsets inside the bounds that pulsarctl-dlq already acknowledged are left out.
    gaps = [(a[1], z[0]) for a, z in zip(runs, runs[1:])]
    handled = [i for s, e in gaps for i in access.ids_between(part, s, e)]
    if handled:
        ids = [str(i) for i in handled]
        if len(ids) <= 10_000:
            df = df.where(~F.col("__messageId").isin(ids))
        else:
            skip = spark.createDataFrame([(i,) for i in ids], "__messageId string")
            df = df.join(F.broadcast(skip), "__messageId", "left_anti")
    return df, part, runs


# -- dlq-report ----------------------------------------------------------------------------------
def dlq_report(spark, store: str, dlq: str, reason_property: str = DEFAULT_REASON,
               everything: bool = False) -> dict:
    """Counts of the DLQ's waiting dead letters by REAL_TOPIC, REAL_SUBSCRIPTION, the reason
    property and the hour (UTC) they landed in the DLQ."""
    from pyspark.sql import functions as F  # lazy: pyspark is costly to import or optional

    with spark_errors("dlq-report"):
        df, part, runs = _dlq_frame(spark, store, dlq, everything)
        rows = []
        if df is not None:
            props = F.col("__messageProperties")
            grouped = (df.select(
                F.date_format(F.date_trunc("hour", "__publishTime"),
                              "yyyy-MM-dd'T'HH:00:00'Z'").alias("hour"),
                F.coalesce(props[REAL_TOPIC], F.lit(NO_VALUE)).alias("realTopic"),
                F.coalesce(props[REAL_SUBSCRIPTION], F.lit(NO_VALUE)).alias("realSubscription"),
                F.coalesce(props[reason_property], F.lit(NO_VALUE)).alias("reason"))
                .groupBy("hour", "realTopic", "realSubscription", "reason").count()
                .orderBy("hour", F.desc("count"), "realTopic", "realSubscription", "reason"))
            rows = [r.asDict() for r in grouped.collect()]
    return {"topic": part.name, "reasonProperty": reason_property,
            "messages": sum(r["count"] for r in rows), "rows": rows}


def chart(report: dict, path: str) -> str:
    """A PNG bar chart of the report: dead letters per hour, stacked by REAL_TOPIC."""
    try:
        import matplotlib  # lazy: matplotlib is costly to import or optional
    except ImportError:
        raise PulsarctlError("--png needs matplotlib, which is not installed",
                             hint="pip install matplotlib, or leave out --png") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib is costly to import or optional

    hours = sorted({r["hour"] for r in report["rows"]})
    topics = sorted({r["realTopic"] for r in report["rows"]})
    counts = {(r["hour"], r["realTopic"]): 0 for r in report["rows"]}
    for r in report["rows"]:
        counts[(r["hour"], r["realTopic"])] += r["count"]
    fig, ax = plt.subplots(figsize=(max(6, len(hours) * 0.6 + 2), 4))
    bottom = [0] * len(hours)
    for t in topics:
        ys = [counts.get((h, t), 0) for h in hours]
        ax.bar(range(len(hours)), ys, bottom=bottom, label=t.split("/")[-1])
        bottom = [a + y for a, y in zip(bottom, ys)]
    ax.set_xticks(range(len(hours)))
    ax.set_xticklabels([h[5:13].replace("T", " ") + "h" for h in hours], rotation=45,
                       ha="right")
    ax.set_ylabel("dead letters")
    ax.set_title(f"{report['topic']} by hour")
    if topics:
        ax.legend(fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(path, format="png")
    except OSError as exc:
        raise PulsarctlError(f"cannot write {path}: {exc.strerror}") from None
    finally:
        plt.close(fig)
    return os.path.abspath(path)


# -- dlq-reprocess -------------------------------------------------------------------------------
_IMPORT_HINT = "run from the directory that holds the module, or set PYTHONPATH"


def find_transform(spec: str) -> tuple[str, str]:
    """Check module:function without importing the module (a module may make UDFs when it is
    imported, and those need a running session): (module, function)."""
    module, _, name = (spec or "").partition(":")
    if not module or not name:
        raise InvalidValue(f"invalid --transform {spec!r}", hint="give it as module:function")
    # As `python -m` does: a module in the current directory is found. A console script's
    # sys.path lacks it; appended, it shadows no installed module (a store/ directory here
    # must not hide the store package).
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise InvalidValue(f"cannot import {module!r} for --transform: {exc}",
                           hint=_IMPORT_HINT) from None
    if found is None:
        raise InvalidValue(f"cannot import {module!r} for --transform: no module named "
                           f"{module!r}", hint=_IMPORT_HINT)
    return module, name


def load_transform(spec: str):
    """module:function, the function taking and returning a DataFrame: (module, function)."""
    module, name = find_transform(spec)
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - whatever the user's module raises on import
        raise InvalidValue(f"cannot import {module!r} for --transform: "
                           f"{type(exc).__name__}: {exc}", hint=_IMPORT_HINT) from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise InvalidValue(f"{module} has no function {name!r}")
    return mod, fn


def dlq_reprocess(spark, store: str, dlq: str, transform: str | None = None,
                  wait: bool = True, split_entries: int = 100_000) -> dict:
    """Read the DLQ's waiting dead letters (bounds fixed at the start), pass them through the
    transform (a function DataFrame -> DataFrame; none: as they are), write each row to its
    __topic (default: the REAL_TOPIC property) with the writer's effectively-once producers,
    and only then acknowledge them on pulsarctl-dlq.

    Producers are named after the DLQ and the first waiting offset, and the input is cut into
    fixed runs of split_entries, so a run that dies between the write and the ack and is
    started again writes nothing twice (given a deterministic transform)."""
    from pyspark.sql import functions as F  # lazy: pyspark is costly to import or optional

    fn = None
    if transform:
        mod, fn = load_transform(transform)
        path = getattr(mod, "__file__", None)
        if path and "." not in mod.__name__ and path.endswith(".py"):
            spark.sparkContext.addPyFile(path)  # so Spark's workers can import it too
    b = access.broker(store, write=True)
    t = parse_topic(dlq)
    with b.dlq(t).lock(wait):
        b.dlq(t).subscribe()
        with spark_errors("dlq-reprocess"):
            df, part, runs = _dlq_frame(spark, store, str(t), split_entries=split_entries)
            if df is None:
                return {"topic": part.name, "read": 0, "written": 0, "acknowledged": 0,
                        "topics": {}}
            out = fn(df) if fn is not None else df
            cols = out.columns
            if "value" not in cols:
                raise InvalidValue("the transform's DataFrame has no value column")
            # A row goes to the __topic the transform gave it, else to its REAL_TOPIC (the
            # DLQ's own name in __topic, as read, is no choice).
            real = (F.col("__messageProperties")[REAL_TOPIC] if "__messageProperties" in cols
                    else F.lit(None).cast("string"))
            if "__topic" in cols:
                real = F.when(F.col("__topic").isNull() | (F.col("__topic") == part.name),
                              real).otherwise(F.col("__topic"))
            routed = out.withColumn("__topic", real)
            keep = [c for c in ("value", "__key", "__messageProperties", "__eventTime",
                                "__topic") if c in routed.columns]
            routed = routed.select(*keep)
            counts = {r["__topic"]: r["count"]
                      for r in routed.groupBy("__topic").count().collect()}
            if None in counts:
                raise InvalidValue(f"{counts[None]} dead letter(s) have no {REAL_TOPIC} "
                                   "property", hint="let the transform set __topic")
            for name in counts:
                try:
                    target = parse_topic(name)
                except UsageError:
                    raise InvalidValue(f"cannot write to {name!r}: not a topic name") from None
                if target.partitioned_topic_name == t.partitioned_topic_name:
                    raise InvalidValue(f"{counts[name]} dead letter(s) would go back into "
                                       f"{t} itself", hint="let the transform set __topic")
            digest = hashlib.sha1(part.name.encode()).hexdigest()[:10]
            (routed.write.format("pulsarctl").option("store", store).mode("append")
             .option("producerPrefix", f"pulsarctl-dlq-reprocess-{digest}-{runs[0][0]}")
             .save())
        # The write committed: now the dead letters are handled.
        ids = [i for s, e in runs for i in access.ids_between(part, s, e)]
        acked = 0
        for i in range(0, len(ids), 10_000):
            acked += b.dlq(t).ack(ids[i:i + 10_000])
    return {"topic": part.name, "read": len(ids), "written": sum(counts.values()),
            "acknowledged": acked,
            "topics": {str(parse_topic(k)): v for k, v in sorted(counts.items())}}


def precheck(store: str, topic: str, dlq: bool = False) -> None:
    """The errors a job would meet first (no store, no topic, a partitioned DLQ), raised
    before Spark starts."""
    b = access.broker(store)
    if dlq:
        access.dlq_waiting(b, topic)
    else:
        access.resolve_parts(b, "names", [parse_topic(topic)])
