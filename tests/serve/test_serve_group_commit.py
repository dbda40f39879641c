"""Group commit (pulsarctl/serve/group_commit.py): SENDs that arrive during a commit share the
next one. With the real client: many producers on several connections and topics sending at
once, every message stored once, in each producer's order, with its own receipt. Without a
server: GroupCommit's batching and ordering, driven by a fake worker."""
from __future__ import annotations

import asyncio
import json
import subprocess
import threading

import pulsar

from procs import PATIENCE_S, argv, pok
from pulsarctl.serve.group_commit import GroupCommit

TOPICS = [f"persistent://public/default/gc-{i}" for i in range(3)]
CLIENTS, PRODUCERS, N = 3, 4, 150


def read_all(env, topic, n) -> list[dict]:
    r = pok(subprocess.run(argv("read", topic, "-n", str(n), "--start-message-id", "earliest",
                                "--until-end", "-o", "json"), env=env, capture_output=True,
                           text=True, timeout=PATIENCE_S))
    return json.loads(r.stdout)


def test_many_producers_sending_at_once_each_get_their_own_ordered_receipts(served, env):
    import logging

    log = logging.getLogger("gc-test")
    log.setLevel(logging.ERROR)
    clients = [pulsar.Client(served.url, operation_timeout_seconds=30, logger=log)
               for _ in range(CLIENTS)]
    receipts: dict[str, list] = {}
    lock = threading.Lock()
    try:
        producers = []
        for c, client in enumerate(clients):
            for p in range(PRODUCERS):
                name = f"c{c}p{p}"
                receipts[name] = []
                producers.append((name, client.create_producer(
                    TOPICS[(c + p) % len(TOPICS)], producer_name=name, batching_enabled=False,
                    max_pending_messages=N)))

        def callback(name, i):
            def done(res, mid):
                with lock:
                    receipts[name].append((i, res, (mid.ledger_id(), mid.entry_id())))
            return done

        # Interleaved: every producer has sends in flight at the same time.
        for i in range(N):
            for name, producer in producers:
                producer.send_async(f"{name}-{i}".encode(), callback(name, i))
        for _, producer in producers:
            producer.flush()
    finally:
        for client in clients:
            client.close()

    for name, got in receipts.items():
        assert [i for i, _, _ in got] == list(range(N)), f"{name}'s receipts out of order"
        assert {res for _, res, _ in got} == {pulsar.Result.Ok}
        ids = [mid for _, _, mid in got]
        assert ids == sorted(ids) and len(set(ids)) == N, f"{name}'s ids do not increase"

    stored: dict[str, list] = {}
    for topic in TOPICS:
        per_topic = (CLIENTS * PRODUCERS // len(TOPICS)) * N
        rows = read_all(env, topic, per_topic)
        assert len(rows) == per_topic, topic
        for r in rows:
            name, i = r["payload"].rsplit("-", 1)
            ledger, entry = (int(x) for x in r["messageId"].split(":")[:2])
            stored.setdefault(name, []).append((int(i), (ledger, entry)))
    for name, got in receipts.items():
        # stored once each, in send order, at the id its receipt named
        assert stored[name] == [(i, mid) for i, _, mid in got], name



def stats(env, topic) -> dict:
    r = pok(subprocess.run(argv("topics", "stats", topic, "-o", "json"), env=env,
                           capture_output=True, text=True, timeout=PATIENCE_S))
    return json.loads(r.stdout)


def test_a_batch_acked_whole_leaves_no_backlog_and_one_acked_in_part_comes_back(client, env):
    """The client acks a batch by its entry's id once all its messages are acked (serve acks
    the entry); a batch with messages left unacked is redelivered."""
    topic = TOPICS[0]
    producer = client.create_producer(topic, batching_enabled=True,
                                      batching_max_messages=50,
                                      batching_max_publish_delay_ms=1000)
    for i in range(100):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(int(PATIENCE_S * 1000)) for _ in range(100)]
    assert [m.data() for m in got] == [f"m{i}".encode() for i in range(100)]
    for m in got[:50] + got[50:97]:       # the first batch whole, the second but three
        consumer.acknowledge(m)
    consumer.close()   # flushes the grouped acks; what is unacked goes back
    sub = stats(env, topic)["subscriptions"]["s"]
    assert sub["msgBacklog"] == 1, sub   # entries: the second batch's
    again = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    back = [again.receive(int(PATIENCE_S * 1000)) for _ in range(50)]
    # Pulsar's default (no acks at batch index level): the batch comes back whole
    assert [m.data() for m in back] == [f"m{i}".encode() for i in range(50, 100)]
    for m in back:
        again.acknowledge(m)
    again.close()
    assert stats(env, topic)["subscriptions"]["s"]["msgBacklog"] == 0

# -- GroupCommit alone -------------------------------------------------------------------------
class FakeWorker:
    """Server.call's shape: fn runs when the test lets it (one call at a time, in order)."""

    def __init__(self):
        self.calls: list = []
        self.gates: list[asyncio.Event] = []

    async def call(self, fn, *args):
        gate = asyncio.Event()
        self.calls.append(args[0])
        self.gates.append(gate)
        await gate.wait()
        return fn(*args)


def publish_many(jobs):
    out = []
    for topic, messages, producer, _kw in jobs:
        if topic == "bad":
            out.append(ValueError("refused"))
        else:
            out.append((producer, list(messages)))
    return out


async def _until(pred):
    while not pred():
        await asyncio.sleep(0)


def test_sends_that_arrive_during_a_commit_share_the_next_one():
    async def main():
        w = FakeWorker()
        gc = GroupCommit(w.call, publish_many)
        first = gc.submit("a", [1], "p", {})
        await _until(lambda: len(w.calls) == 1)       # a lone send is committed at once
        later = [gc.submit("a", [2], "p", {}), gc.submit("bad", [0], "q", {}),
                 gc.submit("b", [3], "r", {}), gc.submit("a", [4], "p", {})]
        w.gates[0].set()
        assert await first == ("p", [1])
        await _until(lambda: len(w.calls) == 2)
        assert [job[0] for job in w.calls[1]] == ["a", "bad", "b", "a"]   # one commit, in order
        w.gates[1].set()
        assert await later[0] == ("p", [2])
        try:
            await later[1]
            raise AssertionError("the refused job succeeded")
        except ValueError:
            pass
        assert await later[2] == ("r", [3]) and await later[3] == ("p", [4])
        assert len(w.calls) == 2
        await gc.close()

    asyncio.run(main())


def test_a_failing_commit_fails_each_of_its_sends_and_the_next_one_runs():
    async def main():
        calls = []

        async def call(fn, jobs):
            calls.append(jobs)
            if len(calls) == 1:
                raise OSError("disk gone")
            return fn(jobs)

        gc = GroupCommit(call, publish_many)
        a, b = gc.submit("a", [1], "p", {}), gc.submit("a", [2], "p", {})
        for f in (a, b):
            try:
                await f
                raise AssertionError("a failed commit answered a send")
            except OSError:
                pass
        assert await gc.submit("a", [3], "p", {}) == ("p", [3])

    asyncio.run(main())
