"""The entry cache (issue 29, item 6): a batch a producer sent to serve goes to its consumers as
sent, and those bytes are exactly what serve would write again from the stored columns; what
the cache keeps it checks against the entry it stands for, and it holds at most its bytes.
Real LMDB in tmp_path; the real pulsar-client against serve in this process."""
from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings, strategies as st

from pulsarctl.broker import Broker, batches
from pulsarctl.entries import F_SEQUENCE_ID
from pulsarctl.errors import InvalidValue
from pulsarctl.messages import BatchIds, MessageId, SentBatch
from pulsarctl.serve import frames
from pulsarctl.serve.entry_cache import EntryCache
from serve_inproc import serving
from serve_procs import quiet_logger

AS_SENT = batches.Spec(1000, 0, as_sent=True)


def _wire(payloads, first, with_ids=True) -> bytes:
    """A batch's payload as a client writes it."""
    return b"".join(frames.batch_message(p, first + i if with_ids else None)
                    for i, p in enumerate(payloads))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300) | st.sampled_from([b"", b"x" * 9000]), min_size=1,
                max_size=40),
       st.integers(0, 2**40))
def test_a_kept_batch_is_byte_for_byte_what_the_columns_give(tmp_path_factory, payloads, first):
    wire = _wire(payloads, first)
    plain = frames.plain_batch(wire, len(payloads), first)
    assert plain == payloads and plain.canonical
    assert not frames.plain_batch(_wire(payloads, first, False), len(payloads), first).canonical
    b = Broker(str(tmp_path_factory.mktemp("s") / "store"))
    b.subscribe("t", "s", "c", "Shared", "Earliest")
    (got,) = b.publish_many([("t", SentBatch(plain, first), "p", {"batching": AS_SENT})])
    (batch,) = b.fetch("t", "s", "c", 10_000, whole_batches=True)
    assert frames.columns_payload(batch.columns, batch.size, batch.rec[F_SEQUENCE_ID]) == wire
    cache = EntryCache()
    cache.put("t", got[1], "p", SentBatch(plain, first), wire)
    assert cache.payload("t", batch) == wire
    b.close()


class _B:   # what EntryCache.payload reads of a batches.Batch
    def __init__(self, lid, eid, producer="p", first=0, payloads=(b"ab", b"c"), skip=None):
        self.id = MessageId(lid, eid)
        self.rec = [0, producer, first]
        self.columns = [list(payloads)]
        self.size = len(payloads)
        self.skip = skip


AB = SentBatch([b"ab", b"c"], 0)   # what _B stands for


def test_the_cache_checks_what_it_hands_out_and_keeps_its_bytes():
    c = EntryCache(max_bytes=25)
    c.put("t", BatchIds(1, 0, -1, 2), "p", AB, b"A" * 10)
    assert c.payload("t", _B(1, 0)) == b"A" * 10
    # another topic, producer, first sequence id, count or payload: not this entry
    for other in (_B(1, 0, producer="q"), _B(1, 0, first=1), _B(1, 0, payloads=[b"abc"]),
                  _B(1, 0, payloads=[b"xx", b"y"][:1] * 2), _B(1, 1)):
        assert c.payload("t", other) is None
    assert c.payload("u", _B(1, 0)) is None
    # an ack set leaves some out: written from the columns
    assert c.payload("t", _B(1, 0, skip={1})) is None
    # a batch split over entries (over maxMessageSize), or with duplicates dropped: not kept
    c.put("t", [MessageId(1, 5, -1, 0), MessageId(1, 6, -1, 0)], "p", AB, b"B")
    c.put("t", [MessageId(-1, -1), MessageId(-1, -1)], "p", AB, b"B")
    assert len(c) == 1
    # oldest out first, by bytes
    c.put("t", BatchIds(1, 1, -1, 2), "p", AB, b"C" * 10)
    c.put("t", BatchIds(1, 2, -1, 2), "p", AB, b"D" * 10)
    assert len(c) == 2 and c.bytes == 20 and c.payload("t", _B(1, 0)) is None
    assert c.payload("t", _B(1, 2)) == b"D" * 10
    c.put("t", BatchIds(1, 3, -1, 2), "p", AB, b"E" * 26)   # over the whole cache
    assert len(c) == 2
    assert len(EntryCache(0)) == 0


def _on_worker(it, fn, *args, **kwargs):
    return asyncio.run_coroutine_threadsafe(_call(it, fn, args, kwargs), it.loop).result(30)


async def _call(it, fn, args, kwargs):
    return await it.server.call(fn, *args, **kwargs)


def test_a_consumer_gets_a_producers_batches_as_sent(store_path):
    import pulsar

    hits = []
    with serving(store_path) as it:
        cache = it.server.entry_cache
        payload = cache.payload

        def counted(topic, b):
            got = payload(topic, b)
            hits.append(got is not None)
            return got
        cache.payload = counted
        c = pulsar.Client(f"pulsar://127.0.0.1:{it.port}", logger=quiet_logger())
        try:
            topic = "persistent://public/default/kept"
            p = c.create_producer(topic, batching_enabled=True, batching_max_messages=100,
                                  batching_max_publish_delay_ms=60_000)
            for i in range(300):
                p.send_async(b"m%d" % i, None)
            p.flush()
            assert len(cache) == 3
            # what is kept is what the stored columns give
            _on_worker(it, it.broker.subscribe, topic, "check", "c", "Shared", "Earliest")
            stored = _on_worker(it, it.broker.fetch, topic, "check", "c", 10_000,
                                whole_batches=True)
            assert [payload(topic, b) for b in stored] == \
                [frames.columns_payload(b.columns, b.size, b.rec[F_SEQUENCE_ID]) for b in stored]
            cons = c.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
            got = [cons.receive(30_000) for _ in range(300)]
            assert [m.data() for m in got] == [b"m%d" % i for i in range(300)]
            assert hits == [True] * 3
        finally:
            c.close()


def test_managed_ledger_cache_size_mb_sizes_it(tmp_path):
    from pulsarctl.serve import conf
    from pulsarctl.serve.settings import configure

    f = tmp_path / "broker.conf"
    f.write_text("managedLedgerCacheSizeMB=0\n")
    values, ignored = conf.read(str(f))
    assert "managedLedgerCacheSizeMB" not in ignored
    assert configure(values).entry_cache_mb == 0
    assert configure({}).entry_cache_mb == 32
    f.write_text("managedLedgerCacheSizeMB=lots\n")
    with pytest.raises(InvalidValue, match="managedLedgerCacheSizeMB must be a whole number"):
        conf.read(str(f))
