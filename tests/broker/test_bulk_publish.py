"""produce --stdin's bulk path (issue 18, item 2): plain messages published from their payloads
alone store exactly what publish stores for the same messages, in the same batches, and give
the same ids; what the bulk path cannot do it leaves to publish, writing nothing."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from pulsarctl.broker import Broker, batches
from pulsarctl.client import produce as p
from pulsarctl.messages import MessageId, OutgoingMessage
from store import codec

SPEC = batches.Spec(1000, 128 * 1024, False)


def _entries(broker, topic):
    def run(ctx):
        from pulsarctl.broker import topics
        from pulsarctl.names import parse_topic

        info = topics.require(ctx, parse_topic(topic))
        return [codec.decode(raw) for _o, _l, _e, raw in
                ctx.ledgers.scan(ctx.txn, info, info.first_offset, info.next_offset)]
    return broker._read(run)


def _ids(runs) -> list[str]:
    return [f"{l}:{e}:{p}" if n == 1 else f"{l}:{e}:{p}:{i}"
            for l, e, p, n in runs for i in range(n)]


def test_the_bulk_path_stores_what_publish_stores(store_path, clock):
    payloads = [b"m%d" % i * (i % 7 + 1) for i in range(2500)]
    for code in (0, 1):   # none, lz4
        b = Broker(store_path, clock)
        name, runs = b.publish_payloads(f"bulk{code}", payloads, "prod", code, SPEC, [700])
        _n, ids = b.publish(f"each{code}", [OutgoingMessage(x) for x in payloads[:700]],
                            "prod", compression=code, batching=SPEC)
        _n, more = b.publish(f"each{code}", [OutgoingMessage(x) for x in payloads[700:]],
                             "prod", compression=code, batching=SPEC)
        assert name == "prod"
        assert _entries(b, f"bulk{code}") == _entries(b, f"each{code}")
        # The same entries and indexes (ledger ids are the store's, one topic's not another's).
        assert [i.split(":", 1)[1] for i in _ids(runs)] == \
            [str(i).split(":", 1)[1] for i in ids + more]
        assert {i.split(":", 1)[0] for i in _ids(runs)} == {str(runs[0][0])}
        st = b.topics.stats(f"bulk{code}")
        assert st["msgInCounter"] == 2500 == b.topics.stats(f"each{code}")["msgInCounter"]
        b.close()


def test_a_second_bulk_send_goes_on_with_the_producer_s_sequence_ids(broker):
    broker.publish_payloads("t", [b"a", b"b"], "prod", 0, SPEC)
    broker.publish_payloads("t", [b"c", b"d", b"e"], "prod", 0, SPEC)
    got = broker.read_entries("t", None, 10, after_id=MessageId.earliest)[0]
    assert [m.sequence_id for m in got] == [0, 1, 2, 3, 4]
    assert [m.payload for m in got] == [b"a", b"b", b"c", b"d", b"e"]


def test_one_message_is_a_plain_entry(broker):
    _name, runs = broker.publish_payloads("t", [b"only"], "prod", 0, SPEC)
    assert runs == [(1, 0, -1, 1)]
    assert broker.read_entries("t", None, 5, after_id=MessageId.earliest)[0][0].payload \
        == b"only"


def test_what_the_bulk_path_cannot_do_is_left_to_publish(broker):
    broker.topics.create_partitioned("parted", 2)
    assert broker.publish_payloads("parted", [b"x", b"y"], "prod", 0, SPEC) is None
    broker.policies.update_setting("maxMessageSize", "1000")
    assert broker.publish_payloads("t", [b"x" * 1001], "prod", 0, SPEC) is None
    # A batch over the limit (publish halves it): nothing written, not even the topic.
    assert broker.publish_payloads("t", [b"y" * 199] * 5, "prod", 0,
                                   batches.Spec(1000, 0, False)) is None
    assert not broker.topics.exists("t")
    assert broker.publish_payloads("t", [b"z"], "prod", 0,
                                   batches.Spec(1000, 0, True)) is None   # key-based


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=60),
       max_n=st.integers(1, 20), max_b=st.integers(0, 20000),
       breaks=st.sets(st.integers(1, 59), max_size=5))
def test_plain_ranges_are_group_s_batches(sizes, max_n, max_b, breaks):
    msgs = [OutgoingMessage(b"x" * n) for n in sizes]
    for i in breaks:
        if i < len(msgs):
            msgs[i].new_batch = True
    spec = batches.Spec(max_n, max_b, False)
    want = [(g[0], g[-1] + 1) for g in batches.group(msgs, spec, 5000)]
    assert batches.plain_ranges(sizes, max_n, max_b, 5000, breaks) == want


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.floats(0, 30, allow_nan=False), min_size=1, max_size=80),
       delay=st.integers(0, 25))
def test_delay_breaks_are_where_the_publish_delay_ran_out(steps, delay):
    """A message starts a batch when it arrived the publish delay or more after the first of
    the batch being filled; mark_delays marks those messages."""
    times, t = [], 1000.0
    for s in steps:
        t += s
        times.append(t)
    want, start = [], times[0]
    for i, at in enumerate(times[1:], 1):
        if at - start >= max(delay, 0.001):
            want.append(i)
            start = at
    assert p.delay_breaks(times, delay) == want
    msgs = [OutgoingMessage(b"x") for _ in times]
    p.mark_delays(msgs, times, delay)
    assert [i for i, m in enumerate(msgs) if m.new_batch] == want
