"""The stored entry's named record (pulsarctl/entries.py): every field named, the short lists
earlier writes left read with their defaults, and to_stored giving back exactly the list the
writers store, so the on-disk format does not change by one byte."""
from __future__ import annotations

import pytest

from pulsarctl import compression as comp
from pulsarctl.broker import Broker, batches, topics
from pulsarctl.entries import (
    F_CHUNK, F_COMPRESSION, F_DELIVER_AT, F_EVENT_TIME, F_HIGHEST_SEQUENCE_ID, F_KEY,
    F_NUM_MESSAGES, F_ORDERING_KEY, F_PAYLOAD, F_PRODUCER_NAME, F_PROPERTIES, F_PUBLISH_TIME,
    F_NULL_VALUE, F_ENCRYPTION, F_KEY_B64, F_SCHEMA_VERSION, F_SEQUENCE_ID, F_UNCOMPRESSED_SIZE, Entry, batch_size,
    chunk_of, is_batch, is_null_value,
)
from pulsarctl.messages import OutgoingMessage, build_entry
from pulsarctl.names import parse_topic
from store import codec
import old_store



def stored(broker, topic) -> list[tuple[bytes, list]]:
    """(raw bytes, decoded list) of every entry of topic."""
    def run(ctx):
        info = topics.require(ctx, parse_topic(topic))
        return [(bytes(raw), codec.decode(raw)) for _o, _l, _e, raw in
                ctx.ledgers.scan(ctx.txn, info, info.first_offset, info.next_offset)]
    return broker._read(run)


def assert_round_trip(raw: bytes, rec: list) -> None:
    e = Entry.from_stored(rec)
    assert e.to_stored() == rec
    assert codec.encode(e.to_stored()) == raw


def test_the_constants_name_the_fields_in_stored_order():
    assert Entry._fields == (
        "publish_time", "producer_name", "sequence_id", "payload", "properties", "key",
        "ordering_key", "event_time", "deliver_at", "compression", "uncompressed_size",
        "schema_version", "chunk", "num_messages", "highest_sequence_id", "null_value",
        "encryption", "key_b64_encoded")
    consts = [F_PUBLISH_TIME, F_PRODUCER_NAME, F_SEQUENCE_ID, F_PAYLOAD, F_PROPERTIES, F_KEY,
              F_ORDERING_KEY, F_EVENT_TIME, F_DELIVER_AT, F_COMPRESSION, F_UNCOMPRESSED_SIZE,
              F_SCHEMA_VERSION, F_CHUNK, F_NUM_MESSAGES, F_HIGHEST_SEQUENCE_ID, F_NULL_VALUE,
              F_ENCRYPTION, F_KEY_B64]
    assert consts == list(range(18))


def test_a_short_old_list_reads_with_its_defaults_and_stores_back_as_it_was():
    rec = [1000, "p", 7, b"x"]
    e = Entry.from_stored(rec)
    assert (e.publish_time, e.producer_name, e.sequence_id, e.payload) == (1000, "p", 7, b"x")
    assert (e.properties, e.key, e.ordering_key, e.event_time, e.deliver_at) == \
        (None, None, None, 0, 0)
    assert (e.compression, e.uncompressed_size, e.schema_version, e.chunk) == (0, None, None, None)
    assert (e.num_messages, e.highest_sequence_id, e.is_batch, e.size) == (None, None, False, 1)
    assert e.null_value is None and not is_null_value(rec)
    assert e.to_stored() == rec
    keyed = [1000, "p", 7, b"x", None, "k"]
    assert Entry.from_stored(keyed).key == "k" and Entry.from_stored(keyed).to_stored() == keyed
    assert not is_batch(rec) and batch_size(rec) == 1 and chunk_of(rec) is None


@pytest.mark.parametrize("m, compressed", [
    (OutgoingMessage(b"plain"), None),
    (OutgoingMessage(b"keyed", key="k"), None),
    (OutgoingMessage(b"", key=""), None),
    (OutgoingMessage(b"props", {"a": "b"}), None),
    (OutgoingMessage(b"all", {"a": "b"}, "k", b"o", 5, 6), None),
    (OutgoingMessage(b"event only", event_time=5), None),
    (OutgoingMessage(b"delayed", deliver_at=9), None),
    (OutgoingMessage(b"ordering", ordering_key=b""), None),
    (OutgoingMessage(b"schema", schema_version=0), None),
    (OutgoingMessage(b"schema", key="k", schema_version=3), None),
    (OutgoingMessage(b"zipped" * 20), (comp.code_of("zlib"), b"zz")),
    (OutgoingMessage(b"", {"a": "b"}), (comp.code_of("lz4"), b"")),
    (OutgoingMessage(b"zipped", schema_version=0), (comp.code_of("zstd"), b"zz")),
])
def test_to_stored_is_what_build_entry_writes(m, compressed):
    rec = build_entry(1000, "p", 3, m, compressed)
    assert Entry.from_stored(rec).to_stored() == rec
    chunk = build_entry(1000, "p", 3, m, chunk=(["p-3", 0, 2, 10], b"piece", 0, 10))
    assert len(chunk) == F_CHUNK + 1
    assert Entry.from_stored(chunk).to_stored() == chunk
    assert chunk_of(chunk) == ("p-3", 0, 2, 10) and not chunk_of(chunk).is_last
    assert chunk_of(chunk).uuid == "p-3" and chunk_of(chunk).total_size == 10


