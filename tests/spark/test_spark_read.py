"""Batch reads through the Spark data source (pulsarctl/spark): columns and values exactly,
offsets, time bounds, topic lists and patterns, partitioned topics, filter pushdown, planning.

A real local Spark session (tests/spark_fixtures.py, started once) and a real store in a
temporary directory, filled once for the module with a simulated clock so publish times are
known to the millisecond."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")  # the plain install has no Spark; CI installs pulsarctl[spark]
pytest.importorskip("pyarrow")

from pyspark.errors import PySparkException  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from pulsarctl.broker import Broker  # noqa: E402
from pulsarctl.broker.hashing import java_string_hash  # noqa: E402
from pulsarctl.clock import SimulatedClock  # noqa: E402
from pulsarctl.messages import OutgoingMessage  # noqa: E402
from spark_fixtures import START_MS, default_store, spark  # noqa: E402,F401

NS = "persistent://public/default/"
T = NS + "events"          # 30 messages, 1 ms apart, ledgers of 7 entries
PT = NS + "orders"         # partitioned, 3 partitions, keyed
OTHER = NS + "audit-log"   # 5 messages, for lists and patterns


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("spark-read") / "store")
    clock = SimulatedClock(START_MS)
    b = Broker(path, clock)
    b.policies.update_setting("managedLedgerMaxEntriesPerLedger", "7")
    ids = []
    for i in range(30):
        m = OutgoingMessage(f"event-{i}".encode(), {"n": str(i), "parity": "even" if i % 2 == 0
                                                        else "odd"} if i % 3 else None,
                            key=f"k{i % 4}" if i % 5 else None, event_time=START_MS - 1000 + i
                            if i % 2 else 0)
        _, got = b.publish(T, [m], producer_name="maker")
        ids += got
        clock.advance(1)
    b.topics.create_partitioned(PT, 3)
    _, pids = b.publish(PT, [OutgoingMessage(f"order-{i}".encode(), key=f"c{i % 6}")
                             for i in range(24)], producer_name="shop")
    clock.advance(1000)
    _, oids = b.publish(OTHER, [OutgoingMessage(f"audit-{i}".encode()) for i in range(5)])
    b.close()
    return {"path": path, "ids": [str(x) for x in ids], "pids": [str(x) for x in pids],
            "oids": [str(x) for x in oids]}


def read(spark, data, **options):
    r = spark.read.format(options.pop("format", "pulsarctl")).option("store", data["path"])
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def values(df) -> list[str]:
    return sorted(r.value.decode() for r in df.select("value").collect())


def event_values(lo, hi):
    return sorted(f"event-{i}" for i in range(lo, hi))


# -- columns ------------------------------------------------------------------------------------
def test_columns_and_values_exactly(spark, data):
    df = read(spark, data, topic="events")
    assert df.columns == ["value", "__key", "__topic", "__messageId", "__publishTime",
                          "__eventTime", "__messageProperties", "__producerName", "__sequenceId",
                          "__redeliveryCount"]
    types = dict(df.dtypes)
    assert types == {"value": "binary", "__key": "string", "__topic": "string",
                     "__messageId": "string", "__publishTime": "timestamp",
                     "__eventTime": "timestamp", "__messageProperties": "map<string,string>",
                     "__producerName": "string", "__sequenceId": "bigint",
                     "__redeliveryCount": "int"}
    rows = (df.withColumn("pt", F.unix_millis("__publishTime"))
            .withColumn("et", F.unix_millis("__eventTime")).orderBy("pt").collect())
    assert len(rows) == 30
    for i, r in enumerate(rows):
        assert r.value == f"event-{i}".encode()
        assert r["__key"] == (f"k{i % 4}" if i % 5 else None)
        assert r["__topic"] == T
        assert r["__messageId"] == data["ids"][i]
        assert r.pt == START_MS + i
        assert r.et == (START_MS - 1000 + i if i % 2 else None)
        assert r["__messageProperties"] == ({"n": str(i), "parity": "even" if i % 2 == 0 else "odd"}
                                         if i % 3 else None)
        assert r["__producerName"] == "maker"
        assert r["__sequenceId"] == i
        assert r["__redeliveryCount"] is None
    # Ledgers roll over every 7 entries: ids go 1:0..1:6, then the next ledger.
    assert len({mid.split(":")[0] for mid in data["ids"]}) == 5


def test_pulsar_alias_and_default_store(spark, data, default_store):
    assert values(read(spark, data, format="pulsar", topic=T)) == event_values(0, 30)
    b = Broker(default_store)
    b.publish("from-default", [OutgoingMessage(b"here")])
    b.close()
    df = spark.read.format("pulsarctl").option("topic", "from-default").load()
    assert [r.value for r in df.collect()] == [b"here"]


def test_a_udf_on_the_session_works_without_a_warning(spark):
    """session() turns Arrow-optimized UDFs off when pandas (which they need) is missing, so
    a transform's UDF runs without Spark warning on stderr that it fell back."""
    import importlib.util
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        twice = F.udf(lambda v: v * 2, "binary")
    df = spark.createDataFrame([(b"ab",)], "value binary")
    assert df.select(twice("value")).first()[0] == b"abab"
    if importlib.util.find_spec("pandas") is None:
        assert spark.conf.get("spark.sql.execution.pythonUDF.arrow.enabled") == "false"


