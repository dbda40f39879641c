"""Frames out (Pulsar's PulsarCommandSender): the MESSAGE frames a consumer is sent, built
from stored messages and batches, and the message ids both ways between the store's MessageId
and the wire's MessageIdData. The connection writes them; nothing here touches a socket."""
from __future__ import annotations

import struct

from pulsarctl.broker.batches import Batch
from pulsarctl.entries import F_PRODUCER_NAME, F_PUBLISH_TIME, F_SCHEMA_VERSION, F_SEQUENCE_ID
from pulsarctl.messages import MessageId
from pulsarctl.serve import frames
from pulsarctl.serve import pulsar_api_pb2 as api

T = api.BaseCommand
_U64 = struct.Struct(">q")


def id_data(mid: MessageId, out=None) -> api.MessageIdData:
    d = out if out is not None else api.MessageIdData()
    d.ledgerId = mid.ledger_id % 2**64  # -1 (an empty topic's) as Pulsar writes it
    d.entryId = mid.entry_id % 2**64
    d.partition = mid.partition
    if mid.batch_index >= 0:
        d.batch_index = mid.batch_index
    return d


def signed(v: int) -> int:
    return v - 2**64 if v >= 2**63 else v


def message_id_of(d: api.MessageIdData) -> MessageId:
    ledger, entry = signed(d.ledgerId), signed(d.entryId)
    if ledger < 0 or ledger == 2**63 - 1:   # earliest, latest
        return MessageId.earliest if ledger < 0 else MessageId.latest
    return MessageId(ledger, entry, d.partition, d.batch_index)


