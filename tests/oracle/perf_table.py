"""pulsar-perf side by side: Pulsar's own benchmark tool against `pulsarctl serve`, a real Apache
Pulsar standalone and pulsar-lite, in one run on this machine, as one markdown table.

Run it inside the oracle's loopback-only namespace (see tests/oracle/README.md):

    tests/oracle/pulsar.sh netns .venv/bin/python tests/oracle/perf_table.py \\
        --out tests/oracle/perf-results.md

It starts the three servers side by side on their own ports (real 6650/8080, serve 6660/8090,
pulsar-lite 6670), checks that nothing listens off 127.0.0.1, then runs the same pulsar-perf
tests against each, the targets alternating (and their order rotating) round after round so the
load of a shared machine falls on all alike, each test on a fresh topic. The table gives per
target and test the median over rounds of pulsar-perf's own aggregated summary lines, and the
ratios serve/real and serve/lite. A test that fails against a target is recorded with what
pulsar-perf said, and the run goes on.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ORACLE_DIR = Path(__file__).resolve().parent
REPO = ORACLE_DIR.parent.parent
PULSAR_SH = ORACLE_DIR / "pulsar.sh"
# Bounds on a hung process only; the machine is shared, so they are generous.
READY_LIMIT_S = 300
TOOL_LIMIT_S = 300
LITE_WHEEL_GLOB = "pulsar_lite-*.whl"

# pulsar-perf's summary lines, printed by its shutdown hook (PerformanceProducer /
# PerformanceConsumer printAggregatedThroughput and printAggregatedStats). The producer's
# throughput unit has been Mbit/s and MB/s in different releases; both are read.
THROUGHPUT = re.compile(
    r"Aggregated throughput stats --- (?P<count>[\d,]+) records (?:sent|received) --- "
    r"(?P<rate>[\d.,]+) msg/s --- (?P<tput>[\d.,]+) (?P<unit>Mbit/s|MB/s)")
LATENCY = re.compile(
    r"Aggregated latency stats --- Latency: mean:\s*(?P<mean>[\d.,]+) ms - med:\s*(?P<p50>[\d.,]+)"
    r" - 95pct:\s*(?P<p95>[\d.,]+) - 99pct:\s*(?P<p99>[\d.,]+) - 99\.9pct:\s*(?P<p999>[\d.,]+)"
    r".*? - Max:\s*(?P<max>[\d.,]+)")
SUBSCRIBED = "Start receiving from"
STAMP = r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) "
# Where a run's own clock starts and stops in its log: the producers made (consumers
# subscribed), and its DONE line (-time run out, -m sent or received).
STARTED = re.compile(STAMP + r".*(?:Created \d+ producers|" + SUBSCRIBED + ")", re.M)
ENDED = re.compile(STAMP + r".*-{5,} DONE", re.M)
# pulsar-perf 4.0.8 refuses -r 0 ("rate must be positive": it always makes a RateLimiter), so
# "unlimited" is a rate far above what any target here reaches.
UNLIMITED = "10000000"
MSG_SIZE = 1024   # pulsar-perf's default -s
# pulsar-perf's default (-o 0) puts no bound on the messages a producer keeps pending: against
# a broker slower than the client, its queue grows until the tool's 512 MB heap runs out (it
# did, against serve) and its latency is the time in that queue. 1,000 was the Java client's
# own default before memory limits (2.10).
PENDING = "1000"

METRICS = ["msg_s", "mb_s", "perf_msg_s", "p50", "p95", "p99", "p999", "max"]
LATENCIES = ["p50", "p95", "p99", "p999", "max"]
HEADERS = {"msg_s": "msg/s", "mb_s": "MB/s", "perf_msg_s": "pulsar-perf msg/s",
           "p50": "p50 ms", "p95": "p95 ms", "p99": "p99 ms", "p999": "p99.9 ms",
           "max": "max ms"}


def number(text: str) -> float:
    return float(text.replace(",", ""))


@dataclass
class Summary:
    """One run: pulsar-perf's aggregated lines, and its rate once it is under way."""

    count: int          # records sent (acknowledged) or received, as pulsar-perf counts them
    msg_s: float        # count over the time from started to DONE
    mb_s: float         # msg_s in MB (2^20 bytes) of 1 KB messages
    perf_msg_s: float   # pulsar-perf's aggregated msg/s, as printed
    p50: float
    p95: float
    p99: float
    p999: float
    max: float


