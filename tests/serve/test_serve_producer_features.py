"""`pulsarctl serve` and the real pulsar-client: a producer's last sequence id and
deduplication, null values (plain and batched), and chunked messages, as Pulsar serves them."""
from __future__ import annotations

import json
import os
import subprocess

import pulsar
import pytest
import requests

from procs import PATIENCE_S, argv, pok
from serve_inproc import configured, start_in_process
from serve_procs import quiet_logger

RECEIVE_MS = int(PATIENCE_S * 1000)
DUPLICATE = (-1, -1)   # the receipt of a message deduplication left out: -1:-1


def cli(env, *args):
    return pok(subprocess.run(argv(*args), env=env, capture_output=True, text=True,
                              timeout=PATIENCE_S))


def set_dedup(served, on: bool):
    r = requests.post(f"{served.http_url}/admin/v2/namespaces/public/default/deduplication",
                      json=on, timeout=PATIENCE_S)
    assert r.status_code in (200, 204), r.text


def _nothing_more(consumer):
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)


def test_deduplication_drops_repeated_sequence_ids_and_a_new_producer_goes_on(served, client):
    set_dedup(served, True)
    t = "persistent://public/default/dedup-t"
    producer = client.create_producer(t, producer_name="p1")
    assert producer.last_sequence_id() == -1
    consumer = client.subscribe(t, "s")
    ids = [producer.send(b"m%d" % i, sequence_id=i) for i in range(3)]
    assert producer.last_sequence_id() == 2
    dups = [producer.send(b"m%d" % i, sequence_id=i) for i in (1, 2)]
    assert [(d.ledger_id(), d.entry_id()) for d in dups] == [DUPLICATE] * 2
    assert all(i.entry_id() >= 0 for i in ids)
    assert producer.last_sequence_id() == 2
    for i in range(3):
        m = consumer.receive(RECEIVE_MS)
        assert m.data() == b"m%d" % i
        consumer.acknowledge(m)
    _nothing_more(consumer)
    producer.close()
    # The same producer name again: PRODUCER_SUCCESS says where it left off.
    producer = client.create_producer(t, producer_name="p1")
    assert producer.last_sequence_id() == 2
    producer.send(b"m2", sequence_id=2)
    _nothing_more(consumer)
    producer.send(b"m3", sequence_id=3)
    assert consumer.receive(RECEIVE_MS).data() == b"m3"
    # Another name starts afresh.
    assert client.create_producer(t, producer_name="p2").last_sequence_id() == -1


def test_a_reconnected_producer_continues_its_sequence_ids(served, client, env):
    set_dedup(served, True)
    t = "persistent://public/default/dedup-seq"
    producer = client.create_producer(t, producer_name="p")
    for i in range(5):
        producer.send(b"m%d" % i)
        assert producer.last_sequence_id() == i
    producer.close()
    producer = client.create_producer(t, producer_name="p")
    assert producer.last_sequence_id() == 4
    for i in range(5, 8):
        producer.send(b"m%d" % i)
        assert producer.last_sequence_id() == i
    consumer = client.subscribe(t, "s", initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(RECEIVE_MS) for _ in range(8)]
    assert [m.data() for m in got] == [b"m%d" % i for i in range(8)]
    rows = json.loads(cli(env, "read", t, "-m", "earliest", "-n", "8", "-o", "json").stdout)
    assert [r["sequenceId"] for r in rows] == list(range(8))


def test_without_deduplication_a_producer_starts_at_minus_one(client):
    t = "persistent://public/default/no-dedup"
    producer = client.create_producer(t, producer_name="p")
    for i in range(3):
        producer.send(b"m%d" % i, sequence_id=i)
    producer.close()
    producer = client.create_producer(t, producer_name="p")
    assert producer.last_sequence_id() == -1
    # and a repeated sequence id is stored again
    assert producer.send(b"again", sequence_id=1).entry_id() >= 0


@pytest.mark.parametrize("batching", [False, True])
def test_null_values_come_back_as_null_not_as_empty_bytes(client, env, batching):
    t = f"persistent://public/default/nulls-{batching}"
    producer = client.create_producer(t, batching_enabled=batching,
                                      batching_max_publish_delay_ms=50)
    consumer = client.subscribe(t, "s", initial_position=pulsar.InitialPosition.Earliest)
    sent = [(b"not null", "k1", None), (None, "k2", {"action": "delete"}), (b"", "k3", None)]
    results = []
    for value, key, props in sent:
        producer.send_async(value, lambda res, mid: results.append(res), partition_key=key,
                            properties=props)
    producer.flush()
    assert results == [pulsar.Result.Ok] * 3
    got = [consumer.receive(RECEIVE_MS) for _ in range(3)]
    assert [(m.data(), m.has_null_value(), m.partition_key()) for m in got] == [
        (b"not null", False, "k1"), (b"", True, "k2"), (b"", False, "k3")]
    assert got[1].properties() == {"action": "delete"}
    if batching:   # the three went into one batch entry
        assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in got}) == 1
    # The CLI's records say null for the null value, and nothing changes for the others.
    rows = [json.loads(line) for line in cli(
        env, "read", t, "-m", "earliest", "-n", "3", "-o", "ndjson").stdout.splitlines()]
    assert [r["payload"] for r in rows] == ["not null", None, ""]
    assert "encoding" not in rows[1]


@pytest.mark.parametrize("compression", [pulsar.CompressionType.NONE,
                                         pulsar.CompressionType.LZ4])
def test_a_chunked_message_is_stored_in_chunks_and_the_client_joins_them(env, tmp_path,
                                                                          store_path,
                                                                          compression):
    conf = tmp_path / "broker.conf"
    conf.write_text("maxMessageSize=16384\n")
    s = start_in_process(store_path, configured(conf))
    c = pulsar.Client(s.url, operation_timeout_seconds=30, logger=quiet_logger())
    try:
        t = "persistent://public/default/chunked"
        producer = c.create_producer(t, chunking_enabled=True, batching_enabled=False,
                                     compression_type=compression)
        consumer = c.subscribe(t, "s", initial_position=pulsar.InitialPosition.Earliest)
        data = os.urandom(100_000)
        small = producer.send(b"small")
        mid = producer.send(data)
        got = consumer.receive(RECEIVE_MS)
        assert got.data() == b"small" and str(got.message_id()) == str(small)
        consumer.acknowledge(got)
        got = consumer.receive(RECEIVE_MS)
        assert got.data() == data
        assert str(got.message_id()) == str(mid)
        consumer.acknowledge(got)   # the client acks every chunk's id
        internal = json.loads(cli(env, "topics", "stats-internal", t, "-o", "json").stdout)
        assert internal["numberOfEntries"] >= 1 + 100_000 // 16384
        # each chunk acked (closing the consumer sends the acks it grouped): no backlog left
        consumer.close()
        stats = json.loads(cli(env, "topics", "stats", t, "-o", "json").stdout)
        assert stats["subscriptions"]["s"]["msgBacklog"] == 0
        # pulsarctl's own reader sees the chunked message whole
        rows = json.loads(cli(env, "read", t, "-m", "earliest", "-n", "2", "--hex",
                              "-o", "json").stdout)
        assert rows[1]["numChunks"] >= 7
    finally:
        c.close()
        s.stop()
