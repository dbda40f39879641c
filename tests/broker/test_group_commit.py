"""Broker.publish_many: several producers' sends in one write transaction (serve's group
commit), each job undone alone when it fails. Real LMDB in tmp_path."""
from __future__ import annotations

from pulsarctl.broker import Broker, policies as P
from pulsarctl.errors import InvalidValue, MessageTooLarge, TopicTerminated
from pulsarctl.broker.backlog_quota import BacklogQuotaExceeded
from pulsarctl.messages import OutgoingMessage

NS = "public/default"


def msgs(*payloads, key=None):
    return [OutgoingMessage(p.encode(), key=key) for p in payloads]


def stored(broker, topic) -> list[str]:
    got, _next, _last = broker.read_entries(topic, 0, 1000)
    return [m.data().decode() for m in got]


def test_jobs_on_several_topics_commit_together_in_order(broker):
    broker.topics.create_partitioned("p", 2)
    results = broker.publish_many([
        ("a", msgs("a0", "a1"), "prod-a", {}),
        ("b", msgs("b0"), "prod-b", {}),
        ("a", msgs("a2"), "prod-a", {}),
        ("p", msgs("p0", key="k"), "prod-p", {}),
    ])
    assert [r[0] for r in results] == ["prod-a", "prod-b", "prod-a", "prod-p"]
    a_ids = results[0][1] + results[2][1]
    assert a_ids == sorted(a_ids) and len(set(a_ids)) == 3
    assert stored(broker, "a") == ["a0", "a1", "a2"]
    assert stored(broker, "b") == ["b0"]
    part = results[3][1][0].partition
    assert stored(broker, f"p-partition-{part}") == ["p0"]
    # what publish would have returned: the same shape, a later id on the same topic
    name, ids = broker.publish("a", msgs("a3"), "prod-a")
    assert name == "prod-a" and ids[0] > a_ids[-1]


def test_a_failing_job_is_undone_alone(broker):
    broker.publish("done", msgs("x"))
    broker.topics.terminate("done")
    broker.topics.create_partitioned("half", 2)
    broker.topics.terminate("half-partition-1")
    broker.subscribe("full", "s", "c", "Shared", "Earliest")
    broker.publish("full", msgs("backlog"))
    broker.policies.set("topic", "full", P.BACKLOG_QUOTA, {"destination_storage": {
        "limitSize": 1, "limitTime": -1, "policy": "producer_exception"}})
    limit = broker.policies.settings()["maxMessageSize"]

    def to_partition(n):   # the key is the partition
        return lambda key, now: int(key)

    results = broker.publish_many([
        ("ok", msgs("o0"), "p1", {}),
        ("done", msgs("late"), "p2", {}),
        # partition 0 takes its message before partition 1 refuses: both are undone
        ("half", msgs("h0", key="0") + msgs("h1", key="1"), "p3", {"route": to_partition}),
        ("full", msgs("over"), "p4", {}),
        ("big", [OutgoingMessage(b"x" * (limit + 1))], "p5", {}),
        ("persistent://no/such/topic/name", msgs("bad"), "p6", {}),
        ("ok", msgs("o1"), "p1", {}),
    ])
    assert isinstance(results[1], TopicTerminated)
    assert isinstance(results[2], TopicTerminated)
    assert isinstance(results[3], BacklogQuotaExceeded)
    assert isinstance(results[4], MessageTooLarge)
    assert isinstance(results[5], InvalidValue)
    assert results[0][1][0] < results[6][1][0]
    assert stored(broker, "ok") == ["o0", "o1"]
    assert stored(broker, "done") == ["x"]
    assert stored(broker, "half-partition-0") == []
    assert stored(broker, "full") == ["backlog"]
    assert "big" not in " ".join(broker.topics.list(NS))


def test_the_batch_survives_a_reopen(store_path, clock):
    b = Broker(store_path, clock)
    b.publish_many([("t", msgs("one"), "p", {}), ("u", msgs("two"), "q", {})])
    b.close()
    b = Broker(store_path, clock)
    try:
        assert stored(b, "t") == ["one"] and stored(b, "u") == ["two"]
    finally:
        b.close()


def test_a_full_map_grows_and_runs_every_job_again(tmp_path, clock):
    b = Broker(str(tmp_path / "small"), clock, map_size=1 << 20)
    try:
        big = [OutgoingMessage(b"y" * 200_000) for _ in range(3)]
        results = b.publish_many([(f"t{i}", list(big), "p", {}) for i in range(4)])
        assert all(not isinstance(r, Exception) for r in results)
        assert [len(stored(b, f"t{i}")) for i in range(4)] == [3, 3, 3, 3]
    finally:
        b.close()


def test_non_persistent_jobs_go_to_their_own_store(broker):
    results = broker.publish_many([
        ("non-persistent://public/default/np", msgs("n0"), "p", {}),
        ("persistent://public/default/pp", msgs("p0"), "p", {}),
    ])
    assert all(not isinstance(r, Exception) for r in results)
    assert stored(broker, "pp") == ["p0"]


def test_a_clients_publish_time_is_kept_when_the_store_clock_allows_it(broker):
    """A wire producer stamps its messages (Pulsar keeps that time; seeks by time read it);
    one from the last 10 s of the store's clock is kept, any other gets the store's."""
    now = broker.clock.now()
    broker.publish_many([
        ("t", msgs("recent"), "p", {"publish_time": now - 3}),
        ("t", msgs("future"), "p", {"publish_time": now + 60_000}),
        ("t", msgs("ancient"), "p", {"publish_time": now - 3_600_000}),
        ("t", msgs("unset"), "p", {"publish_time": 0}),
    ])
    got, _next, _last = broker.read_entries("t", 0, 10)
    assert [(m.data(), m.publish_time) for m in got] == [
        (b"recent", now - 3), (b"future", now), (b"ancient", now), (b"unset", now)]


# -- Broker.ack_many: serve's group commit of ACKs ------------------------------------------------
def _delivered(broker, topic, sub, n):
    broker.subscribe(topic, sub, "c", "Shared", "Earliest")
    broker.publish(topic, msgs(*[f"m{i}" for i in range(n)]), "p")
    return [m.id for m in broker.fetch(topic, sub, "c", n)]


def test_acks_of_several_subscriptions_commit_together_and_a_bad_one_fails_alone(broker):
    a = _delivered(broker, "ta", "s", 3)
    b = _delivered(broker, "tb", "s", 2)
    bogus = type(a[0])(a[0].ledger_id, 9_999, -1)
    results = broker.ack_many([
        ("ta", "s", [a[0]], False),
        ("tb", "s", [b[0], b[1]], False),
        ("ta", "s", [bogus], False),          # names no message: undone alone
        ("ta", "s", [a[1], a[2]], True),      # cumulative on Shared: refused, alone
        ("ta", "s", [a[1], a[2]], False),
    ])
    assert results[0] == 1 and results[1] == 2 and results[4] == 2
    assert isinstance(results[2], Exception) and isinstance(results[3], Exception)
    assert broker.topics.stats("ta")["subscriptions"]["s"]["msgBacklog"] == 0
    assert broker.topics.stats("tb")["subscriptions"]["s"]["msgBacklog"] == 0


def test_acks_on_a_non_persistent_topic_go_to_its_own_store(broker):
    ids = _delivered(broker, "non-persistent://public/default/np-ack", "s", 2)
    assert broker.ack_many([("non-persistent://public/default/np-ack", "s", ids, False)]) == [2]
