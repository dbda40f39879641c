"""Messages over REST, as pulsar-admin's peek-messages, examine-messages and get-message-by-id
read them: one stored entry per answer, whole (a batch is one entry; pulsar-admin splits it),
its payload in the body, decompressed, and its metadata in Pulsar's X-Pulsar-* headers
(PersistentTopicsBase.generateResponseWithEntry)."""
from __future__ import annotations

import base64
import json
import struct

from aiohttp import web

from pulsarctl.broker import unpack
from pulsarctl.compression import NAMES as COMPRESSION_NAMES
from pulsarctl.entries import Entry, payload
from pulsarctl.errors import InvalidValue
from pulsarctl.messages import iso_ms
from pulsarctl.rest.base import topic_of, whole, worker
from pulsarctl.rest.errors import reason
# The wire's batch payload ([size][SingleMessageMetadata][payload] per message) is serve's to
# write; the REST answer carries the same bytes.
from pulsarctl.serve.frames import columns_payload

_U64 = struct.Struct(">q")


def entry_response(ledger_id: int, entry_id: int, rec: list) -> web.Response:
    e = Entry.from_stored(rec)
    h = {"X-Pulsar-Message-ID": f"{ledger_id}:{entry_id}",
         # Gson's compact JSON of the properties
         "X-Pulsar-PROPERTY": json.dumps(e.properties or {}, separators=(",", ":"))}
    if e.publish_time:
        h["X-Pulsar-publish-time"] = iso_ms(e.publish_time)
    if e.event_time:
        h["X-Pulsar-event-time"] = iso_ms(e.event_time)
    if e.deliver_at:
        h["X-Pulsar-deliver-at-time"] = iso_ms(e.deliver_at)
    if e.is_batch:
        h["X-Pulsar-num-batch-message"] = str(e.num_messages)
        h["X-Pulsar-batch-size"] = str(len(e.payload))
    if e.null_value:
        h["X-Pulsar-null-value"] = "true"
    if e.chunk:
        uuid, cid, n, total = e.chunk
        h.update({"X-Pulsar-PROPERTY-TOTAL-CHUNKS": str(n), "X-Pulsar-PROPERTY-CHUNK-ID": str(cid),
                  "X-Pulsar-uuid": uuid, "X-Pulsar-num-chunks-from-msg": str(n),
                  "X-Pulsar-total-chunk-msg-size": str(total), "X-Pulsar-chunk-id": str(cid)})
    h["X-Pulsar-Is-Encrypted"] = "true" if e.encryption else "false"
    h["X-Pulsar-producer-name"] = e.producer_name or ""
    h["X-Pulsar-sequence-id"] = str(max(e.sequence_id or 0, 0))
    if e.key is not None:
        h["X-Pulsar-partition-key"] = e.key
    if e.compression:
        h["X-Pulsar-compression"] = COMPRESSION_NAMES[e.compression]
    if e.schema_version is not None:
        h["X-Pulsar-Base64-schema-version"] = base64.b64encode(
            _U64.pack(e.schema_version)).decode()
    if e.ordering_key:
        okey = e.ordering_key.encode() if isinstance(e.ordering_key, str) else e.ordering_key
        h["X-Pulsar-Base64-ordering-key"] = base64.b64encode(okey).decode()
    if e.highest_sequence_id is not None:
        h["X-Pulsar-highest-sequence-id"] = str(e.highest_sequence_id)
    h["X-Pulsar-txn-uncommitted"] = "false"
    where = f"entry {ledger_id}:{entry_id}"
    if e.encryption or e.chunk:
        body = e.payload  # as the client sent it: only it can decrypt, or join the chunks
    elif e.is_batch:
        body = columns_payload(unpack.batch_columns(rec, where), e.num_messages, e.sequence_id)
    else:
        body = payload(rec, where)
    if e.uncompressed_size is not None or e.compression:
        h["X-Pulsar-uncompressed-size"] = str(len(body))
    return web.Response(body=body, headers=h, content_type="application/octet-stream")


def _persistent_only(request, what: str):
    if request.match_info["domain"] != "persistent":
        return reason(405, f"{what} on a non-persistent topic is not allowed")
    return None


async def peek(request):
    """GET .../subscription/{sub}/position/{n}: the nth entry not acknowledged after the
    subscription's mark-delete position (404 "Message not found" past the last)."""
    t, sub = topic_of(request), request.match_info["sub"]
    n = whole(request.match_info["n"], "the message position")
    refused = _persistent_only(request, "Peek messages")
    if refused:
        return refused

    def run(b):
        if b.topics.partitioned_metadata(t)["partitions"]:
            return reason(405, "Peek messages on a partitioned topic is not allowed")
        found = b.subscription(t, sub).peek_entry(n)
        return reason(404, "Message not found") if found is None else entry_response(*found)
    return await worker(request).run(run)


async def examine(request):
    """GET .../examinemessage?initialPosition=earliest|latest&messagePosition=N."""
    t = topic_of(request)
    initial = request.query.get("initialPosition") or "latest"
    n = max(1, whole(request.query.get("messagePosition", "1"), "messagePosition"))
    refused = _persistent_only(request, "Examine messages")
    if refused:
        return refused

    def run(b):
        if b.topics.partitioned_metadata(t)["partitions"]:
            return reason(405, "Examine messages on a partitioned topic is not allowed, please "
                               "try examine message on specific topic partition")
        found = b.topics.examine_entry(t, initial, n)
        if found is None:
            return reason(412, "Could not examine messages due to the total message is zero")
        return entry_response(*found)
    return await worker(request).run(run)


async def by_id(request):
    """GET .../ledger/{ledger}/entry/{entry}."""
    t = topic_of(request)
    ledger = whole(request.match_info["ledger"], "the ledger id")
    entry = whole(request.match_info["entry"], "the entry id")
    if entry < 0:
        raise InvalidValue(f"the entry id must not be negative, not {entry}")

    def run(b):
        if b.topics.partitioned_metadata(t)["partitions"]:
            return reason(405, "GetMessageById is not allowed on partitioned-topic")
        return entry_response(ledger, entry, b.topics.entry(t, ledger, entry))
    return await worker(request).run(run)


def routes(topic_path: str) -> list:
    return [web.get(topic_path + "/subscription/{sub}/position/{n}", peek),
            web.get(topic_path + "/examinemessage", examine),
            web.get(topic_path + "/ledger/{ledger}/entry/{entry}", by_id)]
