"""Offload (issue 6.5): closed ledgers go to Parquet files plus a manifest, leave LMDB only once
the files are complete, and readers, consumers, peek and stats see offloaded and local ledgers
as one topic. The Spark side (the data source and Spark's Parquet reader) is in
test_spark_offload.py."""
from __future__ import annotations

import json
import os

import pytest

pq = pytest.importorskip("pyarrow.parquet")  # the spark extra; CI installs it

import pulsarctl  # noqa: E402
from pulsarctl import offload  # noqa: E402
from pulsarctl.broker import topics  # noqa: E402
from pulsarctl.client import CompressionType  # noqa: E402
from pulsarctl.names import parse_topic  # noqa: E402
from store import codec  # noqa: E402

from cli_helpers import assert_error, ok, pjson  # noqa: E402

T = "persistent://public/default/tier"
PER_LEDGER = 10


def lmdb_entries(broker) -> int:
    """The entries stored in LMDB (a block of entries under one key counts each of them)."""
    with broker.env._env.begin(db=broker.env.db["entries"]) as txn:
        return sum(codec.block_count(v) if codec.is_block(v) else 1
                   for _k, v in txn.cursor(db=broker.env.db["entries"]))


def fill(broker, n=35, topic=T):
    """n messages, PER_LEDGER per ledger; every 7th compressed, with keys and properties, and
    one chunked message (maxMessageSize 200) inside the second ledger."""
    broker.policies.update_setting("managedLedgerMaxEntriesPerLedger", str(PER_LEDGER))
    broker.policies.update_setting("maxMessageSize", "200")
    broker.ledgers.rollover_entries = PER_LEDGER
    c = pulsarctl.Client(broker=broker)
    plain = c.create_producer(topic, producer_name="plain")
    packed = c.create_producer(topic, producer_name="packed",
                               compression_type=CompressionType.LZ4)
    big = c.create_producer(topic, producer_name="big", chunking_enabled=True)
    for i in range(n):
        if i == 12:
            big.send(bytes(range(256)) * 3)  # 768 bytes: 4 chunks
        p = packed if i % 7 == 0 else plain
        p.send(f"m{i}".encode() * 3, properties={"i": str(i)}, partition_key=f"k{i % 3}")
    c.close()


def read_all(broker, topic=T):
    c = pulsarctl.Client(broker=broker)
    r = c.create_reader(topic, pulsarctl.MessageId.earliest)
    out = []
    while r.has_message_available():
        m = r.read_next(timeout_millis=0)
        out.append((str(m.message_id()), m.data(), m.properties(), m.partition_key()))
    c.close()
    return out


@pytest.fixture
def filled(broker):
    fill(broker)
    broker.subscription(T, "s").create("earliest")
    return broker


def test_offload_moves_closed_ledgers_to_parquet_and_reads_stay_the_same(filled, tmp_path):
    b = filled
    before = read_all(b)
    assert len(before) == 36
    local_before = lmdb_entries(b)
    r = b.topics.offload(T, str(tmp_path / "tier"), size_threshold=0)
    # Every closed ledger (the open one stays), all of their entries.
    info = b.topics.internal_stats(T)
    closed = [x for x in info["ledgers"][:-1]]
    assert [d["ledgerId"] for d in r["ledgers"]] == [x["ledgerId"] for x in closed]
    assert all(x["offloaded"] for x in closed) and not info["ledgers"][-1]["offloaded"]
    assert r["entries"] == sum(x["entries"] for x in closed) == 30  # 35 + 4 chunks: 10/10/10/9
    assert lmdb_entries(b) == local_before - r["entries"]
    d = tmp_path / "tier" / "public" / "default" / "tier"
    files = sorted(p.name for p in d.glob("ledger-*.parquet"))
    assert files == sorted(f"ledger-{x['ledgerId']}.parquet" for x in closed)
    assert oct(os.stat(d / files[0]).st_mode & 0o777) == "0o600"
    man = json.loads((d / "manifest.json").read_text())
    assert [x["ledgerId"] for x in man["ledgers"]] == [x["ledgerId"] for x in closed]
    assert man["topic"] == T and man["visibleColumn"] == "__visible"
    # The same messages, ids, properties and keys, compressed and chunked ones included.
    assert read_all(b) == before
    # And through a fresh Broker (another process would open the store like this).
    b2 = pulsarctl.broker.Broker(b.path)
    try:
        assert read_all(b2) == before
    finally:
        b2.close()
    st = b.topics.stats(T)
    assert st["offloadedStorageSize"] == sum(x["size"] for x in closed)
    assert st["subscriptions"]["s"]["msgBacklog"] == 39  # entries, as Pulsar counts


