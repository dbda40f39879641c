"""The data source's benchmark: read N messages of S bytes through the source and, in the same
Spark session, the same rows from a Parquet file; write N rows through the source.

    python -m pulsarctl.spark.bench [-n 1000000] [-s 100] [--store DIR] [--out FILE]
    pulsarctl spark bench [-n ...]          (the same, printed as a table or JSON)

Reads are timed as a full scan of every column into Spark's noop sink (nothing is skipped, as a
count() on Parquet would skip), best of --repeat runs after one warm-up; readTwoColumns reads
with the schema "value binary, __publishTime timestamp" (the source builds only those). The module prints
nothing (only the CLI prints): it writes the results as JSON to --out (default
spark-bench.json) and returns them.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile

from pulsarctl import clock as clocks

TOPIC = "persistent://public/default/spark-bench"
WRITE_TOPIC = "persistent://public/default/spark-bench-write"


def _fill(store: str, n: int, size: int, batch: int = 10_000) -> float:
    """Produce n messages of size bytes (a key and a property each, as real traffic has)."""
    from pulsarctl.broker import Broker
    from pulsarctl.messages import OutgoingMessage

    b = Broker(store)
    have = b.topic_stats(TOPIC)["msgInCounter"] if b.topic_exists(TOPIC) else 0
    t0 = clocks.monotonic()
    payload = b"x" * size
    for i in range(have, n, batch):
        b.publish(TOPIC, [OutgoingMessage(payload, {"source": "bench"}, f"key-{j % 1000}")
                          for j in range(i, min(n, i + batch))])
    return clocks.monotonic() - t0


def _timed(fn, repeat: int) -> float:
    fn()  # warm-up: Python workers start, classes load
    best = None
    for _ in range(repeat):
        t0 = clocks.monotonic()
        fn()
        s = clocks.monotonic() - t0
        best = s if best is None else min(best, s)
    return best


def run(n: int = 1_000_000, size: int = 100, store: str | None = None, repeat: int = 2,
        master: str | None = None, write_rows: int | None = None) -> dict:
    from pulsarctl import spark as ps

    ps.require()
    tmp = tempfile.mkdtemp(prefix="pulsarctl-bench-")
    try:
        store = os.path.abspath(store or os.path.join(tmp, "store"))
        fill_s = _fill(store, n, size)
        spark = ps.session("pulsarctl-bench", master=master)
        cores = spark.sparkContext.defaultParallelism

        def source():
            return (spark.read.format("pulsarctl").option("store", store)
                    .option("topic", TOPIC).load())

        rows = source().count()
        read_s = _timed(lambda: source().write.format("noop").mode("overwrite").save(), repeat)
        narrow = (spark.read.format("pulsarctl").option("store", store).option("topic", TOPIC)
                  .schema("value binary, __publishTime timestamp").load())
        narrow_s = _timed(lambda: narrow.write.format("noop").mode("overwrite").save(), repeat)
        pq = os.path.join(tmp, "bench.parquet")
        source().write.parquet(pq)
        parquet_s = _timed(
            lambda: spark.read.parquet(pq).write.format("noop").mode("overwrite").save(), repeat)

        w = write_rows or n
        from pyspark.sql import functions as F

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
        spark.stop()
        return {
            "messages": rows, "payloadBytes": size, "cores": cores,
            "produceSecondsToFill": round(fill_s, 3),
            "read": {"seconds": round(read_s, 3), "rowsPerSec": round(rows / read_s)},
            "readTwoColumns": {"seconds": round(narrow_s, 3),
                               "rowsPerSec": round(rows / narrow_s)},
            "parquet": {"seconds": round(parquet_s, 3), "rowsPerSec": round(rows / parquet_s)},
            "readVsParquet": round(parquet_s / read_s, 3),
            "write": {"rows": w, "seconds": round(write_s, 3), "rowsPerSec": round(w / write_s)},
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m pulsarctl.spark.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--num-messages", type=int, default=1_000_000)
    p.add_argument("-s", "--size", type=int, default=100, help="payload bytes")
    p.add_argument("--store", help="store to use (default: a temporary one)")
    p.add_argument("--repeat", type=int, default=2, help="timed runs after a warm-up")
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
