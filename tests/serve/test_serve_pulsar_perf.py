"""What running the real pulsar-perf against serve (tests/oracle/perf_table.py) found serve
doing unlike real Pulsar, pinned here with a raw connection."""
from __future__ import annotations

from pulsarctl.serve import frames
from pulsarctl.serve import pulsar_api_pb2 as api
from serve_raw import Raw, T


def test_producer_success_always_carries_a_schema_version(served):
    # Pulsar's Commands.newProducerSuccess always sets schema_version (empty for a producer
    # without a schema); the Java client reads it unconditionally, so a BYTES producer (as
    # pulsar-perf's) that got none failed with "Field 'schema_version' is not set" and retried
    # for ever. A retry of the same PRODUCER command gets the same answer.
    raw = Raw(served.port)
    try:
        raw.handshake()
        cmd = api.BaseCommand(type=T.PRODUCER)
        p = cmd.producer
        p.topic, p.producer_id, p.request_id = "persistent://public/default/perf", 1, 1
        raw.send(frames.command(cmd))
        got, _, _ = raw.expect(T.PRODUCER_SUCCESS)
        assert got.producer_success.HasField("schema_version"), got
        assert got.producer_success.schema_version == b""
        p.request_id = 2   # the same producer id again: already there
        raw.send(frames.command(cmd))
        again, _, _ = raw.expect(T.PRODUCER_SUCCESS)
        assert again.producer_success.HasField("schema_version"), again
        assert again.producer_success.schema_version == b""
    finally:
        raw.close()
