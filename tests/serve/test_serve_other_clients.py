"""What the Go and Java clients' scenarios (tests/clients, run by tests/oracle/test_clients.py)
found serve doing unlike real Pulsar, each pinned here with the real Python client or, where
that client cannot show it, a raw connection."""
from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request

import pytest

from pulsarctl.auth import tokens
from pulsarctl.serve import frames
from pulsarctl.serve import pulsar_api_pb2 as api
from procs import PATIENCE_S
from serve_inproc import configured, serve_in_process
from serve_raw import Raw, T, command

pytestmark = pytest.mark.serve


def http_json(url: str):
    with urllib.request.urlopen(url, timeout=PATIENCE_S) as r:
        return json.loads(r.read())


@pytest.fixture
def token_served(tmp_path, store_path):
    key = tokens.create_secret_key()
    (tmp_path / "secret.key").write_bytes(key)
    conf = tmp_path / "broker.conf"
    conf.write_text("authenticationEnabled=true\n"
                    "authenticationProviders=org.apache.pulsar.broker.authentication."
                    "AuthenticationProviderToken\n"
                    f"tokenSecretKey=file://{tmp_path}/secret.key\n")
    with serve_in_process(store_path, configured(conf)) as s:   # in this process
        yield s


def test_a_refused_token_gets_pulsars_failed_to_authenticate(token_served):
    # Real Pulsar (tests/oracle/test_token_auth.py) words it "Failed to authenticate"; the Java
    # client puts it in its AuthenticationException. To a C++ client serve says it in the
    # answer to the connection's first request (serve/unauthenticated.py: the C++ and Python
    # clients read it only there), here a lookup's, then closes.
    raw = Raw(token_served.port)
    try:
        forged = tokens.create(tokens.create_secret_key(), "admin")
        raw.send(command(T.CONNECT, "connect", client_version="Pulsar-CPP-v4.2.0",
                         protocol_version=21, auth_method_name="token",
                         auth_data=forged.encode()))
        raw.expect(T.CONNECTED)
        raw.send(command(T.LOOKUP, "lookupTopic", topic="persistent://public/default/t",
                         request_id=4))
        cmd, _, _ = raw.expect(T.LOOKUP_RESPONSE)
        r = cmd.lookupTopicResponse
        assert (r.request_id, r.error, r.message) == (
            4, api.AuthenticationError, "Failed to authenticate")
        assert raw.closed_by_server()
    finally:
        raw.close()


def kv_schema_data(key: bytes, value: bytes) -> bytes:
    """KeyValueSchemaInfo's schema data: each schema's bytes after its 4-byte length."""
    return (struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value)


READING = (b'{"type":"record","name":"Reading","fields":[{"name":"sensor","type":"string"},'
           b'{"name":"value","type":"long"}]}')


def test_a_key_value_schema_with_binary_schema_data_is_registered(served):
    # KeyValue<String, JSON>: the key's schema is empty, so the data starts with 00 00 00 00
    # and carries the value schema's length as binary; Java and Go producers send exactly this.
    # (A length byte of 0x8e or more is no UTF-8, which serve once choked on.)
    value = READING + b" " * (0x8E - len(READING))
    schema = api.Schema(name="KeyValue", type=15, schema_data=kv_schema_data(b"", value))
    for k, v in {"key.schema.name": "String", "key.schema.type": "STRING",
                 "key.schema.properties": "{}", "value.schema.name": "Reading",
                 "value.schema.type": "JSON", "value.schema.properties": "{}",
                 "kv.encoding.type": "INLINE"}.items():
        schema.properties.add(key=k, value=v)
    topic = "persistent://public/default/kv"
    raw = Raw(served.port)
    try:
        raw.handshake()
        cmd = api.BaseCommand(type=T.PRODUCER)
        cmd.producer.topic, cmd.producer.producer_id, cmd.producer.request_id = topic, 1, 1
        cmd.producer.schema.CopyFrom(schema)
        raw.send(frames.command(cmd))
        got, _, _ = raw.read()
        assert got.type == T.PRODUCER_SUCCESS, got
        # A second producer with the same schema gets the same version.
        cmd.producer.producer_id = cmd.producer.request_id = 2
        raw.send(frames.command(cmd))
        again, _, _ = raw.read()
        assert again.type == T.PRODUCER_SUCCESS, again
        assert again.producer_success.schema_version == got.producer_success.schema_version
    finally:
        raw.close()
    doc = http_json(served.http_url + "/admin/v2/schemas/public/default/kv/schema")
    assert doc["type"] == "KEY_VALUE"
    assert doc["properties"]["kv.encoding.type"] == "INLINE"
    # as Pulsar's admin API shows it: each side's definition as JSON, "" for a primitive one
    assert json.loads(doc["data"]) == {"key": "", "value": json.loads(value)}


def sticky(ranges):
    import pulsar

    return pulsar.ConsumerKeySharedPolicy(key_shared_mode=pulsar.KeySharedMode.Sticky,
                                          sticky_ranges=ranges)


