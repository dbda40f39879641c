"""serve's connections as strict as Pulsar's ServerCnx (issue 27, items 3 and 8): SIGTERM
closes the connections (their consumers and producers leave the store) before REST and the
broker; a second CONNECT or a SEND for a producer not on the connection closes it; HTTP that
cannot be read costs one line and an answer (431 for headers too large), never a traceback;
a client refused at CONNECT gets Pulsar's AuthenticationError at once, not a timeout. serve runs
in the test process (tests/serve_inproc.py: its log, and the errors its thread logs, are its
stderr), except for SIGTERM's order of stopping: a real process, whose stderr also shows what
any other thread of it would print."""
from __future__ import annotations

import json
import socket
import subprocess
import threading
import urllib.request

import pulsar
import pytest

from procs import PATIENCE_S, argv, reap, wait_for
from serve_inproc import configured, serve_in_process
from serve_procs import quiet_logger, start_serve
from serve_raw import Raw, command, send
from pulsarctl.serve import pulsar_api_pb2 as api

pytestmark = pytest.mark.serve

T = api.BaseCommand
CLOSED_OBJECT = "Attempt to operate on closed/deleted/dropped object"


class Log:
    """serve's stderr, read line by line by a thread (a full pipe would stall the server)."""

    def __init__(self, proc):
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream):
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def wait(self, text: str):
        return wait_for(lambda: any(text in line for line in self.lines),
                        f"{text!r} on serve's stderr", diag=lambda: self.lines[-20:])

    def finished(self) -> list[str]:
        self._thread.join(PATIENCE_S)
        return self.lines


@pytest.fixture
def logged(store_path):
    """serve running in this process (what it says in .log); stopped after the test."""
    with serve_in_process(store_path) as s:
        yield s


@pytest.fixture
def logged_process(env):
    """A running serve process whose stderr is read by a thread (.log); stopped after the
    test."""
    s = start_serve(env)
    s.log = Log(s.proc)
    yield s
    if s.proc.poll() is None:
        s.stop()
    reap([s.proc])


def _cli_json(env, *args):
    r = subprocess.run(argv(*args, "-o", "json"), env=env, capture_output=True, text=True,
                       timeout=PATIENCE_S)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# -- item 3: the order serve stops in ------------------------------------------------------------
def test_sigterm_closes_connections_before_rest_and_the_broker(logged_process, env):
    logged = logged_process
    topic = "persistent://public/default/stopping"
    with urllib.request.urlopen(logged.http_url + "/admin/v2/tenants", timeout=PATIENCE_S) as r:
        assert r.status == 200   # a call that opened REST's use of the broker
    c = pulsar.Client(logged.url, operation_timeout_seconds=30, logger=quiet_logger())
    try:
        c.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        c.create_producer(topic, producer_name="stopper")
        [sub] = _cli_json(env, "topics", "stats", topic)["subscriptions"].values()
        assert len(sub["consumers"]) == 1
        assert logged.stop() == 0
    finally:
        c.close()
    lines = logged.log.finished()
    assert not [line for line in lines if CLOSED_OBJECT in line or "Traceback" in line], lines
    stats = _cli_json(env, "topics", "stats", topic)
    assert stats["subscriptions"]["sub"]["consumers"] == []
    assert stats["publishers"] == []


# -- item 8: the binary protocol ----------------------------------------------------------------
def test_a_second_connect_closes_the_connection(logged):
    raw = Raw(logged.port)
    try:
        raw.handshake()
        raw.send(command(T.CONNECT, "connect", client_version="raw", protocol_version=20))
        assert raw.closed_by_server()
    finally:
        raw.close()
    logged.log.wait("a second CONNECT on a connected connection")


def test_a_send_for_a_producer_not_on_the_connection_closes_it(logged):
    raw = Raw(logged.port)
    try:
        raw.handshake()
        raw.send(send(7, 0, b"nobody's"))
        got = []
        while (frame := raw.read()) is not None:
            got.append(frame[0].type)
        assert T.SEND_ERROR not in got   # no answer: the connection is closed
    finally:
        raw.close()
    logged.log.wait("SEND for producer 7, which is not open on this connection")


# -- item 8: HTTP ---------------------------------------------------------------------------------
def _http(port: int, data: bytes) -> bytes:
    """Send data as it is (with Connection: close added after its first line) and read the
    answer until the server closes."""
    first, sep, rest = data.partition(b"\r\n")
    if sep:
        data = first + b"\r\nConnection: close\r\n" + rest
    s = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S)
    try:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    finally:
        s.close()


@pytest.mark.parametrize("what,request_bytes", [
    ("header", b"GET /admin/v2/clusters HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000
     + b"\r\n\r\n"),
    ("request line", b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("headers", b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(200))
     + b"\r\n"),
])
def test_headers_too_large_are_431_and_one_line(logged, what, request_bytes):
    port = int(logged.http_url.rsplit(":", 1)[1])
    for _ in range(3):
        answer = _http(port, request_bytes)
        assert answer.startswith(b"HTTP/1.0 431 ") or answer.startswith(b"HTTP/1.1 431 "), \
            answer[:100]
        assert b"aaaa" not in answer   # what the client sent is not echoed
    assert logged.stop() == 0
    lines = logged.log.finished()
    bad = [line for line in lines if "bad HTTP request" in line]
    assert len(bad) == 3 and all("answered 431" in line for line in bad), lines
    assert not [line for line in lines if "Traceback" in line or "Error handling" in line], lines


