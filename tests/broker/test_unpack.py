"""One entry as its messages (pulsarctl/broker/unpack.py): batches split, chunks joined (given
their pieces), payloads decompressed; and every reader of messages going through it sees the
same messages (the Message path of dispatch and the DLQ, the record path of the scans)."""
from __future__ import annotations

from pulsarctl import compression as comp
from pulsarctl.broker import batches, chunks, topics, unpack
from pulsarctl.broker.scan import scan_messages
from pulsarctl.entries import F_COMPRESSION, F_PAYLOAD, Entry, chunk_of
from pulsarctl.messages import OutgoingMessage, build_entry
from pulsarctl.names import parse_topic
from store import codec

LZ4 = comp.code_of("lz4")
TEXT = b"0123456789abcdef" * 64


def test_a_plain_entry_is_one_record_decompressed():
    plain = build_entry(1, "p", 0, OutgoingMessage(b"x", key="k"))
    assert unpack.records(plain) == [(-1, plain)]
    zipped = build_entry(1, "p", 0, OutgoingMessage(TEXT, key="k"),
                         (LZ4, comp.compress(LZ4, TEXT)))
    ((i, r),) = unpack.records(zipped, "1:0")
    assert i == -1 and r[F_PAYLOAD] == TEXT and r[F_COMPRESSION] == 0
    assert zipped[F_PAYLOAD] != TEXT  # the stored entry is left as it was
    (m,) = unpack.messages(zipped, 1, 0, -1, "t")
    assert m.data() == TEXT and str(m.id) == "1:0:-1" and m.partition_key() == "k"


def test_a_batch_is_its_records_with_indexes_and_skip_leaves_some_out():
    msgs = [OutgoingMessage(b"m%d" % i, {"i": str(i)}) for i in range(3)]
    rec = batches.build_entry(1, "p", msgs, [5, 6, 7], LZ4)
    got = unpack.records(rec, "1:0")
    assert [i for i, _r in got] == [0, 1, 2]
    assert [r[F_PAYLOAD] for _i, r in got] == [b"m0", b"m1", b"m2"]
    assert [r[2] for _i, r in got] == [5, 6, 7]
    assert unpack.batch_columns(rec)[0] == [b"m0", b"m1", b"m2"]
    ms = unpack.messages(rec, 1, 0, 2, "t", skip={1})
    assert [str(m.id) for m in ms] == ["1:0:2:0", "1:0:2:2"]
    assert unpack.first_message(rec, 1, 0, 2, "t").data() == b"m0"


def test_a_chunk_is_a_piece_alone_and_the_message_joined_with_its_pieces():
    stored = comp.compress(LZ4, TEXT)
    half = len(stored) // 2
    parts = [stored[:half], stored[half:]]
    m = OutgoingMessage(b"")
    recs = [build_entry(1, "p", 0, m, chunk=(["p-0", cid, 2, len(stored)], piece, LZ4,
                                              len(TEXT)))
            for cid, piece in enumerate(parts)]
    ((i, alone),) = unpack.records(recs[1])
    assert i == -1 and alone is recs[1] and chunk_of(alone) is not None
    (piece,) = unpack.messages(recs[1], 1, 1, -1, "t")
    assert piece.data() == parts[1] and piece.chunk_ is not None
    ((_i, whole),) = unpack.records(recs[1], "1:1", parts)
    assert whole[F_PAYLOAD] == TEXT and chunk_of(whole) is None
    (joined,) = unpack.messages(recs[1], 1, 1, -1, "t", pieces=parts)
    assert joined.data() == TEXT and joined.chunk_ is None and str(joined.id) == "1:1:-1"
    assert Entry.from_stored(unpack.joined(recs[1], parts)).payload == stored


def test_the_scan_and_the_message_path_see_the_same_messages(broker):
    broker.publish("t", [OutgoingMessage(b"plain", key="k")])
    broker.publish("t", [OutgoingMessage(TEXT)], compression=LZ4)
    broker.publish("t", [OutgoingMessage(b"b%d" % i) for i in range(4)],
                   batching=batches.Spec(10))
    broker.policies.update_setting("maxMessageSize", "300")
    broker.publish("t", [OutgoingMessage(TEXT * 2)], chunking=True)

    def run(ctx):
        info = topics.require(ctx, parse_topic("t"))
        entries, rows, recs = scan_messages(ctx, info, info.first_offset, info.next_offset)
        via_messages = []
        for o, lid, eid, raw in entries:
            rec = codec.decode(raw)
            pieces = None
            if chunk_of(rec) is not None:
                pieces = chunks.pieces(ctx, info, o, rec)
                if pieces is None:
                    continue
            via_messages += unpack.messages(rec, lid, eid, -1, "t", pieces=pieces)
        return rows, recs, via_messages
    rows, recs, ms = broker._read(run)
    assert [r[F_PAYLOAD] for r in recs] == [m.data() for m in ms]
    assert [m.data() for m in ms] == [b"plain", TEXT, b"b0", b"b1", b"b2", b"b3", TEXT * 2]
    assert [len(r) > 4 and r[4] for r in rows][2:6] == [0, 1, 2, 3]



def _null():
    m = OutgoingMessage(b"")
    m.null_value = True
    return m


def test_a_batch_messages_are_what_expand_and_message_from_entry_make():
    """unpack.messages builds a batch's Messages from its columns directly: the same Messages
    as its records through message_from_entry, whatever columns the batch has."""
    from pulsarctl.messages import Message, MessageId, message_from_entry

    def variants(sv):
        return [
            [OutgoingMessage(b"a", schema_version=sv), OutgoingMessage(b"b")],
            [OutgoingMessage(b"m%d" % i, {"i": str(i)}, f"k{i}", b"o%d" % i, 100 + i,
                             schema_version=sv) for i in range(3)],
            [OutgoingMessage(b"x", key="only-one", schema_version=sv), OutgoingMessage(b"y")],
            # a null value adds the nullValues column
            [OutgoingMessage(b"v", schema_version=sv), _null(), OutgoingMessage(b"w")],
        ]

    def fields(ms):
        return [[getattr(m, a) for a in Message.__slots__] for m in ms]

    for sv in (None, 3):
        for msgs in variants(sv):
            for seqs in (list(range(5, 5 + len(msgs))), [5, 9, 11][:len(msgs)]):
                for code in (0, LZ4):
                    rec = batches.build_entry(1, "p", msgs, seqs, code)
                    got = unpack.messages(rec, 7, 8, 2, "t", 4, "s", "c", skip={1})
                    want = [message_from_entry(r, MessageId(7, 8, 2, i), "t", 4, "s", "c")
                            for i, r in enumerate(unpack.expand(rec)) if i != 1]
                    assert fields(got) == fields(want)
                    assert len(got) == len(msgs) - 1
