"""Batch writes through the Spark data source: the columns a row carries, routing on partitioned
topics, per-row topics, and effectively-once when Spark runs a failed task again."""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

import pytest

pytest.importorskip("pyspark")  # the plain install has no Spark; CI installs pulsarctl[spark]
pytest.importorskip("pyarrow")

from pyspark.errors import PySparkException  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from pulsarctl.broker import Broker  # noqa: E402
from pulsarctl.broker.hashing import java_string_hash  # noqa: E402
from spark_fixtures import spark  # noqa: E402,F401

NS = "persistent://public/default/"


def write(df, path, **options):
    w = df.write.format("pulsarctl").option("store", path).mode("append")
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def read_all(path, topic):
    b = Broker(path, readonly=True)
    out, o = [], 0
    targets = ([f"{topic}-partition-{i}" for i in range(b.partitions_of(topic))]
               or [topic])
    for t in targets:
        o = 0
        while True:
            msgs, nxt, last = b.read_entries(t, o, 10_000)
            out += msgs
            if nxt > last:
                break
            o = nxt
    b.close()
    return out


def test_row_columns_round_trip(spark, tmp_path):
    path = str(tmp_path / "store")
    et = datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=timezone.utc)
    df = spark.createDataFrame(
        [("a", "k1", {"x": "1"}, et), ("b", None, None, None), ("", "k2", {}, None)],
        "value string, __key string, __messageProperties map<string,string>, "
        "__eventTime timestamp")
    write(df.coalesce(1), path, topic="round")
    msgs = read_all(path, NS + "round")
    assert [(m.payload, m.key, m.properties(), m.event_time) for m in msgs] == [
        (b"a", "k1", {"x": "1"}, int(et.timestamp() * 1000)),
        (b"b", None, {}, 0),
        (b"", "k2", {}, 0),
    ]
    assert [m.sequence_id for m in msgs] == [0, 1, 2]
    assert len({m.producer_name for m in msgs}) == 1
    assert msgs[0].producer_name.startswith("spark-") and msgs[0].producer_name.endswith("-0")
    # The writer turned deduplication on: that is what makes a retried task safe.
    b = Broker(path, readonly=True)
    assert b.policies.get("topic", NS + "round", "deduplicationEnabled") is True
    b.close()
    # A read of the topic writes back as it was (the extra columns are left aside).
    back = spark.read.format("pulsarctl").option("store", path).option("topic", "round").load()
    write(back.coalesce(1), path, topic="copy")
    assert [(m.payload, m.key) for m in read_all(path, NS + "copy")] == [
        (b"a", "k1"), (b"b", None), (b"", "k2")]


def test_partitioned_topic_routes_by_key_like_produce(spark, tmp_path):
    path = str(tmp_path / "store")
    b = Broker(path)
    b.topics.create_partitioned("parts", 3)
    b.close()
    df = spark.range(0, 300, 1, 3).select(
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
        F.when(F.col("id") % 2 == 0, F.concat(F.lit("key"), (F.col("id") % 7).cast("string")))
        .alias("__key"))
    write(df, path, topic="parts")
    b = Broker(path, readonly=True)
    counts = Counter()
    for i in range(3):
        msgs, _, _ = b.read_entries(f"{NS}parts-partition-{i}", 0, 1000)
        for m in msgs:
            counts[i] += 1
            if m.key is not None:
                assert java_string_hash(m.key) % 3 == i
    b.close()
    assert sum(counts.values()) == 300
    assert all(counts[i] > 20 for i in range(3))  # keyless rows go round robin


def test_rows_name_their_topic(spark, tmp_path):
    path = str(tmp_path / "store")
    df = spark.createDataFrame([("x1", "left"), ("y1", "right"), ("x2", "left")],
                               "value string, __topic string")
    write(df.coalesce(1), path)
    assert [m.payload for m in read_all(path, NS + "left")] == [b"x1", b"x2"]
    assert [m.payload for m in read_all(path, NS + "right")] == [b"y1"]
    # The topic option wins over the column.
    write(df.coalesce(1), path, topic="all")
    assert len(read_all(path, NS + "all")) == 3


def test_write_errors_are_clear(spark, tmp_path):
    path = str(tmp_path / "store")
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(PySparkException, match="only takes appends"):
        df.write.format("pulsarctl").option("store", path).option("topic", "t") \
            .mode("overwrite").save()
    with pytest.raises(PySparkException, match="no value column"):
        write(spark.createDataFrame([("x",)], "payload string"), path, topic="t")
    with pytest.raises(PySparkException, match="give the option topic"):
        write(df, path)


def test_a_retried_task_writes_every_row_exactly_once(spark, tmp_path):
    """The first attempt of task 0 stores part of its rows, then fails; Spark runs it again
    (local[2,4] allows 4 attempts). The retry skips what the first attempt stored. (With the
    option deduplication=false the same run stores those rows twice.)"""
    path = str(tmp_path / "store")
    topic = NS + "retried"
    marker = tmp_path / "first-attempt-stored"
    n = 2000

    def value(i):
        import time

        from pyspark import TaskContext

        tc = TaskContext.get()
        if tc.attemptNumber() == 0 and tc.partitionId() == 0 and i == 600:
            # Wait until the writer has stored some of the rows before this one, then die.
            stored = 0
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    b = Broker(path, readonly=True)
                    msgs, _, _ = b.read_entries(topic, 0, 10_000)
                    b.close()
                    stored = sum(1 for m in msgs if m.producer_name.endswith("-0"))
                except Exception:  # noqa: BLE001 - the topic is not there yet
                    stored = 0
                if stored >= 200:
                    break
                time.sleep(0.05)
            marker.write_text(str(stored))
            raise RuntimeError("failing the first attempt on purpose")
        # Large values: a Python worker sends its results in 64 KiB writes, so the rows
        # before this one reach the writer while this one waits.
        return f"row-{i}-".encode() + b"x" * 2000

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        make = F.udf(value, "binary", useArrow=False)
        df = spark.range(0, n, 1, 2).select(
            make("id").alias("value"), F.concat(F.lit("k"), (F.col("id") % 10).cast("string"))
            .alias("__key"))
        write(df, path, topic="retried")
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert int(marker.read_text()) >= 200, "the first attempt stored nothing before failing"
    msgs = read_all(path, topic)
    got = Counter(m.payload for m in msgs)
    assert len(msgs) == n
    assert set(got) == {f"row-{i}-".encode() + b"x" * 2000 for i in range(n)}
    assert max(got.values()) == 1
    # Each task's rows carry its producer name and their row index as sequence id.
    by_producer = Counter(m.producer_name for m in msgs)
    assert sorted(by_producer.values()) == [1000, 1000]
    for m in msgs:
        assert m.sequence_id == int(m.payload.decode().split("-")[1]) % 1000
