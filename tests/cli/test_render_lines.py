"""The NDJSON line of a plain message written field by field (render._record_line) is byte for
byte the record's line (render._line(m.record())), for any payload, key, properties, times,
ids and consumer; other messages fall back to the record."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from pulsarctl.cli import render
from pulsarctl.messages import Message, MessageId

_text = st.text(max_size=30)  # any code points: quotes, controls, C1, non-ASCII


@settings(max_examples=500, deadline=None)
@given(payload=st.binary(max_size=60) | _text.map(str.encode), key=st.none() | _text,
       props=st.none() | st.dictionaries(_text, _text, max_size=3),
       publish=st.integers(0, 2**45), event=st.integers(0, 2**45),
       producer=st.none() | _text, seq=st.none() | st.integers(-1, 2**63 - 1),
       rc=st.integers(0, 100), sub=st.none() | _text, consumer=st.none() | _text,
       topic=_text, ordering=st.none() | st.binary(max_size=5), deliver=st.integers(0, 1),
       null=st.booleans(), batch=st.integers(-1, 5))
def test_the_fast_line_is_the_record_s_line(payload, key, props, publish, event, producer, seq,
                                            rc, sub, consumer, topic, ordering, deliver, null,
                                            batch):
    m = Message(publish, producer, seq, payload, props, key, ordering, event, deliver,
                MessageId(3, 7, -1, batch), topic, rc, sub, consumer if sub is not None else None)
    m.null_value_ = null
    want = render._line(m.record())
    got = render._record_line(m)
    assert got is None or got == want
    try:
        payload.decode("utf-8")
        plain = ordering is None and not deliver and not null
    except UnicodeDecodeError:
        plain = False
    assert (got is not None) == plain


@settings(max_examples=60, deadline=None)
@given(payloads=st.lists(_text.map(str.encode) | st.binary(max_size=20), min_size=2,
                         max_size=30),
       acked=st.sets(st.integers(0, 29), max_size=5), rc=st.integers(0, 3))
def test_a_batch_s_lines_are_its_messages_lines(tmp_path_factory, payloads, acked, rc):
    """_batch_lines writes, from a batch entry's columns, the lines its Messages would have;
    or nothing (False) where it cannot (a payload that is not UTF-8)."""
    from pulsarctl.broker import Broker, batches
    from pulsarctl.messages import OutgoingMessage

    b = Broker(str(tmp_path_factory.mktemp("s") / "store"))
    try:
        b.policies.update_setting("acknowledgmentAtBatchIndexLevelEnabled", "true")
        _n, ids = b.publish("t", [OutgoingMessage(x) for x in payloads], "p",
                            batching=batches.Spec(1000, 1 << 20, False))
        b.subscribe("t", "s", "c", "Shared", "Earliest", lease_ms=60_000)
        gone = [ids[i] for i in sorted(acked) if i < len(ids)]
        if gone and len(gone) < len(ids):
            b.fetch("t", "s", "c", 100)
            b.ack("t", "s", gone)
            b.redeliver_unacked("t", "s", "c")
        (whole,) = b.fetch("t", "s", "c", 1000, whole_batches=True)
        whole.redelivery_count = rc
        got: list = []
        done = render._batch_lines(whole, got)
        want = [render._line(m.record()) for m in whole.messages()]
        assert got == (want if done else [])
        try:
            [x.decode("utf-8") for x in payloads]
            assert done
        except UnicodeDecodeError:
            assert not done
    finally:
        b.close()