@pytest.mark.parametrize("code", [0, 1])
def test_to_stored_is_what_a_batch_writes(code):
    msgs = [OutgoingMessage(b"a", key="k"), OutgoingMessage(b"b", schema_version=None)]
    rec = batches.build_entry(1000, "p", msgs, [4, 5], code)
    assert len(rec) == F_HIGHEST_SEQUENCE_ID + 1
    e = Entry.from_stored(rec)
    assert e.is_batch and e.size == 2 and e.highest_sequence_id == 5 and e.key == "k"
    assert e.to_stored() == rec
    assert is_batch(rec) and batch_size(rec) == 2


def test_every_entry_producers_write_round_trips_byte_for_byte(broker, clock):
    broker.publish("plain", [OutgoingMessage(b"a"), OutgoingMessage(b"b", {"p": "q"}, "k"),
                             OutgoingMessage(b"c", event_time=3, deliver_at=clock.now_ms() + 1000)])
    broker.publish("zipped", [OutgoingMessage(b"z" * 500, key="k")],
                   compression=comp.code_of("lz4"))
    broker.publish("batched", [OutgoingMessage(b"m%d" % i) for i in range(5)],
                   batching=batches.Spec(3))
    broker.publish("chunked", [OutgoingMessage(b"c" * 3000)], chunking=True)
    broker.policies.update_setting("maxMessageSize", "1024")
    broker.publish("chunked", [OutgoingMessage(b"c" * 3000)], chunking=True)
    seen = 0
    for topic in ("plain", "zipped", "batched", "chunked"):
        for raw, rec in stored(broker, topic):
            assert_round_trip(raw, rec)
            seen += 1
    assert seen == 3 + 1 + 2 + 1 + 3


def test_every_entry_of_a_store_written_by_0_1_0_round_trips_byte_for_byte(tmp_path):
    b = Broker(str(old_store.unpack(tmp_path)))
    try:
        def run(ctx):
            out = []
            for name in topics.list_topics(ctx, "public/default"):
                info = topics.lookup(ctx, parse_topic(name))
                out += [(bytes(raw), codec.decode(raw)) for _o, _l, _e, raw in
                        ctx.ledgers.scan(ctx.txn, info, info.first_offset, info.next_offset)]
            return out
        entries = b._read(run)
    finally:
        b.close()
    lengths = {len(rec) for _raw, rec in entries}
    # plain, keyed, compressed, chunked and batched entries are all there
    assert {4, 11, 13, 15} <= lengths, lengths
    for raw, rec in entries:
        assert_round_trip(raw, rec)


def _null(payload=b"", **kw):
    m = OutgoingMessage(payload, **kw)
    m.null_value = True
    return m


@pytest.mark.parametrize("m, compressed", [
    (_null(), None),
    (_null(properties={"action": "delete"}, key="k"), None),
    (_null(schema_version=2), None),
    (_null(), (comp.code_of("lz4"), b"z")),
])
def test_a_null_value_is_the_last_field_and_round_trips(m, compressed):
    rec = build_entry(1000, "p", 3, m, compressed)
    assert len(rec) == F_NULL_VALUE + 1 and is_null_value(rec)
    assert rec[F_UNCOMPRESSED_SIZE] == 0 and rec[F_COMPRESSION] == (compressed or (0,))[0]
    assert Entry.from_stored(rec).null_value is True
    assert Entry.from_stored(rec).to_stored() == rec
    # an empty payload is not a null value: the entry it had before null values existed
    plain = build_entry(1000, "p", 3, OutgoingMessage(b""))
    assert plain == [1000, "p", 3, b""] and not is_null_value(plain)


def test_null_values_come_back_to_readers_plain_and_in_batches(broker):
    from pulsarctl.broker import unpack

    broker.publish("nulls", [OutgoingMessage(b"a"), _null(key="k", properties={"x": "y"}),
                             OutgoingMessage(b"")])
    broker.publish("nulls", [OutgoingMessage(b"b"), _null(), OutgoingMessage(b"")],
                   batching=batches.Spec(3), compression=comp.code_of("zlib"))
    broker.publish("nulls", [OutgoingMessage(b"c"), OutgoingMessage(b"d")],
                   batching=batches.Spec(3))
    got = []
    for o, (raw, rec) in enumerate(stored(broker, "nulls")):
        assert_round_trip(raw, rec)
        got += unpack.messages(rec, 1, o, -1, "nulls")
    assert [(m.payload, m.has_null_value()) for m in got] == [
        (b"a", False), (b"", True), (b"", False), (b"b", False), (b"", True), (b"", False),
        (b"c", False), (b"d", False)]
    assert got[1].key == "k" and got[1].properties() == {"x": "y"}
    assert [m.record()["payload"] for m in got[:3]] == ["a", None, ""]
    # a batch without a null value keeps its six columns, as before
    assert len(unpack.batch_columns(stored(broker, "nulls")[-1][1])) == 6


def test_an_encrypted_message_keeps_its_ciphertext_and_keys_in_field_16():
    from pulsarctl.messages import MessageId, message_from_entry

    m = OutgoingMessage(b"\x01ciphertext", {"a": "b"}, "k")
    m.encryption = {"keys": [["k1", b"wrapped", {}]], "algo": None, "param": b"iv",
                    "compression": 1, "uncompressedSize": 40, "numMessages": 3}
    rec = build_entry(1000, "p", 5, m)
    assert len(rec) == F_ENCRYPTION + 1 and rec[F_ENCRYPTION] == m.encryption
    assert rec[F_COMPRESSION] == 0            # nobody decompresses ciphertext
    assert Entry.from_stored(rec).to_stored() == rec
    got = message_from_entry(rec, MessageId(1, 2), "t")
    assert got.payload == b"\x01ciphertext" and got.encryption_ == m.encryption
    plain = message_from_entry(build_entry(1000, "p", 5, OutgoingMessage(b"x")), MessageId(1, 3), "t")
    assert plain.encryption_ is None
