"""Broker.seek and the Python API's Consumer.seek: by message id (that message again) and by
publish time, on a topic and on a partitioned topic."""
from pulsarctl.client import Client, InitialPosition
from pulsarctl.messages import MessageId, OutgoingMessage

T = "persistent://public/default/seek"


def test_seek_by_id_and_by_time(store_path, clock):
    client = Client(store_path, clock=clock)
    try:
        b = client.broker
        ids = []
        for i in range(4):
            ids += b.publish(T, [OutgoingMessage(f"m{i}".encode())])[1]
            clock.advance(1000)
        c = client.subscribe(T, "s", initial_position=InitialPosition.Earliest)
        got = [c.receive(1000) for _ in range(4)]
        for m in got:
            c.acknowledge(m)
        c.seek(ids[2])
        assert [c.receive(1000).data() for _ in range(2)] == [b"m2", b"m3"]
        c.seek(got[1].publish_timestamp())  # after m1's publish time: m2 on
        assert c.receive(1000).data() == b"m2"
        c.seek(MessageId.earliest)
        assert c.receive(1000).data() == b"m0"
    finally:
        client.close()


def test_seek_on_a_partitioned_topic_moves_the_partition_of_the_id(store_path, clock):
    client = Client(store_path, clock=clock)
    try:
        b = client.broker
        b.topics.create_partitioned("persistent://public/default/ps", 2)
        p1 = "persistent://public/default/ps-partition-1"
        mid = b.publish(p1, [OutgoingMessage(b"x"), OutgoingMessage(b"y")])[1][0]
        c = client.subscribe("persistent://public/default/ps", "s",
                             initial_position=InitialPosition.Earliest)
        seen = sorted(c.receive(1000).data() for _ in range(2))
        assert seen == [b"x", b"y"]
        c.seek(mid)
        assert c.receive(1000).data() == b"x"
    finally:
        client.close()
