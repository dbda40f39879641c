"""What `pulsarctl serve` runs with: broker.conf's keys (conf.py) and the command's flags, read
and checked once, before anything listens (a bad key is one line and exit 2, not a server that
half starts)."""
from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from pulsarctl.auth import tokens
from pulsarctl.auth.authorization import Settings as Authorization
from pulsarctl.auth.basic import BasicAuth
from pulsarctl.auth.service import Authentication, provider_names
from pulsarctl.errors import InvalidValue
from pulsarctl.serve.entry_cache import DEFAULT_SIZE_MB

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024


@dataclass
class ServeSettings:
    host: str = "127.0.0.1"
    advertised: str | None = None      # advertisedAddress (None: the bound address, or loopback)
    port: int = 6650
    http_port: int | None = 8080
    tls_port: int | None = None        # brokerServicePortTls
    https_port: int | None = None      # webServicePortTls
    ssl: ssl.SSLContext | None = field(default=None, repr=False)
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    authentication: Authentication = field(default_factory=Authentication)
    authorization: Authorization | None = None   # None: authorizationEnabled=false
    cluster: str = "standalone"
    keep_alive_s: int = 30
    max_pending_sends: int = 1000   # maxPendingSendRequests (0: no window, as in Pulsar)
    # managedLedgerCacheSizeMB: the batches kept as sent for their consumers (entry_cache.py)
    entry_cache_mb: int = DEFAULT_SIZE_MB
    dynamic: dict = field(default_factory=dict)   # dynamic settings' defaults (conf.DYNAMIC)
    listeners: dict = field(default_factory=dict)  # advertisedListeners: name -> pulsar:// URL


def configure(values: dict, *, bind=None, port=None, http_port=None,
              basic_auth_file=None) -> ServeSettings:
    """ServeSettings from the --config file's values (conf.read) and the flags, which win."""
    v = values
    s = ServeSettings(
        host=bind or v.get("bindAddress") or "127.0.0.1",
        advertised=v.get("advertisedAddress"),
        port=port if port is not None else v.get("brokerServicePort", 6650),
        http_port=http_port if http_port is not None else v.get("webServicePort", 8080),
        max_message_size=v.get("maxMessageSize", DEFAULT_MAX_MESSAGE_SIZE),
        cluster=v.get("clusterName") or "standalone",
        keep_alive_s=v.get("keepAliveIntervalSeconds", 30),
        max_pending_sends=v.get("maxPendingSendRequests", 1000),
        entry_cache_mb=v.get("managedLedgerCacheSizeMB", DEFAULT_SIZE_MB),
        dynamic=dict(v.get("dynamic", {})),
        listeners=listeners(v.get("advertisedListeners", ())),
    )
    for flag, n in (("--port", s.port), ("--http-port", s.http_port)):
        if not 0 <= n <= 65535:
            raise InvalidValue(f"{flag} {n} is no TCP port", hint="give 0 to 65535 (0: any free one)")
    tls_ports = (v.get("brokerServicePortTls"), v.get("webServicePortTls"))
    if any(p is not None for p in tls_ports) or v.get("tlsEnabled"):
        s.ssl = server_context(v)
        s.tls_port, s.https_port = tls_ports
    s.authentication = authentication(v, basic_auth_file)
    if v.get("authorizationEnabled"):
        s.authorization = Authorization.of(v.get("superUserRoles", ()),
                                           v.get("anonymousUserRole"))
    return s


def listeners(entries) -> dict:
    """advertisedListeners' name:URL entries (internal:pulsar://host:6650, ...); the
    pulsar:// one of each name (a pulsar+ssl:// one is served by the TLS port)."""
    out: dict = {}
    for e in entries:
        name, sep, url = e.partition(":")
        if not sep or not url.startswith(("pulsar://", "pulsar+ssl://")):
            raise InvalidValue(f"advertisedListeners entry {e!r} is not name:pulsar://host:port")
        if url.startswith("pulsar://"):
            out[name.strip()] = url
        else:
            out.setdefault(name.strip(), None)
    return {k: v for k, v in out.items() if v}


def server_context(v: dict) -> ssl.SSLContext:
    """The TLS context of the TLS ports: the broker's certificate and key; client certificates
    checked against tlsTrustCertsFilePath (required when tlsRequireTrustedClientCertOnConnect,
    optional otherwise, not checked at all when tlsAllowInsecureConnection)."""
    cert, key = v.get("tlsCertificateFilePath"), v.get("tlsKeyFilePath")
    if not cert or not key:
        raise InvalidValue("a TLS port needs tlsCertificateFilePath and tlsKeyFilePath",
                           hint="set both in --config, or drop brokerServicePortTls / "
                                "webServicePortTls")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidValue(f"cannot load the TLS certificate {cert} with key {key}: "
                           f"{getattr(exc, 'strerror', None) or exc}",
                           hint="check tlsCertificateFilePath and tlsKeyFilePath (PEM files)") from None
    trust = v.get("tlsTrustCertsFilePath")
    require = v.get("tlsRequireTrustedClientCertOnConnect", False)
    if v.get("tlsAllowInsecureConnection", False):
        ctx.verify_mode = ssl.CERT_NONE
    elif trust:
        try:
            ctx.load_verify_locations(trust)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidValue(f"cannot load the trusted certificates {trust}: "
                               f"{getattr(exc, 'strerror', None) or exc}",
                               hint="check tlsTrustCertsFilePath (a PEM file)") from None
        ctx.verify_mode = ssl.CERT_REQUIRED if require else ssl.CERT_OPTIONAL
    elif require:
        raise InvalidValue("tlsRequireTrustedClientCertOnConnect needs tlsTrustCertsFilePath")
    return ctx


def authentication(v: dict, basic_auth_file: str | None) -> Authentication:
    providers = provider_names(v.get("authenticationProviders", ())) \
        if v.get("authenticationEnabled") else ()
    if basic_auth_file and "basic" not in providers:
        # a users file that would silently go unused lets everyone in as anonymous
        raise InvalidValue("--basic-auth-file is used only by AuthenticationProviderBasic",
                           hint="set authenticationEnabled=true and add "
                                "AuthenticationProviderBasic to authenticationProviders in "
                                "--config")
    if not v.get("authenticationEnabled"):
        return Authentication(anonymous_role=v.get("anonymousUserRole"))
    key = algorithm = None
    if "token" in providers:
        if v.get("tokenSecretKey"):
            key = tokens.read_key(v["tokenSecretKey"])
        elif v.get("tokenPublicKey"):
            key = tokens.read_key(v["tokenPublicKey"])
            algorithm = tokens.check_algorithm(v.get("tokenPublicAlg") or "RS256")
    basic = None
    if "basic" in providers:
        path = basic_auth_file or v.get("basicAuthConf")
        if path:
            basic = BasicAuth.from_file(path)
    return Authentication(enabled=True, providers=providers, token_key=key,
                          token_algorithm=algorithm,
                          token_role_claim=v.get("tokenAuthClaim") or tokens.ROLE_CLAIM,
                          token_leeway_s=v.get("tokenAllowedClockSkewSeconds", 0),
                          basic=basic, anonymous_role=v.get("anonymousUserRole"))
