"""A key sent as bytes (Pulsar's partition_key_b64_encoded: a Java keyBytes(), a KeyValue
schema's SEPARATED key, a Go client's binary key) is stored as its base64 text with the flag,
entries.py's field 17 (a batch: its keysB64 column), and comes back to every reader with it;
an entry without it stays the list it was."""
from __future__ import annotations

import base64

import pytest

from pulsarctl import compression as comp
from pulsarctl.broker import batches, topics, unpack
from pulsarctl.broker.dispatch import key_shared
from pulsarctl.broker.dispatch.selectors import POLICIES, slot_of
from pulsarctl.entries import (
    F_CHUNK, F_ENCRYPTION, F_HIGHEST_SEQUENCE_ID, F_KEY, F_KEY_B64, F_NULL_VALUE, Entry,
    is_key_b64, is_null_value,
)
from pulsarctl.messages import MessageId, OutgoingMessage, build_entry, copied, message_from_entry
from pulsarctl.names import parse_topic
from store import codec

RAW = b"\x00\xffid-1"
TEXT = base64.b64encode(RAW).decode()


def keyed(payload=b"v", key=TEXT, **kw) -> OutgoingMessage:
    m = OutgoingMessage(payload, key=key, **kw)
    m.key_b64 = True
    return m


def stored(broker, topic) -> list[tuple[bytes, list]]:
    def run(ctx):
        info = topics.require(ctx, parse_topic(topic))
        return [(bytes(raw), codec.decode(raw)) for _o, _l, _e, raw in
                ctx.ledgers.scan(ctx.txn, info, info.first_offset, info.next_offset)]
    return broker._read(run)


def _null(m):
    m.null_value = True
    return m


def _encrypted(m):
    m.encryption = {"keys": [["k1", b"wrapped", {}]], "algo": None, "param": b"iv",
                    "compression": 0, "uncompressedSize": 1, "numMessages": None}
    return m


@pytest.mark.parametrize("m, compressed", [
    (keyed(), None),
    (keyed(key=""), None),
    (keyed(b"x" * 100, properties={"a": "b"}, schema_version=3), None),
    (keyed(b"z" * 100), (comp.code_of("lz4"), comp.compress(comp.code_of("lz4"), b"z" * 100))),
    (_null(keyed(b"")), None),
    (_encrypted(keyed(b"\x01cipher")), None),
])
def test_a_base64_key_is_field_17_and_comes_back_with_its_message(m, compressed):
    rec = build_entry(1000, "p", 3, m, compressed)
    assert len(rec) == F_KEY_B64 + 1 and is_key_b64(rec) and rec[F_KEY] == m.key
    assert rec[F_NULL_VALUE] == (True if m.null_value else None)
    assert rec[F_ENCRYPTION] == m.encryption
    e = Entry.from_stored(rec)
    assert e.key_b64_encoded is True and e.to_stored() == rec
    got = message_from_entry(rec, MessageId(1, 2), "t")
    assert got.key == m.key and got.key_b64_ is True
    assert got.has_null_value() == bool(m.null_value)
    assert got.record()["key"] == m.key and got.record()["keyEncoding"] == "base64"
    # a move (dead letter, retry) keeps it
    assert copied(got, OutgoingMessage(got.payload, None, got.key)).key_b64 is True
    # a chunk of such a message carries it too
    chunk = build_entry(1000, "p", 3, m, chunk=(["p-3", 0, 2, 10], b"piece", 0, 10))
    assert len(chunk) == F_KEY_B64 + 1 and chunk[F_CHUNK] == ["p-3", 0, 2, 10]
    assert Entry.from_stored(chunk).to_stored() == chunk
    assert message_from_entry(chunk, MessageId(1, 3), "t").key_b64_ is True


