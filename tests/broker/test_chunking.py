"""Chunking (issue 7.3): a payload over maxMessageSize is stored as chunks with Pulsar's chunk
metadata, consumers and readers join them (also interleaved from two producers), incomplete
messages are bounded and expire, and a chunked message is acked, nacked, retried and
dead-lettered as one message."""
from __future__ import annotations

import os
import time

import pytest

import pulsarctl
from pulsarctl import compression as comp
from pulsarctl.broker import chunks, policies, producers, topics
from pulsarctl.client import CompressionType
from pulsarctl.errors import InvalidValue, MessageTooLarge, Timeout
from pulsarctl.messages import MessageId, OutgoingMessage, build_entry
from pulsarctl.names import parse_topic
from store import codec

from cli_helpers import assert_error, ok, pjson, rows

T = "persistent://public/default/t"
BODY = bytes(range(256)) * 2 + b"tail"  # 516 bytes: 6 chunks of at most 100


def entries(broker, topic=T):
    """The stored entries of a topic, decoded."""
    def run(ctx):
        info = topics.require(ctx, parse_topic(topic))
        return [codec.decode(raw) for _o, _l, _e, raw in
                ctx.ledgers.scan(ctx.txn, info, info.first_offset, info.next_offset)]
    return broker._read(run)


def put_chunks(broker, pieces, topic=T):
    """Append chunk entries one by one, as Pulsar producers send them (so they may interleave
    or arrive out of order): pieces are (producer, seq, chunk id, num chunks, payload, total)."""
    def run(ctx):
        t = parse_topic(topic)
        info = topics.ensure(ctx, t)
        for prod, seq, cid, n, data, total in pieces:
            rec = build_entry(ctx.now, prod, seq, OutgoingMessage(b""),
                              chunk=([f"{prod}-{seq}", cid, n, total], data, 0, total))
            ctx.ledgers.append(ctx.txn, info, [codec.encode(rec)], ctx.now)
        chunks.mark(ctx, t)
    broker._write(run)


def plain(broker, payload, topic=T):
    pulsarctl.Client(broker=broker).create_producer(topic).send(payload)


def consumer(client, sub="s", **kw):
    kw.setdefault("initial_position", pulsarctl.InitialPosition.Earliest)
    return client.subscribe(T, sub, **kw)


def backlog(broker, sub="s"):
    return broker.topics.stats(T)["subscriptions"][sub]["msgBacklog"]


@pytest.fixture
def small(broker):
    broker.policies.update_setting("maxMessageSize", "100")
    return broker


def test_chunks_are_stored_with_pulsars_metadata_and_the_id_is_the_last_chunks(small):
    client = pulsarctl.Client(broker=small)
    p = client.create_producer(T, "prod", chunking_enabled=True)
    mid = p.send(BODY, properties={"a": "b"}, partition_key="k")
    recs = entries(small)
    assert len(recs) == 6
    assert [r[12] for r in recs] == [["prod-0", i, 6, len(BODY)] for i in range(6)]
    assert b"".join(r[3] for r in recs) == BODY
    assert all(len(r[3]) <= 100 for r in recs)
    assert all(r[2] == 0 and r[4] == {"a": "b"} and r[5] == "k" for r in recs)
    assert mid == MessageId(mid.ledger_id, 5)
    # Small messages are not chunked; without chunking an oversize message is refused.
    assert p.send(b"small").entry_id == 6
    assert len(entries(small)[-1]) == 4
    with pytest.raises(MessageTooLarge):
        client.create_producer(T).send(BODY)
    client.close()


def test_consumer_and_reader_join_chunks_between_plain_messages(small):
    client = pulsarctl.Client(broker=small)
    plain(small, b"before")
    ids = [client.create_producer(T, chunking_enabled=True).send(BODY)]
    plain(small, b"after")
    c = consumer(client)
    got = [c.receive(timeout_millis=1000) for _ in range(3)]
    assert [m.data() for m in got] == [b"before", BODY, b"after"]
    whole = got[1]
    assert whole.message_id() == ids[0] and len(whole.chunk_ids_) == 6
    assert whole.record()["numChunks"] == 6
    for m in got:
        c.acknowledge(m)
    c.flush_acks()
    assert backlog(small) == 0
    r = client.create_reader(T, MessageId.earliest)
    assert [r.read_next(1000).data() for _ in range(3)] == [b"before", BODY, b"after"]
    assert not r.has_message_available()
    client.close()


