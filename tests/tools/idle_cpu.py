"""An idle serve's CPU: N consumers (the real pulsar-client, one connection) wait on N empty
topics while the serve process's CPU seconds are read from /proc over a window; then a CLI
`pulsarctl produce` reaches one of them: latency = receive time - the message's publish time
(ms, the CLI stamps it), median of R. Not a test: run it by hand, serve already running.

    python tests/tools/idle_cpu.py --url pulsar://127.0.0.1:6650 --pid PID --store DIR"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import time

import pulsar


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--consumers", type=int, default=100)
    ap.add_argument("--window", type=float, default=60)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--tag", default=str(os.getpid()))
    a = ap.parse_args()
    log = logging.getLogger("idle")
    log.setLevel(logging.CRITICAL)
    client = pulsar.Client(a.url, logger=log)
    topics = [f"persistent://public/default/idle-{a.tag}-{i}" for i in range(a.consumers)]
    consumers = [client.subscribe(t, "s") for t in topics]
    time.sleep(2)   # the subscriptions settle (their first fetch finds nothing)
    c0 = cpu_s(a.pid)
    time.sleep(a.window)
    used = cpu_s(a.pid) - c0
    lat = []
    pulsarctl = os.path.join(os.path.dirname(sys.executable), "pulsarctl")
    for i in range(a.rounds):
        subprocess.run([pulsarctl, "--store", a.store, "produce", topics[0], "-m", f"m-{i}"],
                       check=True, capture_output=True)
        m = consumers[0].receive(30_000)
        lat.append(time.time() * 1000 - m.publish_timestamp())
        consumers[0].acknowledge(m)
    client.close()
    print({"consumers": a.consumers, "window_s": a.window, "cpu_s": round(used, 3),
           "core_pct": round(100 * used / a.window, 2),
           "cli_produce_to_receive_ms_p50": round(statistics.median(lat), 1),
           "max_ms": round(max(lat), 1)}, flush=True)


if __name__ == "__main__":
    main()