def test_unreadable_http_bodies_are_400_and_one_line_each(logged):
    port = int(logged.http_url.rsplit(":", 1)[1])
    bodies = [
        b"PUT /admin/v2/tenants/t1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 4\r\n\r\n\xff\xfe\xfd\xfc",
        b"PUT /admin/v2/tenants/t1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json; "
        b"charset=nonesuch\r\nContent-Length: 2\r\n\r\n{}",
        b"PUT /admin/v2/tenants/t2 HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
        b"Content-Type: application/json\r\nContent-Length: 3\r\n\r\nabc",
        b"GET /admin/v2/clusters HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
    ]
    for b in bodies:
        answer = _http(port, b)
        assert answer.split(b"\r\n")[0].split()[1] == b"400", answer[:200]
    assert logged.stop() == 0
    lines = logged.log.finished()
    assert not [line for line in lines if "Traceback" in line or "Error handling" in line
                or "internal error" in line], lines


# -- item 8: authentication refused at CONNECT ---------------------------------------------------
@pytest.fixture
def token_served(cli, store_path, tmp_path):
    key = tmp_path / "secret.key"
    r = cli("tokens", "create-secret-key", "--output", str(key))
    assert r.exit_code == 0, r.stderr
    conf = tmp_path / "broker.conf"
    conf.write_text("authenticationEnabled=true\n"
                    "authenticationProviders=org.apache.pulsar.broker.authentication."
                    "AuthenticationProviderToken\n"
                    f"tokenSecretKey=file://{key}\n")
    with serve_in_process(store_path, configured(conf)) as s:
        yield s


def test_a_bad_token_is_pulsars_authentication_error_not_a_timeout(token_served):
    # A long operation timeout: only an AuthenticationError ends create_producer before it.
    c = pulsar.Client(token_served.url, authentication=pulsar.AuthenticationToken("bad"),
                      operation_timeout_seconds=int(PATIENCE_S), logger=quiet_logger())
    try:
        with pytest.raises(pulsar.AuthenticationError):
            c.create_producer("persistent://public/default/refused")
        with pytest.raises(pulsar.AuthenticationError):
            c.subscribe("persistent://public/default/refused", "s")
    finally:
        c.close()
    token_served.log.wait("refused connection from")


def test_a_refused_connect_is_pulsars_error_before_connected(token_served):
    """What Pulsar's ServerCnx answers a CONNECT that fails authentication, to every client but
    the C++ one: ERROR (request id -1, AuthenticationError), then the connection closes. The Go
    client reads it and logs Pulsar's reason (the oracle lane's auth_refused scenario)."""
    raw = Raw(token_served.port)
    try:
        raw.send(command(T.CONNECT, "connect", client_version="Pulsar Go 0.19.0",
                         protocol_version=20, auth_method_name="token", auth_data=b"bad"))
        got = raw.read()
        assert got is not None and got[0].type == T.ERROR, got
        cmd = got[0]
        assert (cmd.error.request_id, cmd.error.error, cmd.error.message) == (
            (1 << 64) - 1, api.AuthenticationError, "Failed to authenticate")
        assert raw.closed_by_server()
    finally:
        raw.close()


def test_a_refused_connection_is_served_nothing(token_served):
    # A C++ client (the Python one's) does not read an ERROR before CONNECTED: it is answered
    # CONNECTED, then its first request is refused (serve/unauthenticated.py).
    raw = Raw(token_served.port)
    try:
        raw.send(command(T.CONNECT, "connect", client_version="Pulsar-CPP-v4.2.0",
                         protocol_version=20, auth_method_name="token", auth_data=b"bad"))
        raw.expect(T.CONNECTED)
        raw.send(command(T.PRODUCER, "producer", topic="persistent://public/default/sneaky",
                         producer_id=1, request_id=9))
        cmd, _meta, _payload = raw.expect(T.ERROR)
        assert (cmd.error.request_id, cmd.error.error, cmd.error.message) == (
            9, api.AuthenticationError, "Failed to authenticate")
        assert raw.closed_by_server()
    finally:
        raw.close()


def test_an_authorization_header_of_any_bytes_is_a_401_and_one_line(token_served):
    port = int(token_served.http_url.rsplit(":", 1)[1])
    for value in (b"Bearer \xff\xfe", b"Bearer garbage", b"Basic !!!", b"Basic \xff"):
        answer = _http(port, b"GET /admin/v2/tenants HTTP/1.1\r\nHost: x\r\n"
                       b"Authorization: " + value + b"\r\n\r\n")
        assert answer.split(b"\r\n")[0].split()[1] == b"401", answer[:200]
    assert token_served.stop() == 0
    lines = token_served.log.finished()
    assert not [line for line in lines if "Traceback" in line or "internal error" in line], lines