def test_key_shared_sticky_ranges_of_the_subscribe_command_are_kept(client):
    # CommandSubscribe.keySharedMeta (STICKY, hashRanges): each consumer gets exactly the keys
    # whose slot (Murmur3 32 of the key, modulo 65536) falls in its ranges; an overlapping
    # range is refused with ConsumerAssignError.
    import pulsar

    from pulsarctl.broker.hashing import murmur3_32_hash

    topic = "persistent://public/default/sticky"
    halves = [(0, 32767), (32768, 65535)]
    cs = [client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.KeyShared,
                           consumer_name=f"c{i}", key_shared_policy=sticky([r]))
          for i, r in enumerate(halves)]
    p = client.create_producer(topic, batching_enabled=False)
    keys = [f"k-{i}" for i in range(20)]
    for k in keys:
        p.send(k.encode(), partition_key=k)
    got = {}
    for i, c in enumerate(cs):
        while len(got) < len(keys):
            try:
                m = c.receive(timeout_millis=500)
            except pulsar.Timeout:
                break
            got[m.partition_key()] = i
            c.acknowledge(m)
    assert got == {k: (murmur3_32_hash(k) % 65536) // 32768 for k in keys}
    with pytest.raises(pulsar.PulsarException, match="ConsumerAssignError"):
        client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.KeyShared,
                         consumer_name="c2", key_shared_policy=sticky([(100, 40000)]))


def test_partitioned_metadata_without_auto_creation_says_topic_not_found(served, client):
    # PIP-344, as the real broker answers (tests/oracle): CONNECTED says it supports it; asked
    # not to create, a topic that does not exist is TopicNotFound, one that does is 0
    # partitions. The Java client asks this of TOPIC-SUB-RETRY's old name (SUB-RETRY) and,
    # told "exists", would send its retries there.
    client.create_producer("persistent://public/default/there").close()
    raw = Raw(served.port)
    try:
        raw.send(command(T.CONNECT, "connect", client_version="raw", protocol_version=21))
        connected, _, _ = raw.expect(T.CONNECTED)
        flags = connected.connected.feature_flags
        assert flags.supports_get_partitioned_metadata_without_auto_creation
        answers = []
        for rid, (name, auto) in enumerate([("nowhere", False), ("there", False),
                                            ("nowhere", True)], 1):
            cmd = api.BaseCommand(type=T.PARTITIONED_METADATA)
            cmd.partitionMetadata.topic = f"persistent://public/default/{name}"
            cmd.partitionMetadata.request_id = rid
            cmd.partitionMetadata.metadata_auto_creation_enabled = auto
            raw.send(frames.command(cmd))
            got, _, _ = raw.expect(T.PARTITIONED_METADATA_RESPONSE)
            r = got.partitionMetadataResponse
            answers.append((r.request_id, r.response, r.error if r.response else r.partitions))
        assert answers == [(1, 1, api.TopicNotFound), (2, 0, 0), (3, 0, 0)]
    finally:
        raw.close()


def test_get_or_create_schema_of_bytes_is_the_empty_version(served, client):
    # As the real broker answers (tests/oracle): a NONE (bytes) schema on a topic that exists
    # registers nothing and gets the empty version. The Java client's retry letter producer
    # asks this for each message it moves to TOPIC-SUB-RETRY.
    client.create_producer("persistent://public/default/plain").close()
    raw = Raw(served.port)
    try:
        raw.handshake()
        cmd = api.BaseCommand(type=T.GET_OR_CREATE_SCHEMA)
        g = cmd.getOrCreateSchema
        g.topic, g.request_id = "persistent://public/default/plain", 1
        g.schema.name, g.schema.type, g.schema.schema_data = "Bytes", 0, b""
        raw.send(frames.command(cmd))
        got, _, _ = raw.expect(T.GET_OR_CREATE_SCHEMA_RESPONSE)
        r = got.getOrCreateSchemaResponse
        assert not r.HasField("error_code"), r
        assert r.HasField("schema_version") and r.schema_version == b""
    finally:
        raw.close()
    with pytest.raises(urllib.error.HTTPError):   # 404: still no schema
        http_json(served.http_url + "/admin/v2/schemas/public/default/plain/schema")


def test_a_reader_started_at_a_message_id_may_include_it(client):
    # As the real broker (tests/oracle): a reader's cursor starts AT its start message id, and
    # the client drops that message unless its start is inclusive. Served from after it, an
    # inclusive reader (Go's StartMessageIDInclusive, Java's startMessageIdInclusive()) lost it.
    topic = "persistent://public/default/reader-from-id"
    p = client.create_producer(topic, batching_enabled=False)
    ids = [p.send(f"m-{i}".encode()) for i in range(5)]
    firsts = []
    for inclusive in (False, True):
        r = client.create_reader(topic, ids[2], start_message_id_inclusive=inclusive)
        firsts.append(r.read_next(timeout_millis=int(PATIENCE_S * 1000)).data())
        assert r.has_message_available()
        r.close()
    assert firsts == [b"m-3", b"m-2"]


def test_batch_index_acks_leave_only_the_rest_of_the_batch(client):
    # Pulsar 4.x acknowledges at batch index level by default (acknowledgmentAtBatchIndexLevel
    # Enabled): after acking indexes 0 and 2 of a batch of 5, a new consumer gets the batch
    # once, with only 1, 3 and 4 left in it.
    import pulsar

    topic = "persistent://public/default/batch-index"
    c = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                         batch_index_ack_enabled=True)
    p = client.create_producer(topic, batching_enabled=True, batching_max_messages=100,
                               batching_max_publish_delay_ms=60_000)
    for i in range(5):
        p.send_async(f"m-{i}".encode(), None)
    p.flush()
    got = [c.receive(timeout_millis=int(PATIENCE_S * 1000)) for _ in range(5)]
    c.acknowledge(got[0])
    c.acknowledge(got[2])
    c.close()
    c = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                         batch_index_ack_enabled=True)
    again = [c.receive(timeout_millis=int(PATIENCE_S * 1000)).data() for _ in range(3)]
    assert again == [b"m-1", b"m-3", b"m-4"]
    with pytest.raises(pulsar.Timeout):
        extra = c.receive(timeout_millis=1500)
        print("extra", extra.data(), extra.message_id())
