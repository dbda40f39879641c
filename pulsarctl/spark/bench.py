"""The data source's benchmark: read N messages of S bytes through the source and, in the same
Spark session, the same rows from a Parquet file; write N rows through the source.

    python -m pulsarctl.spark.bench [-n 1000000] [-s 100] [--store DIR] [--out FILE]
    pulsarctl spark bench [-n ...]          (the same, printed as a table or JSON)

Reads are timed as a full scan of every column into Spark's noop sink (nothing is skipped, as a
count() on Parquet would skip). Two warm-up rounds run every read in turn, then --repeat timed
rounds do, so that noise falls on all of them alike; each read reports its best and its median.
One warm-up was not enough: the first timed round was still up to 1.5 times slower for the
source and 2 times for the ceiling (the JIT and each new Python worker's first task).
readTwoColumns reads with the schema "value binary, __publishTime timestamp" (the source
builds only those); readBatched reads the same messages stored in
batches of up to 1000 (128 KiB), as Pulsar's Java client sends them by default. readCeiling
reads the same rows through a Python data source that does no work at all: each task hands
Spark Arrow batches made before the timing (from the Parquet file's part it reads), so it is
what Spark's Python data source path itself costs, the most any Python data source could
reach here. The module prints nothing (only the CLI prints): it writes the results as JSON to
--out (default spark-bench.json) and returns them.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from statistics import median

from pulsarctl import clock as clocks

TOPIC = "persistent://public/default/spark-bench"
BATCHED_TOPIC = "persistent://public/default/spark-bench-batched"
WRITE_TOPIC = "persistent://public/default/spark-bench-write"


def _fill(store: str, n: int, size: int, batch: int = 10_000, topic: str = TOPIC,
          batching=None) -> float:
    """Produce n messages of size bytes (a key and a property each, as real traffic has);
    batching: a batches.Spec to store them in batch entries."""
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.broker import Broker
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.messages import OutgoingMessage

    b = Broker(store)
    have = b.topics.stats(topic)["msgInCounter"] if b.topics.exists(topic) else 0
    t0 = clocks.monotonic()
    payload = b"x" * size
    for i in range(have, n, batch):
        b.publish(topic, [OutgoingMessage(payload, {"source": "bench"}, f"key-{j % 1000}")
                          for j in range(i, min(n, i + batch))], batching=batching)
    return clocks.monotonic() - t0


WARMUP_ROUNDS = 2


def _rounds(reads: dict, repeat: int) -> dict:
    """Time each read of reads (name -> function): WARMUP_ROUNDS untimed rounds of every read
    in turn, then repeat timed ones. Returns name -> the seconds of its timed runs."""
    for _ in range(WARMUP_ROUNDS):
        for fn in reads.values():
            fn()  # warm-up: Python workers start, classes load, the JIT compiles
    times = {name: [] for name in reads}
    for _ in range(repeat):
        for name, fn in reads.items():
            t0 = clocks.monotonic()
            fn()
            times[name].append(clocks.monotonic() - t0)
    return times


def _rate(rows: int, runs: list) -> dict:
    best, med = min(runs), median(runs)
    return {"seconds": round(best, 3), "medianSeconds": round(med, 3),
            "rowsPerSec": round(rows / best)}


def run(n: int = 1_000_000, size: int = 100, store: str | None = None, repeat: int = 3,
        master: str | None = None, write_rows: int | None = None, spark=None) -> dict:
    """Fill a store (a temporary one unless given) with n messages and time the reads and the
    write. With spark, that session is used (and left running); else one is made and stopped."""
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl import spark as ps

    ps.require()
    tmp = tempfile.mkdtemp(prefix="pulsarctl-bench-")
    own = spark is None
    try:
        store = os.path.abspath(store or os.path.join(tmp, "store"))
        fill_s = _fill(store, n, size)
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.broker.batches import Spec

        # As Pulsar's Java client batches by default: 1000 messages or 128 KiB a batch.
        _fill(store, n, size, topic=BATCHED_TOPIC, batching=Spec(1000, 128 * 1024))
        if own:
            spark = ps.session("pulsarctl-bench", master=master)
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.spark._ceiling import CeilingDataSource
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.spark._ceiling import NAME as CEILING

        spark.dataSource.register(CeilingDataSource)
        cores = spark.sparkContext.defaultParallelism

        def source(schema=None, topic=TOPIC):
            r = spark.read.format("pulsarctl").option("store", store).option("topic", topic)
            return (r.schema(schema) if schema else r).load()

        def noop(df):
            return lambda: df.write.format("noop").mode("overwrite").save()

        rows = source().count()
        pq = os.path.join(tmp, "bench.parquet")
        source().write.parquet(pq)
        times = _rounds({
            "read": noop(source()),
            "readTwoColumns": noop(source("value binary, __publishTime timestamp")),
            "readBatched": noop(source(topic=BATCHED_TOPIC)),
            "readCeiling": noop(spark.read.format(CEILING).option("path", pq).load()),
            "parquet": noop(spark.read.parquet(pq)),
        }, repeat)

        w = write_rows or n
        from pyspark.sql import functions as F  # lazy: pyspark is costly to import or optional

        frame = (spark.range(0, w, 1, numPartitions=cores)
                 .select(F.concat(F.lit("y" * max(0, size - 10)),
                                  F.lpad(F.col("id").cast("string"), 10, "0"))
                         .cast("binary").alias("value"),
                         F.concat(F.lit("key-"), (F.col("id") % 1000).cast("string"))
                         .alias("__key")))
        frame.cache().count()
        t0 = clocks.monotonic()
        (frame.write.format("pulsarctl").option("store", store).option("topic", WRITE_TOPIC)
         .mode("append").save())
        write_s = clocks.monotonic() - t0
        frame.unpersist()
        out = {"messages": rows, "payloadBytes": size, "cores": cores, "repeat": repeat,
               "produceSecondsToFill": round(fill_s, 3)}
        out.update({name: _rate(rows, runs) for name, runs in times.items()})
        pq_best, pq_med = min(times["parquet"]), median(times["parquet"])
        for name, key in (("read", "readVsParquet"), ("readCeiling", "ceilingVsParquet")):
            out[key] = round(pq_best / min(times[name]), 3)
            out[key + "Median"] = round(pq_med / median(times[name]), 3)
        out["write"] = {"rows": w, "seconds": round(write_s, 3),
                        "rowsPerSec": round(w / write_s)}
        return out
    finally:
        if own and spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m pulsarctl.spark.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--num-messages", type=int, default=1_000_000)
    p.add_argument("-s", "--size", type=int, default=100, help="payload bytes")
    p.add_argument("--store", help="store to use (default: a temporary one)")
    p.add_argument("--repeat", type=int, default=3, help="timed rounds after two warm-up rounds")
    p.add_argument("--master", help="Spark master (default local[*])")
    p.add_argument("--out", default="spark-bench.json", help="where to write the results")
    a = p.parse_args(argv)
    result = run(a.num_messages, a.size, a.store, a.repeat, a.master)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
