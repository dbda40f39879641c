"""TLS, authentication (TLS certificates, tokens, basic) and authorization in `pulsarctl serve`,
configured with Pulsar's broker.conf keys and driven by the real pulsar-client and HTTP. serve
runs in the test process, configured as --config and --basic-auth-file configure it
(tests/serve_inproc.py); a configuration refused at start is the command's: a real process,
its exit code and its one line."""
from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import subprocess
import urllib.error
import urllib.request

import pulsar
import pytest

import certs
from procs import argv
from serve_inproc import configured, serve_in_process

pytestmark = pytest.mark.serve

NS = "private/auth"
LOG = logging.getLogger("pulsar-client-in-tests")
LOG.setLevel(logging.CRITICAL)


def cli(env, *args, check=True):
    r = subprocess.run(argv(*args), env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("auth")
    env = dict(os.environ, PULSARCTL_STORE=str(d / "store"), NO_COLOR="1")
    paths = certs.make(d, clients=("admin", "alice"))
    cli(env, "tokens", "create-secret-key", "--output", str(d / "secret.key"))
    tokens = {who: cli(env, "tokens", "create", "--secret-key", f"file://{d}/secret.key",
                       "--subject", who).stdout.strip() for who in ("alice", "bob", "admin")}
    other = d / "other.key"
    cli(env, "tokens", "create-secret-key", "--output", str(other))
    tokens["forged"] = cli(env, "tokens", "create", "--secret-key", f"file://{other}",
                           "--subject", "admin").stdout.strip()
    from pulsarctl.auth.basic import md5_crypt
    (d / "htpasswd").write_text(f"admin:{md5_crypt(b'123456', b'saltsalt')}\n"
                                f"carol:{md5_crypt(b'secret', b'pepper12')}\n")
    conf = d / "broker.conf"
    conf.write_text("\n".join([
        "brokerServicePortTls=0", "webServicePortTls=0",
        f"tlsCertificateFilePath={paths['broker-cert.pem']}",
        f"tlsKeyFilePath={paths['broker-key.pem']}",
        f"tlsTrustCertsFilePath={paths['ca.pem']}",
        "authenticationEnabled=true",
        "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderTls,"
        "org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
        "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic",
        f"tokenSecretKey=file://{d}/secret.key",
        "authorizationEnabled=true", "superUserRoles=admin,superUser",
        "anonymousUserRole=anonymous", ""]))
    cli(env, "tenants", "create", "private", "--allowed-clusters", "standalone")
    cli(env, "namespaces", "create", NS)
    cli(env, "namespaces", "grant-permission", NS, "--role", "alice", "--actions",
        "produce,consume")
    cli(env, "namespaces", "grant-permission", NS, "--role", "carol", "--actions", "consume")
    with serve_in_process(str(d / "store"),
                          configured(conf, basic_auth_file=str(d / "htpasswd"))) as s:
        yield {"served": s, "env": env, "tokens": tokens, "certs": paths, "dir": d}


def client(url, auth=None, timeout_s=10, **kw):
    return pulsar.Client(url, authentication=auth, operation_timeout_seconds=timeout_s,
                         logger=LOG, **kw)


def roundtrip(c, topic):
    consumer = c.subscribe(topic, "s")
    producer = c.create_producer(topic)
    producer.send(b"hello")
    assert consumer.receive(10000).data() == b"hello"


def topics(env):
    return cli(env, "topics", "list", NS).stdout


def test_a_granted_token_role_produces_and_consumes(setup):
    c = client(setup["served"].url, pulsar.AuthenticationToken(setup["tokens"]["alice"]))
    try:
        roundtrip(c, f"persistent://{NS}/by-token")
    finally:
        c.close()
    assert "by-token" in topics(setup["env"])


def test_a_role_without_a_grant_is_refused_with_no_side_effect(setup):
    c = client(setup["served"].url, pulsar.AuthenticationToken(setup["tokens"]["bob"]))
    try:
        with pytest.raises(pulsar.AuthorizationError):
            c.create_producer(f"persistent://{NS}/bobs")
        with pytest.raises(pulsar.AuthorizationError):
            c.subscribe(f"persistent://{NS}/bobs", "s")
    finally:
        c.close()
    assert "bobs" not in topics(setup["env"])


def test_consume_only_grant_may_not_produce(setup):
    c = client(setup["served"].url, pulsar.AuthenticationBasic("carol", "secret"))
    try:
        c.subscribe(f"persistent://{NS}/carols", "s").close()
        with pytest.raises(pulsar.AuthorizationError):
            c.create_producer(f"persistent://{NS}/carols")
    finally:
        c.close()


def test_a_forged_token_and_a_wrong_password_are_refused_at_connect(setup):
    for auth in (pulsar.AuthenticationToken(setup["tokens"]["forged"]),
                 pulsar.AuthenticationBasic("admin", "wrong")):
        # serve answers the client's first request AuthenticationError and closes
        # (serve/unauthenticated.py): the client gives up at once, long before its timeout.
        c = client(setup["served"].url, auth, timeout_s=60)
        try:
            with pytest.raises(pulsar.AuthenticationError):
                c.create_producer(f"persistent://{NS}/forged")
        finally:
            c.close()
    assert "forged" not in topics(setup["env"])


def test_basic_super_user_may_use_any_namespace(setup):
    c = client(setup["served"].url, pulsar.AuthenticationBasic("admin", "123456"))
    try:
        roundtrip(c, "persistent://public/default/by-admin")
    finally:
        c.close()


def test_tls_client_certificate_is_the_role(setup):
    s, p = setup["served"], setup["certs"]
    assert s.tls_url and s.tls_url.startswith("pulsar+ssl://127.0.0.1:")
    c = client(s.tls_url, pulsar.AuthenticationTLS(p["alice-cert.pem"], p["alice-key.pem"]),
               tls_trust_certs_file_path=p["ca.pem"])
    try:
        roundtrip(c, f"persistent://{NS}/by-cert")
        with pytest.raises(pulsar.AuthorizationError):   # alice is no super-user
            c.create_producer("persistent://public/default/alice-elsewhere")
    finally:
        c.close()


def test_tls_transport_with_token_authentication(setup):
    s, p = setup["served"], setup["certs"]
    c = client(s.tls_url, pulsar.AuthenticationToken(setup["tokens"]["admin"]),
               tls_trust_certs_file_path=p["ca.pem"])
    try:
        roundtrip(c, "persistent://public/default/tls-token")
    finally:
        c.close()


def test_anonymous_clients_get_the_anonymous_role(setup):
    env = setup["env"]
    topic = "persistent://public/default/anon"
    c = client(setup["served"].url)
    try:
        with pytest.raises(pulsar.AuthorizationError):
            c.create_producer(topic)
        cli(env, "namespaces", "grant-permission", "public/default", "--role", "anonymous",
            "--actions", "produce,consume")
        try:
            roundtrip(c, topic)
        finally:
            cli(env, "namespaces", "revoke-permission", "public/default", "--role", "anonymous")
    finally:
        c.close()


def _get(url, headers=None, context=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


# A warning in the request path (aiohttp's NotAppKeyWarning was one) is an error here: a
# real serve would print it on stderr for its user.
@pytest.mark.filterwarnings("error")
def test_rest_authenticates_and_authorizes(setup):
    s, t = setup["served"], setup["tokens"]
    base = s.http_url
    assert _get(base + "/admin/v2/tenants")[0] == 401          # anonymous: no super-user
    code, body = _get(base + "/admin/v2/tenants", {"Authorization": f"Bearer {t['admin']}"})
    assert code == 200 and "private" in body
    assert _get(base + "/admin/v2/tenants", {"Authorization": f"Bearer {t['alice']}"})[0] == 401
    forged = _get(base + f"/admin/v2/namespaces/{NS}/topics",
                  {"Authorization": f"Bearer {t['forged']}"})
    assert forged[0] == 401 and "by-token" not in json.dumps(forged[1])
    # alice may list the topics of the namespace she may produce to, and look them up
    code, body = _get(base + f"/admin/v2/namespaces/{NS}/topics",
                      {"Authorization": f"Bearer {t['alice']}"})
    assert code == 200 and isinstance(body, list)
    assert _get(base + f"/lookup/v2/topic/persistent/{NS}/x",
                {"Authorization": f"Bearer {t['alice']}"})[0] == 200
    basic = base64.b64encode(b"admin:123456").decode()
    assert _get(base + "/admin/v2/tenants", {"Authorization": f"Basic {basic}"})[0] == 200


def test_https_with_a_client_certificate(setup):
    s, p = setup["served"], setup["certs"]
    assert s.https_url and s.https_url.startswith("https://127.0.0.1:")
    ctx = ssl.create_default_context(cafile=p["ca.pem"])
    ctx.check_hostname = False
    ctx.load_cert_chain(p["admin-cert.pem"], p["admin-key.pem"])
    code, body = _get(s.https_url + "/admin/v2/tenants", context=ctx)
    assert code == 200 and "private" in body


def test_the_real_client_over_http_lookup_with_a_token(setup):
    s = setup["served"]
    c = client(s.http_url, pulsar.AuthenticationToken(setup["tokens"]["alice"]))
    try:
        roundtrip(c, f"persistent://{NS}/http-lookup")
    finally:
        c.close()


@pytest.mark.parametrize("line,says", [
    ("authenticationProviders=org.example.Custom", "org.example.Custom"),
    ("authenticationProviders=token", "tokenSecretKey"),
    ("authenticationProviders=basic", "--basic-auth-file"),
])
def test_a_bad_auth_configuration_is_one_line_and_exit_2(tmp_path, line, says):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"authenticationEnabled=true\n{line}\n")
    env = dict(os.environ, PULSARCTL_STORE=str(tmp_path / "store"), NO_COLOR="1")
    r = subprocess.run(argv("serve", "--port", "0", "--http-port", "0", "--config", str(conf)),
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_missing_tls_files_are_one_line_and_exit_2(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerServicePortTls=0\ntlsCertificateFilePath={tmp_path}/nope.pem\n"
                    f"tlsKeyFilePath={tmp_path}/nope-key.pem\n")
    env = dict(os.environ, PULSARCTL_STORE=str(tmp_path / "store"), NO_COLOR="1")
    r = subprocess.run(argv("serve", "--port", "0", "--http-port", "0", "--config", str(conf)),
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "nope.pem" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_rs256_tokens_checked_with_token_public_key(tmp_path):
    env = dict(os.environ, PULSARCTL_STORE=str(tmp_path / "store"), NO_COLOR="1")
    priv, pub = tmp_path / "private.key", tmp_path / "public.key"
    cli(env, "tokens", "create-key-pair", "--output-private-key", str(priv),
        "--output-public-key", str(pub))
    good = cli(env, "tokens", "create", "--private-key", f"file://{priv}", "-s", "rs-user").stdout.strip()
    cli(env, "tokens", "create-secret-key", "--output", str(tmp_path / "secret"))
    hs = cli(env, "tokens", "create", "--secret-key", f"file://{tmp_path}/secret",
             "-s", "rs-user").stdout.strip()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"authenticationEnabled=true\nauthenticationProviders=token\n"
                    f"tokenPublicKey=file://{pub}\ntokenPublicAlg=RS256\n")
    with serve_in_process(str(tmp_path / "store"), configured(conf)) as s:
        c = client(s.url, pulsar.AuthenticationToken(good))
        try:
            roundtrip(c, "persistent://public/default/rs256")
        finally:
            c.close()
        c = client(s.url, pulsar.AuthenticationToken(hs), timeout_s=2)
        try:
            with pytest.raises(pulsar.PulsarException):
                c.create_producer("persistent://public/default/rs256-hs")
        finally:
            c.close()


def test_a_missing_namespace_is_topic_not_found_also_with_authorization(setup):
    # as Pulsar's lookup answers (the operation can create nothing there)
    c = client(setup["served"].url)
    try:
        with pytest.raises(pulsar.TopicNotFound):
            c.create_producer("persistent://tenant/ns/nowhere")
    finally:
        c.close()


def test_rest_an_unknown_route_is_404_also_with_authorization(setup):
    base = setup["served"].http_url
    assert _get(base + "/admin/v2/namespaces/public/default/noSuchPolicy")[0] == 404
    assert _get(base + "/admin/v2/nothing/here")[0] == 404


def test_a_basic_auth_file_without_the_basic_provider_is_refused(tmp_path):
    (tmp_path / "htpasswd").write_text("")
    env = dict(os.environ, PULSARCTL_STORE=str(tmp_path / "store"), NO_COLOR="1")
    r = subprocess.run(argv("serve", "--port", "0", "--http-port", "0", "--basic-auth-file",
                            str(tmp_path / "htpasswd")),
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "AuthenticationProviderBasic" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
