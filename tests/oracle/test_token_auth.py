"""What the real broker does with a token it refuses at CONNECT: the reference for
`pulsarctl serve --auth token`. One ERROR frame (request_id -1 as uint64, AuthenticationError,
"Failed to authenticate"), then the broker closes the connection; the Python client, which
retries the connection until its operation timeout, ends in pulsar.Timeout."""
from __future__ import annotations

import uuid

import pulsar
import pytest

from pulsarctl.auth import tokens
from pulsarctl.serve import pulsar_api_pb2 as api
from serve_raw import Raw, T, command

NO_REQUEST = 2**64 - 1  # Commands.newError(-1, ...): -1 written as a uint64


def connect(port: int, **auth) -> Raw:
    raw = Raw(port)
    raw.send(command(T.CONNECT, "connect", client_version="oracle-raw", protocol_version=21,
                     **auth))
    return raw


def test_a_token_made_by_pulsarctl_is_accepted(token_pulsar):
    raw = connect(token_pulsar.real.broker_port, auth_method_name="token",
                  auth_data=token_pulsar.admin_token.encode())
    try:
        cmd, _, _ = raw.read()
        assert cmd.type == T.CONNECTED
        assert cmd.connected.server_version.startswith("Pulsar Server")
    finally:
        raw.close()


def refused_auth(key: bytes) -> dict:
    other_key = tokens.create_secret_key()
    return {
        "wrong signature": dict(auth_method_name="token",
                                auth_data=tokens.create(other_key, "admin").encode()),
        # exp = 1 s after the epoch
        "expired": dict(auth_method_name="token",
                        auth_data=tokens.create(key, "alice", expires_at_ms=1000).encode()),
        "not a JWT": dict(auth_method_name="token", auth_data=b"not-a-jwt"),
        "empty token": dict(auth_method_name="token", auth_data=b""),
        "no auth method": {},
        "unknown auth method": dict(auth_method_name="basic", auth_data=b"user:pass"),
    }


@pytest.mark.parametrize("case", ["wrong signature", "expired", "not a JWT", "empty token",
                                  "no auth method", "unknown auth method"])
def test_a_refused_connect_gets_one_authentication_error_then_the_close(token_pulsar, case):
    raw = connect(token_pulsar.real.broker_port, **refused_auth(token_pulsar.secret_key)[case])
    try:
        got = raw.read()
        assert got is not None, "closed without an answer"
        cmd = got[0]
        assert cmd.type == T.ERROR
        assert cmd.error.request_id == NO_REQUEST
        assert cmd.error.error == api.AuthenticationError
        assert cmd.error.message == "Failed to authenticate"
        # Nothing else: the next read sees the broker's close.
        assert raw.read() is None
    finally:
        raw.close()


def test_the_python_client_with_a_refused_token_ends_in_timeout(token_pulsar):
    bad = tokens.create(tokens.create_secret_key(), "admin")
    client = pulsar.Client(token_pulsar.real.service_url,
                           authentication=pulsar.AuthenticationToken(bad),
                           operation_timeout_seconds=5)
    try:
        # Not pulsar.AuthenticationError: the client takes the closed connection for a
        # transient failure and retries it (backoff from 100 ms) until the operation times out.
        with pytest.raises(pulsar.Timeout):
            client.create_producer(f"persistent://public/default/refused-{uuid.uuid4().hex[:8]}")
    finally:
        client.close()


def test_pulsar_admin_with_the_superuser_token_works(token_pulsar):
    assert "public" in token_pulsar.real.admin("tenants", "list").stdout.split()
