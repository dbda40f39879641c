"""The daemon's tick counts the delayed messages whose time came since the last tick as fired,
and wakes the consumers waiting on the store: serve's waiting consumers no longer poll, so
without it a delayed message would wait for an unrelated wake (the upstream client suite's
test_deliver_after and test_deliver_at timed out). Real LMDB, the simulated clock."""
from __future__ import annotations

from pulsarctl import wake_events
from pulsarctl.daemon import Daemon
from pulsarctl.messages import OutgoingMessage

from simclock import START_MS


def test_a_tick_fires_what_came_due_and_wakes_the_waiting(broker, clock, store_path):
    broker.subscribe("d", "s", "c", "Shared", "Earliest")
    broker.publish("d", [OutgoingMessage(b"later", deliver_at=START_MS + 1500)], "p")
    assert broker.fetch("d", "s", "c", 10) == []   # held back: the consumer now waits
    daemon = Daemon(broker, store_path, tick_s=1.0)
    with wake_events.watch(broker.wake_path) as watch:
        daemon.tick()                      # nothing due yet
        assert not watch.changed()
        clock.advance(1000)
        assert daemon.tick() == 1          # due within this tick (Pulsar's delivery tick)
        assert watch.changed()
        clock.advance(1000)
        assert daemon.tick() == 0          # counted once
        assert not watch.changed()
    assert [m.data() for m in broker.fetch("d", "s", "c", 10)] == [b"later"]
