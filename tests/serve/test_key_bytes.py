"""A key sent as bytes keeps being bytes through serve (issue 28 item 3, the Java scenario
schema_keyvalue): a Java keyBytes() (a KeyValue schema's SEPARATED key) or a Go binary key
comes as base64 text in partition_key with partition_key_b64_encoded set, in the
MessageMetadata or, in a batch, in each SingleMessageMetadata. Real Pulsar keeps the metadata
as sent, so the consumer's MESSAGE carries the flag and its client decodes the key; REST says
it with X-Pulsar-partition-key-b64-encoded. The real Python client cannot send such a key
(its partition_key is a string), so a raw connection does."""
from __future__ import annotations

import urllib.request

import pytest

from pulsarctl.serve import frames
from pulsarctl.serve import pulsar_api_pb2 as api
from procs import PATIENCE_S
from serve_raw import Raw, T, command

pytestmark = pytest.mark.serve

TOPIC = "persistent://public/default/key-bytes"
ID1, ID2 = "aWQtMQ==", "aWQtMg=="   # base64 of b"id-1", b"id-2"


def _send(raw: Raw, seq: int, meta: api.MessageMetadata, payload: bytes, n: int = 1):
    cmd = api.BaseCommand(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id, cmd.send.num_messages = 1, seq, n
    meta.producer_name, meta.sequence_id, meta.publish_time = "raw-1", seq, 1
    raw.send(frames.payload_command(cmd, meta, payload))
    got, _, _ = raw.expect(T.SEND_RECEIPT)
    return got.send_receipt.message_id


def _headers(served, mid) -> dict:
    url = (f"{served.http_url}/admin/v2/persistent/public/default/key-bytes/ledger/"
           f"{mid.ledgerId}/entry/{mid.entryId}")
    with urllib.request.urlopen(url, timeout=PATIENCE_S) as r:
        return {k.lower(): v for k, v in r.headers.items()}


def test_a_key_sent_as_bytes_reaches_the_consumer_with_its_flag(served):
    raw = Raw(served.port)
    try:
        raw.handshake()
        raw.producer(TOPIC)
        raw.send(command(T.SUBSCRIBE, "subscribe", topic=TOPIC, subscription="s", subType=0,
                         consumer_id=1, request_id=10, initialPosition=1))
        raw.expect(T.SUCCESS)
        plain = _send(raw, 0, api.MessageMetadata(partition_key=ID1,
                                                  partition_key_b64_encoded=True), b"v1")
        text = _send(raw, 1, api.MessageMetadata(partition_key=ID1), b"v2")
        smms = [api.SingleMessageMetadata(partition_key=ID2, partition_key_b64_encoded=True,
                                          sequence_id=2),
                api.SingleMessageMetadata(partition_key="text", sequence_id=3),
                api.SingleMessageMetadata(sequence_id=4)]
        batch = frames.batch_payload([(s, b"b%d" % i) for i, s in enumerate(smms)])
        batched = _send(raw, 2, api.MessageMetadata(num_messages_in_batch=3), batch, 3)
        raw.send(command(T.FLOW, "flow", consumer_id=1, messagePermits=100))
        _, m1, p1 = raw.expect(T.MESSAGE)
        _, m2, p2 = raw.expect(T.MESSAGE)
        _, m3, p3 = raw.expect(T.MESSAGE)
    finally:
        raw.close()
    assert (p1, m1.partition_key, m1.partition_key_b64_encoded) == (b"v1", ID1, True)
    # a key sent as text stays text: no flag, as before
    assert (p2, m2.partition_key, m2.HasField("partition_key_b64_encoded")) == \
        (b"v2", ID1, False)
    assert m3.num_messages_in_batch == 3
    out = frames.split_batch(p3, 3)
    assert [(s.partition_key if s.HasField("partition_key") else None,
             s.partition_key_b64_encoded, data) for s, data in out] == \
        [(ID2, True, b"b0"), ("text", False, b"b1"), (None, False, b"b2")]
    # REST, as Pulsar's generateResponseWithEntry: the key as sent, and the header saying so
    h = _headers(served, plain)
    assert h["x-pulsar-partition-key"] == ID1
    assert h["x-pulsar-partition-key-b64-encoded"] == "true"
    assert "x-pulsar-partition-key-b64-encoded" not in _headers(served, text)
    h = _headers(served, batched)   # a batch's entry: its first message's key
    assert h["x-pulsar-partition-key"] == ID2
    assert h["x-pulsar-partition-key-b64-encoded"] == "true"
