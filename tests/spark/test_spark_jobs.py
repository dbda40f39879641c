"""The Spark jobs and their commands (pulsarctl/cli/spark_cmd.py): spark export, spark
dlq-report, spark dlq-reprocess. (The plain install's side is in test_spark_access.py.)"""
from __future__ import annotations

import base64
import json

import pytest

pytest.importorskip("pyspark")  # the plain install has no Spark; CI installs pulsarctl[spark]
pytest.importorskip("pyarrow")

from pulsarctl.broker import Broker  # noqa: E402
from pulsarctl.clock import SimulatedClock  # noqa: E402
from pulsarctl.errors import InvalidValue  # noqa: E402
from pulsarctl.messages import OutgoingMessage  # noqa: E402
from spark_fixtures import START_MS, spark  # noqa: E402,F401

NS = "persistent://public/default/"
HOUR = 3_600_000


@pytest.fixture
def spark_cli(spark, cli):
    """The CLI, once the session fixture has started Spark (the commands reuse it)."""
    return cli


def _dead_letters(path, dlq="orders-billing-DLQ"):
    """A DLQ filled as dead letter moves fill one: REAL_TOPIC / REAL_SUBSCRIPTION properties,
    plus a reason, over three hours of a simulated clock."""
    clock = SimulatedClock(START_MS)
    b = Broker(path, clock)
    b.topics.create_partitioned("payments", 2)
    plan = [("orders", "billing", "timeout", 3), ("orders", "billing", "bad-json", 2),
            ("payments", "ledger", "timeout", 1), ("orders", "audit", None, 2)]
    letters = []  # (message id, payload, origin topic)
    for hour in range(3):
        for topic, sub, reason, n in plan[hour:hour + 2]:
            for i in range(n):
                props = {"REAL_TOPIC": NS + topic, "REAL_SUBSCRIPTION": sub}
                if reason:
                    props["reason"] = reason
                payload = f"{topic}-{hour}-{reason}-{i}".encode()
                _, got = b.publish(dlq, [OutgoingMessage(payload, props, key=f"k{i}")])
                letters.append((str(got[0]), payload, NS + topic))
        clock.advance(HOUR)
    b.close()
    return NS + dlq, letters


