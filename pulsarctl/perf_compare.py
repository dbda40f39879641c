"""`pulsarctl perf compare`: each of pulsarctl's main paths side by side with its limit or peer,
in one run on this machine, so anyone can see the ratios where they are (issue 18):

    produce --stdin (the whole command)   raw LMDB appends, a transaction per 1000
    consume + per-message ack (command)   raw LMDB read + ack mark, a transaction per 1000
    Python API send(), one at a time      raw LMDB commits of one message each
    Python API send_async + flush         the same client code through the real pulsar-client
    Python API receive + acknowledge        against --service-url (pulsar-lite, or serve)
    Spark read (with --spark)             Spark's Python data source doing no work
    each everyday command's start-up      a bare `python -c "import lmdb"` (CPU; issue 27)

Everything runs on a scratch store in a temporary directory on the same disk (never the user's
store), the pulsarctl path and its limit alternating round by round; each figure is the median
of the rounds. The commands run as real processes, as a user runs them."""
from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid

from pulsarctl import clock as clocks
from pulsarctl.errors import PulsarctlError, UsageError
from pulsarctl.names import dlq_topic
from pulsarctl.perf import payloads
from store import limits
from store.env import Env

# Goals (issue 18): the ratio each path should reach against its limit or peer.
GOALS = {"produceStdin": 0.50, "consumeAck": 0.30, "apiSend": None, "apiSendAsync": 1.0,
         "apiConsumeAck": 1.0, "sparkRead": 0.85}
API_SEND_GOAL = 2000  # durable send()s a second
# Timed rounds of the Spark reads (spark/bench.py, after its warm-up rounds): their best is
# what the row shows, and three left it at the mercy of one slow round.
SPARK_ROUNDS = 5
# Start-up (issue 27, item 11): each everyday command, as a whole process, at most this many
# times the CPU of a bare `python -c "import lmdb"` (Python's own start-up and the one library
# every command needs); completing a topic name under this many milliseconds of wall time.
STARTUP_GOAL = 4.0
COMPLETION_GOAL_MS = 100
STARTUP_RUNS = 3  # per round: each figure is the median of rounds x this many runs
EVERYDAY = (
    ("startVersion", ["--version"]),
    ("startProduce", ["produce", "t", "-m", "x"]),
    ("startTopicsList", ["topics", "list"]),
    ("startTopicsStat", ["topics", "stats", "t"]),
    ("startSubsList", ["topics", "subscriptions", "t"]),
    ("startRead", ["read", "t", "-m", "earliest", "-n", "1"]),
    ("startDlqList", ["dlq", "list"]),
    ("startClockShow", ["clock", "show"]),
    ("startCursor", ["topics", "cursor", "t", "-s", "s"]),
    ("startExplain", ["explain", "1:0", "-t", "t"]),
)


def _timed(fn, *args) -> float:
    t0 = clocks.monotonic()
    fn(*args)
    return max(clocks.monotonic() - t0, 1e-9)


def _run(cmd: list, what: str, stdin=None) -> None:
    """Run cmd as its own process, its output thrown away; a failure says which step failed."""
    env = dict(os.environ, NO_COLOR="1")
    r = subprocess.run(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       env=env, check=False)
    if r.returncode != 0:
        err = r.stderr.decode(errors="replace").strip().splitlines()
        raise PulsarctlError(f"{what} exited {r.returncode} during the comparison: "
                             f"{err[-1] if err else 'no message'}",
                             hint="run that command alone to see why")


def _cli(store: str, *argv, stdin=None) -> None:
    """`pulsarctl --store STORE ARGV...` as its own process."""
    _run([sys.executable, "-m", "pulsarctl", "--store", store, *argv],
         f"`pulsarctl {' '.join(argv)}`", stdin)


def _raw(*argv, stdin=None) -> None:
    """`python -m store.limits ARGV...` as its own process: the whole-command limit."""
    _run([sys.executable, "-m", "store.limits", *argv], f"the raw LMDB {argv[0]}", stdin)


