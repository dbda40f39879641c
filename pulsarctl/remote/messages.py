"""Messages of a remote Pulsar as pulsarctl's Message (pulsarctl/messages.py), so they print
as local ones do (the message records of CLI.md):

- from the pulsar-client library (consume, read): its accessors; the library does not give a
  received message's sequence id, so sequenceId is null;
- from the admin REST API (peek-messages, examine-message, get-message-by-id): one entry per
  answer, its metadata in X-Pulsar-* headers and, for a batch, the serialized batch in the
  body ([4-byte size][SingleMessageMetadata][payload] per message), split here as pulsar-admin
  splits it. REST does not say a message's redelivery count: it is null."""
from __future__ import annotations

import base64
import json
import struct

from pulsarctl.messages import Message, MessageId
from pulsarctl.units import parse_time_ms

_U32 = struct.Struct(">I")


# -- from the client library ---------------------------------------------------------------------
def from_client(m, subscription: str | None = None, consumer: str | None = None) -> Message:
    """A pulsar-client Message as pulsarctl's."""
    mid = m.message_id()
    ok = m.ordering_key()
    out = Message(m.publish_timestamp(), m.producer_name() or None, None, m.data(),
                  dict(m.properties()) or None, m.partition_key() or None,
                  ok.encode() if isinstance(ok, str) and ok else (ok or None),
                  m.event_timestamp() or 0, 0,
                  id=MessageId(mid.ledger_id(), mid.entry_id(), mid.partition(),
                               mid.batch_index()),
                  topic=m.topic_name(), redelivery_count_=m.redelivery_count(),
                  subscription=subscription, consumer_name=consumer)
    try:
        out.null_value_ = bool(m.has_null_value())
    except AttributeError:  # older libraries have no null values
        pass
    return out


# -- from the admin REST API ---------------------------------------------------------------------
def _iso_ms(text: str | None) -> int:
    if not text:
        return 0
    try:
        return parse_time_ms(text)
    except Exception:  # noqa: BLE001 - a header we cannot read is left out, not fatal
        return 0


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def single_metadata(buf: bytes) -> dict:
    """The fields of a SingleMessageMetadata (pulsar_api.proto) this needs: properties (1),
    partition_key (2), payload_size (3), event_time (5), ordering_key (7), sequence_id (8),
    null_value (9). Unknown fields are skipped by their wire type."""
    out: dict = {"properties": {}}
    i = 0
    while i < len(buf):
        tag, i = _varint(buf, i)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        if field == 1:
            kv = single_kv(value)
            out["properties"][kv[0]] = kv[1]
        elif field == 2:
            out["key"] = value.decode("utf-8", "replace")
        elif field == 3:
            out["size"] = value
        elif field == 5:
            out["event_time"] = value
        elif field == 7:
            out["ordering_key"] = bytes(value)
        elif field == 8:
            out["sequence_id"] = value
        elif field == 9:
            out["null_value"] = bool(value)
    return out


def single_kv(buf: bytes) -> tuple[str, str]:
    key = value = ""
    i = 0
    while i < len(buf):
        tag, i = _varint(buf, i)
        n, i = _varint(buf, i)
        text = buf[i:i + n].decode("utf-8", "replace")
        i += n
        if tag >> 3 == 1:
            key = text
        else:
            value = text
    return key, value


def from_rest(resp, topic: str, partition: int = -1) -> list[Message]:
    """The messages of one entry as the admin REST API answers it (a batch: each of them,
    with its batch index)."""
    h = resp.headers
    ledger, _, entry = (h.get("X-Pulsar-Message-ID") or "-1:-1").partition(":")
    lid, eid = int(ledger), int(entry)
    publish = _iso_ms(h.get("X-Pulsar-publish-time"))
    producer = h.get("X-Pulsar-producer-name") or None
    seq = int(h.get("X-Pulsar-sequence-id") or 0)
    deliver_at = _iso_ms(h.get("X-Pulsar-deliver-at-time"))
    batch = h.get("X-Pulsar-num-batch-message")
    if batch is None:
        try:
            props = json.loads(h.get("X-Pulsar-PROPERTY") or "{}")
        except ValueError:
            props = {}
        okey = h.get("X-Pulsar-Base64-ordering-key")
        m = Message(publish, producer, seq, resp.body, props or None,
                    h.get("X-Pulsar-partition-key"),
                    base64.b64decode(okey) if okey else None,
                    _iso_ms(h.get("X-Pulsar-event-time")), deliver_at,
                    id=MessageId(lid, eid, partition), topic=topic, redelivery_count_=None)
        m.null_value_ = h.get("X-Pulsar-null-value") == "true"
        return [m]
    out = []
    body, i, k = resp.body, 0, 0
    while i + 4 <= len(body):
        (n,) = _U32.unpack_from(body, i)
        meta = single_metadata(body[i + 4:i + 4 + n])
        i += 4 + n
        size = meta.get("size", 0)
        payload, i = body[i:i + size], i + size
        m = Message(publish, producer, meta.get("sequence_id", seq + k), payload,
                    meta["properties"] or None, meta.get("key"), meta.get("ordering_key"),
                    meta.get("event_time", 0), deliver_at,
                    id=MessageId(lid, eid, partition, k), topic=topic, redelivery_count_=None)
        m.null_value_ = meta.get("null_value", False)
        out.append(m)
        k += 1
    return out
