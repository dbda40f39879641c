"""ACKs group-committed and never blocking their connection (issue 29 item 4), driven in
this process (serve_inproc.py) with the raw client: the worker's first ack commit is held on a
gate, so what the connection does meanwhile is seen, not timed."""
from __future__ import annotations

import threading

from procs import wait_for
from serve_inproc import gate_first, serving
from serve_raw import Raw, T, ack, command, send
from pulsarctl.serve import pulsar_api_pb2 as api

TOPIC = "persistent://public/default/acks"
N = 10


def _received(raw: Raw, n: int) -> list:
    """Produce n messages, subscribe (Shared), and return the n MESSAGE frames' ids."""
    raw.handshake()
    raw.producer(TOPIC)
    for i in range(n):
        raw.send(send(1, i, f"m-{i}".encode()))
    for _ in range(n):
        raw.expect(T.SEND_RECEIPT)
    raw.send(command(T.SUBSCRIBE, "subscribe", topic=TOPIC, subscription="s", subType=1,
                     consumer_id=7, request_id=100, initialPosition=1))
    raw.expect(T.SUCCESS)
    raw.send(command(T.FLOW, "flow", consumer_id=7, messagePermits=n))
    return [raw.expect(T.MESSAGE)[0].message.message_id for _ in range(n)]


def _backlog(it) -> int:
    return it.broker.topics.stats(TOPIC)["subscriptions"]["s"]["msgBacklog"]


def test_acks_that_arrive_during_a_commit_share_the_next_and_the_connection_reads_on(tmp_path):
    calls, gate = [], threading.Event()
    with serving(str(tmp_path / "store"), wrap=gate_first("ack_many", calls, gate)) as it:
        raw = Raw(it.port)
        ids = _received(raw, N)
        for i, mid in enumerate(ids):
            raw.send(ack(mid, 7, 1000 + i))
        raw.send(command(T.PING, "ping"))
        # The first commit is held in the worker, yet the PING behind ten ACKs is answered:
        # no ack waits in the connection's read loop.
        first = raw.read()
        assert first[0].type == T.PONG, T.Type.Name(first[0].type)
        gate.set()
        answered = sorted(raw.expect(T.ACK_RESPONSE)[0].ackResponse.request_id for _ in ids)
        assert answered == [1000 + i for i in range(N)]
        # Every ack committed, in fewer transactions than acks: those that came during the
        # held commit shared the next one.
        assert sum(calls) == N and len(calls) < N, calls
        assert _backlog(it) == 0
        raw.close()


def test_a_receipt_goes_out_only_after_its_ack_committed(tmp_path):
    calls, gate = [], threading.Event()
    with serving(str(tmp_path / "store"), wrap=gate_first("ack_many", calls, gate)) as it:
        raw = Raw(it.port)
        ids = _received(raw, 1)
        raw.send(ack(ids[0], 7, 5))
        raw.send(command(T.PING, "ping"))
        assert raw.read()[0].type == T.PONG   # and no ACK_RESPONSE before it: still held
        assert _backlog(it) == 1
        gate.set()
        assert raw.expect(T.ACK_RESPONSE)[0].ackResponse.request_id == 5
        assert _backlog(it) == 0
        raw.close()


def test_an_ack_that_fails_in_a_group_fails_alone(tmp_path):
    calls, gate = [], threading.Event()
    with serving(str(tmp_path / "store"), wrap=gate_first("ack_many", calls, gate)) as it:
        raw = Raw(it.port)
        ids = _received(raw, 3)
        raw.send(ack(ids[0], 7, 1))           # the held commit...
        wait_for(lambda: calls == [1], "the first ack's commit held in the worker")
        bogus = api.MessageIdData(ledgerId=ids[1].ledgerId, entryId=99_999)
        for rid, mid in ((2, ids[1]), (3, bogus), (4, ids[2])):
            raw.send(ack(mid, 7, rid))
        raw.send(command(T.PING, "ping"))
        assert raw.read()[0].type == T.PONG
        gate.set()
        got = {}
        for _ in range(4):
            r = raw.expect(T.ACK_RESPONSE)[0].ackResponse
            got[r.request_id] = r.HasField("error")
        assert got == {1: False, 2: False, 3: True, 4: False}
        assert calls == [1, 3]
        assert _backlog(it) == 0
        raw.close()


def test_a_redelivery_asked_after_an_ack_sees_the_ack(tmp_path):
    calls, gate = [], threading.Event()
    with serving(str(tmp_path / "store"), wrap=gate_first("ack_many", calls, gate)) as it:
        raw = Raw(it.port)
        ids = _received(raw, 3)
        raw.send(ack(ids[0], 7, 1))           # held in the worker
        raw.send(ack(ids[1], 7, 2))           # waiting for the next commit
        raw.send(command(T.PING, "ping"))
        assert raw.read()[0].type == T.PONG
        # The redelivery, behind both acks on the connection, waits for them to commit: the
        # client sent them first, so neither message comes back.
        raw.send(command(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, "redeliverUnacknowledgedMessages",
                         consumer_id=7))
        raw.send(command(T.FLOW, "flow", consumer_id=7, messagePermits=10))
        gate.set()
        assert sorted(raw.expect(T.ACK_RESPONSE)[0].ackResponse.request_id
                      for _ in range(2)) == [1, 2]
        assert raw.expect(T.MESSAGE)[0].message.message_id.entryId == ids[2].entryId
        raw.send(command(T.PING, "ping"))
        assert _until_pong(raw) == []   # nothing else was redelivered
        raw.close()


def _until_pong(raw: Raw) -> list[str]:
    """The types of the frames that come before the next PONG."""
    seen = []
    while (f := raw.read()) is not None and f[0].type != T.PONG:
        seen.append(T.Type.Name(f[0].type))
    assert f is not None, "the connection closed"
    return seen
