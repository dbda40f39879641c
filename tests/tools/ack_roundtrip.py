"""Ack round trip as a receipt-waiting client sees it (Java's isAckReceiptEnabled, pulsar-flex):
each consumer sends an ACK with a request id and waits for its ACK_RESPONSE before the next.
Raw protocol over a socket (tests/serve_raw.py), so it measures any Pulsar broker the same way:
`pulsarctl serve`, pulsar-lite, Apache Pulsar. Not a test: run it by hand.

    python tests/tools/ack_roundtrip.py --port 6650 [--consumers 1,8] [-n 2000]

Prints, per consumer count, the p50/p99 of one ack's round trip in ms and acks/s overall."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from serve_raw import Raw, T, ack, command, send  # noqa: E402


def one_consumer(port: int, topic: str, n: int, out: list, ready: threading.Barrier) -> None:
    raw = Raw(port)
    raw.handshake()
    raw.producer(topic)
    for i in range(0, n, 500):   # fill the topic, 500 sends in flight at a time
        k = min(500, n - i)
        for j in range(k):
            raw.send(send(1, i + j, b"x" * 100))
        for _ in range(k):
            raw.expect(T.SEND_RECEIPT)
    raw.send(command(T.SUBSCRIBE, "subscribe", topic=topic, subscription="rt", subType=0,
                     consumer_id=1, request_id=10**6, initialPosition=1))
    raw.expect(T.SUCCESS)
    raw.send(command(T.FLOW, "flow", consumer_id=1, messagePermits=n))
    ids = [raw.expect(T.MESSAGE)[0].message.message_id for _ in range(n)]
    ready.wait()
    times = []
    for i, mid in enumerate(ids):
        t0 = time.perf_counter()
        raw.send(ack(mid, 1, 1 + i))
        r = raw.expect(T.ACK_RESPONSE)[0].ackResponse
        times.append(time.perf_counter() - t0)
        assert not r.HasField("error"), r
    raw.close()
    out.extend(times)


def run(port: int, consumers: int, n: int, tag: str) -> dict:
    times: list = []
    ready = threading.Barrier(consumers + 1)
    threads = [threading.Thread(target=one_consumer,
                                args=(port, f"persistent://public/default/rt-{tag}-{consumers}-{i}",
                                      n, times, ready)) for i in range(consumers)]
    for t in threads:
        t.start()
    ready.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    times.sort()
    return {"consumers": consumers, "acks": len(times),
            "p50_ms": round(statistics.median(times) * 1000, 3),
            "p99_ms": round(times[int(len(times) * 0.99) - 1] * 1000, 3),
            "acks_per_s": round(len(times) / wall)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--consumers", default="1,8")
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--tag", default=str(os.getpid()))
    a = ap.parse_args()
    for c in (int(x) for x in a.consumers.split(",")):
        print(run(a.port, c, a.n, a.tag), flush=True)


if __name__ == "__main__":
    main()