def _row(name: str, what: str, n: int, ours: list, limit: list, limit_is: str,
         goal: float | None, unit: str = "msg/s") -> dict:
    """Rates (n / median seconds) of both sides, and their ratio."""
    mine = n / statistics.median(ours)
    theirs = n / statistics.median(limit) if limit else None
    return {"workload": name, "what": what, "messages": n, "unit": unit,
            "pulsarctl": round(mine), "limit": round(theirs) if theirs else None,
            "limitIs": limit_is, "ratio": round(mine / theirs, 3) if theirs else None,
            "goal": goal, "rounds": len(ours)}


def compare(n: int = 200_000, size: int = 100, api_n: int = 50_000, sends: int = 2000,
            rounds: int = 1, service_url: str | None = None, spark: bool = False,
            spark_n: int = 1_000_000, progress=None) -> dict:
    """Run every comparison; returns {"rows": [...], "n", "size", "rounds"}. progress(label)
    is called before each step."""
    say = progress or (lambda label: None)
    tmp = tempfile.mkdtemp(prefix="pulsarctl-compare-")
    try:
        rows = [_produce_and_consume(tmp, n, size, rounds, say)]
        rows.append(rows[0].pop("consume"))
        rows.append(_api_send(tmp, sends, size, rounds, say))
        rows.extend(_api_batched(tmp, api_n, size, rounds, service_url, say))
        if spark:
            rows.append(_spark(spark_n, size, say))
        rows.extend(_startup(tmp, rounds * STARTUP_RUNS, say))
        return {"messages": n, "size": size, "rounds": rounds, "rows": rows}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _produce_and_consume(tmp: str, n: int, size: int, rounds: int, say) -> dict:
    pool = payloads(size)
    lines = os.path.join(tmp, "lines.txt")
    with open(lines, "wb") as f:
        # One message per line: the payloads with no newline in them.
        f.write(b"".join(pool[i % len(pool)].replace(b"\n", b" ") + b"\n" for i in range(n)))
    prod, cons, raw_in, raw_out = [], [], [], []
    for r in range(rounds):
        store = os.path.join(tmp, f"store-{r}")
        raw = os.path.join(tmp, f"raw-{r}")
        topic = f"compare-{r}"
        say(f"round {r + 1}: produce --stdin")
        with open(lines, "rb") as stdin:
            prod.append(_timed(lambda: _cli(store, "produce", topic, "--stdin", stdin=stdin)))
        say(f"round {r + 1}: raw LMDB appends")
        with open(lines, "rb") as stdin:
            raw_in.append(_timed(lambda: _raw("append", raw, stdin=stdin)))
        say(f"round {r + 1}: consume + ack")
        cons.append(_timed(_cli, store, "consume", topic, "-s", "compare", "-p", "Earliest",
                           "-n", str(n), "-o", "ndjson"))
        say(f"round {r + 1}: raw LMDB read + ack")
        raw_out.append(_timed(_raw, "consume", raw, str(n), os.devnull))
        shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(raw, ignore_errors=True)
    row = _row("produceStdin", f"`produce --stdin`, {n:,} lines of {size} B (whole command)",
               n, prod, raw_in, "raw LMDB appends of stdin's lines, a transaction per 1000 "
               "(whole process)", GOALS["produceStdin"])
    row["consume"] = _row("consumeAck", f"`consume -o ndjson` acking each of {n:,} (whole "
                          "command)", n, cons, raw_out, "raw LMDB read, write out and ack "
                          "mark, a transaction per 1000 (whole process)", GOALS["consumeAck"])
    return row


