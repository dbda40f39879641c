"""The one place a pulsarctl error becomes an HTTP answer: Pulsar's status code and its body
{"reason": "..."} (RestException's ErrorData), as pulsar-admin prints it."""
from __future__ import annotations

from aiohttp import web

from pulsarctl import errors

# Most specific first: the first class an error is an instance of gives the status.
STATUS = (
    (errors.ConsumerBusy, 412),          # a subscription with connected consumers: PRECONDITION_FAILED
    (errors.NotEmpty, 409),              # a tenant or namespace that still holds something
    (errors.AlreadyExists, 409),
    (errors.IncompatibleSchema, 409),
    (errors.TopicTerminated, 409),
    (errors.Conflict, 409),
    (errors.NotFound, 404),
    (errors.AuthenticationFailed, 401),  # Pulsar answers both with UNAUTHORIZED
    (errors.NotAuthorized, 401),
    (errors.UsageError, 400),
    (errors.NotSupportedYet, 501),
    (errors.MessageTooLarge, 413),
    (errors.StoreUnavailable, 503),
)


def reason(status: int, text: str) -> web.Response:
    return web.json_response({"reason": text}, status=status)


def from_error(exc: errors.PulsarctlError) -> web.Response:
    status = next((code for cls, code in STATUS if isinstance(exc, cls)), 500)
    text = " ".join(exc.message.split())
    return reason(status, text)
