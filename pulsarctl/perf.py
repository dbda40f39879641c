"""The benchmark behind `pulsarctl perf` (in the spirit of pulsar-perf): produce or consume N
messages of S bytes through the Python API, and measure rate and latency."""
from __future__ import annotations

from pulsarctl import clock as clocks
from pulsarctl.messages import OutgoingMessage


def percentiles(samples_ms: list[float]) -> dict:
    if not samples_ms:
        return {}
    s = sorted(samples_ms)

    def p(q):
        return round(s[min(len(s) - 1, int(q * len(s)))], 3)
    return {"p50": p(0.50), "p95": p(0.95), "p99": p(0.99), "p999": p(0.999), "max": round(s[-1], 3)}


def _summary(n, nbytes, seconds, lat) -> dict:
    seconds = max(seconds, 1e-9)
    return {"messages": n, "bytes": nbytes, "seconds": round(seconds, 4),
            "msgPerSec": round(n / seconds, 1), "mbPerSec": round(nbytes / seconds / 1e6, 3),
            "latencyMs": percentiles(lat)}


_WORDS = ("order", "customer", "amount", "currency", "EUR", "status", "paid", "pending",
          "item", "sku", "quantity", "price", "shipping", "address", "street", "city", "id")


def payloads(size: int, k: int = 64) -> list[bytes]:
    """k payloads of size bytes that look like JSON events (compressible as real data is,
    unlike a run of one byte), the same on every run."""
    import random

    rng = random.Random(0)
    out = []
    for _ in range(k):
        parts, n = [], 0
        while n < size:
            w = f'"{rng.choice(_WORDS)}": {rng.randrange(100_000)}, '
            parts.append(w)
            n += len(w)
        out.append("".join(parts).encode()[:size])
    return out


def produce(client, topic: str, n: int, size: int, batch: int, progress=None,
            compression: str = "none") -> dict:
    pool = payloads(size)
    producer = client.create_producer(topic, compression_type=compression)
    before = client.broker.internal_stats(topic)["totalSize"] if _exists(client, topic) else 0
    lat: list[float] = []
    done = 0
    t0 = clocks.monotonic()
    while done < n:
        k = min(batch, n - done)
        start = clocks.monotonic()
        producer.send_many([OutgoingMessage(pool[(done + j) % 64]) for j in range(k)])
        # Every message of a batch waits for the batch's commit.
        ms = (clocks.monotonic() - start) * 1000
        lat.extend([ms] * k)
        done += k
        if progress:
            progress(done)
    elapsed = clocks.monotonic() - t0
    stored = client.broker.internal_stats(topic)["totalSize"] - before
    return {"topic": topic, "batch": batch, "size": size, "compression": compression,
            "storedBytesPerMessage": round(stored / n, 1) if n else 0.0,
            **_summary(n, n * size, elapsed, lat)}


def _exists(client, topic: str) -> bool:
    from pulsarctl.errors import TopicNotFound

    try:
        client.broker.internal_stats(topic)
        return True
    except TopicNotFound:
        return False


def consume(client, topic: str, subscription: str, n: int, sub_type: str, queue: int,
            progress=None) -> dict:
    from pulsarctl.errors import Timeout

    consumer = client.subscribe(topic, subscription, sub_type, "Earliest",
                                receiver_queue_size=queue)
    lat: list[float] = []
    got = nbytes = 0
    t0 = t_end = clocks.monotonic()
    mono = clocks.monotonic
    receive, ack, add = consumer.receive, consumer.acknowledge, lat.append
    try:
        while n == 0 or got < n:
            start = mono()
            try:
                m = receive(1000)
            except Timeout:
                break
            ack(m)
            t_end = mono()
            add((t_end - start) * 1000)
            got += 1
            nbytes += len(m.payload)
            if progress and got % 1000 == 0:
                progress(got)
    finally:
        consumer.close()
    # The clock stops at the last message: the idle wait that ends the run is not counted.
    return {"topic": topic, "subscription": subscription, "type": sub_type,
            **_summary(got, nbytes, t_end - t0, lat)}
