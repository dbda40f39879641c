"""The Spark test session: one local SparkSession for the whole test run (starting one takes
seconds), shared by every tests/test_spark*.py module that imports these fixtures.

local[2,4]: two worker threads, and a task may fail up to 4 times before its job does, so a
test can fail a task on purpose and watch Spark run it again.

PULSARCTL_STORE is set while the session starts: Spark's Python workers inherit the JVM's
environment, so a test of the default store needs it fixed then (and it is put back after,
for the other tests of the run).
"""
from __future__ import annotations

import os

import pytest

from simclock import START_MS  # noqa: F401  (2026-01-01T00:00:00Z)

_SESSION = {}


def _start(default_store: str):
    if "spark" not in _SESSION:
        from pulsarctl import spark as ps

        before = os.environ.get("PULSARCTL_STORE")
        os.environ["PULSARCTL_STORE"] = default_store
        try:
            _SESSION["spark"] = ps.session(
                "pulsarctl-tests", master="local[2,4]",
                conf={"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2"})
        finally:
            # The JVM (and so every Python worker) has it now; other tests must not.
            if before is None:
                os.environ.pop("PULSARCTL_STORE", None)
            else:
                os.environ["PULSARCTL_STORE"] = before
        _SESSION["default_store"] = default_store
    return _SESSION["spark"]


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    s = _start(str(tmp_path_factory.mktemp("default-store") / "store"))
    yield s
    if _SESSION.pop("spark", None) is not None:
        s.stop()


@pytest.fixture(scope="session")
def default_store(spark):
    return _SESSION["default_store"]
