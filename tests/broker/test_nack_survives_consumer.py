"""Issue 14: nack timers are durable. A message nacked by a consumer that then goes away (it
closes, its process dies, its lease ends) stays held, neither redelivered nor counted, until its
nack delay (or the backoff for its count) has passed; then it comes back with its redelivery
count raised by one, or goes to the dead letter topic past maxRedeliverCount, whoever fires the
timer: a later fetch, `clock advance` (fire_due), a daemon tick. On every subscription type: a
rewind (the last consumer leaving, a Failover hand-over) does not hand it back early. Messages
the consumer merely held come back at once, uncounted, as in Pulsar. Real LMDB in tmp_path, the
simulated clock.
"""
from __future__ import annotations

import subprocess

import pytest

from pulsarctl.broker.consumers import process_start_time
from pulsarctl.daemon import Daemon
from pulsarctl.messages import OutgoingMessage

LEASE = 600_000
NACK_DELAY = 5_000
TYPES = ["Shared", "Key_Shared", "Exclusive", "Failover"]


def publish(broker, n=3, topic="t"):
    _, ids = broker.publish(topic, [OutgoingMessage(f"m{i}".encode(), key=f"k{i}")
                                    for i in range(n)])
    return ids


def seen(msgs):
    return [(m.data().decode(), m.redelivery_count()) for m in msgs]


class Leaver:
    """Attach a consumer that will go away in one of three ways."""

    def __init__(self, broker, clock):
        self.broker, self.clock, self.procs = broker, clock, []

    def attach(self, name, typ, how, settings=None, priority=0):
        if how == "die":
            p = subprocess.Popen(["sleep", "600"])
            self.procs.append(p)
            kw = {"pid": p.pid, "pid_start": process_start_time(p.pid)}
        else:
            kw = {"lease_ms": 1000 if how == "lease-ends" else LEASE}
        self.broker.subscribe("t", "s", name, typ, "Earliest", settings=settings,
                              priority=priority, **kw)
        return how

    def leave(self, name, how):
        if how == "close":
            self.broker.close_consumer("t", "s", name)
        elif how == "die":
            p = self.procs.pop()
            p.kill()
            p.wait()
        else:
            self.clock.advance(1000)  # the lease ends (the store sees it at the next call)

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


@pytest.fixture
def leaver(broker, clock):
    lv = Leaver(broker, clock)
    yield lv
    lv.stop()


def fire(broker, store_path, how):
    if how == "clock-advance":
        broker.chores.fire_due()
    elif how == "daemon-tick":
        Daemon(broker, store_path).tick()
    # "next-fetch": the fetch itself fires what is due


@pytest.mark.parametrize("typ", TYPES)
@pytest.mark.parametrize("leave", ["close", "die", "lease-ends"])
@pytest.mark.parametrize("firer", ["next-fetch", "clock-advance", "daemon-tick"])
def test_a_nack_outlives_its_consumer(broker, clock, store_path, leaver, typ, leave, firer):
    ids = publish(broker)
    leaver.attach("c1", typ, leave, {"negativeAckRedeliveryDelayMs": NACK_DELAY})
    assert seen(broker.fetch("t", "s", "c1", 10)) == [("m0", 0), ("m1", 0), ("m2", 0)]
    broker.ack("t", "s", [ids[0]])
    broker.nack("t", "s", [ids[1]])            # m2 stays merely pending
    leaver.leave("c1", leave)
    broker.subscribe("t", "s", "c2", typ, "Earliest", lease_ms=LEASE)
    # What c1 merely held is back at once, uncounted; the nacked one is not.
    got = broker.fetch("t", "s", "c2", 10)
    assert seen(got) == [("m2", 0)]
    broker.ack("t", "s", [m.message_id() for m in got])
    clock.advance(NACK_DELAY - 1500)           # still inside the delay
    fire(broker, store_path, firer)
    assert broker.fetch("t", "s", "c2", 10) == []
    clock.advance(1500)
    fire(broker, store_path, firer)
    got = broker.fetch("t", "s", "c2", 10)
    assert seen(got) == [("m1", 1)]
    broker.ack("t", "s", [m.message_id() for m in got])
    assert broker.fetch("t", "s", "c2", 10) == []
    assert broker.topics.stats("t")["subscriptions"]["s"]["msgBacklog"] == 0


@pytest.mark.parametrize("typ", TYPES)
def test_held_nack_fires_with_nobody_connected(broker, clock, store_path, typ):
    """The daemon fires the timer while no consumer is there: the next consumer gets the
    message counted, once."""
    ids = publish(broker, 2)
    broker.subscribe("t", "s", "c1", typ, "Earliest", lease_ms=LEASE,
                     settings={"negativeAckRedeliveryDelayMs": NACK_DELAY})
    broker.fetch("t", "s", "c1", 10)
    broker.nack("t", "s", [ids[0]])
    broker.close_consumer("t", "s", "c1")
    clock.advance(NACK_DELAY)
    assert Daemon(broker, store_path).tick() == 1
    broker.subscribe("t", "s", "c2", typ, "Earliest", lease_ms=LEASE)
    assert seen(broker.fetch("t", "s", "c2", 10)) == [("m0", 1), ("m1", 0)]