def clock_s(m: re.Match) -> float:
    h, mi, sec, ms = (int(g) for g in m.groups())
    return h * 3600 + mi * 60 + sec + ms / 1000


def parse_summary(log: str, since: float | None = None) -> Summary | None:
    """A pulsar-perf log's summary, or None when it has none.

    pulsar-perf's aggregated msg/s divides by its whole life: the making of its client and
    producer (seconds on a fresh real standalone, which makes the topic's first ledger), and
    after DONE the wait for its statistics loop's next turn (up to 10 s), when it exits. So
    msg/s here is its count of messages acknowledged (received) over the time from the log
    line saying the producers are made (consumers subscribed), or from `since` (seconds of the
    day, from the producer's log, for the live consumer), to its DONE line. A run across
    midnight wraps."""
    tputs = list(THROUGHPUT.finditer(log))
    lats = list(LATENCY.finditer(log))
    ended = list(ENDED.finditer(log))
    started = STARTED.search(log)
    if not tputs or not lats or not ended:
        return None
    t, lat = tputs[-1], lats[-1]
    count = int(number(t["count"]))
    if since is None:
        since = None if started is None else clock_s(started)
    span = None if since is None else (clock_s(ended[-1]) - since) % 86400
    msg_s = count / span if span else 0.0
    return Summary(count, msg_s, msg_s * MSG_SIZE / 2**20, number(t["rate"]),
                   *(number(lat[m]) for m in LATENCIES))


def median_summary(runs: list[Summary]) -> Summary:
    """Per metric, the median over rounds (each metric on its own)."""
    return Summary(int(statistics.median(r.count for r in runs)),
                   *(statistics.median(getattr(r, m) for r in runs) for m in METRICS))


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs else "-"


# --- the tests ---------------------------------------------------------------------------------

@dataclass
class Test:
    name: str
    what: str
    latency: bool = True   # whether pulsar-perf's latency says something about the target


TESTS = [
    Test("produce", "1 producer, 1 KB messages, batching on (pulsar-perf's defaults), at most "
         "1,000 messages pending (-o 1000: without a bound pulsar-perf ran out of heap), rate "
         "unlimited (-r 10000000: pulsar-perf 4.0.8 refuses -r 0), for -time seconds; latency "
         "is send to acknowledgement, so with 1,000 pending it is mostly queueing"),
    Test("produce -r 1000", "the same at 1,000 msg/s: publish latency at a steady rate"),
    Test("consume backlog", "a new subscription at Earliest reads all the unlimited produce "
         "left on its topic; no latency given: pulsar-perf's is publish to receive, here mostly "
         "the time the messages waited in the backlog", latency=False),
    Test("consume live", "a consumer subscribed first receives while a producer sends 1 KB "
         "messages at 1,000 msg/s: end-to-end latency (publish to receive); msg/s from the "
         "producer made (its log) to the consumer's DONE"),
]


@dataclass
class Target:
    name: str
    broker_port: int
    web_port: int
    proc: subprocess.Popen | None = None
    note: str = ""

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.broker_port}"

    def env(self) -> dict:
        # pulsar.sh writes the tools' client.conf from these; -u says the same again.
        return {**os.environ, "PULSAR_BROKER_PORT": str(self.broker_port),
                "PULSAR_WEB_PORT": str(self.web_port)}


@dataclass
class Outcome:
    summary: Summary | None
    command: str
    error: str = ""


@dataclass
class Results:
    runs: dict = field(default_factory=dict)       # (target, test) -> [Outcome]
    loads: list = field(default_factory=list)      # load averages seen during the run

    def add(self, target: str, test: str, outcome: Outcome) -> None:
        self.runs.setdefault((target, test), []).append(outcome)