def _api_send(tmp: str, sends: int, size: int, rounds: int, say) -> dict:
    # lazy: the Python API is loaded only by the comparisons that use it
    from pulsarctl.client import Client

    payload = payloads(size, 1)[0]
    ours, raw = [], []
    for r in range(rounds):
        say(f"round {r + 1}: Python API send()")
        client = Client(store=os.path.join(tmp, f"api-{r}"))
        try:
            p = client.create_producer(f"send-{r}")
            ours.append(_timed(lambda: [p.send(payload) for _ in range(sends)]))
        finally:
            client.close()
        say(f"round {r + 1}: raw LMDB one-message commits")
        env = Env(os.path.join(tmp, f"rawsend-{r}"))
        try:
            raw.append(_timed(limits.sync_commits, env, sends, size))
        finally:
            env.close()
    row = _row("apiSend", f"Python API send(), {sends:,} durable messages one at a time", sends,
               ours, raw, "raw LMDB commits of one message each", None, "msg/s")
    row["goalRate"] = API_SEND_GOAL
    return row


def _batched_run(make_client, topic: str, n: int, payload: bytes, real: bool) -> tuple:
    """(send_async + flush seconds, receive + acknowledge seconds) of the same code."""
    client = make_client()
    try:
        kw = {"batching_enabled": True, "batching_max_messages": 1000}
        if real:
            kw.update(block_if_queue_full=True, max_pending_messages=10000)
        p = client.create_producer(topic, **kw)

        def produce():
            for _ in range(n):
                p.send_async(payload, None)
            p.flush()
        t_prod = _timed(produce)
        p.close()
        if real:
            # lazy: the real pulsar-client is optional (the test extra has it)
            import pulsar

            cons = client.subscribe(topic, "compare", consumer_type=pulsar.ConsumerType.Shared,
                                    initial_position=pulsar.InitialPosition.Earliest)
        else:
            # lazy: the Python API is loaded only by the comparisons that use it
            from pulsarctl.client import ConsumerType, InitialPosition

            cons = client.subscribe(topic, "compare", consumer_type=ConsumerType.Shared,
                                    initial_position=InitialPosition.Earliest)

        def consume():
            for _ in range(n):
                cons.acknowledge(cons.receive(10000))
        t_cons = _timed(consume)
        cons.close()
        return t_prod, t_cons
    finally:
        client.close()


def _api_batched(tmp: str, n: int, size: int, rounds: int, service_url: str | None,
                 say) -> list[dict]:
    # lazy: the Python API is loaded only by the comparisons that use it
    from pulsarctl.client import Client

    payload = payloads(size, 1)[0]
    if service_url:
        try:
            # lazy: the real pulsar-client is optional (the test extra has it)
            import pulsar
        except ImportError:
            raise UsageError("--service-url needs the real Pulsar client",
                             hint="pip install pulsar-client, or leave --service-url out")
    mine_p, mine_c, peer_p, peer_c = [], [], [], []
    for r in range(rounds):
        say(f"round {r + 1}: Python API send_async + flush, receive + acknowledge")
        t = _batched_run(lambda: Client(store=os.path.join(tmp, f"batched-{r}")),
                         f"batched-{r}", n, payload, False)
        mine_p.append(t[0])
        mine_c.append(t[1])
        if service_url:
            say(f"round {r + 1}: the same through pulsar-client at {service_url}")
            topic = "persistent://public/default/compare-" + uuid.uuid4().hex[:8]
            try:
                t = _batched_run(lambda: pulsar.Client(service_url, operation_timeout_seconds=30,
                                                       logger=_quiet_logger()),
                                 topic, n, payload, True)
            except Exception as exc:  # the client's own exceptions (ConnectError, Timeout...)
                raise PulsarctlError(f"the peer at {service_url} failed: {exc}",
                                     hint="check that a Pulsar service listens there") from None
            peer_p.append(t[0])
            peer_c.append(t[1])
    peer = f"pulsar-client at {service_url}" if service_url else "no peer (give --service-url)"
    return [
        _row("apiSendAsync", f"Python API send_async + flush, {n:,} messages in batches of 1000",
             n, mine_p, peer_p, peer, GOALS["apiSendAsync"] if service_url else None),
        _row("apiConsumeAck", f"Python API receive + acknowledge each of {n:,}", n, mine_c,
             peer_c, peer, GOALS["apiConsumeAck"] if service_url else None),
    ]


