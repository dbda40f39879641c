"""Streaming reads through the Spark data source: Trigger.AvailableNow, maxEntriesPerTrigger,
exact resume from the checkpoint across query restarts, topics that appear later, and the
durable subscription a query moves as its batches commit."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")  # the plain install has no Spark; CI installs pulsarctl[spark]
pytest.importorskip("pyarrow")

from pulsarctl.broker import Broker  # noqa: E402
from pulsarctl.messages import OutgoingMessage  # noqa: E402
from spark_fixtures import spark  # noqa: E402,F401

NS = "persistent://public/default/"


def produce(path, topic, values, **kw):
    b = Broker(path)
    _, ids = b.publish(topic, [OutgoingMessage(v.encode(), **kw) for v in values])
    b.close()
    return [str(i) for i in ids]


def run(spark, path, checkpoint, **options):
    """One Trigger.AvailableNow run: (rows per micro-batch, the rows it wrote in topic and
    message id order).

    The sink is Parquet files (a new directory per run; the checkpoint carries the offsets),
    not foreachBatch: a Python callback goes through py4j's callback server, which select()s
    its socket and stops working in a process that has 1024 descriptors open, as a long test
    run can."""
    out = f"{checkpoint}-out-{len(RUNS)}"
    RUNS.append(out)
    r = spark.readStream.format(options.pop("format", "pulsarctl")).option("store", path)
    for k, v in options.items():
        r = r.option(k, v)
    q = (r.load().select("value", "__topic", "__messageId").writeStream.format("parquet")
         .option("path", out).option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert not q.isActive, "the query did not finish"
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    rows = sorted(((x["value"].decode(), x["__topic"], x["__messageId"])
                   for x in spark.read.parquet(f"{out}/*.parquet").collect()) if sizes else [],
                  key=lambda x: (x[1], [int(n) for n in x[2].split(":")[:2]]))
    assert sum(sizes) == len(rows)
    return sizes, rows


def values(rows):
    return [v for v, _, _ in rows]


RUNS: list = []


def test_resume_from_the_checkpoint_reads_each_message_once(spark, tmp_path):
    path, ck = str(tmp_path / "store"), str(tmp_path / "ck")
    first = [f"m{i:02d}" for i in range(25)]
    produce(path, "s1", first)
    sizes, rows = run(spark, path, ck, topic="s1", startingOffsets="earliest",
                      maxEntriesPerTrigger="10")
    assert sizes == [10, 10, 5]
    assert values(rows) == first
    more = [f"n{i:02d}" for i in range(12)]
    produce(path, "s1", more)
    sizes, rows = run(spark, path, ck, format="pulsar", topic="s1",
                      startingOffsets="earliest", maxEntriesPerTrigger="10")
    assert sizes == [10, 2]
    assert values(rows) == more
    assert run(spark, path, ck, topic="s1", startingOffsets="earliest") == ([], [])


def test_latest_by_default_and_message_id_start(spark, tmp_path):
    path = str(tmp_path / "store")
    ids = produce(path, "s2", ["old0", "old1", "old2"])
    ck = str(tmp_path / "ck-latest")
    assert run(spark, path, ck, topic="s2") == ([], [])
    produce(path, "s2", ["new0"])
    assert values(run(spark, path, ck, topic="s2")[1]) == ["new0"]
    _, rows = run(spark, path, str(tmp_path / "ck-id"), topic="s2",
                  startingOffsets=json.dumps({NS + "s2": ids[1]}))
    assert values(rows) == ["old1", "old2", "new0"]


def test_partitions_and_topics_that_appear_later(spark, tmp_path):
    path, ck = str(tmp_path / "store"), str(tmp_path / "ck")
    b = Broker(path)
    b.topics.create_partitioned("feed-a", 2)
    b.close()
    produce(path, "feed-a", [f"a{i}" for i in range(8)], key=None)
    sizes, rows = run(spark, path, ck, topicsPattern=NS + "feed-.*",
                      startingOffsets="earliest", maxEntriesPerTrigger="3")
    assert sorted(values(rows)) == [f"a{i}" for i in range(8)]
    assert {t for _, t, _ in rows} == {f"{NS}feed-a-partition-0", f"{NS}feed-a-partition-1"}
    assert sizes == [3, 3, 2]
    produce(path, "feed-b", ["b0", "b1"])  # a new topic the pattern matches: from its start
    produce(path, "feed-a", ["a8"])
    _, later = run(spark, path, ck, topicsPattern=NS + "feed-.*")
    assert sorted(values(later)) == ["a8", "b0", "b1"]


def test_subscription_cursor_moves_as_batches_commit(spark, tmp_path):
    path, ck = str(tmp_path / "store"), str(tmp_path / "ck")
    ids = produce(path, "s3", [f"m{i}" for i in range(7)])
    sizes, _ = run(spark, path, ck, topic="s3", startingOffsets="earliest",
                   subscription="etl", maxEntriesPerTrigger="4")
    assert sizes == [4, 3]
    b = Broker(path, readonly=True)
    d = b.subscription("s3", "etl").describe()
    assert d["msgBacklog"] == 0
    assert d["markDeletePosition"] == ":".join(ids[-1].split(":")[:2])
    b.close()
    produce(path, "s3", ["m7", "m8"])
    b = Broker(path, readonly=True)
    assert b.subscription("s3", "etl").describe()["msgBacklog"] == 2
    b.close()
    assert values(run(spark, path, ck, topic="s3", subscription="etl")[1]) == ["m7", "m8"]
    b = Broker(path, readonly=True)
    assert b.subscription("s3", "etl").describe()["msgBacklog"] == 0
    b.close()


def test_stream_option_errors(spark, tmp_path):
    from pyspark.errors import PySparkException

    path = str(tmp_path / "store")
    produce(path, "s4", ["x"])
    with pytest.raises(PySparkException, match="endingOffsets is for batch reads"):
        run(spark, path, str(tmp_path / "ck"), topic="s4", endingOffsets="latest")
    with pytest.raises(PySparkException, match="subscription is for streaming reads"):
        spark.read.format("pulsarctl").option("store", path).option("topic", "s4") \
            .option("subscription", "x").load().collect()