def loadavg() -> tuple[float, float, float]:
    one, five, fifteen = Path("/proc/loadavg").read_text().split()[:3]
    return float(one), float(five), float(fifteen)


def log_tail(text: str, lines: int = 3) -> str:
    """The lines of a failed run worth quoting: its first distinct errors and exceptions
    (without their time: a client that retries repeats them by the thousand), else its end."""
    useful: list[str] = []
    for line in text.splitlines():
        if re.search(r"(?i)error|exception|refused", line) and not line.startswith("\t"):
            line = re.sub(r"^\d\d:\d\d:\d\d\.\d{3} ", "", line.strip())
            if line not in useful:
                useful.append(line)
    if useful:
        return " | ".join(useful[:lines])
    return " | ".join(text.strip().splitlines()[-lines:] or ["(no output)"])


def spawn(argv: list[str], env: dict, log) -> subprocess.Popen:
    # A session of its own: pulsar.sh runs the JVM as its child, and a run that hangs (a
    # producer a server keeps refusing retries for ever) is ended with all of it.
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def finish(proc: subprocess.Popen) -> int | str:
    """Its exit code, or "timeout" once it ran TOOL_LIMIT_S (then it is killed)."""
    try:
        return proc.wait(timeout=TOOL_LIMIT_S)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return f"timeout (killed after {TOOL_LIMIT_S} s)"


class Runner:
    def __init__(self, args, work: Path, results: Results):
        self.args = args
        self.work = work
        self.results = results
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.seq = 0

    def topic(self, target: Target, test: str) -> str:
        self.seq += 1
        slug = test.replace(" ", "-").replace("-r-1000", "rated")
        return f"persistent://public/default/perf-{slug}-{target.name}-{uuid.uuid4().hex[:8]}"

    def perf_argv(self, target: Target, *args: str) -> list[str]:
        return [str(PULSAR_SH), "perf", *args[:1], "-u", target.url, *args[1:]]

    def log_path(self, target: Target, test: str, rnd: int, role: str) -> Path:
        slug = test.replace(" ", "_")
        return self.logs / f"r{rnd}-{target.name}-{slug}-{role}.log"

    def run_perf(self, target: Target, test: str, rnd: int, role: str, *args: str) -> Outcome:
        argv = self.perf_argv(target, *args)
        path = self.log_path(target, test, rnd, role)
        with path.open("w") as log:
            proc = spawn(argv, target.env(), log)
        return self.outcome(argv, path, finish(proc))

    def outcome(self, argv, path: Path, rc, since: float | None = None) -> Outcome:
        text = path.read_text(errors="replace")
        summary = parse_summary(text, since)
        command = "pulsar-perf " + " ".join(argv[2:])
        if rc != 0 or summary is None or summary.count == 0 or not summary.msg_s:
            return Outcome(None, command, f"exit {rc}: {log_tail(text)} (log {path})")
        return Outcome(summary, command)

    def round(self, rnd: int, targets: list[Target]) -> None:
        a = self.args
        for target in targets:
            self.results.loads.append(loadavg())
            print(f"round {rnd}: {target.name} (load {loadavg()[0]:.2f})", file=sys.stderr)
            # A duration, not -m: with -m pulsar-perf's producer sleeps 5 s after the last send
            # before it exits, and its aggregated rate counts those 5 s.
            topic = self.topic(target, "produce")
            out = self.run_perf(target, "produce", rnd, "producer", "produce", "-r", UNLIMITED,
                                "-o", PENDING, "-time", str(a.seconds), topic)
            self.results.add(target.name, "produce", out)
            if out.summary is not None:
                # The backlog is all the unlimited produce left on its topic: every message
                # acknowledged.
                out = self.run_perf(target, "consume backlog", rnd, "consumer", "consume",
                                    "-ss", "backlog", "-sp", "Earliest",
                                    "-m", str(out.summary.count), topic)
            else:
                out = Outcome(None, "pulsar-perf consume ...", "no backlog: produce failed")
            self.results.add(target.name, "consume backlog", out)
            out = self.run_perf(target, "produce -r 1000", rnd, "producer", "produce",
                                "-r", "1000", "-o", PENDING, "-time", str(a.seconds),
                                self.topic(target, "produce -r 1000"))
            self.results.add(target.name, "produce -r 1000", out)
            self.results.add(target.name, "consume live", self.live(target, rnd))

    def live(self, target: Target, rnd: int) -> Outcome:
        """A consumer subscribed (its log says so) before a producer starts on the topic; its
        rate runs from the producer made to the last message received."""
        a, test = self.args, "consume live"
        topic = self.topic(target, test)
        cargv = self.perf_argv(target, "consume", "-ss", "live", "-m", str(a.live_messages),
                               topic)
        cpath = self.log_path(target, test, rnd, "consumer")
        with cpath.open("w") as clog:
            consumer = spawn(cargv, target.env(), clog)
        try:
            deadline = time.monotonic() + READY_LIMIT_S
            while SUBSCRIBED not in cpath.read_text(errors="replace"):
                if consumer.poll() is not None or time.monotonic() > deadline:
                    rc = consumer.poll()
                    return self.outcome(cargv, cpath, "did not subscribe" if rc is None else rc)
                time.sleep(0.2)
            producer = self.run_perf(target, test, rnd, "producer", "produce", "-r", "1000",
                                     "-o", PENDING, "-m", str(a.live_messages), topic)
            made = STARTED.search(self.log_path(target, test, rnd, "producer")
                                  .read_text(errors="replace"))
            out = self.outcome(cargv, cpath, finish(consumer),
                               None if made is None else clock_s(made))
            out.command = f"{out.command} & {producer.command}"
            if producer.summary is None and out.summary is not None:
                out.summary, out.error = None, f"producer: {producer.error}"
            return out
        finally:
            if consumer.poll() is None:
                kill_group(consumer)