def test_chunks_interleaved_from_two_producers_are_joined(broker):
    a, b = b"A" * 250, b"B" * 180
    put_chunks(broker, [("pa", 0, 0, 3, a[:100], 250), ("pb", 7, 0, 2, b[:100], 180),
                        ("pa", 0, 1, 3, a[100:200], 250), ("pb", 7, 1, 2, b[100:], 180),
                        ("pa", 0, 2, 3, a[200:], 250)])
    client = pulsarctl.Client(broker=broker)
    c = consumer(client, receiver_queue_size=1)
    m1, m2 = c.receive(1000), c.receive(1000)
    assert (m1.data(), m2.data()) == (b, a)
    assert [i.entry_id for i in m1.chunk_ids_] == [1, 3]
    assert [i.entry_id for i in m2.chunk_ids_] == [0, 2, 4]
    assert (m1.producer_name, m2.producer_name) == ("pb", "pa")
    # Acking by the message's id alone (the last chunk's) acks every chunk, even interleaved.
    assert broker.ack(T, "s", [m2.message_id()]) == 1
    assert backlog(broker) == 2
    assert broker.ack(T, "s", [m1.message_id()]) == 1
    assert backlog(broker) == 0
    client.close()


def test_a_chunk_out_of_order_discards_its_message(broker):
    put_chunks(broker, [("p", 0, 0, 3, b"x" * 10, 30), ("p", 0, 2, 3, b"z" * 10, 30),
                        ("p", 0, 1, 3, b"y" * 10, 30)])
    plain(broker, b"next")
    client = pulsarctl.Client(broker=broker)
    c = consumer(client)
    assert c.receive(1000).data() == b"next"
    assert c._chunks.discarded == 2 and len(c._chunks) == 0
    with pytest.raises(Timeout):
        c.receive(50)
    client.close()


def test_pending_limit_drops_the_oldest_incomplete_message_and_nacks_its_chunks(broker, clock):
    put_chunks(broker, [("p1", 0, 0, 2, b"1" * 5, 10), ("p2", 0, 0, 2, b"2" * 5, 10),
                        ("p3", 0, 0, 2, b"3" * 5, 10)])
    plain(broker, b"plain")
    client = pulsarctl.Client(broker=broker)
    c = consumer(client, consumer_type=pulsarctl.ConsumerType.Shared,
                 max_pending_chunked_message=2, negative_ack_redelivery_delay_ms=100)
    assert c.receive(1000).data() == b"plain"
    assert len(c._chunks) == 2
    pending = {r["messageId"]: r for r in broker.subscription(T, "s").pending()}
    assert pending["1:0:-1"]["nextRedelivery"] is not None  # p1's chunk was nacked
    assert pending["1:1:-1"]["nextRedelivery"] is None
    client.close()


def test_auto_ack_oldest_chunked_message_on_queue_full(broker):
    put_chunks(broker, [("p1", 0, 0, 2, b"1" * 5, 10), ("p2", 0, 0, 2, b"2" * 5, 10)])
    plain(broker, b"plain")
    client = pulsarctl.Client(broker=broker)
    c = consumer(client, max_pending_chunked_message=1,
                 auto_ack_oldest_chunked_message_on_queue_full=True)
    assert c.receive(1000).data() == b"plain"
    c.acknowledge(c._queue[-1])
    c.flush_acks()
    assert backlog(broker) == 1  # p2's first chunk, still waiting for its second
    client.close()


def test_incomplete_chunked_messages_expire_on_the_store_clock(broker, clock):
    put_chunks(broker, [("p", 0, 0, 2, b"a" * 5, 10)])
    client = pulsarctl.Client(broker=broker)
    c = consumer(client, consumer_type=pulsarctl.ConsumerType.Shared,
                 expire_time_of_incomplete_chunked_message_ms=1000,
                 negative_ack_redelivery_delay_ms=100)
    with pytest.raises(Timeout):
        c.receive(30)
    assert len(c._chunks) == 1
    clock.advance(999)
    with pytest.raises(Timeout):
        c.receive(30)
    assert len(c._chunks) == 1
    clock.advance(1)
    with pytest.raises(Timeout):
        c.receive(30)
    assert len(c._chunks) == 0
    (rec,) = broker.subscription(T, "s").pending()
    assert rec["nextRedelivery"] is not None  # given back, to come again
    # Its last chunk arrives late: with the first chunk redelivered first, it is joined.
    put_chunks(broker, [("p", 0, 1, 2, b"b" * 5, 10)])
    clock.advance(1000)
    broker.chores.fire_due()
    m = c.receive(1000)
    assert m.data() == b"a" * 5 + b"b" * 5
    assert m.redelivery_count() == 0  # the last chunk's, as in Pulsar
    client.close()


