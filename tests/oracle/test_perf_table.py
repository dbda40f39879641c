"""perf_table.py, pulsar-perf side by side: how it reads pulsar-perf's summary lines and builds
its table (lines as pulsar-perf 4.0.8 printed them), and one short run of the script itself
against serve, with the real pulsar-perf, in the oracle's namespace."""
from __future__ import annotations

import subprocess
import sys

import pytest

import perf_table
from perf_table import Outcome, Results, Summary, parse_summary, table

PRODUCER_LOG = """\
05:27:02.065 INFO  org.apache.pulsar.testclient.PerformanceProducer - Created 1 producers
05:27:08.076 INFO  org.apache.pulsar.testclient.PerformanceProducer - ------------- DONE (reached the maximum duration: [6 seconds] of production) --------------
05:27:09.121 INFO  org.apache.pulsar.testclient.PerformanceProducer - Aggregated throughput stats --- 134580 records sent --- 13280.388 msg/s --- 103.753 Mbit/s 
05:27:09.682 INFO  org.apache.pulsar.testclient.PerformanceProducer - Aggregated latency stats --- Latency: mean: 1716.694 ms - med: 1684.607 - 95pct: 2702.351 - 99pct: 2782.143 - 99.9pct: 2784.879 - 99.99pct: 2784.879 - 99.999pct: 2784.879 - Max: 2784.879
"""  # noqa: E501

# A rated producer pads its figures with spaces.
RATED_LOG = """\
05:20:23.963 INFO  org.apache.pulsar.testclient.PerformanceProducer - Created 1 producers
05:20:25.976 INFO  org.apache.pulsar.testclient.PerformanceProducer - ------------- DONE (reached the maximum number: 2000 of production) --------------
05:20:31.554 INFO  org.apache.pulsar.testclient.PerformanceProducer - Aggregated throughput stats --- 2002 records sent --- 199.937 msg/s --- 1.562 Mbit/s 
05:20:32.028 INFO  org.apache.pulsar.testclient.PerformanceProducer - Aggregated latency stats --- Latency: mean:   9.719 ms - med:   7.536 - 95pct:  24.073 - 99pct:  30.137 - 99.9pct:  33.339 - 99.99pct:  34.361 - 99.999pct:  34.361 - Max:  34.361
"""  # noqa: E501

CONSUMER_LOG = """\
05:20:10.290 INFO  org.apache.pulsar.testclient.PerformanceConsumer - Start receiving from 1 consumers per subscription on 1 topics
05:20:11.487 INFO  org.apache.pulsar.testclient.PerformanceConsumer - ------------------- DONE -----------------------
05:20:11.539 INFO  org.apache.pulsar.testclient.PerformanceConsumer - Aggregated throughput stats --- 3988 records received --- 3247.228 msg/s --- 25.369 Mbit/s --- AckRate: 3246.413273739825  msg/s --- ack failed 0 msg
05:20:11.890 INFO  org.apache.pulsar.testclient.PerformanceConsumer - Aggregated latency stats --- Latency: mean: 21348.688 ms - med: 21369 - 95pct: 21544 - 99pct: 21604 - 99.9pct: 21615 - 99.99pct: 21681 - 99.999pct: 21681 - Max: 21681
"""  # noqa: E501


def test_reads_a_producers_aggregated_lines():
    s = parse_summary(PRODUCER_LOG)
    # its rate from the producer made (02.065) to DONE (08.076)
    rate = 134580 / 6.011
    assert s == Summary(134580, pytest.approx(rate), pytest.approx(rate / 1024), 13280.388,
                        1684.607, 2702.351, 2782.143, 2784.879, 2784.879)


def test_reads_padded_figures():
    s = parse_summary(RATED_LOG)
    assert (s.count, s.perf_msg_s, s.p50, s.p95, s.p999, s.max) == (
        2002, 199.937, 7.536, 24.073, 33.339, 34.361)


def test_reads_a_consumers_aggregated_lines():
    s = parse_summary(CONSUMER_LOG)
    assert (s.count, s.perf_msg_s, s.p50, s.p99, s.max) == (3988, 3247.228, 21369, 21604, 21681)
    # from subscribed (10.290) to DONE (11.487)
    assert s.msg_s == pytest.approx(3988 / 1.197)