def test_partitioned_topic_rows_land_by_key_hash(spark, data):
    rows = read(spark, data, topic="orders").collect()
    assert len(rows) == 24
    for r in rows:
        i = java_string_hash(r["__key"]) % 3
        assert r["__topic"] == f"{PT}-partition-{i}"
        assert r["__messageId"].endswith(f":{i}")
        assert r["__producerName"] == "shop"
    assert sorted(r["__messageId"] for r in rows) == sorted(data["pids"])


# -- topics --------------------------------------------------------------------------------------
def test_topics_list_and_pattern(spark, data):
    df = read(spark, data, topics=f"events, {OTHER}")
    assert len(df.collect()) == 35
    by_pattern = read(spark, data, topicsPattern=NS + "(orders|audit.*)")
    got = {r["__topic"] for r in by_pattern.collect()}
    assert got == {f"{PT}-partition-{i}" for i in range(3)} | {OTHER}
    # The pattern is matched against the whole name: "events" alone matches nothing there.
    assert read(spark, data, topicsPattern="event").count() == 0
    # A short pattern is in public/default.
    assert read(spark, data, topicsPattern="audit-.*").count() == 5


def test_one_topic_option_is_required(spark, data):
    with pytest.raises(PySparkException, match="exactly one of the options topic, topics"):
        read(spark, data).collect()
    with pytest.raises(PySparkException, match="exactly one of the options"):
        read(spark, data, topic="events", topicsPattern="x").collect()
    with pytest.raises(PySparkException, match="does not exist"):
        read(spark, data, topic="nope").collect()


# -- offsets -------------------------------------------------------------------------------------
def test_starting_offsets_inclusive_ending_exclusive(spark, data):
    ids = data["ids"]
    df = read(spark, data, topic="events", startingOffsets=json.dumps({T: ids[5]}),
              endingOffsets=json.dumps({T: ids[12]}))
    assert values(df) == event_values(5, 12)
    # Split at an id, the two halves hold every message once.
    left = read(spark, data, topic="events", endingOffsets=json.dumps({T: ids[17]}))
    right = read(spark, data, topic="events", startingOffsets=json.dumps({T: ids[17]}))
    assert sorted(values(left) + values(right)) == event_values(0, 30)
    assert values(read(spark, data, topic="events", startingOffsets="latest")) == []
    assert values(read(spark, data, topic="events", startingOffsets="earliest",
                       endingOffsets="latest")) == event_values(0, 30)


def test_entry_minus_one_is_the_start_of_its_ledger(spark, data):
    third_ledger = data["ids"][14].split(":")[0]  # entries 14..20 are the third ledger
    df = read(spark, data, topic="events", startingOffsets=json.dumps({T: f"{third_ledger}:-1:-1"}),
              endingOffsets=json.dumps({T: data["ids"][21]}))
    assert values(df) == event_values(14, 21)


def test_offsets_per_partition(spark, data):
    rows = read(spark, data, topic="orders").collect()
    p1 = sorted((r for r in rows if r["__topic"].endswith("-1")),
                key=lambda r: tuple(int(x) for x in r["__messageId"].split(":")[:2]))
    start = {f"{PT}-partition-1": p1[1]["__messageId"], f"{PT}-partition-0": "latest",
             f"{PT}-partition-2": "latest"}
    df = read(spark, data, topic="orders", startingOffsets=json.dumps(start))
    assert sorted(r["__messageId"] for r in df.collect()) == sorted(r["__messageId"] for r in p1[1:])