def test_the_parquet_rows_are_the_messages_spark_sees(filled, tmp_path):
    b = filled
    b.topics.offload(T, str(tmp_path / "tier"), size_threshold=0)
    d = tmp_path / "tier" / "public" / "default" / "tier"
    rows = []
    for f in sorted(d.glob("ledger-*.parquet"), key=lambda p: int(p.stem.split("-")[1])):
        rows += pq.read_table(str(f)).to_pylist()
    visible = [r for r in rows if r["__visible"]]
    assert len(rows) == 30 and len(visible) == 27  # 3 of the 4 chunks are not messages
    m12 = next(r for r in visible if r["__producerName"] == "big")
    assert m12["value"] == bytes(range(256)) * 3
    m7 = next(r for r in visible if r["__messageProperties"] == [("i", "7")])
    assert m7["value"] == b"m7m7m7" and m7["__key"] == "k1"  # decompressed
    assert m7["__topic"] == T
    first = visible[0]
    assert first["__messageId"] == f"{first['__ledgerId']}:{first['__entryId']}:-1"


def test_consumers_ack_nack_and_retention_over_offloaded_ledgers(filled, tmp_path, clock):
    b = filled
    b.topics.offload(T, str(tmp_path / "tier"), size_threshold=0)
    c = pulsarctl.Client(broker=b)
    con = c.subscribe(T, "s", consumer_type=pulsarctl.ConsumerType.Shared,
                      negative_ack_redelivery_delay_ms=1000)
    first = con.receive(timeout_millis=0)
    con.negative_acknowledge(first)
    got = [con.receive(timeout_millis=0) for _ in range(35)]
    for m in got:
        con.acknowledge(m)
    clock.advance(1500)
    again = con.receive(timeout_millis=0)
    assert again.message_id() == first.message_id() and again.data() == first.data()
    assert again.redelivery_count() == 1
    con.acknowledge(again)
    c.close()
    assert b.topics.stats(T)["subscriptions"]["s"]["msgBacklog"] == 0
    # Nothing retained: the acknowledged offloaded ledgers are trimmed with the rest.
    b.chores.enforce_policies()
    info = b.topics.internal_stats(T)
    assert not any(x["offloaded"] for x in info["ledgers"])
    st = b.topics.offload_status(T)["partitions"][0]
    assert st["offloadedLedgers"] == []


def test_size_threshold_and_older_than(broker, tmp_path, clock):
    broker.policies.update_setting("managedLedgerMaxEntriesPerLedger", "10")
    broker.ledgers.rollover_entries = 10
    p = pulsarctl.Client(broker=broker).create_producer(T)
    for i in range(40):
        p.send(b"x" * 100)
        clock.advance(60_000)  # a minute between messages: ledgers span 10 minutes
    sizes = [x["size"] for x in broker.topics.internal_stats(T)["ledgers"]]
    # Keep at most two ledgers' bytes locally: the two oldest closed ones go.
    r = broker.topics.offload(T, str(tmp_path / "a"), size_threshold=sum(sizes[-2:]))
    assert [x["ledgerId"] for x in r["ledgers"]] == [
        x["ledgerId"] for x in broker.topics.internal_stats(T)["ledgers"][:2]]
    # Again: nothing more to do.
    assert broker.topics.offload(T, str(tmp_path / "a"), size_threshold=sum(sizes[-2:]))["ledgers"] == []
    # Older than 15 minutes: the third ledger ended (the fourth began) 10 minutes ago.
    assert broker.topics.offload(T, str(tmp_path / "a"), older_than_ms=15 * 60_000)["ledgers"] == []
    r = broker.topics.offload(T, str(tmp_path / "a"), older_than_ms=9 * 60_000)
    assert len(r["ledgers"]) == 1
    # The open ledger never goes.
    broker.topics.offload(T, str(tmp_path / "a"), size_threshold=0)
    assert not broker.topics.internal_stats(T)["ledgers"][-1]["offloaded"]


