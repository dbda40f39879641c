"""broker.scans, the Spark connector's bulk reads, and broker.topics.ensure (issue 29 item 2):
named methods in place of transaction bodies run from outside the broker, routed so a
non-persistent topic is read from the Broker that holds it."""
from __future__ import annotations

import re

import pytest

from pulsarctl.broker.scan import IdColumns
from pulsarctl.errors import DataLoss, TopicNotFound
from pulsarctl.messages import OutgoingMessage
from pulsarctl.names import parse_topic

NP = "non-persistent://public/default/np"
T = "persistent://public/default/t"


pytestmark = pytest.mark.usefixtures("clean_np_tmpfs")


def _publish(broker, topic, *payloads):
    return broker.publish(topic, [OutgoingMessage(p) for p in payloads])[1]


def test_parts_of_topics_and_of_a_partitioned_topic(broker):
    _publish(broker, T, b"a", b"b")
    broker.topics.create_partitioned("persistent://public/default/p", 2)
    rows = broker.scans.parts([parse_topic(T), parse_topic("persistent://public/default/p")])
    assert [r[0] for r in rows] == ["persistent://public/default/p-partition-0",
                                    "persistent://public/default/p-partition-1", T]
    name, partition, _ml, first, nxt, ledgers, offloaded = rows[2]
    assert (partition, first, nxt, offloaded) == (-1, 0, 2, [])
    assert ledgers[0][2] == 2
    with pytest.raises(TopicNotFound):
        broker.scans.parts([parse_topic("persistent://public/default/none")])
    assert broker.scans.parts([parse_topic("persistent://public/default/none")], True) == []


def test_parts_of_a_non_persistent_topic_come_from_its_store(broker):
    broker.subscribe(NP, "s", "c", "Exclusive")
    _publish(broker, NP, b"a", b"b", b"c")
    [row] = broker.scans.parts([parse_topic(NP)])
    assert row[0] == NP and row[4] == 3


def test_parts_matching_a_pattern(broker):
    _publish(broker, T, b"a")
    _publish(broker, "persistent://public/default/other", b"a")
    rows = broker.scans.parts_matching(re.compile(r"persistent://public/default/t"))
    assert [r[0] for r in rows] == [T]


def test_a_chunk_is_raw_records_in_entry_order(broker):
    ids = _publish(broker, T, b"m0", b"m1", b"m2")
    [row] = broker.scans.parts([parse_topic(T)])
    stop, runs, recs = broker.scans.chunk(T, row[2], 0, 3, 100, 1 << 20, True)
    assert stop == 3 and isinstance(runs, IdColumns)
    assert [tuple(r) for r in runs] == [(ids[0].ledger_id, 0, 3)]
    assert [r[3] for r in recs] == [b"m0", b"m1", b"m2"]
    # at most max_entries
    assert broker.scans.chunk(T, row[2], 1, 3, 1, 1 << 20, True)[0] == 2


def test_a_chunk_with_a_decoder_gives_its_columns(broker):
    _publish(broker, T, b"m0", b"m1")
    [row] = broker.scans.parts([parse_topic(T)])

    class Decoder:
        def pieces(self, pieces):
            return ("from pieces", len(pieces))

        def values(self, values):
            return ("from values", [bytes(v) for v in values])

        def batched(self, runs, recs):
            return None

    stop, _runs, cols = broker.scans.chunk(T, row[2], 0, 2, 100, 1 << 20, True, Decoder())
    assert stop == 2 and cols[0] in ("from pieces", "from values")


def test_a_chunk_of_a_deleted_topic_is_data_loss(broker):
    _publish(broker, T, b"m0")
    [row] = broker.scans.parts([parse_topic(T)])
    broker.topics.delete(T)
    with pytest.raises(DataLoss):
        broker.scans.chunk(T, row[2], 0, 1, 100, 1 << 20, True)
    assert broker.scans.chunk(T, row[2], 0, 1, 100, 1 << 20, False) == (1, [], [])


def test_a_chunk_of_a_non_persistent_topic(broker):
    broker.subscribe(NP, "s", "c", "Exclusive")
    _publish(broker, NP, b"x", b"y")
    [row] = broker.scans.parts([parse_topic(NP)])
    stop, _runs, recs = broker.scans.chunk(NP, row[2], 0, 2, 100, 1 << 20, True)
    assert stop == 2 and [r[3] for r in recs] == [b"x", b"y"]


def test_first_at_or_after_and_current(broker, clock):
    _publish(broker, T, b"a", b"b")
    clock.advance(1000)
    t = clock.now_ms()
    _publish(broker, T, b"c")
    [row] = broker.scans.parts([parse_topic(T)])
    assert broker.scans.first_at_or_after(T, row[2], 0, 3, t) == 2
    assert broker.scans.first_at_or_after(T, row[2], 0, 3, t + 1) == 3
    assert broker.scans.first_at_or_after(T, row[2] + 1, 0, 3, 0) == 3  # another ledger: hi
    assert broker.scans.current({T: row[2]}) == {T: (0, 3)}
    assert broker.scans.current({T: row[2] + 1}) == {}


def test_ensure_creates_a_non_persistent_topic_in_its_store(broker):
    broker.topics.ensure(NP)
    assert broker.topics.exists(NP)
    assert broker.owner_of(NP).topics.exists(NP)
    broker.topics.ensure(T)
    assert broker.topics.exists(T)
    broker.policies.update_setting("allowAutoTopicCreation", "false")
    with pytest.raises(TopicNotFound):
        broker.topics.ensure("persistent://public/default/not-allowed")
