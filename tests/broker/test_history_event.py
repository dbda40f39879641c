"""The stored history event with its fields named (issue 29 item 7): history_event.Event reads
every stored shape (a plain event, a span record) and gives back the very list the writers
store, so a store's history reads as it did, byte for byte. Real LMDB in tmp_path, a simulated
clock."""
from __future__ import annotations

import pytest

from store import codec
from pulsarctl.broker import history
from pulsarctl.broker.history_event import E_EXTRA, E_KIND, E_SPAN, Event
from pulsarctl.messages import OutgoingMessage

LEASE = 600_000


def _stored_shapes(kind):
    """The lists a writer stores for an event of kind: plain, with an extra, and span records."""
    return [
        [kind, 1000, None, None, None, None],
        [kind, 1000, "s", "c1", 2, {"reason": "why", "delay": 4000}],
        [kind, 1000, "s", "c1", 0, {"type": "Shared"}, [3, 9]],
        [kind, 1000, "s", None, None, None, [1, 5, 7]],
    ]


@pytest.mark.parametrize("kind", history.EVENTS)
def test_every_event_kind_round_trips_byte_for_byte(kind):
    for stored in _stored_shapes(kind):
        e = Event.from_stored(stored)
        assert e.kind == kind and e.at == 1000
        assert e.subscription == stored[2] and e.consumer == stored[3]
        assert e.redelivery_count == stored[4] and e.extra == stored[E_EXTRA]
        assert e.span == (stored[E_SPAN] if len(stored) > E_SPAN else None)
        assert e.to_stored() == stored
        assert codec.encode(e.to_stored()) == codec.encode(stored)
        assert e.without_span().to_stored() == stored[:6]
        assert e.detail == (stored[E_EXTRA] or {})
        assert e.reason == (stored[E_EXTRA] or {}).get("reason")
        assert Event.from_stored(e) is e


def _life(broker, clock):
    """A life that records most kinds: spans, ranges, own events."""
    def msgs(n):
        return [OutgoingMessage(f"m{i}".encode()) for i in range(n)]
    _p, ids = broker.publish("t", msgs(6))
    broker.subscribe("t", "s", "c1", "Shared", "Earliest", lease_ms=LEASE, fetch=0,
                     settings={"negativeAckRedeliveryDelayMs": 1000, "ackTimeoutMs": 30_000})
    got = broker.fetch("t", "s", "c1", 3)
    broker.ack("t", "s", [got[0].id])
    broker.nack("t", "s", [got[1].id])
    clock.advance(40_000)
    broker.fetch("t", "s", "c1", 10)   # fires the nack and the ack timeout
    broker.subscription("t", "s").skip(1)
    broker.subscription("t", "s").clear_backlog()
    return ids


def test_what_the_broker_stores_reads_back_byte_for_byte(broker, clock):
    _life(broker, clock)

    def raw(ctx):
        return [bytes(v) for _k, v in ctx.env.cursor(ctx.txn, "history")]
    values = broker._read(raw)
    kinds = set()
    for v in values:
        e = Event.from_stored(codec.decode(v))
        kinds.add(e.kind)
        assert codec.encode(e.to_stored()) == v
    assert {"delivered", "acked", "nacked", "ackTimeout", "redelivered", "skipped",
            "cleared"} <= kinds
    assert any(codec.decode(v)[E_KIND] == "delivered" and len(codec.decode(v)) > E_SPAN
               for v in values)   # a span record was among them


def test_a_message_life_is_named_events(broker, clock):
    ids = _life(broker, clock)

    def events(ctx):
        info = ctx.ledgers.lookup(ctx.txn, "persistent://public/default/t")
        return history.events_of(ctx, info, ids[1].entry_id)
    got = broker._read(events)
    assert got and all(type(e) is Event and e.span is None for e in got)
    assert [e.kind for e in got][:3] == ["delivered", "nacked", "redelivered"]
    assert got[2].subscription == "s" and got[2].reason.startswith("nacked at")