def test_an_entry_without_a_base64_key_is_the_list_it_was():
    assert build_entry(1000, "p", 3, OutgoingMessage(b"v", key=TEXT)) == \
        [1000, "p", 3, b"v", None, TEXT]
    # the flag means nothing without a key: nothing stored for it
    lone = OutgoingMessage(b"v")
    lone.key_b64 = True
    assert build_entry(1000, "p", 3, lone) == [1000, "p", 3, b"v"]
    null = _null(OutgoingMessage(b"", key="k"))
    assert len(build_entry(1000, "p", 3, null)) == F_NULL_VALUE + 1
    m = message_from_entry([1000, "p", 3, b"v", None, TEXT], MessageId(1, 2), "t")
    assert m.key_b64_ is False and "keyEncoding" not in m.record()


def test_a_batch_keeps_each_messages_flag_in_a_column_of_its_own(broker):
    broker.publish("kb", [keyed(b"a"), OutgoingMessage(b"b", key="text"), keyed(b"c", key="")],
                   batching=batches.Spec(3))
    broker.publish("kb", [OutgoingMessage(b"d", key="text"), keyed(b"e"),
                          _null(keyed(b""))], batching=batches.Spec(3),
                   compression=comp.code_of("zlib"))
    broker.publish("kb", [OutgoingMessage(b"f", key="k"), _null(OutgoingMessage(b""))],
                   batching=batches.Spec(2))
    (raw1, first), (raw2, second), (_raw3, third) = stored(broker, "kb")
    for raw, rec in ((raw1, first), (raw2, second)):
        assert Entry.from_stored(rec).to_stored() == rec and codec.encode(rec) == raw
    # the entry's key and flag are its first message's (Key_Shared hashes them)
    assert len(first) == F_KEY_B64 + 1 and is_key_b64(first) and first[F_KEY] == TEXT
    assert len(second) == F_HIGHEST_SEQUENCE_ID + 1 and second[F_KEY] == "text"
    cols = unpack.batch_columns(first)
    assert len(cols) == 8 and cols[6] is None and cols[7] == [True, False, True]
    cols = unpack.batch_columns(second)
    assert cols[6] == [False, False, True] and cols[7] == [False, True, True]
    # a batch without a base64 key keeps its columns as before
    assert len(unpack.batch_columns(third)) == 7
    got = []
    for o, (_raw, rec) in enumerate(stored(broker, "kb")):
        got += unpack.messages(rec, 1, o, -1, "kb")
    assert [(m.payload, m.key, m.key_b64_, m.has_null_value()) for m in got] == [
        (b"a", TEXT, True, False), (b"b", "text", False, False), (b"c", "", True, False),
        (b"d", "text", False, False), (b"e", TEXT, True, False), (b"", TEXT, True, True),
        (b"f", "k", False, False), (b"", None, False, True)]
    # the records the scans read say the same
    recs = [r for _o, (_raw, rec) in enumerate(stored(broker, "kb")[:2])
            for r in unpack.expand(rec)]
    assert [is_key_b64(r) for r in recs] == [True, False, True, False, True, True]
    assert [is_null_value(r) for r in recs] == [False] * 5 + [True]
    assert [message_from_entry(r, MessageId(1, 0), "kb").key_b64_ for r in recs] == \
        [True, False, True, False, True, True]


@pytest.mark.parametrize("policy", POLICIES)
def test_key_shared_hashes_a_base64_key_as_its_bytes(policy):
    rec = build_entry(1000, "p", 3, keyed())
    assert key_shared.slot(policy, rec) == slot_of(policy, RAW)
    # as text it would land elsewhere: the flag is what makes the difference
    text = build_entry(1000, "p", 3, OutgoingMessage(b"v", key=TEXT))
    assert key_shared.slot(policy, text) == slot_of(policy, TEXT.encode())
    assert slot_of(policy, RAW) != slot_of(policy, TEXT.encode())
    batch = batches.build_entry(1000, "p", [keyed(b"a"), OutgoingMessage(b"b")], [3, 4])
    assert key_shared.slot(policy, batch) == slot_of(policy, RAW)
