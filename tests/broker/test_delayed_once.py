"""Issue 14, item 4: a delayed message is delivered exactly once, however it was produced and
however the subscription's consumers come and go.

The double delivery came from the cursor rewind (the last consumer of a Shared or Key_Shared
subscription leaving, a type change, a Failover hand-over, a redelivery on a single-active
subscription): it put the read position back to mark-delete + 1 but left the delayed index, so
a message that came due was taken from the index *and* read again from the rewound read
position. The whole family: produced one by one, by a batching producer or not, with
deliverAfter or deliverAt, mixed with immediate messages, consumed by one consumer or several,
who close or die, with the time moved by a bare clock advance, by `clock advance`'s firing or
by a daemon tick. Real LMDB in tmp_path, the simulated clock.
"""
from __future__ import annotations

import subprocess
from collections import Counter

import pytest

import pulsarctl
from pulsarctl.broker.consumers import process_start_time
from pulsarctl.daemon import Daemon
from pulsarctl.messages import OutgoingMessage

from simclock import START_MS

LEASE = 600_000
DELAY = 10_000
IMMEDIATE = ["imm-0", "imm-1", "imm-2"]
DELAYED = ["del-0", "del-1", "del-2"]


# -- producing ------------------------------------------------------------------------------------
def produce(broker, clock, how: str, when: str, topic="t"):
    """Three immediate, then three delayed messages (keys k0..k5), in one of the ways a
    producer sends them."""
    kw = (lambda: {"deliver_after": DELAY}) if when == "after" else (
        lambda: {"deliver_at": START_MS + DELAY})
    if how == "one-by-one":  # `produce` once per message, or an NDJSON record per line
        for i, p in enumerate(IMMEDIATE):
            broker.publish(topic, [OutgoingMessage(p.encode(), key=f"k{i}")])
        for i, p in enumerate(DELAYED):
            at = clock.now_ms() + DELAY if when == "after" else START_MS + DELAY
            broker.publish(topic, [OutgoingMessage(p.encode(), key=f"k{i + 3}", deliver_at=at)])
        return
    client = pulsarctl.Client(broker=broker)
    producer = client.create_producer(topic, batching_enabled=how == "batched")
    if how == "batched":
        for i, p in enumerate(IMMEDIATE):
            producer.send_async(p.encode(), partition_key=f"k{i}")
        for i, p in enumerate(DELAYED):
            producer.send_async(p.encode(), partition_key=f"k{i + 3}", **kw())
        producer.flush()
    else:
        for i, p in enumerate(IMMEDIATE):
            producer.send(p.encode(), partition_key=f"k{i}")
        for i, p in enumerate(DELAYED):
            producer.send(p.encode(), partition_key=f"k{i + 3}", **kw())
    producer.close()


# -- consuming ------------------------------------------------------------------------------------
class Consumers:
    """Consumers that attach, take everything available (acking it) and leave: closing, or
    dying (their process is killed), as a `consume` run does."""

    def __init__(self, broker, sub_type, topic="t", sub="s"):
        self.broker, self.sub_type, self.topic, self.sub = broker, sub_type, topic, sub
        self.procs = []
        self.round = 0

    def run(self, n: int, leave: str) -> list[str]:
        self.round += 1
        names = [f"c{self.round}-{i}" for i in range(n)]
        attached = {}
        for name in names:
            kw = {"lease_ms": LEASE}
            if leave == "die":
                p = subprocess.Popen(["sleep", "600"])
                self.procs.append(p)
                kw = {"pid": p.pid, "pid_start": process_start_time(p.pid)}
                attached[name] = p
            self.broker.subscribe(self.topic, self.sub, name, self.sub_type, "Earliest", **kw)
        got = []
        progress = True
        while progress:
            progress = False
            for name in names:  # several consumers take turns, two messages at a time
                msgs = self.broker.fetch(self.topic, self.sub, name, 2)
                if msgs:
                    progress = True
                    self.broker.ack(self.topic, self.sub, [m.message_id() for m in msgs])
                    got += [m.data().decode() for m in msgs]
        for name in names:
            if leave == "close":
                self.broker.close_consumer(self.topic, self.sub, name)
            else:
                p = attached[name]
                p.kill()
                p.wait()
        return got

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def consumers(broker):
    made = []

    def make(sub_type, **kw):
        c = Consumers(broker, sub_type, **kw)
        made.append(c)
        return c
    yield make
    for c in made:
        c.stop()


def move_time(broker, store_path, clock, ms: int, how: str) -> None:
    clock.advance(ms)
    if how == "clock-advance":     # what `clock advance` does after moving the clock
        broker.chores.fire_due()
    elif how == "daemon-tick":
        Daemon(broker, store_path).tick()
    # "lazy": nothing fires until the next consumer's fetch


