"""The data source's benchmark (pulsarctl/spark/bench.py, `pulsarctl spark bench`) and its
ceiling source (pulsarctl/spark/_ceiling.py), on the shared local Spark session."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")  # the plain install has no Spark; CI installs pulsarctl[spark]
pytest.importorskip("pyarrow")

from pulsarctl.broker import Broker  # noqa: E402
from pulsarctl.messages import OutgoingMessage  # noqa: E402
from pulsarctl.spark import bench  # noqa: E402
from pulsarctl.spark._ceiling import NAME as CEILING  # noqa: E402
from pulsarctl.spark._ceiling import CeilingDataSource, parts  # noqa: E402
from spark_fixtures import spark  # noqa: E402,F401

READS = ("read", "readTwoColumns", "readBatched", "readCeiling", "parquet")


@pytest.fixture
def no_warmup(monkeypatch):
    """The warm-up rounds only steady the timings; what these tests check is what is timed
    and reported (test_rounds_warm_up_every_read_untimed covers the warm-up itself), so
    they skip the two untimed rounds of five Spark reads each."""
    monkeypatch.setattr(bench, "WARMUP_ROUNDS", 0)


def test_rounds_warm_up_every_read_untimed():
    calls = []
    reads = {name: (lambda name=name: calls.append(name)) for name in ("a", "b")}
    times = bench._rounds(reads, 3)
    assert bench.WARMUP_ROUNDS == 2
    assert calls == ["a", "b"] * (2 + 3)  # every read in turn, warm-ups first
    assert {k: len(v) for k, v in times.items()} == {"a": 3, "b": 3}


def _check(doc, n):
    assert doc["messages"] == n
    assert doc["cores"] >= 1
    for key in READS:
        t = doc[key]
        assert 0 < t["seconds"] <= t["medianSeconds"], (key, t)
        assert t["rowsPerSec"] == pytest.approx(n / t["seconds"], rel=0.05)
    for ratio, read in (("readVsParquet", "read"), ("ceilingVsParquet", "readCeiling")):
        assert doc[ratio] == pytest.approx(doc["parquet"]["seconds"] / doc[read]["seconds"],
                                           rel=0.05)
        assert doc[ratio + "Median"] == pytest.approx(
            doc["parquet"]["medianSeconds"] / doc[read]["medianSeconds"], rel=0.05)
    assert doc["write"]["rows"] == n and doc["write"]["rowsPerSec"] > 0


def test_run_times_every_read_on_the_same_rows_and_leaves_a_given_session_running(
        spark, tmp_path, no_warmup):
    store = str(tmp_path / "store")
    doc = bench.run(n=1200, size=16, store=store, repeat=2, spark=spark)
    _check(doc, 1200)
    assert doc["repeat"] == 2
    # The write landed, each row once, and the session is still the caller's to use.
    b = Broker(store)
    assert b.topics.stats(bench.WRITE_TOPIC)["msgInCounter"] == 1200
    assert b.topics.stats(bench.TOPIC)["msgInCounter"] == 1200
    assert b.topics.stats(bench.BATCHED_TOPIC)["msgInCounter"] == 1200
    assert b.topics.internal_stats(bench.BATCHED_TOPIC)["entriesAddedCounter"] == 2  # 1000 + 200
    b.close()
    assert spark.range(3).count() == 3


def test_the_ceiling_source_hands_over_exactly_the_parquet_rows(spark, tmp_path):
    """What the ceiling reads is the data source's own rows, as Spark wrote them to Parquet,
    partition by partition (one per part file), in the source's schema."""
    store = str(tmp_path / "store")
    b = Broker(store)
    b.publish("ceil", [OutgoingMessage(f"m{i}".encode(), {"i": str(i)}, key=f"k{i % 3}")
                       for i in range(50)])
    b.close()
    src = (spark.read.format("pulsarctl").option("store", store).option("topic", "ceil")
           .option("minPartitions", 3).load())
    pq = str(tmp_path / "ceil.parquet")
    src.write.parquet(pq)
    spark.dataSource.register(CeilingDataSource)
    ceiling = spark.read.format(CEILING).option("path", pq).load()
    assert ceiling.schema == src.schema
    assert ceiling.rdd.getNumPartitions() == len(parts(pq)) == 3
    key = ["__messageId"]
    assert ceiling.sort(key).collect() == src.sort(key).collect()
    assert sorted(r["value"] for r in ceiling.collect()) == sorted(
        f"m{i}".encode() for i in range(50))


def test_the_command_prints_every_read_and_the_ratios(spark, cli, no_warmup):
    r = cli("spark", "bench", "-n", "600", "-s", "8", "--repeat", "1", "-o", "json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    _check(doc, 600)
    assert spark.range(2).count() == 2  # the command did not stop the running session
    r = cli("spark", "bench", "-n", "300", "--repeat", "1")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == ["read", "read", "read", "ceiling", "parquet",
                                              "source", "write"]
    assert "in batches of 1000" in lines[2]
    assert "of Parquet" in lines[5] and "by medians" in lines[5]


@pytest.mark.parametrize("args", [["-n", "0"], ["-n", "abc"], ["--repeat", "0"],
                                  ["-s", "-1"]])
def test_bad_numbers_are_one_line_and_exit_2(cli, args):
    r = cli("spark", "bench", *args)
    assert r.exit_code == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