def test_a_failed_commit_leaves_the_store_whole(filled, tmp_path, monkeypatch):
    b = filled
    before = read_all(b)
    n = lmdb_entries(b)

    def boom(fn, *a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(b, "_write", boom)
    with pytest.raises(OSError):
        b.topics.offload(T, str(tmp_path / "tier"), size_threshold=0)
    monkeypatch.undo()
    assert lmdb_entries(b) == n
    assert not any(x["offloaded"] for x in b.topics.internal_stats(T)["ledgers"])
    assert read_all(b) == before
    # The spare files are overwritten by the next run, which succeeds.
    assert b.topics.offload(T, str(tmp_path / "tier"), size_threshold=0)["entries"] == 30
    assert read_all(b) == before


def test_a_missing_file_is_a_clear_error(filled, tmp_path, cli, store_path):
    b = filled
    r = b.topics.offload(T, str(tmp_path / "tier"), size_threshold=0)
    os.remove(r["ledgers"][0]["file"])
    offload._CACHE.clear()
    b.close()
    line = assert_error(cli("read", "tier", "-m", "earliest", "-n", "1"), 1)
    assert "offloaded" in line and r["ledgers"][0]["file"] in line


def test_cli(cli, tmp_path, store_path):
    ok(cli("brokers", "update-dynamic-config", "--config", "managedLedgerMaxEntriesPerLedger",
           "--value", "5"))
    ok(cli("produce", "c", "-m", "hello", "-n", "12"))
    to = str(tmp_path / "t")
    r = pjson(cli("topics", "offload", "c", "--to", to, "-s", "0", "-o", "json"))
    assert r["entries"] == 10 and len(r["ledgers"]) == 2
    s = pjson(cli("topics", "offload-status", "c", "-o", "json"))
    assert s["partitions"][0]["offloadedEntries"] == 10
    text = ok(cli("topics", "offload", "c", "--to", to, "-s", "0")).stdout
    assert "nothing to offload" in text
    out = ok(cli("read", "c", "-m", "earliest", "-n", "12", "-o", "ndjson")).stdout
    assert out.count("hello") == 12
    # Mistakes: one line, a documented code.
    assert "--size-threshold or --older-than" in assert_error(
        cli("topics", "offload", "c", "--to", to), 2)
    assert_error(cli("topics", "offload", "c", "--to", to, "-s", "lots"), 2)
    assert_error(cli("topics", "offload", "c", "--to", to, "--older-than", "-3d"), 2)
    assert_error(cli("topics", "offload", "nope", "--to", to, "-s", "0"), 3)
    assert_error(cli("topics", "offload", "c", "--to", "", "-s", "0"), 2)
    (tmp_path / "file").write_text("x")
    assert_error(cli("topics", "offload", "c", "--to", str(tmp_path / "file"), "-s", "0"), 2)
    assert_error(cli("topics", "offload", "non-persistent://public/default/np", "--to", to,
                     "-s", "0"), 2)


def test_partitioned_topic_offloads_every_partition(broker, tmp_path):
    broker.policies.update_setting("managedLedgerMaxEntriesPerLedger", "4")
    broker.ledgers.rollover_entries = 4
    broker.topics.create_partitioned("pt", 2)
    p = pulsarctl.Client(broker=broker).create_producer("pt")
    for i in range(20):
        p.send(b"v%d" % i)
    r = broker.topics.offload("pt", str(tmp_path / "x"), size_threshold=0)
    assert {d["topic"] for d in r["ledgers"]} == {
        "persistent://public/default/pt-partition-0", "persistent://public/default/pt-partition-1"}
    for part in (0, 1):
        assert (tmp_path / "x" / "public" / "default" / f"pt-partition-{part}" /
                "manifest.json").exists()
    st = broker.topics.offload_status("pt")
    assert len(st["partitions"]) == 2
    t = parse_topic("pt-partition-0")
    assert broker._read(lambda ctx: topics.lookup(ctx, t).first_offset) == 0


def test_batched_entries_offload_and_read_back_exactly(broker, tmp_path):
    broker.policies.update_setting("managedLedgerMaxEntriesPerLedger", "3")
    broker.ledgers.rollover_entries = 3
    c = pulsarctl.Client(broker=broker)
    p = c.create_producer(T, batching_enabled=True, batching_max_messages=5,
                          batching_max_publish_delay_ms=60_000)
    for i in range(40):
        p.send_async(b"b%d" % i, properties={"i": str(i)})
    p.flush()
    c.close()
    before = read_all(broker)
    assert len(before) == 40 and before[0][0].endswith(":0")
    r = broker.topics.offload(T, str(tmp_path / "tier"), size_threshold=0)
    assert r["entries"] == 6  # 8 batch entries in ledgers of 3: two closed ledgers
    assert read_all(broker) == before
    d = tmp_path / "tier" / "public" / "default" / "tier"
    rows = []
    for f in sorted(d.glob("ledger-*.parquet")):
        rows += pq.read_table(str(f)).to_pylist()
    assert len(rows) == 30 and all(x["__visible"] for x in rows)
    assert sum(x["__entry"] is not None for x in rows) == 6
    assert sorted(x["__messageId"] for x in rows) == sorted(m[0] for m in before[:30])
