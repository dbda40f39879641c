"""What the Go and Java clients' scenarios (tests/clients, run by tests/oracle/test_clients.py)
found serve doing unlike real Pulsar, each pinned here with the real Python client or, where
that client cannot show it, a raw connection."""
from __future__ import annotations

import os

import pytest

from pulsarctl.auth import tokens
from pulsarctl.serve import pulsar_api_pb2 as api
from procs import reap
from serve_procs import start_serve
from serve_raw import Raw, T, command

pytestmark = pytest.mark.serve


@pytest.fixture
def token_served(tmp_path):
    key = tokens.create_secret_key()
    (tmp_path / "secret.key").write_bytes(key)
    conf = tmp_path / "broker.conf"
    conf.write_text("authenticationEnabled=true\n"
                    "authenticationProviders=org.apache.pulsar.broker.authentication."
                    "AuthenticationProviderToken\n"
                    f"tokenSecretKey=file://{tmp_path}/secret.key\n")
    env = dict(os.environ, PULSARCTL_STORE=str(tmp_path / "store"), NO_COLOR="1")
    s = start_serve(env, "--config", str(conf))
    yield s
    if s.proc.poll() is None:
        s.stop()
    reap([s.proc])


def test_a_refused_token_gets_pulsars_failed_to_authenticate(token_served):
    # Real Pulsar (tests/oracle/test_token_auth.py): "Failed to authenticate". The Java client
    # puts it in its AuthenticationException, the Go client in its log.
    raw = Raw(token_served.port)
    try:
        forged = tokens.create(tokens.create_secret_key(), "admin")
        raw.send(command(T.CONNECT, "connect", client_version="raw", protocol_version=21,
                         auth_method_name="token", auth_data=forged.encode()))
        cmd, _, _ = raw.expect(T.ERROR)
        assert cmd.error.error == api.AuthenticationError
        assert cmd.error.message == "Failed to authenticate"
        assert raw.closed_by_server()
    finally:
        raw.close()