# --- the servers -------------------------------------------------------------------------------

def wait_port(port: int, proc: subprocess.Popen | None, what: str) -> None:
    deadline = time.monotonic() + READY_LIMIT_S
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            pass
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"perf_table: {what} exited ({proc.returncode}) during start-up")
        if time.monotonic() > deadline:
            raise SystemExit(f"perf_table: {what} did not listen on {port} in {READY_LIMIT_S}s")
        time.sleep(0.2)


def find_lite_binary(args, work: Path) -> Path:
    """pulsar-lite's broker binary, from its wheel (unpacked into the work directory)."""
    if args.lite_binary:
        return Path(args.lite_binary)
    wheels = sorted(Path(args.lite_wheel_dir).glob(LITE_WHEEL_GLOB))
    if not wheels:
        raise SystemExit(f"perf_table: no {LITE_WHEEL_GLOB} in {args.lite_wheel_dir} "
                         "(pip download pulsar-lite --no-deps -d DIR), or use --targets")
    dest = work / "lite-wheel"
    with zipfile.ZipFile(wheels[-1]) as whl:
        names = [n for n in whl.namelist() if n.endswith("/bin/pulsar-lite")]
        if not names:
            raise SystemExit(f"perf_table: no bin/pulsar-lite in {wheels[-1]}")
        binary = Path(whl.extract(names[0], dest))
    binary.chmod(0o755)
    return binary


def lite_version(binary: Path) -> str:
    parts = binary.parts
    for p in parts:
        m = re.match(r"pulsar_lite-([^/]+)\.data$", p)
        if m:
            return m.group(1)
    return "?"


