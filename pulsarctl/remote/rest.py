"""Pulsar's admin REST API over HTTP (requests): the calls pulsar-admin makes, their errors
turned into pulsarctl's (an exit code each), and topic names turned into REST paths.

Authentication as the context says: a token (Authorization: Bearer), Basic (the JSON
{"userId", "password"} of AuthenticationBasic), a TLS client certificate; TLS verified against
--tls-trust-certs-file unless --tls-allow-insecure. A 307 (a topic owned by another broker of
a cluster) is followed with its method and body, as pulsar-admin's client does."""
from __future__ import annotations

import json
from urllib.parse import quote

from pulsarctl.errors import (
    AlreadyExists, AuthenticationFailed, Conflict, InvalidValue, MessageNotFound,
    NamespaceNotFound, NotAuthorized, NotEmpty, NotFound, RemoteError, RemoteUnavailable,
    SubscriptionNotFound, TenantNotFound, TopicNotFound, UsageError,
)
from pulsarctl.names import parse_namespace, parse_topic
from pulsarctl.remote import credentials

CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 120  # a compaction or a stats call on a big cluster may take a while


def topic_path(topic) -> str:
    """/admin/v2/persistent/TENANT/NS/LOCAL of a topic name (short names as everywhere)."""
    t = parse_topic(str(topic))
    return (f"/admin/v2/{t.domain}/{quote(t.tenant, safe='')}/"
            f"{quote(t.namespace_portion, safe='')}/{quote(t.local_name, safe='')}")


def namespace_path(namespace: str) -> str:
    tenant, ns = parse_namespace(namespace)
    return f"/admin/v2/namespaces/{quote(tenant, safe='')}/{quote(ns, safe='')}"


class Response:
    """What a call answered: its status, headers, body (bytes) and JSON (None if not JSON)."""

    def __init__(self, status: int, headers, body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class Admin:
    """The admin REST client of one target. Each call returns a Response, or raises the
    error the status means (status())."""

    def __init__(self, target):
        if not target.admin_url:
            raise UsageError(f"the context {target.name} has no admin URL, which "
                             f"administration needs",
                             hint=f"add one: `pulsarctl context set {target.name} --admin-url "
                                  f"http://HOST:8080` (or --admin-url on the command line)")
        import requests  # lazy: only remote administration needs it

        self.target = target
        self.base = target.admin_url.rstrip("/")
        self._requests = requests
        self.session = requests.Session()
        self.session.headers.update(credentials.http_headers(target))
        self.session.verify = credentials.http_verify(target)
        cert = credentials.http_cert(target)
        if cert:
            self.session.cert = cert

    def close(self) -> None:
        self.session.close()

    # -- the calls ------------------------------------------------------------------------
    def call(self, method: str, path: str, *, params=None, body=None, raw: bytes | None = None,
             ok=(200, 204), content_type: str = "application/json") -> Response:
        url = self.base + path
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        elif raw is not None:
            data = raw
            headers["Content-Type"] = content_type
        elif method in ("PUT", "POST"):
            headers["Content-Type"] = content_type
        try:
            r = self.session.request(method, url, params=params, data=data, headers=headers,
                                     timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
                                     allow_redirects=False)
            hops = 0
            while r.status_code in (301, 302, 307, 308) and hops < 5:
                # Another broker owns the topic: ask it, with the same method and body.
                url = r.headers.get("Location") or url
                hops += 1
                r = self.session.request(method, url, data=data, headers=headers,
                                         timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
                                         allow_redirects=False)
        except self._requests.exceptions.SSLError as exc:
            raise RemoteUnavailable(f"TLS to {self.base} failed: {_short(exc)}",
                                    hint="give the CA with --tls-trust-certs-file (or "
                                         "--tls-allow-insecure to accept any)") from None
        except self._requests.exceptions.RequestException as exc:
            raise RemoteUnavailable(f"cannot reach the admin API at {self.base} (context "
                                    f"{self.target.name}): {_short(exc)}") from None
        resp = Response(r.status_code, r.headers, r.content)
        if r.status_code not in ok:
            raise status_error(resp, method, path)
        return resp

    def get(self, path: str, params=None, ok=(200,)):
        return self.call("GET", path, params=params, ok=ok).json()

    def get_raw(self, path: str, params=None) -> Response:
        return self.call("GET", path, params=params, ok=(200,))

    def put(self, path: str, body=None, params=None):
        return self.call("PUT", path, params=params, body=body).json()

    def post(self, path: str, body=None, params=None):
        return self.call("POST", path, params=params, body=body).json()

    def delete(self, path: str, params=None):
        return self.call("DELETE", path, params=params).json()


def _short(exc) -> str:
    text = str(exc)
    # urllib3 nests its reasons: the innermost, after the last colon of a "Caused by", says it.
    if "Connection refused" in text:
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "the host name does not resolve"
    return " ".join(text.split())[:200]


def reason_of(resp: Response) -> str:
    """Pulsar's {"reason": ...}, or the body's text, or the status."""
    doc = resp.json()
    if isinstance(doc, dict) and doc.get("reason"):
        return str(doc["reason"])
    text = resp.body.decode("utf-8", "replace").strip() if resp.body else ""
    if text and not text.startswith("<"):
        return " ".join(text.split())[:300]
    return f"HTTP {resp.status}"


_NOT_FOUND = (("subscription", SubscriptionNotFound), ("topic", TopicNotFound),
              ("partitioned", TopicNotFound), ("tenant", TenantNotFound),
              ("namespace", NamespaceNotFound), ("message", MessageNotFound))


def status_error(resp: Response, method: str, path: str):
    """The error an HTTP status means, with Pulsar's reason as its message."""
    why = reason_of(resp)
    s = resp.status
    where = f"(remote: HTTP {s} to {method} {path})"
    if s == 401:
        return AuthenticationFailed(f"{why} {where}", hint="check the token or credentials of "
                                    "the context (`pulsarctl context current`)")
    if s == 403:
        return NotAuthorized(f"{why} {where}", hint="the role of these credentials may not do "
                             "this; ask for the permission, or use a super-user's")
    if s == 404:
        low = why.lower()
        cls = next((c for word, c in _NOT_FOUND if word in low), NotFound)
        return cls(f"{why} {where}")
    if s == 409:
        if "exist" in why.lower():
            return AlreadyExists(f"{why} {where}")
        return Conflict(f"{why} {where}")
    if s == 412:
        if "not empty" in why.lower() or "active" in why.lower():
            return NotEmpty(f"{why} {where}", hint="give --force to do it anyway")
        return Conflict(f"{why} {where}")
    if s in (400, 405, 406, 415):
        return InvalidValue(f"{why} {where}")
    return RemoteError(f"{why} {where}")