def ack_set(indexes, size: int) -> list[int]:
    """java.util.BitSet.toLongArray of the indexes still to deliver, as signed longs."""
    words = [0] * ((size + 63) // 64)
    for i in indexes:
        words[i // 64] |= 1 << (i % 64)
    return [w - (1 << 64) if w >= 1 << 63 else w for w in words]


def _encryption_metadata(md: api.MessageMetadata, e: dict) -> None:
    for name, value, meta in e["keys"]:
        k = md.encryption_keys.add(key=name, value=value)
        for mk, mv in (meta or {}).items():
            k.metadata.add(key=mk, value=mv)
    if e.get("algo") is not None:
        md.encryption_algo = e["algo"]
    if e.get("param") is not None:
        md.encryption_param = e["param"]
    if e.get("compression"):
        md.compression = e["compression"]
    md.uncompressed_size = e.get("uncompressedSize") or 0
    if e.get("numMessages"):
        md.num_messages_in_batch = e["numMessages"]


def _metadata(m) -> api.MessageMetadata:
    md = api.MessageMetadata(producer_name=m.producer_name or "", sequence_id=max(m.sequence_id or 0, 0),
                             publish_time=m.publish_time or 0)
    if m.event_time:
        md.event_time = m.event_time
    if m.schema_version_ is not None:
        md.schema_version = _U64.pack(m.schema_version_)
    return md


def message_frame(consumer_id: int, m, counted: bool = True) -> bytes:
    cmd = api.BaseCommand(type=T.MESSAGE)
    cmd.message.consumer_id = consumer_id
    id_data(m.id, cmd.message.message_id)
    if counted:
        cmd.message.redelivery_count = m.redelivery_count_ or 0
    md = _metadata(m)
    _keys_and_properties(md, m)
    if m.deliver_at:
        md.deliver_at_time = m.deliver_at
    if m.null_value_:
        md.null_value = True
    payload = m.payload if m.payload is not None else b""
    md.uncompressed_size = len(payload)
    if m.encryption_:
        _encryption_metadata(md, m.encryption_)
    if m.chunk_ is not None:
        # A chunk as stored: its piece of the (compressed) payload, for the client to join.
        (uuid, cid, n, total), code, size = m.chunk_
        md.uuid, md.chunk_id, md.num_chunks_from_msg, md.total_chunk_msg_size = uuid, cid, n, total
        if code:
            md.compression = code
        md.uncompressed_size = size
    return frames.payload_command(cmd, md, payload)


def _keys_and_properties(md, m) -> None:
    """A message's properties, key and ordering key into a MessageMetadata or a batch's
    SingleMessageMetadata (the fields have the same names in both)."""
    for k, v in (m.properties_ or {}).items():
        md.properties.add(key=k, value=v)
    if m.key is not None:
        md.partition_key = m.key
        if m.key_b64_:
            md.partition_key_b64_encoded = True
    if m.ordering_key_ is not None:
        md.ordering_key = m.ordering_key_


def whole_batch_frame(consumer_id: int, b: Batch, counted: bool = True,
                      payload: bytes | None = None) -> bytes:
    """A Batch (a batch entry a fetch handed out whole) as one batch MESSAGE, built from its
    columns as batch_frame builds it from a Message per index: the batch runs to its highest
    index delivered, and an ack set leaves out the indexes not delivered (b.skip). payload:
    the same bytes, kept as the producer sent them (entry_cache.py), if they are."""
    rec, columns, skip = b.rec, b.columns, b.skip
    size = b.size
    first = 0
    if skip:
        sent = [i for i in range(size) if i not in skip]
        first, size = sent[0], sent[-1] + 1
    cmd = api.BaseCommand(type=T.MESSAGE)
    cmd.message.consumer_id = consumer_id
    id_data(b.id, cmd.message.message_id)
    if counted:
        cmd.message.redelivery_count = b.redelivery_count or 0
    if skip:
        cmd.message.ack_set.extend(ack_set(sent, size))
    seqs, events = columns[5], columns[4]
    first_seq = rec[F_SEQUENCE_ID]
    seq = seqs[first] if seqs else first_seq + first
    md = api.MessageMetadata(producer_name=rec[F_PRODUCER_NAME] or "",
                             sequence_id=max(seq or 0, 0), publish_time=rec[F_PUBLISH_TIME] or 0)
    if events and events[first]:
        md.event_time = events[first]
    sv = rec[F_SCHEMA_VERSION] if len(rec) > F_SCHEMA_VERSION else None
    if sv is not None:
        md.schema_version = _U64.pack(sv)
    md.num_messages_in_batch = size
    if payload is None:
        payload = frames.columns_payload(columns, size, first_seq, skip)
    md.uncompressed_size = len(payload)
    return frames.payload_command(cmd, md, payload)


def batch_frame(consumer_id: int, group, counted: bool = True,
                by_index: dict | None = None) -> bytes:
    """The delivered messages of one batch entry as one batch MESSAGE: the batch runs to the
    highest index delivered; indexes not delivered now (acked before, or for another consumer)
    are left out by the ack set. by_index: group by batch index, if the caller has it."""
    first = group[0]
    if by_index is None:
        by_index = {g.id.batch_index: g for g in group}
    size = max(by_index) + 1
    cmd = api.BaseCommand(type=T.MESSAGE)
    cmd.message.consumer_id = consumer_id
    id_data(MessageId(first.id.ledger_id, first.id.entry_id, first.id.partition),
             cmd.message.message_id)
    if counted:
        cmd.message.redelivery_count = max(g.redelivery_count_ or 0 for g in group)
    if len(by_index) < size:
        cmd.message.ack_set.extend(ack_set(by_index, size))
    md = _metadata(first)
    md.num_messages_in_batch = size
    one = frames.batch_message
    parts = []
    for i in range(size):
        g = by_index.get(i)
        if g is None:
            parts.append(one(b""))
            continue
        seq = g.sequence_id
        okey = g.ordering_key_
        parts.append(one(g.payload if g.payload is not None else b"",
                         seq if seq is not None and seq >= 0 else None, g.event_time,
                         g.properties_, g.key,
                         okey.encode() if isinstance(okey, str) else okey,
                         bool(g.null_value_), g.key_b64_))
    payload = b"".join(parts)
    md.uncompressed_size = len(payload)
    return frames.payload_command(cmd, md, payload)
