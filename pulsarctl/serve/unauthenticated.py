"""What serve answers a client whose CONNECT it refused (authentication failed).

Pulsar's ServerCnx.authenticationFailed answers the CONNECT with ERROR(request_id -1,
AuthenticationError, "Failed to authenticate") and closes. A Java client fails its operation
with that error at once; the C++ client (and so the Python one) never reads it: an ERROR before
CONNECTED only closes its connection as ResultDisconnected, which it retries until its operation
timeout, so `create_producer` with a bad token ends in a Timeout. The C++ client reads an
AuthenticationError where it waits for an answer to a request (its lookup, its producer), and
gives up at once on it (ResultAuthenticationError is not retryable). So serve answers a refused
CONNECT with CONNECTED, then the connection's first request with AuthenticationError in that
request's own answer, and closes: every client, Java or C++, then fails promptly with Pulsar's
authentication error. Nothing else is served on such a connection."""
from __future__ import annotations

from pulsarctl.serve import frames
from pulsarctl.serve import pulsar_api_pb2 as api

T = api.BaseCommand
REFUSED = "Failed to authenticate"   # ServerCnx.authenticationFailed's text
# Commands answered with their own response type, whose error field the client reads.
_OWN = {
    T.PARTITIONED_METADATA: (T.PARTITIONED_METADATA_RESPONSE, "partitionMetadata",
                             "partitionMetadataResponse", {"response": 1}, "error", "message"),
    T.LOOKUP: (T.LOOKUP_RESPONSE, "lookupTopic", "lookupTopicResponse", {"response": 2},
               "error", "message"),
    T.GET_SCHEMA: (T.GET_SCHEMA_RESPONSE, "getSchema", "getSchemaResponse", {}, "error_code",
                   "error_message"),
    T.GET_OR_CREATE_SCHEMA: (T.GET_OR_CREATE_SCHEMA_RESPONSE, "getOrCreateSchema",
                             "getOrCreateSchemaResponse", {}, "error_code", "error_message"),
}


def request_id(cmd):
    """The request id a command carries, if it has one (to answer it)."""
    for field, value in cmd.ListFields():
        if field.name != "type" and hasattr(value, "request_id"):
            try:
                return value.request_id
            except AttributeError:
                return None
    return None


def refusal(cmd) -> bytes | None:
    """The frame refusing cmd with AuthenticationError, in the answer its client waits for;
    None for a command that has no request id to answer."""
    own = _OWN.get(cmd.type)
    if own is not None:
        rtype, field, rfield, extra, err, text = own
        r = api.BaseCommand(type=rtype)
        out = getattr(r, rfield)
        out.request_id = getattr(cmd, field).request_id
        for k, v in extra.items():
            setattr(out, k, v)
        setattr(out, err, api.AuthenticationError)
        setattr(out, text, REFUSED)
        return frames.command(r)
    rid = request_id(cmd)
    if rid is None:
        return None
    r = api.BaseCommand(type=T.ERROR)
    r.error.request_id, r.error.error, r.error.message = rid, api.AuthenticationError, REFUSED
    return frames.command(r)