def test_chunked_message_is_nacked_and_dead_lettered_as_one(small, clock):
    client = pulsarctl.Client(broker=small)
    mid = client.create_producer(T, chunking_enabled=True,
                                 compression_type=CompressionType.ZLib).send(
        os.urandom(150), properties={"x": "1"})
    c = consumer(client, consumer_type=pulsarctl.ConsumerType.Shared,
                 negative_ack_redelivery_delay_ms=100,
                 dead_letter_policy=pulsarctl.ConsumerDeadLetterPolicy(max_redeliver_count=1))
    first = c.receive(1000)
    assert first.message_id() == mid and len(first.chunk_ids_) >= 2
    c.negative_acknowledge(first)
    assert all(r["nextRedelivery"] for r in small.subscription(T, "s").pending())
    clock.advance(1000)
    small.chores.fire_due()
    again = c.receive(1000)
    assert again.data() == first.data() and again.redelivery_count() == 1
    c.negative_acknowledge(again)
    clock.advance(1000)
    small.chores.fire_due()
    assert backlog(small) == 0
    dlq = f"{T}-s-DLQ"
    recs = entries(small, dlq)
    assert len(recs) == len(first.chunk_ids_)
    assert all(r[9] == comp.ZLIB and r[10] == 150 for r in recs)
    assert [r[12][1] for r in recs] == list(range(len(recs)))
    assert len({r[12][0] for r in recs}) == 1
    m = client.create_reader(dlq, MessageId.earliest).read_next(1000)
    assert m.data() == first.data()
    assert m.properties()["x"] == "1" and m.properties()["ORIGIN_MESSAGE_ID"] == str(mid)
    # `dlq replay` by the dead letter's id republishes it whole, in chunks.
    (res,) = small.dlq(dlq).replay([m.message_id()])
    assert res["action"] == "replayed" and small.dlq(dlq).count() == 0
    r = client.create_reader(T, mid)
    back = r.read_next(1000)
    assert back.data() == first.data() and back.properties()["REPLAY_COUNT"] == "1"
    assert str(back.message_id()) == res["newMessageId"]
    client.close()


def test_reconsume_later_moves_a_chunked_message_whole(small):
    client = pulsarctl.Client(broker=small)
    client.create_producer(T, chunking_enabled=True).send(BODY)
    c = client.subscribe(T, "s", consumer_type=pulsarctl.ConsumerType.Shared,
                         initial_position=pulsarctl.InitialPosition.Earliest, enable_retry=True)
    m = c.receive(1000)
    c.reconsume_later(m)
    retried = c.receive(1000)
    assert retried.data() == BODY and retried.properties()["RECONSUMETIMES"] == "1"
    assert retried.topic_name().endswith("-RETRY")
    assert backlog(small) == 0
    client.close()


def test_compression_happens_before_chunking(small):
    text = os.urandom(300).hex().encode() * 2  # 1200 bytes, compress to about 320: 4 chunks
    client = pulsarctl.Client(broker=small)
    client.create_producer(T, chunking_enabled=True,
                           compression_type=CompressionType.ZSTD).send(text)
    recs = entries(small)
    stored = b"".join(r[3] for r in recs)
    assert 2 < len(recs) < 6 and len(stored) < len(text) // 2
    assert all(r[9] == comp.ZSTD and r[10] == len(text) and r[12][3] == len(stored) for r in recs)
    assert comp.decompress(comp.ZSTD, stored, len(text)) == text
    assert consumer(client).receive(1000).data() == text
    client.close()


def test_batching_and_chunking_together_is_an_error(broker):
    client = pulsarctl.Client(broker=broker)
    with pytest.raises(InvalidValue, match="Batching and chunking of messages can't be enabled"):
        client.create_producer(T, batching_enabled=True, chunking_enabled=True)
    client.create_producer(T, batching_enabled=False, chunking_enabled=True)
    client.close()


