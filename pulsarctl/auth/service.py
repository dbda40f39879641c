"""Pulsar's AuthenticationService: which role a client is, from what it presented.

Providers, named as broker.conf's authenticationProviders names them (the class names
AuthenticationProviderTls / Token / Basic, or their short method names tls / token / basic):
- tls: the Common Name of the client certificate the TLS handshake verified against
  tlsTrustCertsFilePath (AuthenticationProviderTls);
- token: the role claim of a JWT signed with tokenSecretKey (HS256/384/512) or the private half
  of tokenPublicKey (RS256, ES256...: tokenPublicAlg) (AuthenticationProviderToken);
- basic: an htpasswd user and password (AuthenticationProviderBasic, basicAuthConf or
  `serve --basic-auth-file`).

The binary protocol (ServerCnx.handleConnect): CONNECT names its method (auth_method_name); a
known method must authenticate or the connection is refused with AuthenticationError; a method
no provider serves (none, or a plugin the broker does not run) is the anonymous role when
anonymousUserRole is set, and refused otherwise. HTTP (authenticateHttpRequest): each provider
tries what the request carries (Authorization: Bearer / Basic, the client certificate); if none
succeeds the request is the anonymous role when one is set, and refused (401) otherwise.

Nothing here reads the time or the store: the caller passes now_ms.
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from pulsarctl.auth import tokens
from pulsarctl.auth.basic import BasicAuth
from pulsarctl.errors import AuthenticationFailed, InvalidValue

# authenticationProviders entries: Pulsar's class names and the method names clients send.
PROVIDERS = {
    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls": "tls",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken": "token",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic": "basic",
    "tls": "tls", "token": "token", "basic": "basic",
}


def provider_names(entries) -> tuple[str, ...]:
    """authenticationProviders' entries as method names; an entry pulsarctl does not run
    (SASL, Athenz, OAuth's server side, a custom class) is refused at start, not ignored: a
    client that relies on it would otherwise be let in as somebody else."""
    out: list[str] = []
    for e in entries:
        e = e.strip()
        if not e:
            continue
        name = PROVIDERS.get(e) or PROVIDERS.get(e.lower())
        if name is None:
            raise InvalidValue(f"authentication provider {e} is not one pulsarctl serve runs",
                               hint="use AuthenticationProviderTls, AuthenticationProviderToken "
                                    "or AuthenticationProviderBasic")
        if name not in out:
            out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class Authentication:
    """broker.conf's authentication keys, read and checked once at start."""
    enabled: bool = False
    providers: tuple[str, ...] = ()
    token_key: bytes | None = None        # tokenSecretKey, or tokenPublicKey's bytes
    token_algorithm: str | None = None    # None: HMAC from the secret key; else tokenPublicAlg
    token_role_claim: str = tokens.ROLE_CLAIM
    token_leeway_s: int = 0
    basic: BasicAuth | None = field(default=None, compare=False)
    anonymous_role: str | None = None

    def __post_init__(self):
        if not self.enabled:
            return
        if "token" in self.providers and self.token_key is None:
            raise InvalidValue("AuthenticationProviderToken needs tokenSecretKey or "
                               "tokenPublicKey", hint="set tokenSecretKey=file:///path/secret.key")
        if "basic" in self.providers and self.basic is None:
            raise InvalidValue("AuthenticationProviderBasic needs the users' htpasswd file",
                               hint="pass --basic-auth-file FILE (or basicAuthConf in --config)")

    # -- the binary protocol -----------------------------------------------------------------
    def connect_role(self, method: str | None, data: bytes, peer_cn: str | None,
                     now_ms: int) -> str | None:
        """The role a CONNECT authenticates (None when authentication is off);
        AuthenticationFailed when it is refused."""
        if not self.enabled:
            return None
        method = (method or "none").lower()
        if method not in self.providers:
            if self.anonymous_role:
                return self.anonymous_role
            raise AuthenticationFailed("No anonymous role, and no authentication provider "
                                       "configured")
        return self._provider(method, data, peer_cn, now_ms)

    def _provider(self, method: str, data: bytes, peer_cn: str | None, now_ms: int) -> str:
        if method == "tls":
            if not peer_cn:
                raise AuthenticationFailed("Failed to get TLS certificates from client")
            return peer_cn
        text = _text(data)
        if method == "token":
            return tokens.subject(text, self.token_key, now_ms, self.token_algorithm,
                                  self.token_role_claim, self.token_leeway_s)
        user, sep, password = text.partition(":")
        if not sep:
            raise AuthenticationFailed("basic auth data is not user:password")
        return self.basic.check(user, password)

    # -- HTTP --------------------------------------------------------------------------------
    def http_role(self, authorization: str | None, peer_cn: str | None,
                  now_ms: int) -> str | None:
        """The role of an HTTP request from its Authorization header and client certificate
        (None when authentication is off); AuthenticationFailed (401) when refused."""
        if not self.enabled:
            return None
        failure: AuthenticationFailed | None = None
        scheme, _, value = (authorization or "").strip().partition(" ")
        for method in self.providers:
            try:
                if method == "tls" and peer_cn:
                    return peer_cn
                if method == "token" and scheme.lower() == "bearer":
                    # the header's bytes as sent (aiohttp keeps non-UTF-8 ones as surrogates):
                    # not UTF-8 is a refusal, not a crash
                    return self._provider("token", value.encode("utf-8", "surrogateescape"),
                                          None, now_ms)
                if method == "basic" and scheme.lower() == "basic":
                    try:
                        decoded = base64.b64decode(value.strip(), validate=True)
                    except (binascii.Error, ValueError):
                        raise AuthenticationFailed("the Basic Authorization header is not "
                                                   "base64") from None
                    return self._provider("basic", decoded, None, now_ms)
            except AuthenticationFailed as exc:
                failure = exc
        if self.anonymous_role:
            return self.anonymous_role
        raise failure or AuthenticationFailed("Authentication required")


def _text(data: bytes) -> str:
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("the authentication data is not UTF-8 text") from None


def common_name(peercert: dict | None) -> str | None:
    """The CN of a certificate as ssl's getpeercert() gives it (None without one)."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None
