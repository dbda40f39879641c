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