def _quiet_logger():
    """The client's log through Python's logging, warnings and worse only: its own logger writes
    every connection's INFO lines to standard output, where the comparison's result goes."""
    import logging  # lazy: only a comparison with a peer needs it

    log = logging.getLogger("pulsarctl.perf_compare.pulsar")
    log.setLevel(logging.WARNING)
    return log


def _spark(n: int, size: int, say) -> dict:
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.spark import bench

    say(f"Spark: reading {n:,} messages and the no-work data source")
    r = bench.run(n, size, repeat=SPARK_ROUNDS)
    ours, ceiling = r["read"]["rowsPerSec"], r["readCeiling"]["rowsPerSec"]
    return {"workload": "sparkRead", "what": f"Spark read of {n:,} messages", "messages": n,
            "unit": "rows/s", "pulsarctl": ours, "limit": ceiling,
            "limitIs": "Spark's Python data source doing no work", "ratio":
            round(ours / ceiling, 3) if ceiling else None, "goal": GOALS["sparkRead"],
            "rounds": SPARK_ROUNDS}


def _process(cmd: list, what: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of cmd as its own process: the CPU is the operating
    system's accounting of the finished child (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = _timed(_run, cmd, what)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def _startup(tmp: str, runs: int, say) -> list[dict]:
    """Each everyday command's CPU beside a bare `python -c "import lmdb"`, run in turn (one
    command, then the bare import, ...) so a machine that slows down slows both; medians. The
    commands run on a scratch store holding a topic, a subscription and a dead letter topic."""
    store = os.path.join(tmp, "startup")
    _cli(store, "produce", "t", "-m", "a", "-m", "b")
    _cli(store, "topics", "create-subscription", "t", "-s", "s", "-m", "earliest")
    _cli(store, "produce", dlq_topic("t", "s"), "-m", "dead")
    bare = [sys.executable, "-c", "import lmdb"]
    lines = [(name, [sys.executable, "-m", "pulsarctl", "--store", store, *argv],
              f"`pulsarctl {' '.join(argv)}`") for name, argv in EVERYDAY]
    lines.append(("startComplete", [sys.executable, "-m", "pulsarctl", "__complete", "--store",
                                    store, "topics"], "completing a topic name"))
    rows = []
    for name, cmd, what in lines:
        say(f"start-up: {what}")
        ours, limit = [], []
        for _ in range(runs):
            ours.append(_process(cmd, what))
            limit.append(_process(bare, "python -c 'import lmdb'"))
        cpu, lim = (statistics.median(c for c, _ in t) for t in (ours, limit))
        wall, lim_wall = (statistics.median(w for _, w in t) for t in (ours, limit))
        row = {"workload": name, "what": f"{what} (whole process)", "messages": None,
               "unit": "ms CPU", "pulsarctl": round(cpu * 1000), "limit": round(lim * 1000),
               "limitIs": "bare `python -c 'import lmdb'`, CPU (goal: at most 4x)",
               "ratio": round(cpu / lim, 2) if lim else None, "goal": STARTUP_GOAL,
               "wallMs": round(wall * 1000), "limitWallMs": round(lim_wall * 1000),
               "rounds": runs}
        if name == "startComplete":
            row.update(unit="ms wall", pulsarctl=row["wallMs"], limit=row["limitWallMs"],
                       ratio=round(wall / lim_wall, 2) if lim_wall else None, goal=None,
                       goalMs=COMPLETION_GOAL_MS, limitIs="bare `python -c 'import lmdb'`, "
                       f"wall time (goal: under {COMPLETION_GOAL_MS} ms)")
        rows.append(row)
    return rows
