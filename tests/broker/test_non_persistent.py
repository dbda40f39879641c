"""Non-persistent topics (issue 7.5): never written to the store's disk (a tmpfs store beside
it), delivered only to consumers attached when published, every subscription type works,
stats and listings show them."""
from __future__ import annotations

import os

import pytest

import pulsarctl
from pulsarctl.broker import nonpersistent
from pulsarctl.errors import InvalidValue

from cli_helpers import assert_error, ok, pjson, rows

NP = "non-persistent://public/default/np"


pytestmark = pytest.mark.usefixtures("clean_np_tmpfs")


def _fetch_all(broker, sub, consumer, n=100):
    return [m.data() for m in broker.fetch(NP, sub, consumer, n)]


def test_messages_live_on_tmpfs_not_in_the_store(broker, store_path):
    broker.subscribe(NP, "s", "c1", "Exclusive")
    broker.publish(NP, [pulsarctl.messages.OutgoingMessage(b"needle-9f2c" * 10)])
    where = nonpersistent.path_for(store_path)
    if os.path.isdir("/dev/shm"):
        assert where.startswith("/dev/shm/")
    assert os.path.exists(os.path.join(where, "data.mdb"))
    with open(os.path.join(store_path, "data.mdb"), "rb") as f:
        assert b"needle-9f2c" not in f.read()
    with open(os.path.join(where, "data.mdb"), "rb") as f:
        assert b"needle-9f2c" in f.read()
    assert _fetch_all(broker, "s", "c1") == [b"needle-9f2c" * 10]


def test_only_consumers_attached_at_publish_get_messages(broker):
    out = pulsarctl.messages.OutgoingMessage
    broker.publish(NP, [out(b"before anyone")])
    broker.subscribe(NP, "s", "c1", "Shared", position="Earliest")  # Earliest is ignored
    broker.publish(NP, [out(b"m1"), out(b"m2")])
    assert _fetch_all(broker, "s", "c1") == [b"m1", b"m2"]
    broker.close_consumer(NP, "s", "c1")
    broker.publish(NP, [out(b"while nobody listens")])
    broker.subscribe(NP, "s", "c2", "Shared")
    broker.publish(NP, [out(b"m3")])
    assert _fetch_all(broker, "s", "c2") == [b"m3"]


@pytest.mark.parametrize("typ", ["Exclusive", "Shared", "Failover", "Key_Shared"])
def test_every_subscription_type_works(broker, typ):
    client = pulsarctl.Client(broker=broker)
    c = client.subscribe(NP, "s", consumer_type=getattr(pulsarctl.ConsumerType, typ.replace("_", "")))
    p = client.create_producer(NP)
    for i in range(5):
        p.send(f"m{i}".encode(), partition_key=f"k{i}")
    got = [c.receive(timeout_millis=1000) for _ in range(5)]
    assert sorted(m.data() for m in got) == [f"m{i}".encode() for i in range(5)]
    for m in got:
        c.acknowledge(m)
    c.close()
    st = broker.topics.stats(NP)
    assert st["msgInCounter"] == 5 and st["subscriptions"]["s"]["msgBacklog"] == 0
    client.close()


def test_cli_lists_and_stats_and_refuses_mixing(cli):
    ok(cli("produce", "t", "-m", "persistent"))
    ok(cli("topics", "create-subscription", NP, "-s", "s"))
    ok(cli("produce", NP, "-m", "x"))
    names = pjson(cli("topics", "list", "public/default", "-o", "json"))
    assert NP in names and "persistent://public/default/t" in names
    assert pjson(cli("topics", "stats", NP, "-o", "json"))["msgInCounter"] == 1
    (m,) = rows(ok(cli("topics", "peek-messages", NP, "-s", "s", "-o", "ndjson")).stdout)
    assert m["payload"] == "x" and m["topic"] == NP
    assert_error(cli("consume", "t", NP, "-s", "s"), 2)


def test_mixing_in_the_api_is_refused(broker):
    with pytest.raises(InvalidValue):
        broker.subscribe(["t", NP], "s", "c", "Shared")
