"""spark/_batched.py reads chunks of batch entries column by column. Whatever it reads must be
exactly what the Python path (a record per message, batches.expand) makes, and a chunk it does
not read (a chunked message's entry) goes back to that path. splits.read_split sizes chunks of
batch entries by messages."""
from __future__ import annotations

import random

import pytest

pytest.importorskip("pyarrow")

from pulsarctl import compression  # noqa: E402
from pulsarctl.broker import Broker  # noqa: E402
from pulsarctl.broker.batches import Spec  # noqa: E402
from pulsarctl.clock import SimulatedClock  # noqa: E402
from pulsarctl.messages import OutgoingMessage  # noqa: E402
from pulsarctl.spark import _access as access  # noqa: E402
from pulsarctl.spark import _arrow, _batched, splits  # noqa: E402

NS = "persistent://public/default/"


def _messages(rnd, n, start=0):
    out = []
    for i in range(start, start + n):
        props = rnd.choice([None, {}, {"n": str(i)}, {"a": "1", "b": "é" * (i % 3)}])
        out.append(OutgoingMessage(
            f"m-{i}".encode() * rnd.randrange(0, 4), props,
            key=rnd.choice([None, f"k{i % 5}", ""]),
            event_time=rnd.choice([0, 1_700_000_000_000 + i]),
            ordering_key=rnd.choice([None, b"ok"]),
            sequence_id=rnd.choice([None, None, 10_000 + 3 * i])))
    return out


def _fill(path, rnd, topic="batched", partitions=0):
    """Batches of every size (a batch of one is stored plain), plain and compressed messages
    between them, two producers, ledgers of 5 entries."""
    clock = SimulatedClock(1_790_000_000_000)
    b = Broker(path, clock)
    b.policies.update_setting("managedLedgerMaxEntriesPerLedger", "5")
    if partitions:
        b.topics.create_partitioned(topic, partitions)
    i = 0
    for round_ in range(14):
        n = rnd.choice([1, 2, 7, 30])
        spec = Spec(max_messages=rnd.choice([1, 4, 1000]), max_bytes=0,
                    key_based=round_ % 5 == 4)
        code = rnd.choice([compression.NONE, compression.NONE, compression.LZ4,
                           compression.ZLIB, compression.ZSTD, compression.SNAPPY])
        batching = None if round_ % 4 == 3 else spec
        b.publish(topic, _messages(rnd, n, i), producer_name=f"p{round_ % 2}",
                  compression=code, batching=batching)
        i += n
        clock.advance(3)
    b.close()
    return i


def _read(path, topic, schema=splits.SCHEMA, chunk=16, **kw):
    rows = []
    for part in access.resolve_parts(access.broker(path), "names", [access.parse_topic(topic)]):
        split = splits.Split(part.name, part.partition, part.ml_id, part.first, part.next)
        for batch in splits.read_split(path, schema, split, chunk=chunk, **kw):
            batch.validate(full=True)
            rows.append(batch)
    return rows


def _python_path(monkeypatch):
    monkeypatch.setattr(_batched, "decode", lambda *a: None)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_batches_read_exactly_as_the_python_path(tmp_path, monkeypatch, seed):
    path = str(tmp_path / "store")
    total = _fill(path, random.Random(seed))
    seen = []
    real = _batched.decode
    monkeypatch.setattr(_batched, "decode", lambda *a: seen.append(real(*a)) or seen[-1])
    fast = _read(path, "batched")
    assert seen and all(c is not None for c in seen)
    _python_path(monkeypatch)
    slow = _read(path, "batched")
    assert sum(x.num_rows for x in fast) == total
    assert [r for x in fast for r in x.to_pylist()] == [r for x in slow for r in x.to_pylist()]
    assert any(":" in r["__messageId"][len("1:1:-1"):] for x in fast for r in x.to_pylist())