def test_fifty_megabytes_round_trip_through_the_python_api(broker):
    payload = os.urandom(50 * 1024 * 1024)
    client = pulsarctl.Client(broker=broker)
    c = consumer(client)
    # CPU time of this process, not elapsed time: what the round trip costs, whatever else runs
    # on the machine.
    start = time.process_time()
    mid = client.create_producer(T, chunking_enabled=True).send(payload)
    m = c.receive(5000)
    c.acknowledge(m)
    c.flush_acks()
    assert time.process_time() - start < 5
    assert m.data() == payload and m.message_id() == mid and len(m.chunk_ids_) == 10
    assert backlog(broker) == 0
    client.close()


def test_cli_produces_a_50mb_file_in_chunks_and_consumes_it_whole(cli, tmp_path):
    body = (b"0123456789abcdef" * 64 + b"\n") * (50 * 1024)  # 50 MB of text
    f = tmp_path / "big.txt"
    f.write_bytes(body)
    r = cli("produce", T, "-f", str(f))
    assert_error(r, 1)
    assert "maxMessageSize" in r.stderr
    (rec,) = rows(ok(cli("produce", T, "-c", "-db", "-f", str(f), "-o", "ndjson")).stdout)
    assert rec["messageId"].split(":")[1] == "10"  # 11 chunks of 5 MB: the last one's id
    (m,) = rows(ok(cli("consume", T, "-s", "s", "-p", "Earliest", "-o", "ndjson")).stdout)
    assert m["payload"].encode() == body and m["numChunks"] == 11
    assert pjson(cli("topics", "stats", T, "-o", "json"))["subscriptions"]["s"]["msgBacklog"] == 0


def test_cli_ack_and_nack_by_the_printed_id_act_on_every_chunk(cli, broker):
    ok(cli("brokers", "update-dynamic-config", "--config", "maxMessageSize", "--value", "100"))
    (rec,) = rows(ok(cli("produce", T, "-c", "-m", "y" * 250, "-o", "ndjson")).stdout)
    assert rec["messageId"].startswith("1:2:")
    ok(cli("topics", "create-subscription", T, "-s", "s", "-m", "earliest"))
    (m,) = rows(ok(cli("receive", T, "-s", "s", "-t", "Shared", "-o", "ndjson")).stdout)
    assert m["messageId"] == rec["messageId"] and m["payload"] == "y" * 250
    r = ok(cli("nack", T, "-s", "s", m["messageId"]))
    assert "nacked 1 message(s)" in r.stderr
    assert all(p["nextRedelivery"] for p in broker.subscription(T, "s").pending())
    # peek shows the stored chunks.
    peeked = rows(ok(cli("topics", "peek-messages", T, "-s", "s", "-n", "5", "-o",
                         "ndjson")).stdout)
    assert [p["chunk"]["chunkId"] for p in peeked] == [0, 1, 2]
    r = ok(cli("ack", T, "-s", "s", m["messageId"]))
    assert "acked 1 message(s)" in r.stderr
    assert backlog(broker) == 0


def _chunk_msg(seq, cid, n, piece, total, uuid):
    """One chunk as a Pulsar client sends it alone (serve's SEND of a chunk)."""
    m = OutgoingMessage(piece, sequence_id=seq)
    m.chunks = (0, total, n, total, [(cid, piece)], uuid)
    return m


@pytest.mark.parametrize("dedup", [False, True])
def test_chunks_sent_one_by_one_share_a_sequence_id_and_only_the_last_is_deduplicated(
        broker, dedup):
    if dedup:
        broker.topics.create(T)
        broker.policies.set("topic", T, policies.DEDUP, True)
    halves = [BODY[:300], BODY[300:]]
    ids = [broker.publish(T, [_chunk_msg(5, i, 2, h, len(BODY), "c-5")], "c")[1][0]
           for i, h in enumerate(halves)]
    assert all(i.entry_id >= 0 for i in ids)
    assert [chunks_meta[-1] for chunks_meta in entries(broker)] == [
        ["c-5", 0, 2, len(BODY)], ["c-5", 1, 2, len(BODY)]]
    # the last chunk recorded the sequence id; a client told it goes on from there
    assert broker.last_sequence_id(T, "c") == (5 if dedup else -1)
    again = [broker.publish(T, [_chunk_msg(5, i, 2, h, len(BODY), "c-5")], "c")[1][0]
             for i, h in enumerate(halves)]
    assert again[0].entry_id >= 0   # a chunk other than the last is let through
    assert (again[1] == producers.DUPLICATE) is dedup
    # readers join the chunks by the client's uuid
    got = pulsarctl.Client(broker=broker).create_reader(T, MessageId.earliest).read_next(1000)
    assert got.data() == BODY
