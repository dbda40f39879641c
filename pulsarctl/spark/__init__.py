"""pulsarctl on Apache Spark: a PySpark data source for the topics of a store, and the jobs
built on it (export, dead letter reports, dead letter reprocessing).

    pip install 'pulsarctl[spark]'            # pyspark >= 4.2 and pyarrow

    from pulsarctl import spark as ps
    spark = ps.session()                      # a local SparkSession, configured and registered
    df = (spark.read.format("pulsarctl").option("store", "/path/to/store")
          .option("topic", "persistent://public/default/orders").load())

`register(spark)` registers the source on a session made elsewhere, under the format names
`pulsarctl` and `pulsar`, and turns spark.sql.python.filterPushdown.enabled on for that session
so that it takes filters (where the setting cannot be changed, it registers the source without
pushdown: Spark then filters the rows read).

Columns, as StreamNative's pulsar-spark: value (binary), __key (string), __topic (the full
name of the topic partition), __messageId ("ledger:entry:partition", as message ids print),
__publishTime, __eventTime (timestamps; null when unset), __messageProperties
(map<string,string>); plus __producerName, __sequenceId and __redeliveryCount (always null:
a read is not a delivery). A schema with fewer of these columns (.schema("value binary")) is
read with less work.

Read options (names are case-insensitive):
    store                the store directory (default: as the CLI finds it: $PULSARCTL_STORE,
                         the config file, ~/.local/share/pulsarctl/store)
    topic | topics | topicsPattern
                         one topic, a comma-separated list, or a regular expression matched
                         against whole names (a partition matches by its own name or its
                         partitioned topic's; a pattern without "/" is in public/default)
    startingOffsets      earliest (batch default) | latest (streaming default) | JSON
                         {"persistent://public/default/t": "3:10:-1", ...}: the message id to
                         start at (inclusive; "L:-1" is the start of ledger L); values may also
                         be "earliest"/"latest"; keys are topics or partitions the read covers
    endingOffsets        batch only: latest (default) | JSON of message ids (exclusive)
    startingTime, endingTime
                         publish time bounds, epoch ms or ISO 8601: from (inclusive), before
                         (exclusive); endingTime is batch only
    minPartitions        at least this many Spark partitions (default: this machine's cores)
    maxEntriesPerPartition
                         at most this many entries per Spark partition (default 1,000,000)
    splitEntries         cut each topic partition's range every N entries from its start
                         (the same start gives the same Spark partitions however far the end
                         moved: what lets a rerun of a write job deduplicate)
    failOnDataLoss       true (default): fail when planned entries were trimmed or the topic
                         was deleted meanwhile; false: read what is left
    maxEntriesPerTrigger streaming: at most this many entries per micro-batch
    offloaded            include (default): offloaded ledgers (topics offload) are read too,
                         from their Parquet files in the Python workers; skip: left out (what
                         read_topic() uses, reading them with Spark's own Parquet reader)
    subscription         streaming: a durable subscription acknowledged through each batch
                         once Spark committed it (created at Earliest when missing; cumulative
                         ack on Exclusive/Failover, individual acks on Shared/Key_Shared)

Write options (df.write.format("pulsarctl").mode("append")):
    store, topic         the target; without topic, each row's __topic column names it
    deduplication        true (default): the writer turns the deduplication policy on for
                         the target topics, which is what makes a retried task safe
    producerPrefix       producers are named <prefix>-<task partition> (default
                         spark-<random>); sequence ids are the row index in the task
    hashingScheme        JavaStringHash (default) | Murmur3_32Hash, for keyed rows on
                         partitioned topics (keyless rows go round robin)
    maxEntriesPerTransaction
                         rows per write transaction (default 10,000)
Columns written: value (binary or string, required), __key, __messageProperties, __eventTime
(timestamp or epoch ms) and __topic; others are left aside, so a read writes back as is.

Importing this package does not import pyspark; the functions do, and raise SparkUnavailable
(exit code 1, "install 'pulsarctl[spark]'") when it is missing.
"""
from __future__ import annotations

import os
import sys
import threading

import tempfile
import importlib.util
from pulsarctl.errors import JvmFailed, SparkUnavailable

FORMATS = ("pulsarctl", "pulsar")


def require() -> None:
    """Raise SparkUnavailable unless pyspark and pyarrow can be imported."""
    missing = []
    for mod in ("pyspark", "pyarrow"):
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        raise SparkUnavailable(f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                               "not installed")


def read_topic(spark, store: str | None = None, **options):
    """A topic as a DataFrame, its offloaded ledgers read by Spark's own Parquet reader and the
    rest by the data source, inside bounds fixed now (pulsarctl/spark/tiered.py)."""
    require()
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.spark.tiered import read_topic as read

    return read(spark, store, **options)


PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark) -> bool:
    """Register the data source on a SparkSession under `pulsarctl` and `pulsar`, on any
    session however it was made. Filter pushdown for Python data sources is a runtime SQL
    setting, off by default, and pyspark refuses to read from a source that takes filters while
    it is off: so this turns it on for the session (it changes nothing for sources that take
    no filters). Where it cannot be turned on, the source is registered without pushdown and
    Spark filters the rows read. Returns whether filters are pushed down."""
    require()
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.spark import source

    pushdown = _pushdown_on(spark)
    for cls in source.sources(pushdown):
        spark.dataSource.register(cls)
    return pushdown


