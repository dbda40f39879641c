"""A context's authentication, for both doors: the pulsar-client library's Authentication
object (the binary protocol) and HTTP headers, client certificate and verification (the
admin REST API).

The plugins are named as Pulsar's Java clients and client.conf name them (short names too):
AuthenticationToken (params `token:XXX`, `file:///path` or the token itself),
AuthenticationTls (`tlsCertFile:PATH,tlsKeyFile:PATH` or their JSON), AuthenticationBasic
(`{"userId": .., "password": ..}` or `userId:..,password:..`). OAuth2 and Athenz plugins work
only where the Python library implements them and never over REST here: refused in one line.
A token file is read at each command, so a rotated token is picked up."""
from __future__ import annotations

import json

from pulsarctl.errors import InvalidValue, UsageError

TOKEN, TLS, BASIC = "token", "tls", "basic"
_PLUGINS = {
    "org.apache.pulsar.client.impl.auth.AuthenticationToken": TOKEN,
    "AuthenticationToken": TOKEN, "token": TOKEN,
    "org.apache.pulsar.client.impl.auth.AuthenticationTls": TLS,
    "AuthenticationTls": TLS, "tls": TLS,
    "org.apache.pulsar.client.impl.auth.AuthenticationBasic": BASIC,
    "AuthenticationBasic": BASIC, "basic": BASIC,
}


def _params(text: str) -> dict:
    """Pulsar's auth parameters: JSON, or key:value pairs separated by commas."""
    text = (text or "").strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            raise InvalidValue("--auth-params is not valid JSON") from None
        return {str(k): str(v) for k, v in doc.items()}
    out = {}
    for part in text.split(","):
        k, sep, v = part.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


def _read_token(path: str) -> str:
    path = path[len("file://"):] if path.startswith("file://") else path
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError as exc:
        raise UsageError(f"cannot read the token file {path}: {exc.strerror}") from None


def resolved(target) -> tuple[str | None, dict]:
    """(kind, values) of the target's authentication: (None, {}) for none; TOKEN {token};
    TLS {cert, key}; BASIC {user, password}."""
    f = target.fields
    if f.get("token"):
        tok = f["token"]
        return TOKEN, {"token": _read_token(tok) if tok.startswith("file:") else tok}
    if f.get("token-file"):
        return TOKEN, {"token": _read_token(f["token-file"])}
    plugin = f.get("auth-plugin")
    if plugin:
        kind = _PLUGINS.get(plugin)
        if kind is None:
            raise UsageError(f"authentication plugin {plugin!r} is not one pulsarctl can use "
                             f"for a remote target",
                             hint="use AuthenticationToken, AuthenticationTls or "
                                  "AuthenticationBasic (a token from an OAuth2 issuer works "
                                  "as --token)")
        raw = f.get("auth-params") or ""
        if kind == TOKEN:
            if raw.startswith("token:"):
                return TOKEN, {"token": raw[len("token:"):]}
            if raw.startswith("file:"):
                return TOKEN, {"token": _read_token(raw)}
            return TOKEN, {"token": raw.strip()}
        p = _params(raw)
        if kind == TLS:
            cert, key = p.get("tlsCertFile"), p.get("tlsKeyFile")
            if not cert or not key:
                raise InvalidValue("AuthenticationTls needs tlsCertFile and tlsKeyFile in "
                                   "--auth-params")
            return TLS, {"cert": cert, "key": key}
        user, password = p.get("userId"), p.get("password")
        if not user or password is None:
            raise InvalidValue("AuthenticationBasic needs userId and password in --auth-params")
        return BASIC, {"user": user, "password": password}
    if f.get("tls-cert-file"):
        return TLS, {"cert": f["tls-cert-file"], "key": f["tls-key-file"]}
    return None, {}


# -- the binary protocol (pulsar-client) ---------------------------------------------------------
def client_authentication(target):
    """The pulsar-client Authentication of the target, or None."""
    kind, v = resolved(target)
    if kind is None:
        return None
    import pulsar  # lazy: only remote data commands load the client library

    if kind == TOKEN:
        return pulsar.AuthenticationToken(v["token"])
    if kind == TLS:
        return pulsar.AuthenticationTLS(v["cert"], v["key"])
    return pulsar.AuthenticationBasic(v["user"], v["password"])


# -- the admin REST API (requests) ---------------------------------------------------------------
def http_headers(target) -> dict:
    kind, v = resolved(target)
    if kind == TOKEN:
        return {"Authorization": f"Bearer {v['token']}"}
    if kind == BASIC:
        import base64  # lazy: only Basic authentication needs it

        pair = f"{v['user']}:{v['password']}".encode()
        return {"Authorization": "Basic " + base64.b64encode(pair).decode()}
    return {}


def http_cert(target):
    kind, v = resolved(target)
    return (v["cert"], v["key"]) if kind == TLS else None


def http_verify(target):
    """requests' verify: False with --tls-allow-insecure, the CA file if given, else True."""
    if target.get("tls-allow-insecure"):
        return False
    return target.get("tls-trust-certs-file") or True
