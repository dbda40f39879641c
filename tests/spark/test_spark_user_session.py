"""The data source in a session the user made (not pulsarctl.spark.session()): register() must
make it readable there, filters and all (issue 14, item 5).

Spark allows one SparkContext per JVM and the test session is shared by the whole run, so the
user's session lives in a subprocess of its own: SparkSession.builder...getOrCreate(), then
pulsarctl.spark.register(spark), as the README tells a user to do. One JVM start covers both
cases: the setting turned on by register(), and a session that refuses to change it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")  # the plain install has no Spark; CI installs pulsarctl[spark]
pytest.importorskip("pyarrow")

from pulsarctl.broker import Broker  # noqa: E402
from pulsarctl.clock import SimulatedClock  # noqa: E402
from pulsarctl.messages import OutgoingMessage  # noqa: E402
from simclock import START_MS  # noqa: E402

# What a user writes: a session of their own, then register(). The UI is off and the address
# is 127.0.0.1 (SPARK_LOCAL_IP below) only because tests bind nothing else.
USER_SCRIPT = r"""
import json, sys
from datetime import datetime, timezone

from pyspark.sql import SparkSession, functions as F
from pyspark.sql.conf import RuntimeConfig

import pulsarctl.spark

CONF = "spark.sql.python.filterPushdown.enabled"
store = sys.argv[1]
spark = (SparkSession.builder.master("local[1]").appName("mine")
         .config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
out = {"before": spark.conf.get(CONF, None)}


def read(fmt):
    # A DataFrame per query: Spark 4.3 keeps the plan of a pushed-down read on the relation,
    # and a later query of the same DataFrame without filters would reuse it.
    def df():
        return spark.read.format(fmt).option("store", store).option("topic", "t").load()

    at = datetime.fromtimestamp(int(sys.argv[2]) / 1000, tz=timezone.utc)
    return {
        "keyed": sorted(r.value.decode() for r in df().where(F.col("__key") == "k1").collect()),
        "since": sorted(r.value.decode() for r in df().where(F.col("__publishTime") >= at)
                        .collect()),
        "all": df().count(),
    }


out["pushdown"] = pulsarctl.spark.register(spark)
out["after"] = spark.conf.get(CONF)
out["read"] = read("pulsarctl")

# A session that will not have the setting changed: the source must read without pushdown.
spark.conf.set(CONF, "false")
real_set = RuntimeConfig.set


def refuse(self, key, value):
    if key == CONF:
        raise RuntimeError("this session's settings are fixed")
    return real_set(self, key, value)


RuntimeConfig.set = refuse
out["fallbackPushdown"] = pulsarctl.spark.register(spark)
out["fallbackConf"] = spark.conf.get(CONF)
out["fallback"] = read("pulsar")
spark.stop()
print("RESULT " + json.dumps(out))
"""


def test_a_session_made_by_the_user_reads_with_filters_after_register(store_path, tmp_path):
    clock = SimulatedClock(START_MS)
    b = Broker(store_path, clock)
    for i, key in enumerate(["k1", "k2", "k1", "k2"]):
        b.publish("t", [OutgoingMessage(f"m{i}".encode(), key=key)])
        clock.advance(1000)
    b.close()
    venv_bin = os.path.dirname(sys.executable)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
           # as in an activated virtualenv: Spark's Python workers run `python3` from PATH
           "PATH": venv_bin + os.pathsep + os.environ.get("PATH", "")}
    for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PULSARCTL_STORE"):
        env.pop(k, None)
    # Run from a directory of its own: one holding the store (a directory named store) would
    # shadow the package of that name in Spark's Python workers.
    home = tmp_path / "home"
    home.mkdir()
    p = subprocess.run([sys.executable, "-c", USER_SCRIPT, store_path, str(START_MS + 2000)],
                       capture_output=True, text=True, timeout=300, cwd=str(home), env=env)
    lines = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT "):])
    want = {"keyed": ["m0", "m2"], "since": ["m2", "m3"], "all": 4}
    # Spark's default is off; register() turned it on, and the filters were pushed down.
    assert out["before"] in (None, "false")
    assert out["pushdown"] is True and out["after"] == "true"
    assert out["read"] == want
    # Where it cannot be turned on, the source is registered without pushdown: same rows.
    assert out["fallbackPushdown"] is False and out["fallbackConf"] == "false"
    assert out["fallback"] == want