def test_bad_offsets_are_one_clear_error(spark, data):
    with pytest.raises(PySparkException, match="startingOffsets must be earliest, latest or"):
        read(spark, data, topic="events", startingOffsets="{oops").collect()
    with pytest.raises(PySparkException, match="malformed message id"):
        read(spark, data, topic="events", startingOffsets=json.dumps({T: "x:y"})).collect()
    with pytest.raises(PySparkException, match="does not cover"):
        read(spark, data, topic="events",
             startingOffsets=json.dumps({OTHER: data["oids"][0]})).collect()
    with pytest.raises(PySparkException, match="is not on"):
        read(spark, data, topic="events", startingOffsets=json.dumps({T: "999:0:-1"})).collect()
    with pytest.raises(PySparkException, match="endingOffsets cannot be earliest"):
        read(spark, data, topic="events", endingOffsets="earliest").collect()


# -- time bounds ---------------------------------------------------------------------------------
def test_starting_and_ending_time(spark, data):
    df = read(spark, data, topic="events", startingTime=str(START_MS + 10),
              endingTime=str(START_MS + 20))
    assert values(df) == event_values(10, 20)
    iso = read(spark, data, topic="events", startingTime="2026-01-01T00:00:00.025Z")
    assert values(iso) == event_values(25, 30)
    offset = read(spark, data, topic="events", endingTime="2026-01-01T01:00:00.003+01:00")
    assert values(offset) == event_values(0, 3)
    with pytest.raises(PySparkException, match="neither epoch milliseconds nor an ISO"):
        read(spark, data, topic="events", startingTime="yesterday").collect()


# -- filters -------------------------------------------------------------------------------------
def test_publish_time_and_topic_filters(spark, data):
    df = read(spark, data, topicsPattern=NS + ".*")
    lo = F.timestamp_millis(F.lit(START_MS + 3))
    hi = F.timestamp_millis(F.lit(START_MS + 8))
    got = df.where((F.col("__publishTime") >= lo) & (F.col("__publishTime") < hi))
    assert values(got) == event_values(3, 8)
    gt = df.where((F.col("__publishTime") > lo) & (F.col("__publishTime") <= hi))
    assert values(gt) == event_values(4, 9)
    one = df.where(F.col("__topic") == f"{PT}-partition-2")
    assert {r["__topic"] for r in one.collect()} == {f"{PT}-partition-2"}
    both = df.where(F.col("__topic").isin(T, OTHER) & (F.col("__publishTime") < hi))
    assert values(both) == event_values(0, 8)
    starts = df.where(F.col("__topic").startswith(NS + "aud"))
    assert values(starts) == sorted(f"audit-{i}" for i in range(5))
    # Not pushed (a key filter), still right.
    keyed = df.where((F.col("__key") == "k1") & (F.col("__topic") == T))
    assert values(keyed) == sorted(f"event-{i}" for i in range(30) if i % 5 and i % 4 == 1)


def test_filters_are_pushed_into_the_plan(data):
    """The reader takes the filters it can answer exactly and narrows its plan with them."""
    from datetime import datetime, timezone

    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan

    from pulsarctl.spark.source import BatchReader
    from pulsarctl.spark.splits import SCHEMA

    r = BatchReader({"store": data["path"], "topicspattern": NS + ".*"}, SCHEMA)
    key = EqualTo(("__key",), "k1")
    t0 = datetime.fromtimestamp((START_MS + 3) / 1000, tz=timezone.utc)
    t1 = datetime.fromtimestamp((START_MS + 8) / 1000, tz=timezone.utc)
    left = list(r.pushFilters([GreaterThanOrEqual(("__publishTime",), t0),
                               LessThan(("__publishTime",), t1),
                               EqualTo(("__topic",), T), key]))
    assert left == [key]
    ranges = r.plan()
    assert [(p.name, e - s) for p, s, e, _ in ranges] == [(T, 5)]


