"""A batch entry goes out through serve unopened (issue 16, item 9): a fetch with
whole_batches hands it out as one batches.Batch, and whole_batch_frame makes from its columns
the same MESSAGE frame that batch_frame makes from a Message per index. Real LMDB in tmp_path,
a simulated clock."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from pulsarctl.broker import Broker, batches
from pulsarctl.messages import MessageId, OutgoingMessage
from pulsarctl.serve import frames
from pulsarctl.serve.command_sender import batch_frame, whole_batch_frame

LEASE = 600_000
INDEX_LEVEL = "acknowledgmentAtBatchIndexLevelEnabled"


def _publish(broker, topic, messages, **kw):
    return broker.publish(topic, messages, batching=batches.Spec(1000, 1 << 20, False), **kw)[1]


def _subscribe(broker, topic, sub):
    broker.subscribe(topic, sub, "c", "Shared", "Earliest", lease_ms=LEASE)


def _both_ways(broker, topic, max_n=10_000):
    """The frames of one fetch for a subscription "whole" with whole_batches, and of the same
    fetch for a subscription "each" without: (whole frames, each frames, whole items)."""
    whole = broker.fetch(topic, "whole", "c", max_n, whole_batches=True)
    each = broker.fetch(topic, "each", "c", max_n)
    assert all(type(b) is batches.Batch for b in whole)
    got = [whole_batch_frame(7, b) for b in whole]
    by_entry: dict = {}
    for m in each:
        by_entry.setdefault((m.id.ledger_id, m.id.entry_id), []).append(m)
    want = [batch_frame(7, group) for group in by_entry.values()]
    return got, want, whole


def test_a_plain_batch_frames_as_the_messages_would(store_path, clock):
    b = Broker(store_path, clock)
    for s in ("whole", "each"):
        _subscribe(b, "t", s)
    _publish(b, "t", [OutgoingMessage(b"x" * (i * 7 % 300)) for i in range(300)])
    got, want, whole = _both_ways(b, "t")
    assert got == want and len(got) == 1
    assert (whole[0].size, whole[0].count, whole[0].skip) == (300, 300, None)
    b.close()


def test_a_batch_with_every_field_frames_as_the_messages_would(store_path, clock):
    b = Broker(store_path, clock)
    for s in ("whole", "each"):
        _subscribe(b, "t", s)
    msgs = []
    for i in range(40):
        m = OutgoingMessage(f"m{i}".encode() if i % 5 else b"",
                            properties={"n": str(i)} if i % 3 else None,
                            key=f"k{i}" if i % 2 else None,
                            ordering_key=b"o%d" % i if i % 4 == 1 else None,
                            event_time=1000 + i if i % 6 else 0, sequence_id=500 + 3 * i)
        m.null_value = i % 5 == 0
        m.key_b64 = i % 7 == 1   # a key sent as bytes, base64 (only a key can be)
        msgs.append(m)
    _publish(b, "t", msgs)
    got, want, _ = _both_ways(b, "t")
    assert got == want
    # The frame reads back as the batch: 40 messages, their keys and sequence ids.
    (cmd, meta, payload) = frames.parse(got[0][4:])
    assert meta.num_messages_in_batch == 40
    out = frames.split_batch(payload, 40)
    assert [s.sequence_id for s, _ in out] == [500 + 3 * i for i in range(40)]
    assert [s.partition_key if s.HasField("partition_key") else None for s, _ in out] == \
        [f"k{i}" if i % 2 else None for i in range(40)]
    assert [s.null_value for s, _ in out] == [i % 5 == 0 for i in range(40)]
    assert [s.partition_key_b64_encoded for s, _ in out] == \
        [i % 7 == 1 and i % 2 == 1 for i in range(40)]
    b.close()


def test_acked_indexes_are_left_out_by_the_ack_set(store_path, clock):
    """With batch index acks, a redelivered batch goes out without the indexes acked: the
    same ack set and the same bytes either way."""
    b = Broker(store_path, clock)
    b.policies.update_setting(INDEX_LEVEL, "true")
    for s in ("whole", "each"):
        _subscribe(b, "t", s)
    ids = _publish(b, "t", [OutgoingMessage(b"p%d" % i) for i in range(130)])
    for s in ("whole", "each"):
        b.fetch("t", s, "c", 1000)
        b.ack("t", s, [ids[0], ids[1], ids[64], ids[129]])
        b.redeliver_unacked("t", s, "c")
    got, want, whole = _both_ways(b, "t")
    assert got == want
    assert whole[0].count == 126 and whole[0].skip == {0, 1, 64, 129}
    (cmd, _meta, _payload) = frames.parse(got[0][4:])
    assert list(cmd.message.ack_set)  # the client skips what the broker left out
    b.close()


def test_permits_and_stats_count_a_batch_by_its_messages(store_path, clock):
    """A fetch of 5 takes the whole batch of 50 (a batch goes whole) and counts 50 out, bytes
    as a Message each would."""
    b = Broker(store_path, clock)
    for s in ("whole", "each"):
        _subscribe(b, "t", s)
    _publish(b, "t", [OutgoingMessage(b"y" * i) for i in range(50)])
    _publish(b, "t", [OutgoingMessage(b"z" * i) for i in range(50)])
    whole = b.fetch("t", "whole", "c", 5, whole_batches=True)
    each = b.fetch("t", "each", "c", 5)
    assert batches.message_count(whole) == len(each) == 50
    stats = b.topics.stats("t")["subscriptions"]
    assert stats["whole"]["msgOutCounter"] == stats["each"]["msgOutCounter"] == 50
    assert stats["whole"]["bytesOutCounter"] == stats["each"]["bytesOutCounter"] == \
        sum(range(50))
    b.close()


_columns = st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.lists(st.binary(max_size=200), min_size=n, max_size=n),
    st.none() | st.lists(st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5),
                                                     max_size=2), min_size=n, max_size=n),
    st.none() | st.lists(st.none() | st.text(max_size=8), min_size=n, max_size=n),
    st.none() | st.lists(st.none() | st.binary(max_size=8), min_size=n, max_size=n),
    st.none() | st.lists(st.integers(0, 2**40), min_size=n, max_size=n),
    st.none() | st.lists(st.integers(0, 2**63), min_size=n, max_size=n),
    st.none() | st.lists(st.booleans(), min_size=n, max_size=n),
    st.none() | st.lists(st.booleans(), min_size=n, max_size=n),   # keysB64
    st.sets(st.integers(0, n - 1), max_size=n),
))


@settings(max_examples=200, deadline=None)
@given(cols=_columns, first=st.integers(-1, 2**40))
def test_columns_payload_is_batch_message_by_message(cols, first):
    """Every column combination: the bytes batch_message writes one message at a time."""
    *columns, skip = cols
    if columns[7] is None:
        columns = columns[:7]
        if columns[6] is None:
            columns = columns[:6]
    payloads, props, keys_, okeys, events, seqs = columns[:6]
    nulls = columns[6] if len(columns) > 6 else None
    b64 = columns[7] if len(columns) > 7 else None
    n = len(payloads)
    want = []
    for i in range(n):
        if i in skip:
            want.append(frames.batch_message(b""))
            continue
        seq = seqs[i] if seqs else first + i
        want.append(frames.batch_message(
            payloads[i], seq if seq >= 0 else None, events[i] if events else 0,
            props[i] if props else None, keys_[i] if keys_ else None,
            okeys[i] if okeys else None, bool(nulls and nulls[i]), bool(b64 and b64[i])))
    assert frames.columns_payload(list(columns), n, first, skip or None) == b"".join(want)


def test_two_byte_varints_are_protobufs():
    """The two-byte shortcut of _varint agrees with the general encoding at its bounds."""
    for n in (0x7F, 0x80, 0x81, 0x3FFF, 0x4000, 0x4001, 300, 16000):
        raw = frames._varint(n)
        value, shift = 0, 0
        for byte in raw:
            value |= (byte & 0x7F) << shift
            shift += 7
        assert value == n and all(b & 0x80 for b in raw[:-1]) and not raw[-1] & 0x80
