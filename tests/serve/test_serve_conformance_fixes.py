"""What apache/pulsar-client-python's own suites showed serve had to do as Pulsar does: seeks
that close the consumer (so the client's seek completes and a second one is allowed), readers'
seeks by id and time, hasMessageAvailable from the mark-delete position, batch-index acks with
acknowledgmentAtBatchIndexLevelEnabled from --config, topics created by their producer, and a
missing namespace reported as TopicNotFound."""
from __future__ import annotations

import subprocess
import time

import pulsar
import pytest
from pulsar import ConsumerType, MessageId

from procs import argv
from serve_inproc import configured, start_in_process

pytestmark = pytest.mark.serve
TM = 10000


def _publish(client, topic, n, gap_s=0.0):
    p = client.create_producer(topic, batching_enabled=False)
    for i in range(n):
        if i and gap_s:
            time.sleep(gap_s)   # distinct publish times, for the seeks by time
        p.send(b"m-%d" % i)
    p.close()


def test_consecutive_seeks_by_id_and_time(client):
    topic = "persistent://public/default/seeks"
    consumer = client.subscribe(topic, "s", consumer_type=ConsumerType.Shared)
    _publish(client, topic, 30, gap_s=0.005)
    ids, times = [], []
    for _ in range(30):
        m = consumer.receive(TM)
        ids.append(m.message_id())
        times.append(m.publish_timestamp())
        consumer.acknowledge(m)
    consumer.seek(MessageId.earliest)
    assert consumer.receive(TM).data() == b"m-0"
    consumer.seek(ids[10])                      # a second seek is allowed: the first completed
    assert consumer.receive(TM).data() == b"m-11"
    consumer.seek(times[5])                     # by time after by id: from the time, not the id
    assert consumer.receive(TM).data() == b"m-5"


def test_reader_seeks_by_id_and_time(client):
    topic = "persistent://public/default/reader-seeks"
    _publish(client, topic, 20, gap_s=0.005)
    reader = client.create_reader(topic, MessageId.earliest)
    got = [reader.read_next(TM) for _ in range(20)]
    reader.seek(got[7].message_id())
    assert reader.read_next(TM).data() == b"m-8"
    reader.seek(got[12].publish_timestamp())
    assert [reader.read_next(TM).data() for _ in range(2)] == [b"m-12", b"m-13"]
    reader.seek(MessageId.earliest)
    assert reader.read_next(TM).data() == b"m-0"


def test_has_message_available_and_inclusive_latest(client):
    topic = "persistent://public/default/has-available"
    producer = client.create_producer(topic)           # creates the topic
    reader = client.create_reader(topic, MessageId.latest)
    assert not reader.has_message_available()
    mid = producer.send(b"only")
    assert reader.has_message_available()
    assert reader.read_next(TM).data() == b"only"
    assert not reader.has_message_available()
    inclusive = client.create_reader(topic, MessageId.latest, start_message_id_inclusive=True)
    assert inclusive.has_message_available()
    assert inclusive.read_next(TM).message_id() == mid


def test_a_producer_creates_its_topic(client, env):
    client.create_producer("persistent://public/default/made-by-producer")
    out = subprocess.run(argv("topics", "list", "public/default"), env=env, capture_output=True,
                         text=True, timeout=60)
    assert "persistent://public/default/made-by-producer" in out.stdout


def test_a_missing_namespace_is_topic_not_found(client):
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer("persistent://nope/nope/t")


