"""What every route handler of the admin REST API shares: the worker thread that owns the
Broker, the app's keys, Pulsar's answers (200 with JSON, 204), and reading a request's body,
query flags, path parts and message ids."""
from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from pulsarctl.errors import InvalidValue
from pulsarctl.messages import MessageId

WORKER = web.AppKey("worker", object)
SETTINGS = web.AppKey("settings", dict)

NO_CONTENT = 204


class Worker:
    """One thread that owns the Broker: every call of the app runs there, in order. pool: the
    executor of a thread shared with another user of the Broker (serve's own worker), which
    its owner shuts down; None: a thread of the app's own."""

    def __init__(self, broker_factory, owns_broker: bool = True, pool=None):
        self._factory = broker_factory
        self._owns = owns_broker   # closed with the app (else its owner closes it)
        self._broker = None
        self._owns_pool = pool is None
        self._pool = pool or ThreadPoolExecutor(max_workers=1, thread_name_prefix="pulsarctl-rest")

    def _broker_now(self):
        if self._broker is None:
            self._broker = self._factory()
        return self._broker

    async def run(self, fn, *args):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(self._broker_now(), *args))

    def _close(self):
        if self._broker is not None:
            if self._owns:
                self._broker.close()
            self._broker = None

    async def close(self):
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool, self._close)
        if self._owns_pool:
            self._pool.shutdown(wait=True)


# -- answers -------------------------------------------------------------------------------------
def ok(value=None, status=200):
    if value is None:
        return web.Response(status=NO_CONTENT)
    return web.json_response(value, status=status)


def done():
    return web.Response(status=NO_CONTENT)


async def body(request, default=None):
    """The request's JSON body (default when it has none); malformed JSON is a 400."""
    try:
        text = await request.text()
    except (UnicodeDecodeError, LookupError):
        raise InvalidValue("the request body is not text in its charset (UTF-8 by default)") \
            from None
    except (RequestPayloadError, HttpProcessingError):
        raise InvalidValue("the request body cannot be read: its Content-Encoding or "
                           "Transfer-Encoding is broken") from None
    if not text.strip():
        return default
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidValue(f"malformed JSON body: {exc}") from None


def flag(request, name: str, default=False) -> bool:
    v = request.query.get(name)
    if v is None:
        return default
    return v.lower() in ("true", "1", "yes")


def whole(text, what: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        raise InvalidValue(f"{what} must be a whole number, not {text!r}") from None


def message_id_json(mid: MessageId) -> dict:
    out = {"ledgerId": mid.ledger_id, "entryId": mid.entry_id, "partitionIndex": mid.partition}
    if mid.batch_index != -1:
        out["batchIndex"] = mid.batch_index
    return out


def message_id_of(doc) -> MessageId:
    """A MessageIdImpl / ResetCursorData document as a MessageId."""
    if not isinstance(doc, dict):
        raise InvalidValue("a message id is a JSON object with ledgerId and entryId")
    try:
        return MessageId(int(doc["ledgerId"]), int(doc["entryId"]),
                         int(doc.get("partitionIndex", -1)), int(doc.get("batchIndex", -1)))
    except (KeyError, TypeError, ValueError):
        raise InvalidValue("a message id is a JSON object with whole numbers ledgerId and "
                           "entryId (partitionIndex and batchIndex optional)") from None


def topic_of(request) -> str:
    m = request.match_info
    return f"{m['domain']}://{m['tenant']}/{m['ns']}/{m['topic']}"


def namespace_of(request) -> str:
    m = request.match_info
    return f"{m['tenant']}/{m['ns']}"


def worker(request) -> Worker:
    return request.app[WORKER]