# -- planning ------------------------------------------------------------------------------------
def test_partitions_planned_from_metadata(spark, data):
    assert read(spark, data, topic="events").rdd.getNumPartitions() >= 2
    df = read(spark, data, topic="events", minPartitions="6")
    assert df.rdd.getNumPartitions() == 6
    assert values(df) == event_values(0, 30)
    small = read(spark, data, topic="orders", maxEntriesPerPartition="2", minPartitions="1")
    assert small.rdd.getNumPartitions() >= 12
    assert small.count() == 24


def test_bounds_are_fixed_at_planning(spark, data, tmp_path):
    path = str(tmp_path / "store")
    b = Broker(path)
    b.publish("grows", [OutgoingMessage(b"a"), OutgoingMessage(b"b")])
    df = spark.read.format("pulsarctl").option("store", path).option("topic", "grows").load()
    plan = df.rdd  # planning happens here: the bounds are fixed now
    b.publish("grows", [OutgoingMessage(b"c")])
    assert sorted(plan.map(lambda r: r.value).collect()) == [b"a", b"b"]
    b.close()


def test_empty_topic_reads_nothing(spark, tmp_path):
    path = str(tmp_path / "store")
    b = Broker(path)
    b.topics.create("empty")
    b.close()
    df = spark.read.format("pulsarctl").option("store", path).option("topic", "empty").load()
    assert df.collect() == []


def test_compressed_and_chunked_messages_read_whole(spark, tmp_path):
    """A compressed payload comes out decompressed; a message stored in chunks comes out once,
    whole, at its last chunk's id, also when a Spark partition boundary cuts its chunks."""
    from pulsarctl import compression

    path = str(tmp_path / "store")
    b = Broker(path)
    _, small = b.publish("packed", [OutgoingMessage(b"z" * 300, {"c": "zlib"})],
                         compression=compression.ZLIB)
    b.policies.update_setting("maxMessageSize", "100")
    big = [bytes([65 + i]) * (250 + i) for i in range(3)]
    _, ids = b.publish("packed", [OutgoingMessage(p, key=f"big{i}") for i, p in enumerate(big)],
                       chunking=True)
    _, after = b.publish("packed", [OutgoingMessage(b"tail")])
    b.close()
    for options in ({}, {"maxEntriesPerPartition": "2", "minPartitions": "1"}):
        r = spark.read.format("pulsarctl").option("store", path).option("topic", "packed")
        for k, v in options.items():
            r = r.option(k, v)
        rows = sorted(r.load().collect(), key=lambda x: [int(p) for p in
                                                         x["__messageId"].split(":")[:2]])
        assert [x["value"] for x in rows] == [b"z" * 300] + big + [b"tail"]
        assert [x["__messageId"] for x in rows] == [str(i) for i in small + ids + after]
        assert [x["__key"] for x in rows[1:4]] == ["big0", "big1", "big2"]


def test_batched_messages_read_one_row_each_with_their_batch_index(spark, tmp_path):
    """A batch entry gives a row per message, its id ledger:entry:partition:batchIndex, its own
    key, properties and payload (the batch decompressed as a whole)."""
    import pulsarctl
    from pulsarctl.client import CompressionType

    path = str(tmp_path / "store")
    b = Broker(path)
    c = pulsarctl.Client(broker=b)
    p = c.create_producer("batched", batching_enabled=True, batching_max_messages=4,
                          batching_max_publish_delay_ms=60_000,
                          compression_type=CompressionType.LZ4)
    for i in range(10):
        p.send_async(f"b{i}".encode(), properties={"i": str(i)}, partition_key=f"k{i}")
    ids = [str(x) for x in p.flush()]
    one = c.create_producer("batched").send(b"alone")
    c.close()
    b.close()
    rows = (spark.read.format("pulsarctl").option("store", path).option("topic", "batched")
            .load().collect())
    by_id = {r["__messageId"]: r for r in rows}
    assert len(rows) == 11 and set(by_id) == set(ids) | {str(one)}
    assert ids[0].endswith(":0") and ids[5].endswith(":1")  # batches of 4: 0..3, 0..3, 0..1
    for i, mid in enumerate(ids):
        assert by_id[mid]["value"] == f"b{i}".encode()
        assert by_id[mid]["__key"] == f"k{i}"
        assert by_id[mid]["__messageProperties"] == {"i": str(i)}
    assert by_id[str(one)]["value"] == b"alone"