def test_a_live_consumers_rate_runs_from_the_producer_made():
    made = perf_table.clock_s(perf_table.STARTED.search(
        "05:20:09.487 INFO  org.apache.pulsar.testclient.PerformanceProducer - "
        "Created 1 producers\n"))
    s = parse_summary(CONSUMER_LOG, since=made)
    assert s.msg_s == pytest.approx(3988 / 2.0)
    assert s.mb_s == pytest.approx(3988 / 2.0 / 1024)


def test_a_run_across_midnight_wraps():
    log = CONSUMER_LOG.replace("05:20:10.290", "23:59:59.500").replace("05:20:11.487",
                                                                        "00:00:00.500")
    assert parse_summary(log).msg_s == pytest.approx(3988)


def test_a_log_without_summary_lines_has_no_summary():
    assert parse_summary("05:07:03.322 WARN ClientCnx - Got exception\n") is None


def run(msg_s: float, p50: float) -> Outcome:
    return Outcome(Summary(100, msg_s, msg_s / 1024, msg_s / 2, p50, p50, p50, p50, p50),
                   "pulsar-perf ...")


def test_the_table_gives_medians_and_the_ratios_of_serve_to_each_peer():
    results = Results()
    for msg_s, p50 in [(1000, 10), (3000, 30), (2000, 20)]:
        results.add("real", "produce", run(msg_s, p50))
    for msg_s, p50 in [(500, 40), (400, 50), (600, 60)]:
        results.add("serve", "produce", run(msg_s, p50))
    results.add("lite", "produce", Outcome(None, "pulsar-perf produce ...", "exit 1: refused"))
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:4]): line
            for line in table(results, ["real", "serve", "lite"]).splitlines()}
    assert ("produce", "real", "3/3", "2,000") in rows
    assert ("produce", "serve", "3/3", "500") in rows
    assert ("produce", "lite", "0/1", "failed: see below") in rows
    ratio = rows[("produce", "serve/real", "", "0.25")]
    cells = [c.strip() for c in ratio.strip("|").split("|")]
    assert cells[3:] == ["0.25", "0.25", "0.25"] + ["2.50"] * 5   # each latency: 50 / 20
    assert not any(key[1] == "serve/lite" for key in rows)
    assert perf_table.failures(results) == [
        "- lite, produce, run 1: `pulsar-perf produce ...`: exit 1: refused"]


def test_the_backlog_rows_give_no_latency():
    results = Results()
    results.add("real", "consume backlog", run(9000, 5000))
    results.add("serve", "consume backlog", run(3000, 7000))
    lines = [line for line in table(results, ["real", "serve"]).splitlines()
             if line.startswith("| consume backlog")]
    assert len(lines) == 3
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[-5:] == ["-"] * 5
    assert "| 0.33 |" in lines[2]


def test_the_script_against_serve_with_the_real_pulsar_perf(tmp_path):
    """One short round against serve alone: every test gives figures (a serve that failed
    pulsar-perf, say with a PRODUCER_SUCCESS the Java client refuses, gives none)."""
    pre = subprocess.run([str(perf_table.PULSAR_SH), "isolated"])
    if pre.returncode != 0:
        pytest.skip("needs tests/oracle/pulsar.sh netns")
    out = tmp_path / "results.md"
    proc = subprocess.run(
        [sys.executable, str(perf_table.ORACLE_DIR / "perf_table.py"), "--targets", "serve",
         "--rounds", "1", "--seconds", "2", "--live-messages", "500",
         "--work", str(tmp_path / "work"), "--out", str(out)],
        capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    assert "Failures:\n\n- none" in text, text
    for test in perf_table.TESTS:
        assert f"| {test.name} | serve | 1/1 |" in text, text
    assert "127.0.0.1:6660" in text


def test_a_failures_quote_is_its_first_distinct_errors():
    log = "".join(
        f"05:40:{i:02}.997 WARN  ClientCnx - Got exception io.netty.util.internal."
        "OutOfDirectMemoryError: failed to allocate 4194304 byte(s) of direct memory\n"
        "\tat io.netty.channel.epoll.EpollEventLoop.run(EpollEventLoop.java:399)\n"
        for i in range(30))
    assert perf_table.log_tail(log) == (
        "WARN  ClientCnx - Got exception io.netty.util.internal.OutOfDirectMemoryError: "
        "failed to allocate 4194304 byte(s) of direct memory")
