"""A non-persistent consumer's CONSUMER_STATS and GET_LAST_MESSAGE_ID over the wire (issue 29
item 2): serve asks the Broker's named methods, which route a non-persistent topic to the store
that holds it. Asked around the facade, they answered ConsumerNotFound (no stats) and a
mark-delete position of -1:-1:-1. Driven in this process with the raw client."""
from __future__ import annotations

import pytest

from serve_inproc import serving
from serve_raw import Raw, T, command, send

TOPIC = "non-persistent://public/default/np-wire"
pytestmark = pytest.mark.usefixtures("clean_np_tmpfs")


def _consumer_with_messages(raw: Raw) -> None:
    raw.handshake()
    raw.send(command(T.SUBSCRIBE, "subscribe", topic=TOPIC, subscription="s", subType=0,
                     consumer_id=3, request_id=1, consumer_name="np-c"))
    raw.expect(T.SUCCESS)
    raw.producer(TOPIC)
    for i in range(3):
        raw.send(send(1, i, f"m-{i}".encode()))
    for _ in range(3):
        raw.expect(T.SEND_RECEIPT)


def test_consumer_stats_of_a_non_persistent_consumer_are_its_stats(store_path):
    with serving(store_path) as it:
        raw = Raw(it.port)
        _consumer_with_messages(raw)
        raw.send(command(T.CONSUMER_STATS, "consumerStats", request_id=9, consumer_id=3))
        r = raw.expect(T.CONSUMER_STATS_RESPONSE)[0].consumerStatsResponse
        assert not r.HasField("error_code"), r.error_message
        assert r.consumerName == "np-c" and r.type == "Exclusive"
        raw.close()


def test_the_mark_delete_position_of_a_non_persistent_subscription_is_not_minus_one(store_path):
    with serving(store_path) as it:
        raw = Raw(it.port)
        _consumer_with_messages(raw)
        raw.send(command(T.GET_LAST_MESSAGE_ID, "getLastMessageId", consumer_id=3, request_id=8))
        r = raw.expect(T.GET_LAST_MESSAGE_ID_RESPONSE)[0].getLastMessageIdResponse
        mdp, last = r.consumer_mark_delete_position, r.last_message_id
        want = it.broker.subscription(TOPIC, "s").mark_delete_position()
        assert (mdp.ledgerId, mdp.entryId) == (want.ledger_id % 2**64, want.entry_id % 2**64)
        assert mdp.ledgerId != 2**64 - 1            # not -1:-1:-1
        assert mdp.ledgerId == last.ledgerId       # on the topic's own ledger
        raw.close()
