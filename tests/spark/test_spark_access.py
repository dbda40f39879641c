"""What needs no Spark (these run on the plain install too): that pulsarctl, its CLI and
pulsarctl.spark import without pyspark, and a spark command then says what to install in one
line; and pulsarctl/spark/_access.py: option parsing, message ids to offsets, the handle cache,
data loss, and how a subscription is acknowledged as stream batches commit."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pulsarctl.broker import Broker
from pulsarctl.errors import InvalidMessageId, InvalidValue, MessageNotFound
from pulsarctl.messages import MessageId, OutgoingMessage
from pulsarctl.names import parse_topic
from pulsarctl.spark import _access as access

NS = "persistent://public/default/"
ROOT = Path(__file__).resolve().parents[2]


def test_only_the_data_source_modules_import_pyspark_or_pyarrow_at_load():
    """import pulsarctl, the CLI and pulsarctl.spark itself never load pyspark or pyarrow: only
    the modules Spark loads (source and the reader and writer modules it joins, _arrow, _columnar
    with _chunk and _field_walk, _batched, _ceiling) and bench/jobs
    inside functions do."""
    allowed = {"pulsarctl/spark/source.py", "pulsarctl/spark/splits.py",
               "pulsarctl/spark/stream.py", "pulsarctl/spark/writer.py",
               "pulsarctl/spark/_arrow.py", "pulsarctl/spark/_columnar.py",
               "pulsarctl/spark/_chunk.py", "pulsarctl/spark/_field_walk.py",
               "pulsarctl/spark/_batched.py", "pulsarctl/spark/_ceiling.py"}
    found = []
    for path in sorted((ROOT / "pulsarctl").rglob("*.py")) + sorted((ROOT / "store").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Try):
                names = [a.name for n in node.body if isinstance(n, ast.Import) for a in n.names]
                names += [n.module or "" for n in node.body if isinstance(n, ast.ImportFrom)]
            for n in names:
                if n.split(".")[0] in ("pyspark", "pyarrow") and rel not in allowed:
                    found.append(f"{rel}: {n}")
    assert not found, found
    # and nothing outside pulsarctl/spark imports pulsarctl.spark (store and broker never do)
    for path in sorted((ROOT / "store").rglob("*.py")) + sorted(
            (ROOT / "pulsarctl" / "broker").rglob("*.py")):
        assert "pulsarctl.spark" not in path.read_text(encoding="utf-8"), path


def test_without_pyspark_the_cli_works_and_spark_commands_say_what_to_install(tmp_path):
    code = textwrap.dedent("""
        import sys
        sys.modules["pyspark"] = None      # as if it were not installed
        sys.modules["pyarrow"] = None
        import pulsarctl, pulsarctl.spark
        from pulsarctl.cli import app, spark_cmd
        assert app.run(["--store", sys.argv[1], "produce", "t", "-m", "x"]) == 0
        code = app.run(["--store", sys.argv[1], "spark", "export", "t", "--out", sys.argv[2]])
        assert "pyspark" not in sys.modules or sys.modules["pyspark"] is None
        sys.exit(code)
    """)
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "store"),
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and "install 'pulsarctl[spark]'" in lines[0]
    assert not (tmp_path / "out").exists()


def test_times():
    assert access.parse_time_ms("1767225600123", "t") == 1_767_225_600_123
    assert access.parse_time_ms("2026-01-01T00:00:00.123Z", "t") == 1_767_225_600_123
    assert access.parse_time_ms("2026-01-01T01:00:00+01:00", "t") == 1_767_225_600_000
    assert access.parse_time_ms("2026-01-01 00:00:01", "t") == 1_767_225_601_000  # UTC
    with pytest.raises(InvalidValue, match="neither epoch milliseconds nor an ISO 8601"):
        access.parse_time_ms("soon", "startingTime")


def test_offsets_options():
    assert access.parse_offsets(" Earliest ", "x") == "earliest"
    assert access.parse_offsets(None, "x") is None
    got = access.parse_offsets('{"t": "3:4:-1", "a/b/c": "latest", "u": "-1:-1:-1"}', "x")
    assert got == {NS + "t": MessageId(3, 4, -1), "persistent://a/b/c": "latest",
                   NS + "u": "earliest"}
    with pytest.raises(InvalidValue, match="x must be earliest, latest or a JSON object"):
        access.parse_offsets("[1]", "x")
    with pytest.raises(InvalidMessageId):
        access.parse_offsets('{"t": "3"}', "x")
    with pytest.raises(InvalidValue, match="must be a message id string"):
        access.parse_offsets('{"t": 3}', "x")
    with pytest.raises(InvalidValue, match="exactly one of"):
        access.topic_options({})
    kind, spec = access.topic_options({"topics": "a, b,a"})
    assert kind == "names" and [str(t) for t in spec] == [NS + "a", NS + "b"]
    with pytest.raises(InvalidValue, match="not a valid regular expression"):
        access.topic_options({"topicspattern": "a(("})
    with pytest.raises(InvalidValue, match="takes true or false"):
        access.flag({"failondataloss": "maybe"}, "failOnDataLoss", True)
    with pytest.raises(InvalidValue, match="at least 1"):
        access.whole({"minpartitions": "0"}, "minPartitions", 2)


def test_ids_and_offsets(store_path):
    b = Broker(store_path)
    b.policies.update_setting("managedLedgerMaxEntriesPerLedger", "3")
    _, ids = b.publish("t", [OutgoingMessage(b"%d" % i) for i in range(7)])
    b.close()
    b = access.broker(store_path)
    (part,) = access.resolve_parts(b, "names", [parse_topic("t")])
    assert (part.first, part.next) == (0, 7)
    for o, mid in enumerate(ids):
        assert access.offset_of_id(part, mid) == o
        assert access.position_at(part, o) == (mid.ledger_id, mid.entry_id)
    second = ids[3].ledger_id
    assert access.offset_of_id(part, MessageId(second, -1)) == 3  # the start of its ledger
    assert access.boundary_id(part, 7) == f"{ids[6].ledger_id}:{ids[6].entry_id + 1}:-1"
    assert access.offset_of_id(part, MessageId(ids[6].ledger_id, ids[6].entry_id + 1)) == 7
    with pytest.raises(MessageNotFound, match="is not on"):
        access.offset_of_id(part, MessageId(999, 0))
    assert access.bound(part, {NS + "t": ids[2]}, "earliest", "x") == 2
    assert access.bound(part, {NS + "other": ids[2]}, "latest", "x") == 7
    assert [str(m) for m in access.ids_between(part, 2, 5)] == [str(m) for m in ids[2:5]]


def test_handles_follow_the_store_at_a_path(tmp_path):
    path = str(tmp_path / "s")
    b = Broker(path)
    b.publish("t", [OutgoingMessage(b"old")])
    b.close()
    r1 = access.broker(path)
    assert access.broker(path) is r1
    w = access.broker(path, write=True)
    assert access.broker(path) is r1  # a writer beside a reader: both stay open
    assert r1.read_entries("t", 0, 10)[0][0].payload == b"old"
    # Another process replaces the store (as a test suite's next tmp store at a reused path, or
    # a person's `rm -rf` and new store) while this worker keeps its handles.
    shutil.rmtree(path)
    code = ("import sys; from pulsarctl.broker import Broker; from pulsarctl.messages import "
            "OutgoingMessage; Broker(sys.argv[1]).publish('t', [OutgoingMessage(b'new')])")
    subprocess.run([sys.executable, "-c", code, path], check=True, timeout=60)
    r2 = access.broker(path)
    assert r2 is not r1
    assert r2.read_entries("t", 0, 10)[0][0].payload == b"new"
    assert w is not access.broker(path, write=True)


def test_a_topic_deleted_while_read_is_data_loss(store_path):
    b = Broker(store_path)
    b.publish("gone", [OutgoingMessage(b"x")] * 3)
    (part,) = access.resolve_parts(b, "names", [parse_topic("gone")])
    b.topics.delete("gone")
    b.publish("gone", [OutgoingMessage(b"y")] * 5)  # the same name, another managed ledger
    b.close()
    r = access.broker(store_path)
    with pytest.raises(access.DataLoss, match="deleted while it was being read"):
        access.scan_chunk(r, part.name, part.ml_id, 0, 3, 100, 1 << 20, True)
    assert access.scan_chunk(r, part.name, part.ml_id, 0, 3, 100, 1 << 20, False) == (3, [], [])


@pytest.mark.parametrize("kind", ["Exclusive", "Shared"])
def test_ack_through(store_path, kind):
    b = Broker(store_path)
    _, ids = b.publish("acks", [OutgoingMessage(b"%d" % i) for i in range(6)])
    if kind == "Shared":
        b.subscribe("acks", "etl", "c1", "Shared", "Earliest")
        b.close_consumer("acks", "etl", "c1")
    w = access.broker(store_path, write=True)
    (part,) = access.resolve_parts(w, "names", [parse_topic("acks")])
    assert access.ack_through(w, "etl", {part.name: (part.ml_id, 0, 4)}) == 4
    d = w.subscription("acks", "etl").describe()
    # a subscription no consumer ever had is of type None, as Pulsar reports it
    assert d["type"] == ("Shared" if kind == "Shared" else "None") and d["msgBacklog"] == 2
    assert d["markDeletePosition"] == f"{ids[3].ledger_id}:{ids[3].entry_id}"
    assert access.ack_through(w, "etl", {part.name: (part.ml_id, 4, 4)}) == 0
    assert access.ack_through(w, "etl", {part.name: (part.ml_id, 4, 6)}) == 2
    assert w.subscription("acks", "etl").describe()["msgBacklog"] == 0
    b.close()


# What Spark raises, as its text reads (stack frames shortened).
_WORKER = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/jobs/fixes.py", line 5, in repair
    raise KeyError("id")
KeyError: 'id'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/jobs/fixes.py", line 7, in repair
    raise ValueError("cannot repair this letter")
ValueError: cannot repair this letter
"""
_JAVA = """An error occurred while calling o65.parquet.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 failed
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:1)

Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.abortStage(DAGScheduler.scala:2)
Caused by: org.apache.hadoop.fs.FileAlreadyExistsException: wrapper
Caused by: java.io.IOException: Mkdirs failed to create file:/proc/x (exists=false)
\t... 1 more
"""
_JAVA_WRAPPING_PYTHON = """An error occurred while calling o90.save.
: org.apache.spark.SparkException: Job aborted due to stage failure: most recent failure: \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/jobs/fixes.py", line 3, in boom
ZeroDivisionError: division by zero

\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)
Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/jobs/fixes.py", line 3, in boom
ZeroDivisionError: division by zero
"""


@pytest.mark.parametrize("text,line", [
    (_WORKER, "ValueError: cannot repair this letter"),
    (_JAVA, "java.io.IOException: Mkdirs failed to create file:/proc/x (exists=false)"),
    (_JAVA_WRAPPING_PYTHON, "ZeroDivisionError: division by zero"),
    (": org.apache.spark.SparkException: Job aborted\n\tat x.y(Z.java:1)\n",
     "org.apache.spark.SparkException: Job aborted"),
    ("[PATH_NOT_FOUND] Path does not exist: file:/nope. SQLSTATE: 42K03\n",
     "[PATH_NOT_FOUND] Path does not exist: file:/nope. SQLSTATE: 42K03"),
    ("", "Py4JError"),
])
def test_a_spark_error_is_summed_up_by_the_line_that_says_what_went_wrong(text, line):
    from pulsarctl.spark.jobs import summary

    assert summary(text, "Py4JError") == line