def test_partitions_narrow_schemas_and_time_bounds(tmp_path, monkeypatch):
    path = str(tmp_path / "store")
    _fill(path, random.Random(5), topic="parts", partitions=3)
    from pyspark.sql.types import StructType

    narrow = [StructType([f for f in splits.SCHEMA.fields if f.name in names]) for names in (
        ("value",), ("__messageId", "__sequenceId"), ("__eventTime", "__messageProperties"),
        ("__key", "__producerName", "__publishTime"))]
    cases = [(s, {}) for s in narrow] + [
        (splits.SCHEMA, {"lo_ms": 1_790_000_000_010, "hi_ms": 1_790_000_000_030})]
    fast = [[r for x in _read(path, "parts", s, **kw) for r in x.to_pylist()]
            for s, kw in cases]
    _python_path(monkeypatch)
    slow = [[r for x in _read(path, "parts", s, **kw) for r in x.to_pylist()]
            for s, kw in cases]
    assert fast == slow
    assert all(fast)
    ids = [r["__messageId"] for r in fast[1]]
    assert {i.split(":")[2] for i in ids} == {"0", "1", "2"}


def test_a_chunked_message_among_batches_goes_to_the_python_path(tmp_path, monkeypatch):
    path = str(tmp_path / "store")
    b = Broker(path)
    b.publish("mixed", [OutgoingMessage(b"a%d" % i) for i in range(5)], batching=Spec())
    b.policies.update_setting("maxMessageSize", "100")
    b.publish("mixed", [OutgoingMessage(b"B" * 250, key="big")], chunking=True)
    b.publish("mixed", [OutgoingMessage(b"c%d" % i) for i in range(3)], batching=Spec())
    b.close()
    got = []
    real = _batched.decode
    monkeypatch.setattr(_batched, "decode", lambda *a: got.append(real(*a)) or got[-1])
    rows = [r for x in _read(path, "mixed", chunk=100) for r in x.to_pylist()]
    assert got == [None]  # the one chunk holds the chunks: the Python path joins them
    assert [r["value"] for r in rows] == [b"a%d" % i for i in range(5)] + [b"B" * 250] + [
        b"c%d" % i for i in range(3)]


def test_chunks_of_batches_hold_about_chunk_messages(tmp_path, monkeypatch):
    """After the first chunk shows batches of 20, a chunk reads ~chunk messages, not chunk
    entries (a thousand batches of a thousand overflow the processor's caches). Plain entries
    are read PLAIN_CHUNKS_PER_READ chunks at a time. Either way Spark gets batches of at most
    chunk rows."""
    reads = []
    real = access.scan_chunk
    monkeypatch.setattr(access, "scan_chunk", lambda b, name, ml, lo, hi, n, *a: (
        reads.append(n), real(b, name, ml, lo, hi, n, *a))[1])
    path = str(tmp_path / "store")
    b = Broker(path)
    for _ in range(300):
        b.publish("many", [OutgoingMessage(b"x" * 20) for _ in range(20)],
                  batching=Spec(max_messages=20))
    b.close()
    sizes = [x.num_rows for x in _read(path, "many", chunk=100)]
    # The first chunk: 100 entries (it is under FIRST_CHUNK_BYTES); then 5 entries a chunk.
    assert reads == [100] + [5] * 40
    assert sizes == [100] * 60  # the first chunk's 2,000 messages in batches of 100
    # Plain entries: 300 first, then PLAIN_CHUNKS_PER_READ times that a read, handed over 300
    # a batch.
    reads.clear()
    b = Broker(path)
    b.publish("plain", [OutgoingMessage(b"y") for _ in range(1000)])
    b.close()
    assert [x.num_rows for x in _read(path, "plain", chunk=300)] == [300, 300, 300, 100]
    per_read = 300 * splits.PLAIN_CHUNKS_PER_READ
    assert splits.PLAIN_CHUNKS_PER_READ > 1
    assert reads == [300] + [per_read] * -(-700 // per_read)


def test_record_batch_ids_of_batch_runs():
    ids = [(3, 0, 0), (3, 1, 0), (3, 2, 3), (3, 3, 0), (4, 0, 2), (4, 1, 0), (5, 9, 0)]
    got = _arrow._entry_ids(ids, 2).to_pylist()
    assert got == ["3:0:2", "3:1:2", "3:2:2:0", "3:2:2:1", "3:2:2:2", "3:3:2", "4:0:2:0",
                   "4:0:2:1", "4:1:2", "5:9:2"]
    assert _arrow._entry_ids([], -1).to_pylist() == []