def test_export_parquet_and_json(spark, spark_cli, store_path, tmp_path):
    b = Broker(store_path)
    _, ids = b.publish("exp", [OutgoingMessage(f"m{i}".encode(), {"i": str(i)}, key=f"k{i}")
                               for i in range(10)])
    b.close()
    out = tmp_path / "pq"
    r = spark_cli("spark", "export", "exp", "--out", str(out), "-o", "json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc == {"topic": NS + "exp", "format": "parquet", "out": str(out), "rows": 10}
    rows = spark.read.parquet(str(out)).orderBy("__messageId").collect()
    assert [(x["value"], x["__key"], x["__messageProperties"]["i"]) for x in rows] == [
        (f"m{i}".encode(), f"k{i}", str(i)) for i in range(10)]
    js = tmp_path / "js"
    r = spark_cli("spark", "export", "exp", "--out", str(js), "--format", "json",
                  "--ending-offsets", json.dumps({NS + "exp": str(ids[4])}))
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "" and "exported 4 message(s)" in r.stderr
    lines = [json.loads(x) for f in sorted(js.glob("part-*.json")) for x in f.read_text().splitlines()]
    assert sorted(base64.b64decode(x["value"]) for x in lines) == [b"m0", b"m1", b"m2", b"m3"]
    # Bad input: one line, an exit code, nothing written.
    r = spark_cli("spark", "export", "exp", "--out", str(out))
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "exists" in r.stderr
    r = spark_cli("spark", "export", "nope", "--out", str(tmp_path / "x"))
    assert r.exit_code == 3 and "does not exist" in r.stderr
    assert not (tmp_path / "x").exists()
    r = spark_cli("spark", "export", "exp", "--out", str(tmp_path / "y"), "--format", "csv")
    assert r.exit_code == 2 and "parquet or json" in r.stderr
    r = spark_cli("spark", "export", "exp", "--out", str(tmp_path / "z"),
                  "--starting-offsets", "{bad")
    assert r.exit_code == 2 and r.stderr.startswith("error: startingOffsets")
    # Spark's own failure is said by its cause, not by Spark's "An error occurred while
    # calling o65.parquet."
    r = spark_cli("spark", "export", "exp", "--out", "/proc/pulsarctl-test/out")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "export failed: java.io.IOException: Mkdirs failed to create" in r.stderr


def _export_in_a_subprocess(store_path, out, **env):
    """`pulsarctl spark export one --out OUT` as a new process (its own JVM), on a topic of one
    message; returns the finished process."""
    import os
    import subprocess
    import sys

    b = Broker(store_path)
    b.publish("one", [OutgoingMessage(b"x")])
    b.close()
    return subprocess.run([sys.executable, "-m", "pulsarctl", "spark", "export", "one", "--out",
                           str(out)], capture_output=True, timeout=300,
                          env={**os.environ, "PULSARCTL_STORE": store_path, **env})


def test_a_spark_command_says_one_line_on_stderr(store_path, tmp_path):
    """Spark's JVM warns at every start (WARNING: Using incubator modules: ...): a command's
    stderr is still its one line, which is all a cron job mails."""
    out = tmp_path / "o"
    p = _export_in_a_subprocess(store_path, out)
    assert p.returncode == 0, p.stderr
    assert p.stderr.decode().splitlines() == [
        f"exported 1 message(s) of {NS}one to {out} (parquet)"]


def test_a_jvm_that_does_not_start_is_one_line_naming_the_cause(store_path, tmp_path):
    p = _export_in_a_subprocess(store_path, tmp_path / "o", JAVA_HOME=str(tmp_path / "no-java"))
    assert p.returncode == 1
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: Spark's JVM did not start: ")
    assert "no-java/bin/java" in lines[0] and "install Java 17" in lines[0]
    assert not (tmp_path / "o").exists()


def test_dlq_report(spark_cli, store_path, tmp_path):
    dlq, letters = _dead_letters(store_path)
    ids = [i for i, _, _ in letters]
    r = spark_cli("spark", "dlq-report", dlq, "-o", "json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["topic"] == dlq and doc["messages"] == 11 and doc["reasonProperty"] == "reason"
    assert doc["rows"] == [
        {"hour": "2026-01-01T00:00:00Z", "realTopic": NS + "orders",
         "realSubscription": "billing", "reason": "timeout", "count": 3},
        {"hour": "2026-01-01T00:00:00Z", "realTopic": NS + "orders",
         "realSubscription": "billing", "reason": "bad-json", "count": 2},
        {"hour": "2026-01-01T01:00:00Z", "realTopic": NS + "orders",
         "realSubscription": "billing", "reason": "bad-json", "count": 2},
        {"hour": "2026-01-01T01:00:00Z", "realTopic": NS + "payments",
         "realSubscription": "ledger", "reason": "timeout", "count": 1},
        {"hour": "2026-01-01T02:00:00Z", "realTopic": NS + "orders",
         "realSubscription": "audit", "reason": "(none)", "count": 2},
        {"hour": "2026-01-01T02:00:00Z", "realTopic": NS + "payments",
         "realSubscription": "ledger", "reason": "timeout", "count": 1},
    ]
    # Handled dead letters are left out (as `dlq stats` counts), unless --all.
    b = Broker(store_path)
    from pulsarctl.messages import parse_message_id

    b.dlq(dlq).ack([parse_message_id(i) for i in ids[:3]])
    b.close()
    doc = json.loads(spark_cli("spark", "dlq-report", dlq, "-o", "json").stdout)
    assert doc["messages"] == 8 and doc["rows"][0]["reason"] == "bad-json"
    assert json.loads(spark_cli("spark", "dlq-report", dlq, "--all", "-o", "json")
                      .stdout)["messages"] == 11
    text = spark_cli("spark", "dlq-report", dlq, "--reason-property", "nope")
    assert text.exit_code == 0 and "REAL_SUBSCRIPTION" in text.stdout and "(none)" in text.stdout
    png = tmp_path / "report.png"
    r = spark_cli("spark", "dlq-report", dlq, "--png", str(png))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "matplotlib" in r.stderr
    else:
        assert r.exit_code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = spark_cli("spark", "dlq-report", "no-such-DLQ")
    assert r.exit_code == 3 and "does not exist" in r.stderr


TRANSFORM = '''
from pyspark.sql import functions as F

def shout(df):
    return df.withColumn("value", F.upper(F.col("value").cast("string")).cast("binary"))

def to_nowhere(df):
    return df.withColumn("__topic", F.lit("persistent://no-tenant/ns/x"))

@F.udf("binary")
def _refuse(value):
    raise ValueError("cannot repair this letter")

def refuse(df):
    return df.withColumn("value", _refuse(F.col("value")))
'''


def test_dlq_reprocess(spark_cli, store_path, tmp_path, monkeypatch):
    dlq, letters = _dead_letters(store_path)
    (tmp_path / "fixes.py").write_text(TRANSFORM)
    monkeypatch.syspath_prepend(str(tmp_path))
    b = Broker(store_path)
    from pulsarctl.messages import parse_message_id

    b.dlq(dlq).ack([parse_message_id(letters[1][0])])  # handled already: not reprocessed
    b.close()
    waiting = letters[:1] + letters[2:]

    # A write that fails leaves every dead letter waiting.
    r = spark_cli("spark", "dlq-reprocess", dlq, "--transform", "fixes:to_nowhere")
    assert r.exit_code != 0 and r.stderr.count("\n") == 1, r.stderr
    b = Broker(store_path, readonly=True)
    assert b.dlq(dlq).count() == 10
    b.close()

    # A transform that raises in the workers: its own error is the one line, not Spark's.
    r = spark_cli("spark", "dlq-reprocess", dlq, "--transform", "fixes:refuse")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "dlq-reprocess failed: ValueError: cannot repair this letter" in r.stderr
    b = Broker(store_path, readonly=True)
    assert b.dlq(dlq).count() == 10
    b.close()

    r = spark_cli("spark", "dlq-reprocess", dlq, "--transform", "fixes:shout", "-o", "json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc == {"topic": dlq, "read": 10, "written": 10, "acknowledged": 10,
                   "topics": {NS + "orders": 8, NS + "payments": 2}}
    b = Broker(store_path, readonly=True)
    assert b.dlq(dlq).count() == 0
    orders, _, _ = b.read_entries("orders", 0, 100)
    assert sorted(m.payload for m in orders) == sorted(
        p.upper() for _, p, t in waiting if t == NS + "orders")
    assert all(m.properties()["REAL_SUBSCRIPTION"] in ("billing", "audit") for m in orders)
    pay = [m for i in range(2) for m in b.read_entries(f"payments-partition-{i}", 0, 100)[0]]
    assert sorted(m.payload for m in pay) == sorted(
        p.upper() for _, p, t in waiting if t == NS + "payments")
    b.close()
    r = spark_cli("spark", "dlq-reprocess", dlq, "-o", "json")
    assert json.loads(r.stdout)["read"] == 0
    r = spark_cli("spark", "dlq-reprocess", dlq, "--transform", "fixes:nothing")
    assert r.exit_code == 2 and "no function 'nothing'" in r.stderr
    r = spark_cli("spark", "dlq-reprocess", dlq, "--transform", "no_such_fixes:shout")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "cannot import 'no_such_fixes'" in r.stderr


def test_a_transform_is_found_in_the_current_directory_and_imported_once_spark_runs(
        tmp_path, monkeypatch):
    """As `python -m` finds it (a console script's sys.path lacks the current directory); and
    only checked, not imported, before Spark starts: a module may make UDFs as it loads."""
    import sys

    from pulsarctl.spark import jobs

    (tmp_path / "here_fixes.py").write_text("LOADED = []\nLOADED.append(1)\n"
                                            "def repair(df):\n    return df\n")
    (tmp_path / "broken_fixes.py").write_text("raise RuntimeError('half-written module')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert jobs.find_transform("here_fixes:repair") == ("here_fixes", "repair")
    assert "here_fixes" not in sys.modules
    mod, fn = jobs.load_transform("here_fixes:repair")
    assert mod.LOADED == [1] and fn("df") == "df"
    assert sys.path[-1] == str(tmp_path)  # after every installed package, shadowing none
    with pytest.raises(InvalidValue, match="RuntimeError: half-written module"):
        jobs.load_transform("broken_fixes:repair")
    for bad in ("fixes", ":f", "m:", ".rel:f"):
        with pytest.raises(InvalidValue):
            jobs.find_transform(bad)
    monkeypatch.delitem(sys.modules, "here_fixes")


def test_dlq_reprocess_again_after_a_crash_before_the_ack(spark, store_path, monkeypatch):
    """The write committed, the ack did not happen: the next run writes nothing twice."""
    from pulsarctl.spark import jobs

    dlq, _letters = _dead_letters(store_path)
    calls = {"n": 0}
    from pulsarctl.broker.admin.dlq import Dlq

    real = Dlq.ack

    def dies(self, ids):
        calls["n"] += 1
        raise RuntimeError("killed between the write and the ack")

    monkeypatch.setattr(Dlq, "ack", dies)
    with pytest.raises(RuntimeError):
        jobs.dlq_reprocess(spark, store_path, dlq)
    assert calls["n"] == 1
    monkeypatch.setattr(Dlq, "ack", real)
    b = Broker(store_path)
    b.publish(dlq, [OutgoingMessage(b"late", {"REAL_TOPIC": NS + "orders"})])  # arrives between
    b.close()
    doc = jobs.dlq_reprocess(spark, store_path, dlq)
    assert doc["read"] == 12 and doc["acknowledged"] == 12
    b = Broker(store_path, readonly=True)
    orders, _, _ = b.read_entries("orders", 0, 100)
    assert len(orders) == 10  # 9 dead letters of orders + the late one, each once
    assert sorted(m.payload for m in orders).count(b"late") == 1
    assert b.dlq(dlq).count() == 0
    b.close()
