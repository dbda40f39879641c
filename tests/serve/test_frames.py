"""frames.py: what it writes it reads back; whatever bytes come, it answers with a frame or
ProtocolError, nothing else (hypothesis)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from pulsarctl.errors import ProtocolError
from pulsarctl.serve import frames
from pulsarctl.serve import pulsar_api_pb2 as api

LIMIT = 5 * 1024 * 1024 + frames.PADDING


def _send(payload=b"hello", seq=7):
    cmd = api.BaseCommand(type=api.BaseCommand.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = 1, seq
    meta = api.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=0)
    return frames.payload_command(cmd, meta, payload)


def test_a_simple_command_reads_back():
    cmd = api.BaseCommand(type=api.BaseCommand.PING)
    cmd.ping.SetInParent()
    raw = frames.command(cmd)
    assert frames.frame_size(raw[:4], LIMIT) == len(raw) - 4
    got, meta, payload = frames.parse(raw[4:])
    assert (got.type, meta, payload) == (api.BaseCommand.PING, None, b"")


def test_a_payload_command_reads_back_and_its_checksum_is_checked():
    raw = _send()
    cmd, meta, payload = frames.parse(raw[4:])
    assert (cmd.send.sequence_id, meta.producer_name, payload) == (7, "p", b"hello")
    bad = raw[:-1] + bytes([raw[-1] ^ 1])
    with pytest.raises(ProtocolError, match="checksum"):
        frames.parse(bad[4:])


_text = st.text(max_size=20)


@settings(max_examples=200, deadline=None)
@given(payload=st.binary(max_size=300), seq=st.none() | st.integers(0, 2**64 - 1),
       event_time=st.integers(0, 2**64 - 1),
       properties=st.none() | st.dictionaries(_text, _text, max_size=3),
       key=st.none() | _text, ordering_key=st.none() | st.binary(max_size=20))
def test_batch_message_writes_what_protobuf_writes(payload, seq, event_time, properties, key,
                                                    ordering_key):
    """The hand-written SingleMessageMetadata is the protobuf's, byte for byte."""
    smm = api.SingleMessageMetadata(payload_size=len(payload))
    for k, v in (properties or {}).items():
        smm.properties.add(key=k, value=v)
    if key is not None:
        smm.partition_key = key
    if event_time:
        smm.event_time = event_time
    if ordering_key is not None:
        smm.ordering_key = ordering_key
    if seq is not None:
        smm.sequence_id = seq
    raw = smm.SerializeToString()
    got = frames.batch_message(payload, seq, event_time, properties, key, ordering_key)
    assert got == struct.pack(">I", len(raw)) + raw + payload
    ((back, data),) = frames.split_batch(got, 1)
    assert (back, data) == (smm, payload)


def test_a_batch_payload_splits_into_its_messages():
    msgs = [(api.SingleMessageMetadata(payload_size=0, partition_key=f"k{i}"), f"m{i}".encode())
            for i in range(3)]
    out = frames.split_batch(frames.batch_payload(msgs), 3)
    assert [(s.partition_key, p) for s, p in out] == [("k0", b"m0"), ("k1", b"m1"), ("k2", b"m2")]
    with pytest.raises(ProtocolError):
        frames.split_batch(frames.batch_payload(msgs), 4)


def test_sizes_out_of_bounds_are_refused():
    for total in (0, 3, LIMIT + 1, 2**32 - 1):
        with pytest.raises(ProtocolError):
            frames.frame_size(struct.pack(">I", total), LIMIT)


@settings(max_examples=2000)
@given(st.binary(max_size=200) | st.builds(lambda cut, junk: _send()[4:][:cut] + junk,
                                           st.integers(0, 60), st.binary(max_size=20)))
def test_any_bytes_parse_or_raise_protocol_error(data):
    try:
        frames.parse(data)
    except ProtocolError:
        pass


@settings(max_examples=500)
@given(st.binary(max_size=300), st.integers(0, 10))
def test_any_batch_splits_or_raises_protocol_error(data, count):
    try:
        frames.split_batch(data, count)
    except ProtocolError:
        pass


def test_a_command_without_its_required_fields_is_refused():
    with pytest.raises(ProtocolError, match="required"):
        frames.parse(b"\x00\x00\x00\x00")          # no type
    cmd = api.BaseCommand(type=api.BaseCommand.FLOW)
    cmd.flow.consumer_id = 1                       # no messagePermits
    raw = cmd.SerializePartialToString()
    with pytest.raises(ProtocolError, match="messagePermits"):
        frames.parse(struct.pack(">I", len(raw)) + raw)
