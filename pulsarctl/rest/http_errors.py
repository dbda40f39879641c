"""HTTP that cannot be read costs its client one line on serve's log and an answer, never a
traceback: aiohttp logs the exception of every request it fails to parse ("Error handling
request", with its stack), so any client could fill the log at will.

A request line or a header over aiohttp's limits (max_line_size, max_field_size: 8190 bytes)
or too many headers (max_headers: 128) is answered 431 Request Header Fields Too Large, as
Pulsar's web server (Jetty) answers headers over its limit; any other unreadable request 400
Bad Request. Neither echoes what the client sent. A body that cannot be decoded (its
Content-Encoding, its chunks, its charset) is a 400 from the handler that reads it
(app.body), and aiohttp's own failure to read the rest of it one line too."""
from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler, RequestPayloadError

from pulsarctl.rest.errors import reason

TOO_LARGE = 431


def _why(exc: HttpProcessingError) -> tuple[int, str, str]:
    """(status, reason answered, what the log line says) for an unreadable request."""
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else "the limit of"
        return TOO_LARGE, "Request Header Fields Too Large", \
            f"a request line or header over {limit} bytes"
    if "too many headers" in str(exc.message).lower():
        return TOO_LARGE, "Request Header Fields Too Large", "too many headers"
    return 400, "Bad Request", f"unreadable request ({type(exc).__name__})"


class _Handler(RequestHandler):
    """aiohttp's connection handler, with requests that cannot be parsed answered in one
    line."""

    log_line = staticmethod(logging.getLogger("pulsarctl.rest").warning)

    def handle_error(self, request, status=500, exc=None, message=None):
        if not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        code, text, why = _why(exc)
        self.log_line(f"bad HTTP request from {request.remote}: {why}; answered {code}")
        resp = reason(code, text)
        resp.force_close()
        return resp

    def log_exception(self, *args, **kw):
        # After the answer, aiohttp reads what is left of a body it could not decode (a bad
        # Content-Encoding or chunk), and logs that failure with its stack.
        exc = kw.get("exc_info")
        if isinstance(exc, (HttpProcessingError, RequestPayloadError)):
            peer = self.transport.get_extra_info("peername") if self.transport else None
            who = peer[0] if peer else "?"
            self.log_line(f"bad HTTP request body from {who}: {type(exc).__name__}")
            return
        super().log_exception(*args, **kw)


class _Server(web.Server):
    def __init__(self, *args, log=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._log_line = log

    def __call__(self) -> RequestHandler:
        handler = _Handler(self, loop=self._loop, **self._kwargs)
        if self._log_line is not None:
            handler.log_line = self._log_line
        return handler


class Runner(web.AppRunner):
    """web.AppRunner (without an access log) whose connections answer unreadable requests
    with one line on log(line)."""

    def __init__(self, app: web.Application, log=None):
        super().__init__(app, access_log=None)
        self._log_line = log

    async def _make_server(self) -> web.Server:
        base = await super()._make_server()
        return _Server(base.request_handler, request_factory=base.request_factory,
                       handler_cancellation=base.handler_cancellation, loop=base._loop,
                       log=self._log_line, **base._kwargs)
