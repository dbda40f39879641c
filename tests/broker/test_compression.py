"""Compression (issue 7.1): stored compressed, read back transparently everywhere, sized by
what is stored, and a payload that cannot be decompressed is a clear error, never garbage."""
from __future__ import annotations

import pytest

import pulsarctl
from pulsarctl import compression as comp
from pulsarctl.broker import topics
from pulsarctl.client import CompressionType
from pulsarctl.errors import MessageTooLarge
from pulsarctl.messages import MessageId, OutgoingMessage, build_entry
from pulsarctl.names import parse_topic
from store import codec

from cli_helpers import assert_error, ok, pjson, rows

CODECS = ["lz4", "zlib", "zstd", "snappy"]
TEXT = b'{"order": 42, "status": "paid", "currency": "EUR"} ' * 200  # 10 KB, compressible


@pytest.mark.parametrize("name", CODECS)
def test_codec_round_trips_and_is_what_the_entry_records(name):
    code = comp.code_of(name)
    packed = comp.compress(code, TEXT)
    assert len(packed) < len(TEXT) // 4
    assert comp.decompress(code, packed, len(TEXT)) == TEXT
    # Pulsar's CompressionType values, as the entry stores them.
    assert code == {"lz4": 1, "zlib": 2, "zstd": 3, "snappy": 4}[name]
    assert comp.code_of(getattr(CompressionType, {"zlib": "ZLib"}.get(name, name.upper()))) == code


@pytest.mark.parametrize("name", CODECS)
def test_produce_stores_compressed_and_every_reader_sees_the_payload(cli, name):
    ok(cli("produce", "t", "--compression", name, "-m", TEXT.decode(), "-k", "k1", "-p", "a=b"))
    stats = pjson(cli("topics", "stats-internal", "t", "-o", "json"))
    assert stats["totalSize"] < len(TEXT) // 4
    for args in (["read", "t", "-m", "earliest", "-o", "ndjson"],
                 ["consume", "t", "-s", "s", "-p", "Earliest", "-o", "ndjson"]):
        (m,) = rows(ok(cli(*args)).stdout)
        assert m["payload"] == TEXT.decode() and m["key"] == "k1"
        assert m["properties"] == {"a": "b"}
    ok(cli("produce", "t", "--compression", name, "-m", "second"))
    (m,) = rows(ok(cli("topics", "peek-messages", "t", "-s", "s", "-o", "ndjson")).stdout)
    assert m["payload"] == "second"
    r = ok(cli("topics", "get-message-by-id", "t", "-l", m["messageId"].split(":")[0], "-e",
               m["messageId"].split(":")[1], "-o", "json"))
    assert '"second"' in r.stdout


def test_python_api_compression_type_and_dead_letter_copy_is_decompressed(broker, clock):
    client = pulsarctl.Client(broker=broker)
    p = client.create_producer("t", compression_type=CompressionType.ZSTD)
    p.send(TEXT)
    c = client.subscribe("t", "s", consumer_type=pulsarctl.ConsumerType.Shared,
                         initial_position=pulsarctl.InitialPosition.Earliest,
                         negative_ack_redelivery_delay_ms=100,
                         dead_letter_policy=pulsarctl.ConsumerDeadLetterPolicy(max_redeliver_count=1))
    for _ in range(2):
        m = c.receive(timeout_millis=2000)
        assert m.data() == TEXT
        c.negative_acknowledge(m)
        clock.advance(1000)
        broker.chores.fire_due()
    r = client.create_reader("t-s-DLQ", MessageId.earliest)
    assert r.read_next(timeout_millis=2000).data() == TEXT
    client.close()


def test_max_message_size_applies_to_the_stored_compressed_payload(broker, cli):
    broker.policies.update_setting("maxMessageSize", "2000")
    big = TEXT  # 10 KB, compresses far under 2000 bytes
    client = pulsarctl.Client(broker=broker)
    client.create_producer("t", compression_type=CompressionType.LZ4).send(big)
    with pytest.raises(MessageTooLarge):
        client.create_producer("t").send(big)
    r = cli("produce", "t", "-m", big.decode())
    assert_error(r, 1)
    ok(cli("produce", "t", "--compression", "lz4", "-m", big.decode()))


def test_unknown_compression_is_a_usage_error(cli):
    r = cli("produce", "t", "--compression", "brotli", "-m", "x")
    assert_error(r, 2)
    assert "lz4" in r.stderr


def test_an_entry_that_cannot_be_decompressed_is_a_clear_error(broker, cli):
    t = parse_topic("t")

    def put(ctx):
        info = topics.ensure(ctx, t)
        rec = build_entry(ctx.now, "p", 0, OutgoingMessage(b"x" * 100),
                          (comp.ZSTD, b"definitely not zstd"))
        ctx.ledgers.append(ctx.txn, info, [codec.encode(rec)], ctx.now)
    broker._write(put)
    r = cli("read", "t", "-m", "earliest")
    assert_error(r, 1)
    assert "cannot decompress" in r.stderr and "ZSTD" in r.stderr
    assert "Traceback" not in r.stderr