# -- the family -----------------------------------------------------------------------------------
@pytest.mark.parametrize("sub_type", ["Shared", "Key_Shared"])
@pytest.mark.parametrize("how", ["one-by-one", "batched", "unbatched"])
@pytest.mark.parametrize("when", ["after", "at"])
@pytest.mark.parametrize("n_consumers", [1, 2])
@pytest.mark.parametrize("tick", ["lazy", "clock-advance", "daemon-tick"])
def test_delayed_messages_are_delivered_once(broker, clock, store_path, consumers, sub_type,
                                             how, when, n_consumers, tick):
    """The issue's reproduction and its family: a consume before the delivery time gets the
    immediate messages only; after the clock passes it, the next consume gets each delayed
    message once, and nothing is left."""
    produce(broker, clock, how, when)
    group = consumers(sub_type)
    first = group.run(n_consumers, "close")
    assert sorted(first) == IMMEDIATE
    move_time(broker, store_path, clock, DELAY + 1000, tick)
    second = group.run(n_consumers, "close")
    assert Counter(second) == Counter(DELAYED), second
    assert group.run(n_consumers, "close") == []
    s = broker.topics.stats("t")["subscriptions"]["s"]
    assert (s["msgBacklog"], s["delayedMessages"]) == (0, 0)


@pytest.mark.parametrize("sub_type", ["Shared", "Key_Shared"])
@pytest.mark.parametrize("leave", ["close", "die"])
@pytest.mark.parametrize("tick", ["lazy", "clock-advance", "daemon-tick"])
def test_many_consumes_before_and_after_the_delivery_time(broker, clock, store_path, consumers,
                                                          sub_type, leave, tick):
    """Several runs while the messages wait (each leaving rewinds the cursor; the delayed ones
    are deferred again, never delivered early), then several after: each comes once."""
    produce(broker, clock, "one-by-one", "after")
    group = consumers(sub_type)
    seen = group.run(1, leave)
    assert sorted(seen) == IMMEDIATE
    for _ in range(3):
        move_time(broker, store_path, clock, 2000, tick)
        assert group.run(2, leave) == []                      # still ahead: nothing early
    move_time(broker, store_path, clock, DELAY, tick)
    for _ in range(3):
        seen += group.run(2, leave)
    assert Counter(seen) == Counter(IMMEDIATE + DELAYED), seen


def test_the_issue_reproduction_after_the_first_consume(broker, clock, consumers):
    """After the first consume: the delayed messages wait in the index while the cursor is
    rewound, and a fetch after the delivery time gives each of them once, in order."""
    produce(broker, clock, "one-by-one", "after")
    group = consumers("Shared")
    assert group.run(1, "close") == IMMEDIATE
    clock.advance(11_000)
    assert group.run(1, "close") == DELAYED


@pytest.mark.parametrize("single", ["Exclusive", "Failover"])
def test_a_type_change_in_between_does_not_deliver_twice(broker, clock, single):
    """A type change rewinds too: a single-active consumer gets the delayed messages at once
    (as Pulsar's single-active dispatchers do) and leaves them unacked; the Shared consumer
    after the delivery time gets each once."""
    produce(broker, clock, "one-by-one", "after")
    broker.subscribe("t", "s", "a", "Shared", "Earliest", lease_ms=LEASE)
    msgs = broker.fetch("t", "s", "a", 10)
    broker.ack("t", "s", [m.message_id() for m in msgs])
    broker.close_consumer("t", "s", "a")
    broker.subscribe("t", "s", "b", single, "Earliest", lease_ms=LEASE)
    assert [m.data().decode() for m in broker.fetch("t", "s", "b", 10)] == DELAYED
    broker.close_consumer("t", "s", "b")
    clock.advance(DELAY + 1000)
    broker.subscribe("t", "s", "c", "Shared", "Earliest", lease_ms=LEASE)
    got = broker.fetch("t", "s", "c", 10) + broker.fetch("t", "s", "c", 10)
    assert [m.data().decode() for m in got] == DELAYED


def test_python_producer_deliver_after_counts_from_the_store_clock(broker, clock):
    """deliver_after on the simulated clock: due DELAY after the store's now (it counted from
    the wall clock, so on a simulated store it was due at some other time)."""
    client = pulsarctl.Client(broker=broker)
    p = client.create_producer("t")
    p.send(b"x", deliver_after=DELAY)
    broker.subscribe("t", "s", "c", "Shared", "Earliest", lease_ms=LEASE)
    assert broker.fetch("t", "s", "c", 10) == []
    clock.advance(DELAY)
    assert [m.data() for m in broker.fetch("t", "s", "c", 10)] == [b"x"]


@pytest.mark.parametrize("whole_batches", [False, True])
def test_a_fetch_past_its_scan_bound_of_delayed_entries_reads_on_until_it_finds_one(
        broker, clock, monkeypatch, whole_batches):
    # A fetch reads past delayed entries up to a bound of work per call; one that found
    # nothing but delayed entries within it read on, else a waiting wire consumer (serve)
    # stayed waiting, permits in hand, with a deliverable message behind them (as Pulsar's
    # dispatcher reads again after a read that sent nothing).
    from pulsarctl.broker import dispatch
    monkeypatch.setattr(dispatch, "MAX_SCAN_PER_FETCH", 2)
    broker.subscribe("t", "s", "a", "Shared", "Earliest", lease_ms=LEASE)
    for i in range(5):
        broker.publish("t", [OutgoingMessage(b"later-%d" % i,
                                             deliver_at=clock.now_ms() + DELAY)])
    broker.publish("t", [OutgoingMessage(b"now")])
    got = broker.fetch("t", "s", "a", 1, whole_batches=whole_batches)
    assert [m.payload for m in got] == [b"now"]
