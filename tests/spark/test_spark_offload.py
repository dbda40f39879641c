"""Offloaded ledgers through Spark (issue 6.5): the data source reads offloaded and local
ledgers as one topic, and read_topic() gives the same rows with the offloaded ledgers read by
Spark's own Parquet reader (what a cluster does with files it can reach)."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark")  # the plain install has no Spark; CI installs pulsarctl[spark]
pytest.importorskip("pyarrow")

import pulsarctl  # noqa: E402
from pulsarctl import spark as ps  # noqa: E402
from pulsarctl.broker import Broker  # noqa: E402
from pulsarctl.clock import SimulatedClock  # noqa: E402
from pulsarctl.client import CompressionType  # noqa: E402
from spark_fixtures import START_MS, spark  # noqa: E402,F401

T = "persistent://public/default/tiered"


@pytest.fixture(scope="module")
def tiered(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-offload")
    path = str(root / "store")
    clock = SimulatedClock(START_MS)
    b = Broker(path, clock)
    b.policies.update_setting("managedLedgerMaxEntriesPerLedger", "10")
    b.policies.update_setting("maxMessageSize", "300")
    b.ledgers.rollover_entries = 10
    c = pulsarctl.Client(broker=b)
    plain = c.create_producer(T)
    packed = c.create_producer(T, compression_type=CompressionType.ZSTD)
    big = c.create_producer(T, chunking_enabled=True)
    for i in range(45):
        clock.advance(1)
        if i == 14:
            big.send(bytes(range(256)) * 4)  # 1 KB in 4 chunks
        (packed if i % 5 == 0 else plain).send(f"v{i}".encode(), properties={"i": str(i)},
                                               partition_key=f"k{i % 4}")
    c.close()
    rows_before = None
    yield b, path, str(root / "tier"), rows_before
    b.close()


def _rows(df):
    return sorted((r["__messageId"], bytes(r["value"]), r["__key"], r["__publishTime"],
                   tuple(sorted((r["__messageProperties"] or {}).items()))) for r in df.collect())


def test_offloaded_and_local_ledgers_read_as_one_topic(spark, tiered):
    b, path, tier, _ = tiered
    before = _rows(spark.read.format("pulsarctl").option("store", path).option("topic", T).load())
    assert len(before) == 46
    r = b.topics.offload(T, tier, size_threshold=0)
    assert r["entries"] == 40 and len(r["ledgers"]) == 4
    after = _rows(spark.read.format("pulsarctl").option("store", path).option("topic", T).load())
    assert after == before
    via_parquet = _rows(ps.read_topic(spark, path, topic=T))
    assert via_parquet == before
    # The Parquet side really is Spark's reader: the plan scans the files.
    df = ps.read_topic(spark, path, topic=T)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan or "Parquet" in plan
    # With offloaded=skip, the data source reads only the local tail.
    tail = _rows(spark.read.format("pulsarctl").option("store", path).option("topic", T)
                 .option("offloaded", "skip").load())
    assert len(tail) == 9 and tail == before[-9:]  # 45 messages + 4 chunks: 40 entries offloaded
    # Time bounds apply to both halves.
    lo, hi = START_MS + 10, START_MS + 41
    bounded = _rows(ps.read_topic(spark, path, topic=T, startingTime=lo, endingTime=hi))
    direct = _rows(spark.read.format("pulsarctl").option("store", path).option("topic", T)
                   .option("startingTime", lo).option("endingTime", hi).load())
    assert bounded == direct and 0 < len(bounded) < len(before)


def test_export_job_reads_offloaded_ledgers(spark, tiered, tmp_path):
    from pulsarctl.spark import jobs

    b, path, tier, _ = tiered
    b.topics.offload(T, tier, size_threshold=0)
    r = jobs.export(spark, path, T, "parquet", str(tmp_path / "out"))
    assert r["rows"] == 46