def test_batch_index_acks_with_the_config_setting(store_path, tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("acknowledgmentAtBatchIndexLevelEnabled=true\n")
    s = start_in_process(store_path, configured(conf))
    c = pulsar.Client(s.url, operation_timeout_seconds=30)
    try:
        topic = "persistent://public/default/batch-index-acks"
        p = c.create_producer(topic, batching_enabled=True, batching_max_messages=100,
                              batching_max_publish_delay_ms=10000)
        consumer = c.subscribe(topic, "s", batch_index_ack_enabled=True)
        for i in range(5):
            p.send_async(b"b-%d" % i, None)
        p.flush()
        got = [consumer.receive(TM) for _ in range(5)]
        for m in got[:2]:
            consumer.acknowledge(m)
        consumer.close()   # the client flushes its grouped acks on close
        consumer = c.subscribe(topic, "s", batch_index_ack_enabled=True)
        again = [consumer.receive(TM).data() for _ in range(3)]
        assert again == [b"b-2", b"b-3", b"b-4"]
        with pytest.raises(pulsar.Timeout):
            consumer.receive(300)
    finally:
        c.close()
        s.stop()


def test_a_listener_the_broker_does_not_advertise_is_refused(served):
    c = pulsar.Client(served.url, listener_name="test", operation_timeout_seconds=5)
    try:
        with pytest.raises(pulsar.PulsarException):
            c.create_producer("persistent://public/default/via-listener")
    finally:
        c.close()


class _Raw:
    """A client speaking the protocol with pulsarctl's own frame codec, for what the Python
    client does not expose (ACTIVE_CONSUMER_CHANGE reaches only a Java/C++ event listener)."""

    def __init__(self, port):
        import socket

        from pulsarctl.serve import pulsar_api_pb2 as api
        self.api = api
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.send(type=api.BaseCommand.CONNECT, connect={"client_version": "raw",
                                                          "protocol_version": 20})
        assert self.until(api.BaseCommand.CONNECTED)

    def send(self, **fields):
        from google.protobuf import json_format

        from pulsarctl.serve import frames
        cmd = json_format.ParseDict({k: v for k, v in fields.items() if k != "type"},
                                    self.api.BaseCommand())
        cmd.type = fields["type"]
        self.sock.sendall(frames.command(cmd))

    def read(self):
        from pulsarctl.serve import frames
        head = self._exact(4)
        body = self._exact(frames.frame_size(head, 10 * 1024 * 1024))
        return frames.parse(body)[0]

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "the server closed the connection"
            buf += chunk
        return buf

    def until(self, type_):
        while True:
            cmd = self.read()
            if cmd.type == type_:
                return cmd

    def subscribe(self, topic, sub, consumer_id, name, sub_type="Failover", position="Latest"):
        self.send(type=self.api.BaseCommand.SUBSCRIBE, subscribe={
            "topic": topic, "subscription": sub, "subType": sub_type,
            "consumer_id": consumer_id, "request_id": consumer_id, "consumer_name": name,
            "initialPosition": position})


def test_failover_tells_each_consumer_whether_it_is_active(served, env):
    # A partition's active consumer is index % count of the sorted names (a non-partitioned
    # topic's comes from a hash ring): a-consumer is partition 0's while it is there.
    subprocess.run(argv("topics", "create-partitioned-topic", "persistent://public/default/fo",
                        "-p", "1"), env=env, check=True, capture_output=True, timeout=60)
    a = _Raw(served.port)
    api_t = a.api.BaseCommand
    topic = "persistent://public/default/fo-partition-0"
    a.subscribe(topic, "fo", 1, "a-consumer")
    first = a.until(api_t.ACTIVE_CONSUMER_CHANGE).active_consumer_change
    assert first.consumer_id == 1 and first.is_active
    b = _Raw(served.port)
    b.subscribe(topic, "fo", 2, "b-consumer")       # sorts after a-consumer: stays waiting
    second = b.until(api_t.ACTIVE_CONSUMER_CHANGE).active_consumer_change
    assert second.consumer_id == 2 and not second.is_active
    a.sock.close()                                    # the active one goes: b takes over
    third = b.until(api_t.ACTIVE_CONSUMER_CHANGE).active_consumer_change
    assert third.consumer_id == 2 and third.is_active
    b.sock.close()


def test_a_terminated_topic_tells_the_consumer_it_reached_the_end(served, env):
    topic = "persistent://public/default/ends"
    for args in (("produce", topic, "-m", "one", "-m", "two"), ("topics", "terminate", topic)):
        subprocess.run(argv(*args), env=env, check=True, capture_output=True, timeout=60)
    raw = _Raw(served.port)
    t = raw.api.BaseCommand
    raw.subscribe(topic, "s", 1, "c", sub_type="Exclusive", position="Earliest")
    raw.send(type=t.FLOW, flow={"consumer_id": 1, "messagePermits": 10})
    seen = []
    while True:
        cmd = raw.read()
        if cmd.type in (t.MESSAGE, t.REACHED_END_OF_TOPIC):
            seen.append(cmd.type)
        if cmd.type == t.REACHED_END_OF_TOPIC:
            break
    assert seen == [t.MESSAGE, t.MESSAGE, t.REACHED_END_OF_TOPIC]
    raw.sock.close()


def test_a_terminated_topic_refuses_a_producer_when_it_is_created(served, client, env):
    # Pulsar's PersistentTopic.addProducer refuses it (TopicTerminatedError); serve accepted it
    # and failed each send, and the client reconnected for ever.
    topic = "persistent://public/default/ended"
    for args in (("produce", topic, "-m", "one"), ("topics", "terminate", topic)):
        subprocess.run(argv(*args), env=env, check=True, capture_output=True, timeout=60)
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer(topic)


def test_a_topic_deleted_under_a_consumer_closes_it_and_the_client_comes_back(served, client,
                                                                               env):
    topic = "persistent://public/default/deleted-under"
    consumer = client.subscribe(topic, "s", consumer_name="keeper")
    producer = client.create_producer(topic)
    producer.send(b"before")
    assert consumer.receive(TM).data() == b"before"
    subprocess.run(argv("topics", "delete", topic, "--force"), env=env, check=True,
                   capture_output=True, timeout=60)
    # serve closes the consumer (CLOSE_CONSUMER); the client subscribes again, which makes the
    # topic and the subscription anew
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = subprocess.run(argv("topics", "subscriptions", topic), env=env, capture_output=True,
                           text=True, timeout=60)
        if r.returncode == 0 and "s" in r.stdout.split():
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the consumer did not come back after its topic was deleted")
    producer.send(b"after")      # the producer re-creates the topic; the consumer re-subscribed
    assert consumer.receive(TM).data() == b"after"
    # under its own name: serve let go of it when it closed it
    names = subprocess.run(argv("subscriptions", "consumers", topic, "s", "-o", "json"),
                           env=env, capture_output=True, text=True, timeout=60)
    assert '"keeper"' in names.stdout, names.stdout + names.stderr


def test_has_message_available_follows_what_the_reader_consumed_and_its_seeks(client):
    topic = "persistent://public/default/has-available-seek"
    producer = client.create_producer(topic)
    reader = client.create_reader(topic, MessageId.earliest)
    producer.send(b"m-0")
    assert reader.has_message_available()      # dispatched or not, not yet read
    reader.seek(MessageId.latest)
    assert not reader.has_message_available()
    producer.send(b"m-1")
    assert reader.has_message_available()
    assert reader.read_next(TM).data() == b"m-1"
    assert not reader.has_message_available()


def test_transactions_are_refused_as_pulsar_without_a_coordinator(served):
    raw = _Raw(served.port)
    t = raw.api.BaseCommand
    for type_, field in ((t.TC_CLIENT_CONNECT_REQUEST, "tcClientConnectRequest"),
                         (t.NEW_TXN, "newTxn"), (t.END_TXN, "endTxn")):
        raw.send(type=type_, **{field: {"request_id": 77}})
        err = raw.until(t.ERROR).error
        assert (err.request_id, err.error, err.message) == (
            77, raw.api.NotAllowedError, "Transactions are not enabled.")
    raw.sock.close()


def test_consumer_stats_over_the_wire(served, env):
    topic = "persistent://public/default/consumer-stats"
    subprocess.run(argv("produce", topic, "-m", "a", "-m", "b"), env=env, check=True,
                   capture_output=True, timeout=60)
    raw = _Raw(served.port)
    t = raw.api.BaseCommand
    raw.subscribe(topic, "s", 1, "statsy", sub_type="Shared", position="Earliest")
    raw.until(t.SUCCESS)
    raw.send(type=t.CONSUMER_STATS, consumerStats={"request_id": 9, "consumer_id": 1})
    st = raw.until(t.CONSUMER_STATS_RESPONSE).consumerStatsResponse
    assert not st.HasField("error_code")
    assert (st.request_id, st.consumerName, st.type, st.msgBacklog) == (9, "statsy", "Shared", 2)
    raw.send(type=t.CONSUMER_STATS, consumerStats={"request_id": 10, "consumer_id": 99})
    missing = raw.until(t.CONSUMER_STATS_RESPONSE).consumerStatsResponse
    assert missing.error_code == raw.api.ConsumerNotFound
    raw.sock.close()
