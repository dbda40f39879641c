"""`pulsarctl serve` driven by the real pulsar-client, over the same store as the CLI. serve
runs in the test process (the `served` fixture) except where the process itself is tested:
SIGTERM's exit code, and the command line's --config with what serve prints about it."""
from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import textwrap

import pulsar

from procs import PATIENCE_S, argv, pok, wait_for
from serve_procs import start_serve

T = "persistent://public/default/serve-t"
RECEIVE_MS = int(PATIENCE_S * 1000)


def cli(env, *args):
    return pok(subprocess.run(argv(*args), env=env, capture_output=True, text=True,
                              timeout=PATIENCE_S))


def stats(env, topic=T) -> dict:
    return json.loads(cli(env, "topics", "stats", topic, "-o", "json").stdout)


def test_produce_then_consume_with_the_real_client(client):
    producer = client.create_producer(T)
    sent = [producer.send(f"m{i}".encode(), properties={"i": str(i)}, partition_key=f"k{i}")
            for i in range(3)]
    consumer = client.subscribe(T, "s", initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(RECEIVE_MS) for _ in range(3)]
    assert [m.data() for m in got] == [b"m0", b"m1", b"m2"]
    assert [m.properties() for m in got] == [{"i": "0"}, {"i": "1"}, {"i": "2"}]
    assert [m.partition_key() for m in got] == ["k0", "k1", "k2"]
    assert [str(m.message_id()) for m in got] == [str(s) for s in sent]
    for m in got:
        consumer.acknowledge(m)


def test_a_batch_of_the_client_is_one_batch_entry_and_comes_back_whole(client, env):
    producer = client.create_producer(T, batching_enabled=True,
                                      batching_max_publish_delay_ms=50,
                                      compression_type=pulsar.CompressionType.LZ4)
    ids = []
    for i in range(5):
        producer.send_async(f"b{i}".encode(), lambda res, mid: ids.append((res, mid)))
    producer.flush()
    assert [r for r, _ in ids] == [pulsar.Result.Ok] * 5
    # One entry, as the CLI's batching makes it: the CLI reads five messages of one entry.
    assert json.loads(cli(env, "topics", "stats-internal", T, "-o", "json").stdout)[
        "numberOfEntries"] == 1
    rows = json.loads(cli(env, "read", T, "-n", "5", "--start-message-id", "earliest",
                          "-o", "json").stdout)
    assert [(r["messageId"], r["payload"]) for r in rows] == [
        (f"{ids[0][1].ledger_id()}:{ids[0][1].entry_id()}:-1:{i}", f"b{i}") for i in range(5)]
    consumer = client.subscribe(T, "s", initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(RECEIVE_MS) for _ in range(5)]
    assert [m.data() for m in got] == [f"b{i}".encode() for i in range(5)]
    for m in got:
        consumer.acknowledge(m)


def test_the_cli_and_the_client_see_each_others_messages(client, env):
    consumer = client.subscribe(T, "wire", initial_position=pulsar.InitialPosition.Earliest,
                                consumer_type=pulsar.ConsumerType.Shared)
    cli(env, "produce", T, "-m", "from-cli", "-k", "ck")
    m = consumer.receive(RECEIVE_MS)
    assert (m.data(), m.partition_key()) == (b"from-cli", "ck")
    consumer.acknowledge(m)
    client.create_producer(T).send(b"from-client", properties={"a": "b"})
    out = cli(env, "consume", T, "-s", "shell", "-p", "Earliest", "-n", "2", "-o", "json")
    rows = json.loads(out.stdout)
    assert [(r["payload"], r.get("properties") or {}) for r in rows] == [
        ("from-cli", {}), ("from-client", {"a": "b"})], rows