def start_targets(names: list[str], args, work: Path) -> tuple[list[Target], dict]:
    info: dict = {}
    targets = []
    if "real" in names:
        real = Target("real", 6650, 8080)
        t0 = time.monotonic()
        subprocess.run([str(PULSAR_SH), "start", str(work / "real")], check=True,
                       timeout=READY_LIMIT_S * 2)
        info["real"] = f"Apache Pulsar 4.2.4 standalone (started in {time.monotonic() - t0:.0f} s)"
        targets.append(real)
    if "serve" in names:
        serve = Target("serve", 6660, 8090)
        log = (work / "serve.log").open("w")
        serve.proc = subprocess.Popen(
            [str(Path(args.pulsarctl)), "--store", str(work / "serve-store"), "serve",
             "--port", str(serve.broker_port), "--http-port", str(serve.web_port)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        wait_port(serve.broker_port, serve.proc, "pulsarctl serve")
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip()
        info["serve"] = f"pulsarctl serve at {rev or '?'} (store in a fresh tmp dir)"
        targets.append(serve)
    if "lite" in names:
        lite = Target("lite", 6670, 6671)  # pulsar-lite has no admin HTTP; nothing on 6671
        binary = find_lite_binary(args, work)
        conf = work / "pulsar-lite.toml"
        # Its metrics endpoint would bind 0.0.0.0:8080 (taken by the real standalone anyway).
        conf.write_text("[metrics]\nenabled = false\n")
        log = (work / "lite.log").open("w")
        lite.proc = subprocess.Popen(
            [str(binary), "--config", str(conf), "--addr", f"127.0.0.1:{lite.broker_port}",
             "--db-path", str(work / "lite-db")],
            cwd=work, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        wait_port(lite.broker_port, lite.proc, "pulsar-lite")
        info["lite"] = f"pulsar-lite {lite_version(binary)} (its defaults, metrics off)"
        targets.append(lite)
    return targets, info


def stop_targets(targets: list[Target], work: Path) -> None:
    for t in targets:
        if t.proc is not None:
            t.proc.terminate()
            try:
                t.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                t.proc.kill()
                t.proc.wait()
        elif t.name == "real":
            subprocess.run([str(PULSAR_SH), "stop", str(work / "real")], check=False)


# --- the report --------------------------------------------------------------------------------

def shown(test: Test, metric: str) -> bool:
    return test.latency or metric not in LATENCIES


def table(results: Results, targets: list[str]) -> str:
    header = ["test", "target", "rounds", *[HEADERS[m] for m in METRICS]]
    rows = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for test in TESTS:
        medians = {}
        for name in targets:
            outs = results.runs.get((name, test.name), [])
            good = [o.summary for o in outs if o.summary is not None]
            if not good:
                rows.append(f"| {test.name} | {name} | 0/{len(outs)} | failed: see below |"
                            + " |" * (len(METRICS) - 1))
                continue
            medians[name] = med = median_summary(good)
            rows.append(f"| {test.name} | {name} | {len(good)}/{len(outs)} | "
                        + " | ".join(fmt(getattr(med, m)) if shown(test, m) else "-"
                                     for m in METRICS) + " |")
        for peer in ("real", "lite"):
            if "serve" in medians and peer in medians:
                ours, theirs = medians["serve"], medians[peer]
                rows.append(f"| {test.name} | serve/{peer} | | "
                            + " | ".join(ratio(getattr(ours, m), getattr(theirs, m))
                                         if shown(test, m) else "-" for m in METRICS) + " |")
    return "\n".join(rows)


def failures(results: Results) -> list[str]:
    out = []
    for (target, test), outs in results.runs.items():
        for i, o in enumerate(outs, 1):
            if o.summary is None:
                out.append(f"- {target}, {test}, run {i}: `{o.command}`: {o.error}")
    return out


def report(args, results: Results, targets: list[str], info: dict, started: datetime,
           listeners: str, seconds: float) -> str:
    loads = results.loads or [loadavg()]
    ones = [la[0] for la in loads]
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    lines = [
        f"Run {started:%Y-%m-%d %H:%M} UTC, {seconds / 60:.0f} min; {os.cpu_count()} cores "
        f"({cpu}), {mem_kb / 1024 / 1024:.0f} GB; shared with other work: load average (1 min) "
        f"{min(ones):.2f} to {max(ones):.2f}, median {statistics.median(ones):.2f}, sampled "
        "before each target's turn.",
        "",
        "Targets: " + "; ".join(f"**{n}**: {info.get(n, '?')}" for n in targets) + ".",
        f"Client: the real pulsar-perf 4.0.8 (one JVM a run, -Xmx512m); {args.rounds} rounds, "
        "the targets alternating and their order rotating each round, a fresh topic each run. "
        "Each figure is the median over the rounds (each metric's on its own). Latencies are "
        "pulsar-perf's aggregated percentiles, in ms. **msg/s** is pulsar-perf's aggregated "
        "count of messages acknowledged (received) over the time from its log line saying the "
        "producer is made (consumer subscribed) to its DONE line; MB/s the same in MB (2^20 "
        "bytes) of 1 KB. **pulsar-perf msg/s** is its aggregated rate as printed, which "
        "divides by its whole life: the making of its client and producer (seconds on a fresh "
        "real standalone, making the topic's first ledger) and, after DONE, the wait for its "
        "10 s statistics loop's next turn. Ratios are serve divided by the peer: above 1 is "
        "better for serve in msg/s, worse in latency.",
        "",
        table(results, targets),
        "",
        "Tests:",
        *[f"- **{t.name}**: {t.what}." for t in TESTS],
        "",
        "Commands (first round; topics fresh each run, `-u` the target's broker URL):",
        "",
        "```",
    ]
    seen = set()
    for (target, test), outs in results.runs.items():
        if outs and target == targets[0] and test not in seen:
            seen.add(test)
            lines.append(outs[0].command)
    lines += ["```", ""]
    fails = failures(results)
    lines += ["Failures:", "", *(fails or ["- none"]), ""]
    lines += ["Listening sockets during the run (`pulsar.sh listeners`):", "", "```",
              listeners.strip(), "```", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--targets", default="real,serve,lite",
                   help="comma-separated, of real, serve, lite (default all three)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=10,
                   help="duration of each produce run (pulsar-perf -time)")
    p.add_argument("--live-messages", type=int, default=10000,
                   help="messages of the live run (produced at 1,000 msg/s)")
    p.add_argument("--pulsarctl", default=str(REPO / ".venv" / "bin" / "pulsarctl"))
    p.add_argument("--lite-wheel-dir", default="/tmp/lite")
    p.add_argument("--lite-binary", help="pulsar-lite's binary (instead of its wheel)")
    p.add_argument("--work", help="work directory (default: a new tmp dir, removed after)")
    p.add_argument("--out", help="also write the report (markdown) to this file")
    args = p.parse_args(argv)
    names = [n for n in args.targets.split(",") if n]
    unknown = set(names) - {"real", "serve", "lite"}
    if unknown or not names:
        p.error(f"unknown target(s): {', '.join(sorted(unknown)) or '(none)'}")
    if subprocess.run([str(PULSAR_SH), "isolated"]).returncode != 0:
        raise SystemExit("perf_table: run me under 'tests/oracle/pulsar.sh netns'")

    # SIGTERM (a timeout around this script) still stops the servers, in the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="perf-table-"))
    work.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    targets: list[Target] = []
    try:
        targets, info = start_targets(names, args, work)
        lst = subprocess.run([str(PULSAR_SH), "listeners"], capture_output=True, text=True)
        if lst.returncode != 0:
            raise SystemExit(f"perf_table: something listens off loopback:\n{lst.stdout}"
                             f"{lst.stderr}")
        results = Results()
        runner = Runner(args, work, results)
        for rnd in range(1, args.rounds + 1):
            shift = (rnd - 1) % len(targets)
            runner.round(rnd, targets[shift:] + targets[:shift])
        text = report(args, results, [t.name for t in targets], info, started, lst.stdout,
                      time.monotonic() - t0)
    finally:
        stop_targets(targets, work)
    print(text)
    if args.out:
        Path(args.out).write_text("# pulsar-perf side by side\n\n" + text)
    if failures(results):
        print(f"perf_table: pulsar-perf's logs are in {work / 'logs'}", file=sys.stderr)
    elif not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