@pytest.mark.parametrize("typ", TYPES)
def test_held_nack_follows_the_backoff_for_its_count(broker, clock, typ):
    """Nacked at count 2 with backoff 1s:60s:2, the consumer gone: back after 4 s, count 3."""
    ids = publish(broker, 1)
    policy = {"negativeAckBackoff": [1000, 60_000, 2.0]}
    broker.subscribe("t", "s", "c1", typ, "Earliest", lease_ms=LEASE, settings=policy)
    for delay in (1000, 2000):                 # counts 0 and 1, nacked while connected
        broker.fetch("t", "s", "c1", 10)
        broker.nack("t", "s", ids)
        clock.advance(delay)
    assert seen(broker.fetch("t", "s", "c1", 10)) == [("m0", 2)]
    broker.nack("t", "s", ids)
    broker.close_consumer("t", "s", "c1")
    broker.subscribe("t", "s", "c2", typ, "Earliest", lease_ms=LEASE)
    clock.advance(3500)
    assert broker.fetch("t", "s", "c2", 10) == []
    clock.advance(500)
    assert seen(broker.fetch("t", "s", "c2", 10)) == [("m0", 3)]


@pytest.mark.parametrize("typ", TYPES)
def test_held_nack_past_the_limit_goes_to_the_dlq(broker, clock, store_path, typ):
    """Past maxRedeliverCount the fired timer dead-letters the message, whoever fires it; it
    never comes back to the subscription."""
    ids = publish(broker, 1)
    policy = {"negativeAckRedeliveryDelayMs": NACK_DELAY, "maxRedeliverCount": 1}
    broker.subscribe("t", "s", "c1", typ, "Earliest", lease_ms=LEASE, settings=policy)
    broker.fetch("t", "s", "c1", 10)
    broker.nack("t", "s", ids)
    clock.advance(NACK_DELAY)
    assert seen(broker.fetch("t", "s", "c1", 10)) == [("m0", 1)]
    broker.nack("t", "s", ids)                  # the last allowed delivery failed too
    broker.close_consumer("t", "s", "c1")
    broker.subscribe("t", "s", "c2", typ, "Earliest", lease_ms=LEASE)
    assert broker.fetch("t", "s", "c2", 10) == []
    assert not broker.topics.exists("t-s-DLQ")   # not before the delay
    clock.advance(NACK_DELAY)
    fire(broker, store_path, "daemon-tick")
    assert broker.fetch("t", "s", "c2", 10) == []
    dead, _n, _l = broker.read_entries("t-s-DLQ", 0, 10)
    assert [m.data() for m in dead] == [b"m0"]
    assert broker.topics.stats("t")["subscriptions"]["s"]["msgBacklog"] == 0


def test_failover_hand_over_keeps_the_nack_held(broker, clock):
    """A Failover hand-over rewinds: the new active consumer gets what the old one held, but not
    the message the old one nacked until its delay has passed (the old one is still there)."""
    ids = publish(broker)
    broker.subscribe("t", "s", "b", "Failover", "Earliest", lease_ms=LEASE, priority=5,
                     settings={"negativeAckRedeliveryDelayMs": NACK_DELAY})
    assert len(broker.fetch("t", "s", "b", 10)) == 3
    broker.nack("t", "s", [ids[1]])
    broker.subscribe("t", "s", "a", "Failover", "Earliest", lease_ms=LEASE, priority=0)
    assert broker.fetch("t", "s", "b", 10) == []          # b is no longer active
    assert seen(broker.fetch("t", "s", "a", 10)) == [("m0", 0), ("m2", 0)]
    clock.advance(NACK_DELAY)
    assert seen(broker.fetch("t", "s", "a", 10)) == [("m0", 0), ("m1", 1), ("m2", 0)]


def test_pending_view_shows_the_held_nack_and_when_it_comes_back(broker, clock):
    ids = publish(broker, 2)
    broker.subscribe("t", "s", "c1", "Shared", "Earliest", lease_ms=LEASE,
                     settings={"negativeAckRedeliveryDelayMs": NACK_DELAY})
    broker.fetch("t", "s", "c1", 10)
    broker.nack("t", "s", [ids[0]])
    assert broker.subscription("t", "s").disconnect_consumer("c1") == 1   # only m1 was given back
    [row] = broker.subscription("t", "s").pending()
    assert row["messageId"] == str(ids[0]) and row["consumerName"] == "c1"
    assert row["nextRedelivery"] is not None
