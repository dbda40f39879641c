"""End-to-end encryption through serve: the real client encrypts (a batch or a single message),
the store keeps the ciphertext with the encrypted data keys (entries.py's field 16), and a
consumer holding the private key reads the plaintext; the store never sees it."""
from __future__ import annotations

import base64
import json
import subprocess

import pulsar
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from procs import argv

pytestmark = pytest.mark.serve
TM = 10000


@pytest.fixture
def keys(tmp_path):
    k = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    priv, pub = tmp_path / "private.pem", tmp_path / "public.pem"
    priv.write_bytes(k.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.TraditionalOpenSSL,
                                     serialization.NoEncryption()))
    pub.write_bytes(k.public_key().public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo))
    return pulsar.CryptoKeyReader(str(pub), str(priv))


@pytest.mark.parametrize("batching", [True, False])
def test_encrypted_messages_reach_the_key_holder_and_the_store_keeps_ciphertext(
        client, env, keys, batching):
    topic = f"persistent://public/default/secret-{batching}"
    consumer = client.subscribe(topic, "s", crypto_key_reader=keys)
    producer = client.create_producer(topic, encryption_key="k1", crypto_key_reader=keys,
                                      batching_enabled=batching,
                                      compression_type=pulsar.CompressionType.LZ4)
    for i in range(3):
        producer.send_async(b"secret-%d" % i, None, properties={"i": str(i)})
    producer.flush()
    got = [consumer.receive(TM) for _ in range(3)]
    assert [m.data() for m in got] == [b"secret-0", b"secret-1", b"secret-2"]
    assert [m.properties()["i"] for m in got] == ["0", "1", "2"]
    for m in got:
        consumer.acknowledge(m)
    stored = subprocess.run(argv("read", topic, "-m", "earliest", "-n", "1", "-o", "ndjson"),
                            env=env, capture_output=True, text=True, timeout=60)
    assert stored.returncode == 0, stored.stderr
    rec = json.loads(stored.stdout)
    raw = base64.b64decode(rec["payload"]) if rec.get("encoding") == "base64" \
        else rec["payload"].encode()
    assert b"secret-" not in raw and len(raw) > 0     # only ciphertext was stored
    reader = client.create_reader(topic, pulsar.MessageId.earliest, crypto_key_reader=keys)
    assert reader.read_next(TM).data() == b"secret-0"
