"""`read` on a partitioned topic reads every partition, as Pulsar's MultiTopicsReaderImpl does
(issue 27, item 4): each partition's messages in their order, the partitions merged by publish
time and then partition index; -m earliest/latest (each partition's), a message id refused as
PulsarClientImpl refuses it (exit 2, naming the partition to read); -n counts across
partitions; --until-end stops at each partition's last message. The reader of the Python API
does the same (client/reading.py)."""
from __future__ import annotations

import json

import pytest

from cli_helpers import assert_error, ok, rows
from pulsarctl.client import Client, reading
from pulsarctl.errors import InvalidValue
from pulsarctl.messages import MessageId

PT = "persistent://public/default/pt"


def part(message_id: str) -> int:
    return int(message_id.split(":")[2])


@pytest.fixture
def spread(cli):
    """Messages put on partitions by hand at known times of a simulated clock: (payload,
    partition) in the order of their publish times."""
    ok(cli("clock", "simulate", "--at", "2026-01-01T00:00:00Z"))
    ok(cli("topics", "create-partitioned-topic", "pt", "-p", "3"))
    order = []
    for step, (partition, payloads) in enumerate(
            [(1, ["a", "b"]), (0, ["c"]), (2, ["d", "e"]), (1, ["f"]), (0, ["g", "h"])]):
        args = [a for p in payloads for a in ("-m", p)]
        ok(cli("produce", f"pt-partition-{partition}", *args))
        order += [(p, partition) for p in payloads]
        ok(cli("clock", "advance", "1s"))
    return order


@pytest.mark.parametrize("read_ahead", [1000, 1])
def test_read_from_earliest_merges_the_partitions_by_publish_time(cli, spread, read_ahead,
                                                                   monkeypatch):
    # read_ahead 1: every partition's buffer runs out after each message (refilled before
    # the next pick, so the order is the same).
    monkeypatch.setattr(reading, "READ_AHEAD", read_ahead)
    r = ok(cli("read", "pt", "-m", "earliest", "-n", "0", "--until-end", "-o", "ndjson"))
    got = rows(r.stdout)
    assert [(m["payload"], part(m["messageId"])) for m in got] == spread
    # Each message says its partition, as a Pulsar reader's message does.
    assert {m["topic"] for m in got} == {f"{PT}-partition-{i}" for i in range(3)}
    # Another read gives the same sequence: the merge is deterministic.
    again = ok(cli("read", "pt", "-m", "earliest", "-n", "0", "--until-end", "-o", "ndjson"))
    assert again.stdout == r.stdout


def test_n_counts_across_partitions_and_ties_go_by_partition_index(cli, spread):
    r = ok(cli("read", "pt", "-m", "earliest", "-n", "4", "-o", "ndjson"))
    assert [m["payload"] for m in rows(r.stdout)] == [p for p, _ in spread[:4]]
    # Published together (one clock time): partition 0 first, then 1, 2.
    ok(cli("produce", "pt", "-m", "x", "-m", "y", "-m", "z"))
    r = ok(cli("read", "pt", "-m", "earliest", "-n", "0", "--until-end", "-o", "ndjson"))
    tail = rows(r.stdout)[len(spread):]
    assert [part(m["messageId"]) for m in tail] == sorted(part(m["messageId"]) for m in tail)
    assert len(tail) == 3


def test_latest_reads_nothing_old_and_inclusive_latest_each_partitions_last(cli, spread):
    r = ok(cli("read", "pt", "-m", "latest", "-n", "0", "--until-end", "-o", "ndjson"))
    assert r.stdout == ""
    r = ok(cli("read", "pt", "-m", "latest", "-n", "0", "--idle-timeout", "50ms"))
    assert r.stdout == ""
    r = ok(cli("read", "pt", "-m", "latest", "-i", "-n", "0", "--until-end", "-o", "ndjson"))
    last = {}
    for payload, partition in spread:
        last[partition] = payload
    got = rows(r.stdout)
    assert sorted((part(m["messageId"]), m["payload"]) for m in got) == sorted(last.items())


def test_json_is_one_array_and_fail_if_empty_counts_every_partition(cli, spread):
    r = ok(cli("read", "pt", "-m", "earliest", "-n", "3", "-o", "json"))
    assert [m["payload"] for m in json.loads(r.stdout)] == [p for p, _ in spread[:3]]
    r = cli("read", "pt", "-m", "latest", "-n", "0", "--until-end", "--fail-if-empty")
    assert r.exit_code == 6, r.stderr


def test_a_message_id_start_is_refused_naming_its_partition(cli, spread):
    first = rows(ok(cli("read", "pt-partition-2", "-m", "earliest", "-o", "ndjson")).stdout)[0]
    r = cli("read", "pt", "-m", first["messageId"])
    line = assert_error(r, 2, stdout_empty=True)
    assert "The partitioned topic startMessageId is illegal" in line
    assert f"pulsarctl read {PT}-partition-2 -m {first['messageId']}" in line
    # The partition itself reads from the id, as before.
    r = ok(cli("read", "pt-partition-2", "-m", first["messageId"], "-i", "-n", "2", "-o",
               "ndjson"))
    assert [m["payload"] for m in rows(r.stdout)] == ["d", "e"]


def test_a_non_durable_consumer_reads_every_partition(cli, spread):
    r = ok(cli("consume", "pt", "-s", "nd", "-m", "NonDurable", "-p", "Earliest", "-n", "0",
               "--idle-timeout", "50ms", "-o", "ndjson"))
    assert [m["payload"] for m in rows(r.stdout)] == [p for p, _ in spread]
    assert ok(cli("topics", "subscriptions", "pt")).stdout == ""


# -- the Python API's reader ------------------------------------------------------------------
@pytest.fixture
def client(store_path, clock):
    c = Client(store=store_path, clock=clock)
    yield c
    c.close()
    c.broker.close()


def test_the_python_reader_reads_every_partition_and_stops_at_the_end(client, clock):
    client.broker.topics.create_partitioned(PT, 2)
    p = client.create_producer(PT)
    for i in range(6):
        p.send(f"m{i}".encode())
        clock.advance(1000)
    reader = client.create_reader(PT, MessageId.earliest)
    reader.stop_at_last()
    p.send(b"after")                      # stored after the bound: not read
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(1000).data().decode())
    assert got == [f"m{i}" for i in range(6)]
    assert reader.topic() == PT

    reader.seek(MessageId.earliest)       # every partition starts again
    assert reader.read_next(1000).data() == b"m0"
    with pytest.raises(InvalidValue, match="earliest/latest"):
        reader.seek(MessageId(1, 0, 0))
    with pytest.raises(InvalidValue, match="startMessageId is illegal"):
        client.create_reader(PT, MessageId(1, 0, 0))


def test_a_following_reader_picks_up_partitions_added_later(client, clock, fake_time):
    client.broker.topics.create_partitioned(PT, 1)
    reader = client.create_reader(PT, MessageId.latest)
    assert not reader.has_message_available()
    client.broker.topics.update_partitioned(PT, 2)
    client.create_producer(f"{PT}-partition-1").send(b"new partition")
    fake_time.now += 2.0                  # past the reader's look for new partitions
    m = reader.read_next(1000)
    assert m.data() == b"new partition" and m.message_id().partition == 1
