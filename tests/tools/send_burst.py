"""A burst of SENDs that never waits: P producers (one connection each) write N messages
as fast as their sockets take them while a thread per connection counts the receipts. With
--pid, the serve process's peak resident memory (VmHWM) is printed at the end: how much of the
burst the server held. Not a test: run it by hand.

    python tests/tools/send_burst.py --port 6650 -p 10 -n 100000 --pid PID"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from serve_raw import Raw, T, send  # noqa: E402


def producer(port: int, topic: str, n: int, size: int) -> None:
    raw = Raw(port, timeout=600)
    raw.handshake()
    raw.producer(topic)
    got = [0]

    def receipts():
        while got[0] < n:
            raw.expect(T.SEND_RECEIPT)
            got[0] += 1
    t = threading.Thread(target=receipts)
    t.start()
    payload = b"x" * size
    chunk = 1000
    for i in range(0, n, chunk):
        raw.send(b"".join(send(1, j, payload) for j in range(i, min(n, i + chunk))))
    t.join()
    raw.close()


def hwm_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("-p", type=int, default=10)
    ap.add_argument("-n", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--pid", type=int)
    a = ap.parse_args()
    before = hwm_mib(a.pid) if a.pid else None
    t0 = time.perf_counter()
    threads = [threading.Thread(target=producer, args=(a.port, f"persistent://public/default/"
                                                      f"burst-{os.getpid()}-{i}", a.n, a.size))
               for i in range(a.p)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    out = {"messages": a.p * a.n, "seconds": round(wall, 1),
           "msg_per_s": round(a.p * a.n / wall)}
    if a.pid:
        out |= {"rss_peak_before_mib": round(before, 1), "rss_peak_after_mib": round(hwm_mib(a.pid), 1)}
    print(out, flush=True)


if __name__ == "__main__":
    main()
