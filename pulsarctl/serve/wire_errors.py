"""pulsarctl's errors as Pulsar's ServerError codes and texts, for every command's error
response (the connection's ERROR and SEND_ERROR, schema_commands.py's error_code fields)."""
from __future__ import annotations

from pulsarctl.errors import (
    AuthenticationFailed, BacklogQuotaExceeded, ConsumerAssignError, ConsumerBusy, IncompatibleSchema, InvalidTopicName,
    ChecksumMismatch, MessageTooLarge, NamespaceNotFound, NotAuthorized, NotFound, ProducerBusy,
    ProducerFenced,
    PulsarctlError, SubscriptionNotFound, TenantNotFound, TopicNotFound, TopicTerminated,
    UnsubscribeRefused,
)
from pulsarctl.serve import pulsar_api_pb2 as api

# pulsarctl's errors as Pulsar's ServerError codes.
SERVER_ERRORS = [
    (TopicNotFound, api.TopicNotFound), (SubscriptionNotFound, api.SubscriptionNotFound),
    # a topic in a namespace or tenant that does not exist is a topic not found to a client
    (NamespaceNotFound, api.TopicNotFound), (TenantNotFound, api.TopicNotFound),
    (NotFound, api.UnknownError),
    # before ConsumerBusy, its base: Pulsar's ServerMetadataException
    (UnsubscribeRefused, api.MetadataError), (ConsumerBusy, api.ConsumerBusy),
    (ProducerFenced, api.ProducerFenced), (ProducerBusy, api.ProducerBusy),
    (TopicTerminated, api.TopicTerminatedError),
    (IncompatibleSchema, api.IncompatibleSchema), (InvalidTopicName, api.InvalidTopicName),
    (ConsumerAssignError, api.ConsumerAssignError),
    (BacklogQuotaExceeded, api.ProducerBlockedQuotaExceededError),
    (MessageTooLarge, api.NotAllowedError), (AuthenticationFailed, api.AuthenticationError),
    (NotAuthorized, api.AuthorizationError), (ChecksumMismatch, api.ChecksumError),
]


def server_error(exc: BaseException) -> int:
    for cls, code in SERVER_ERRORS:
        if isinstance(exc, cls):
            return code
    return api.UnknownError


def error_text(exc: BaseException) -> str:
    return exc.message if isinstance(exc, PulsarctlError) else f"{type(exc).__name__}: {exc}"
