"""The benchmark behind `pulsarctl perf` (in the spirit of pulsar-perf): produce or consume N
messages of S bytes through the Python API, and measure rate and latency."""
from __future__ import annotations

import os

import random
import tempfile
import shutil
from pulsarctl import clock as clocks
from pulsarctl.messages import OutgoingMessage
from pulsarctl.errors import TopicNotFound, Timeout
from pulsarctl.broker import Broker, policies
from pulsarctl.clock import SimulatedClock


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
            compression: str = "none", batching: bool = True,
            batching_max_messages: int = 1000, batching_max_bytes: int = 128 * 1024) -> dict:
    """batching (on by default, as in pulsar-perf): each transaction's messages go into batch
    entries of batching_max_messages messages / batching_max_bytes bytes."""
    # With batching, a pool smaller than a batch would repeat payloads inside each batch and
    # flatter its compression: then no payload repeats within a batch (up to 64 MB of pool).
    distinct = 64 if not batching else max(
        64, min(2 * batching_max_messages, (64 << 20) // max(size, 1)))
    pool = payloads(size, distinct)
    producer = client.create_producer(topic, compression_type=compression,
                                      batching_enabled=batching,
                                      batching_max_messages=batching_max_messages,
                                      batching_max_allowed_size_in_bytes=batching_max_bytes)
    before = _stored(client, topic) if _exists(client, topic) else 0
    lat: list[float] = []
    done = 0
    npool = len(pool)
    t0 = clocks.monotonic()
    while done < n:
        k = min(batch, n - done)
        start = clocks.monotonic()
        producer.send_many([OutgoingMessage(pool[(done + j) % npool]) for j in range(k)])
        # Every message of a batch waits for the batch's commit.
        ms = (clocks.monotonic() - start) * 1000
        lat.extend([ms] * k)
        done += k
        if progress:
            progress(done)
    elapsed = clocks.monotonic() - t0
    stored = _stored(client, topic) - before
    return {"topic": topic, "batch": batch, "size": size, "compression": compression,
            "batching": batching,
            "batchingMaxMessages": batching_max_messages if batching else None,
            "storedBytesPerMessage": round(stored / n, 1) if n else 0.0,
            **_summary(n, n * size, elapsed, lat)}


def _stored(client, topic: str) -> int:
    """The bytes a topic stores (a partitioned topic's: its partitions' together)."""
    s = client.broker.topics.internal_stats(topic)
    parts = s.get("partitions")
    return sum(p["totalSize"] for p in parts.values()) if parts else s["totalSize"]


def _exists(client, topic: str) -> bool:
    try:
        client.broker.topics.internal_stats(topic)
        return True
    except TopicNotFound:
        return False


def consume(client, topic: str, subscription: str, n: int, sub_type: str, queue: int,
            progress=None) -> dict:
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


# -- timers and delayed delivery, on a scratch store with a simulated clock ---------------------
def _scratch():
    """A temporary store on a simulated clock: these benchmarks move time, which a user's
    store must not see."""
    d = tempfile.mkdtemp(prefix="pulsarctl-perf-")
    clock = SimulatedClock(1_800_000_000_000)
    b = Broker(os.path.join(d, "store"), clock)
    # All n are held by one consumer at once: lift Pulsar's unacked limits (50,000 / 200,000).
    for field in (policies.MAX_UNACKED_CONSUMER, policies.MAX_UNACKED_SUBSCRIPTION):
        b.policies.set("namespace", "public/default", field, 0)
    return d, clock, b


def timers(n: int, progress=None) -> dict:
    """n nacked messages whose nack delay has run out, then one fire_due (what `daemon
    run-once` does): timers fired per second."""
    d, clock, b = _scratch()
    try:
        _fill(b, "t", n, progress)
        b.subscribe("t", "s", "c", "Shared", "Earliest",
                    settings={"negativeAckRedeliveryDelayMs": 1000})
        ids = []
        while len(ids) < n:
            got = b.fetch("t", "s", "c", 10_000)
            if not got:
                raise RuntimeError(f"only {len(ids)} of {n} messages could be fetched")
            ids.extend(m.message_id() for m in got)
        t0 = clocks.monotonic()
        b.nack("t", "s", ids)
        t_nack = clocks.monotonic() - t0
        clock.advance(2000)
        t0 = clocks.monotonic()
        fired = b.chores.fire_due()
        t_fire = clocks.monotonic() - t0
        return {"timers": n, "fired": fired, "fireSeconds": round(t_fire, 3),
                "timersPerSec": round(fired / t_fire) if t_fire else 0,
                "nackSeconds": round(t_nack, 3), "nacksPerSec": round(n / t_nack) if t_nack else 0}
    finally:
        b.close()
        shutil.rmtree(d, ignore_errors=True)


def delayed(n: int, due: int = 1000, progress=None) -> dict:
    """n messages delayed by a day on a Shared subscription, then `due` messages due now: how
    long dispatching the due ones takes while the n wait (and the one-time indexing pass)."""
    d, clock, b = _scratch()
    try:
        b.subscription("t", "s").create("earliest")
        _fill(b, "t", n, progress, deliver_at=clock.now_ms() + 86_400_000)
        # local: imported only where this branch runs
        from pulsarctl.broker.consumers import this_process

        pid, start = this_process()
        b.subscribe("t", "s", "c", "Shared", pid=pid, pid_start=start)
        t0 = clocks.monotonic()
        first = b.fetch("t", "s", "c", 1000)  # reads the n once and indexes them
        t_index = clocks.monotonic() - t0
        assert not first
        _fill(b, "t", due, None)
        t0 = clocks.monotonic()
        got = b.fetch("t", "s", "c", due)
        t_due = clocks.monotonic() - t0
        b.ack("t", "s", [m.message_id() for m in got])
        clock.advance(86_400_000)
        t0 = clocks.monotonic()
        later = b.fetch("t", "s", "c", 1000)
        t_later = clocks.monotonic() - t0
        return {"delayed": n, "due": len(got), "dueDispatchMs": round(t_due * 1000, 1),
                "indexingSeconds": round(t_index, 2),
                "firstThousandOnceDueMs": round(t_later * 1000, 1), "onceDue": len(later)}
    finally:
        b.close()
        shutil.rmtree(d, ignore_errors=True)


def _fill(b, topic: str, n: int, progress, deliver_at: int = 0) -> None:
    done = 0
    while done < n:
        k = min(10_000, n - done)
        b.publish(topic, [OutgoingMessage(b"m" * 32, deliver_at=deliver_at) for _ in range(k)])
        done += k
        if progress:
            progress(done)
