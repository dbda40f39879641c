"""What the differential tests (tests/oracle/test_differential.py: the same random operations
on real Apache Pulsar and on serve) found serve doing otherwise than Pulsar, each pinned here
with the real Python client against a real serve, so it stays fixed without the oracle lane."""
from __future__ import annotations

import uuid

import pulsar
import pytest
from pulsar import ConsumerType

pytestmark = pytest.mark.serve
TM = 10000


def _topic(name: str) -> str:
    return f"persistent://public/default/{name}-{uuid.uuid4().hex[:8]}"


def test_unsubscribe_while_another_consumer_is_connected_is_refused_and_keeps_the_consumer(
        client):
    # PersistentSubscription.doUnsubscribe: only the subscription's one consumer may
    # unsubscribe; otherwise ServerMetadataException ("Unconnected or shared consumer attempting
    # to unsubscribe"), the consumer stays connected and keeps receiving.
    topic = _topic("unsub-refused")
    first = client.subscribe(topic, "s", consumer_type=ConsumerType.Failover, consumer_name="a")
    second = client.subscribe(topic, "s", consumer_type=ConsumerType.Failover, consumer_name="b")
    with pytest.raises(pulsar.BrokerMetadataError):
        first.unsubscribe()
    second.close()
    client.create_producer(topic).send(b"still here")
    assert first.receive(TM).data() == b"still here"
    first.unsubscribe()     # alone now: allowed