def _pushdown_on(spark) -> bool:
    """Turn filter pushdown for Python data sources on for the session if it is not; whether
    it is on now."""
    try:
        if str(spark.conf.get(PUSHDOWN_CONF, "false")).lower() != "true":
            spark.conf.set(PUSHDOWN_CONF, "true")
        return str(spark.conf.get(PUSHDOWN_CONF, "false")).lower() == "true"
    except Exception:  # noqa: BLE001 - a session that refuses the setting reads without it
        return False


# Settings every session made here gets (a caller's conf wins).
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    PUSHDOWN_CONF: "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


_LOG4J2 = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = {level}
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
logger.submit.name = org.apache.spark.deploy.SparkSubmit
logger.submit.level = {level}
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
"""


def _log_config(level: str) -> str:
    """A log4j2 configuration file for the driver JVM at this level (made once per level)."""
    level = level.lower()
    path = os.path.join(tempfile.gettempdir(), f"pulsarctl-spark-log4j2-{level}-{os.getuid()}"
                        ".properties")
    text = _LOG4J2.format(level=level)
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return path
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def session(app_name: str = "pulsarctl", master: str | None = None, conf: dict | None = None,
            log_level: str | None = "ERROR"):
    """A local SparkSession set up for this machine, with the data source registered: workers
    run this Python, Spark binds to 127.0.0.1, no web UI, filter pushdown for Python data
    sources on, times in UTC, Arrow-optimized UDFs off when pandas is missing (they need it).
    master defaults to local[*]; conf adds or overrides settings.
    log_level (ERROR, or OFF for none) applies from the JVM's start when this call starts it."""
    require()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # lazy: pyspark is costly to import or optional

    builder = SparkSession.builder.appName(app_name).master(master or "local[*]")
    cores = os.cpu_count() or 1
    settings = {**DEFAULT_CONF, "spark.sql.shuffle.partitions": str(max(2, 2 * cores))}

    if importlib.util.find_spec("pandas") is None:
        # Arrow-optimized Python UDFs (Spark's default since 4.3) need pandas, which the
        # spark extra leaves out: Spark would fall back anyway, warning on stderr at every
        # UDF a transform defines.
        settings["spark.sql.execution.pythonUDF.arrow.enabled"] = "false"
    if log_level:
        settings["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile=file:{_log_config(log_level)}")
    settings.update(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, str(v))
    _launch_jvm({"spark.app.name": app_name, "spark.master": master or "local[*]",
                 **{k: str(v) for k, v in settings.items()}})
    spark = builder.getOrCreate()
    if log_level:
        spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark


# What the JVM prints on stderr at every start (Spark runs it with the incubator module
# jdk.incubator.vector): noise in a cron job's mail and in a script's one error line.
_JVM_NOISE = (b"WARNING: Using incubator modules",)


def _launch_jvm(conf: dict) -> None:
    """Start Spark's JVM, as getOrCreate would, with its stderr passed on through a relay
    that leaves out _JVM_NOISE (pyspark's popen_kwargs hook). What it says before it is up
    is held: when it does not start, the first of it goes into the one error line
    (JvmFailed). Nothing when a JVM runs already, or when spark-submit started this process
    (it made one)."""
    from pyspark import SparkConf, SparkContext  # lazy: pyspark is costly to import or optional
    # lazy: pyspark is costly to import or optional
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    spark_conf = SparkConf().setAll(list(conf.items()))
    r, w = os.pipe()
    relay = _Relay(r)
    relay.start()
    try:
        try:
            gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": w})
        finally:
            os.close(w)
    except Exception as exc:
        if type(exc).__name__ != "PySparkRuntimeError":
            raise
        relay.join(timeout=5)  # spark-submit has exited: its stderr ends
        said = [x.decode(errors="replace").strip() for x in relay.held if x.strip()]
        # The first thing it said is the cause (what follows is spark-class giving up).
        raise JvmFailed("Spark's JVM did not start" + (f": {said[0][:300]}" if said else "")
                        ) from None
    relay.release()
    SparkContext(conf=spark_conf, gateway=gateway)  # the builder's getOrCreate takes it up


class _Relay(threading.Thread):
    """Passes the JVM's stderr on, line by line, but for _JVM_NOISE; holds it until
    release()."""

    def __init__(self, fd: int):
        super().__init__(name="pulsarctl-jvm-stderr", daemon=True)
        self.fd = fd
        self.lock = threading.Lock()
        self.held: list[bytes] = []
        self.holding = True

    def run(self):
        with os.fdopen(self.fd, "rb", buffering=0) as pipe:
            for line in iter(pipe.readline, b""):
                if line.startswith(_JVM_NOISE):
                    continue
                with self.lock:
                    if self.holding:
                        self.held.append(line)
                    else:
                        _pass_stderr(line)

    def release(self):
        with self.lock:
            self.holding = False
            for line in self.held:
                _pass_stderr(line)
            self.held = []


def _pass_stderr(line: bytes) -> None:
    try:
        os.write(2, line)
    except OSError:
        pass
