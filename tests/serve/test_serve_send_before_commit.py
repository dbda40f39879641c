"""A fetch's messages go out while its commit syncs (Broker.fetch's on_chosen, store's
write_announced): the consumer does not wait for the disk a second time after the publish.
Driven in this process (serve_inproc.py) with the raw client; the fetch's commit is held on a
gate in the worker, so what reaches the client meanwhile is seen, not timed."""
from __future__ import annotations

import threading

from procs import PATIENCE_S
from serve_inproc import serving
from serve_raw import Raw, T, ack, command, send

TOPIC = "persistent://public/default/early"


def _hold_fetch_commits(gate: threading.Event, held: list):
    """A wrap for serving(): after a fetch chose messages (and serve was told), its commit
    waits in the worker until the test sets gate."""
    def wrap(broker):
        real = broker.fetch

        def fetch(*args, on_chosen=None, **kwargs):
            def chosen(got):
                first = bool(got) and not held
                if first:
                    held.append(len(got))
                on_chosen(got)
                if first:
                    assert gate.wait(PATIENCE_S), "the test never opened the gate"
            return real(*args, on_chosen=chosen if on_chosen else None, **kwargs)
        broker.fetch = fetch
    return wrap


def _subscribe(raw: Raw, permits: int) -> None:
    raw.send(command(T.SUBSCRIBE, "subscribe", topic=TOPIC, subscription="s", subType=1,
                     consumer_id=7, request_id=100, initialPosition=1))
    raw.expect(T.SUCCESS)
    raw.send(command(T.FLOW, "flow", consumer_id=7, messagePermits=permits))


def _published_and_subscribed(raw: Raw):
    """m-0 published, then a Shared consumer from the earliest with 10 permits: its first
    MESSAGE frame."""
    raw.handshake()
    raw.producer(TOPIC)
    raw.send(send(1, 0, b"m-0"))
    raw.expect(T.SEND_RECEIPT)
    _subscribe(raw, 10)
    return raw.expect(T.MESSAGE)


def test_a_fetched_message_reaches_the_consumer_before_the_fetch_commits(tmp_path):
    gate, held = threading.Event(), []
    with serving(str(tmp_path / "store"), wrap=_hold_fetch_commits(gate, held)) as it:
        raw = Raw(it.port)
        try:
            got = _published_and_subscribed(raw)
            assert held == [1]          # its fetch is still waiting to commit
            assert got[0].message.message_id.entryId == 0
            assert not gate.is_set()
        finally:
            gate.set()
        # once committed, the store says it went to that consumer: an ack lands, and the
        # subscription's backlog is empty
        raw.send(ack(got[0].message.message_id, 7, 5))
        raw.expect(T.ACK_RESPONSE)
        stats = it.broker.topics.stats(TOPIC)["subscriptions"]["s"]
        assert stats["msgBacklog"] == 0 and stats["msgOutCounter"] == 1


def test_a_fetch_whose_commit_fails_after_sending_delivers_again(tmp_path):
    # The commit failing after the message went out: the store never recorded the delivery,
    # so the message is delivered again (at least once, as after a crash), never lost.
    failed = []

    def wrap(broker):
        real = broker.fetch

        def fetch(*args, on_chosen=None, **kwargs):
            def chosen(got):
                on_chosen(got)
                if got and not failed:
                    failed.append(1)
                    raise OSError("the disk refused the commit")
            return real(*args, on_chosen=chosen if on_chosen else None, **kwargs)
        broker.fetch = fetch

    with serving(str(tmp_path / "store"), wrap=wrap) as it:
        raw = Raw(it.port)
        first = _published_and_subscribed(raw)
        raw.send(send(1, 1, b"m-1"))     # a publish wakes the consumer: it fetches again
        raw.expect(T.SEND_RECEIPT)
        again = raw.expect(T.MESSAGE)
        assert again[0].message.message_id == first[0].message.message_id
        assert raw.expect(T.MESSAGE)[0].message.message_id.entryId == 1