def test_acks_over_the_wire_leave_no_backlog(client, env):
    producer = client.create_producer(T)
    for i in range(4):
        producer.send(f"a{i}".encode())
    consumer = client.subscribe(T, "acked", initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(4):
        consumer.acknowledge(consumer.receive(RECEIVE_MS))
    consumer.close()  # the client flushes its grouped acks as it closes
    sub = stats(env)["subscriptions"]["acked"]
    assert sub["msgBacklog"] == 0, sub


def test_a_lost_connection_gives_its_unacked_messages_back(served, client, env):
    client.create_producer(T).send(b"held")
    script = textwrap.dedent(f"""
        import logging, sys, pulsar
        log = logging.getLogger("q"); log.setLevel(logging.ERROR)
        c = pulsar.Client({served.url!r}, logger=log)
        cons = c.subscribe({T!r}, "jobs", consumer_type=pulsar.ConsumerType.Shared,
                           initial_position=pulsar.InitialPosition.Earliest)
        m = cons.receive({RECEIVE_MS})
        print(m.data().decode(), flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        unacked = lambda: stats(env)["subscriptions"]["jobs"].get("unackedMessages")  # noqa: E731
        assert unacked() == 1
        proc.kill()   # no CLOSE_CONSUMER: the connection is simply lost
        proc.wait(timeout=PATIENCE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_for(lambda: unacked() == 0, "the lost consumer's message to be given back")
    again = client.subscribe(T, "jobs", consumer_type=pulsar.ConsumerType.Shared)
    m = again.receive(RECEIVE_MS)
    assert m.data() == b"held"
    again.acknowledge(m)


def test_a_malformed_frame_closes_only_its_connection(served, client):
    producer = client.create_producer(T)
    producer.send(b"before")
    for junk in (struct.pack(">I", 8) + b"\x00\x00\x00\x04junk",   # a command that does not parse
                 b"\xff\xff\xff\xff",                              # a frame of 4 GiB
                 struct.pack(">I", 2) + b"xx"):                    # shorter than its own sizes
        with socket.create_connection(("127.0.0.1", served.port), timeout=PATIENCE_S) as s:
            s.sendall(junk)
            assert s.recv(100) == b""   # closed by the server
    producer.send(b"after")
    consumer = client.subscribe(T, "after", initial_position=pulsar.InitialPosition.Earliest)
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(2)] == [b"before", b"after"]
    assert served.proc.poll() is None


def test_sigterm_stops_it_cleanly(served_process):
    assert served_process.stop() == 0


def test_readers_and_seek(client):
    producer = client.create_producer(T)
    ids = [producer.send(f"r{i}".encode()) for i in range(10)]
    reader = client.create_reader(T, pulsar.MessageId.earliest)
    assert [reader.read_next(RECEIVE_MS).data() for _ in range(3)] == [b"r0", b"r1", b"r2"]
    after = client.create_reader(T, ids[4])
    assert after.read_next(RECEIVE_MS).data() == b"r5"
    reader.seek(ids[7])
    assert reader.read_next(RECEIVE_MS).data() == b"r8"
    consumer = client.subscribe(T, "seeking", initial_position=pulsar.InitialPosition.Earliest)
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(3)] == [b"r0", b"r1", b"r2"]
    consumer.seek(ids[1])   # as Pulsar: the next message is the one after
    assert consumer.receive(RECEIVE_MS).data() == b"r2"
    consumer.seek(pulsar.MessageId.earliest)
    assert consumer.receive(RECEIVE_MS).data() == b"r0"


def test_config_file_and_flags(env, tmp_path):
    conf = tmp_path / "standalone.conf"
    conf.write_text("# Pulsar's format\nbindAddress=127.0.0.1\nbrokerServicePort=6650\n"
                    "maxMessageSize=1024\nclusterName=standalone\nzookeeperServers=\n")
    s = start_serve(env, "--config", str(conf))   # --port 0 overrides brokerServicePort
    try:
        assert s.url.startswith("pulsar://127.0.0.1:") and s.port != 6650
        c = pulsar.Client(s.url, operation_timeout_seconds=30)
        try:
            p = c.create_producer(T, batching_enabled=False)
            p.send(b"small")
            try:
                p.send(b"x" * 4096)
                raise AssertionError("a message over maxMessageSize was accepted")
            except pulsar.PulsarException:
                pass
        finally:
            c.close()
    finally:
        assert s.stop() == 0
    err = s.before + s.proc.stderr.read()
    # clusterName is used (the REST API's cluster); zookeeperServers is named once as ignored
    assert err.count("ignored") == 1 and "(not used by serve): zookeeperServers\n" in err, err


def test_a_regex_consumer_finds_the_namespaces_topics(client, env):
    import re

    cli(env, "produce", "persistent://public/default/rx-a", "-m", "a")
    cli(env, "produce", "persistent://public/default/rx-b", "-m", "b")
    consumer = client.subscribe(re.compile("persistent://public/default/rx-.*"), "rx",
                                initial_position=pulsar.InitialPosition.Earliest)
    assert sorted(consumer.receive(RECEIVE_MS).data() for _ in range(2)) == [b"a", b"b"]


def test_a_negative_ack_comes_back_counted(client):
    client.create_producer(T).send(b"retry me")
    consumer = client.subscribe(T, "nacking", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=100)
    m = consumer.receive(RECEIVE_MS)
    consumer.negative_acknowledge(m)
    again = consumer.receive(RECEIVE_MS)
    assert (again.data(), again.redelivery_count()) == (b"retry me", 1)
    consumer.acknowledge(again)


def test_an_exclusive_consumer_sees_redelivery_count_0_as_in_pulsar(client, env):
    """Pulsar's Exclusive and Failover dispatchers count no redeliveries, so a dead letter
    policy never fires there. A count sent anyway made the client, past its limit, ask for
    redelivery of everything at once, over and over (hundreds of deliveries a second)."""
    consumer = client.subscribe(T, "excl", initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=100,
                                dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
                                    max_redeliver_count=1))
    client.create_producer(T).send(b"stay")
    counts = []
    for _ in range(3):
        m = consumer.receive(RECEIVE_MS)
        counts.append((m.data(), m.redelivery_count()))
        if len(counts) < 3:
            consumer.negative_acknowledge(m)
    assert counts == [(b"stay", 0)] * 3
    consumer.acknowledge(m)
    assert stats(env)["subscriptions"]["excl"]["msgOutCounter"] == 3


def test_seek_by_publish_time(client):
    producer = client.create_producer(T)
    for i in range(5):
        producer.send(f"p{i}".encode())
    consumer = client.subscribe(T, "by-time", initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(RECEIVE_MS) for _ in range(5)]
    for m in got:
        consumer.acknowledge(m)
    consumer.seek(got[3].publish_timestamp())
    first = consumer.receive(RECEIVE_MS)
    # Served from the first message published at or after that time (the same millisecond may
    # hold earlier messages too).
    assert first.publish_timestamp() <= got[3].publish_timestamp()
    assert first.data() in [m.data() for m in got if m.publish_timestamp() ==
                            got[3].publish_timestamp()]
