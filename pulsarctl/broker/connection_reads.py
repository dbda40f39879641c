"""What a client's connection asks the Broker besides its transactions of record (Pulsar's
ServerCnx): the store's clock for a token's expiry, whether a role may do an action, and the
small reads behind PRODUCER_SUCCESS, ACTIVE_CONSUMER_CHANGE, CONSUMER_STATS,
GET_LAST_MESSAGE_ID, a reader's seek by time and REACHED_END_OF_TOPIC.

A mixin of Broker (service.py), kept here so service.py stays the data plane. Each method is
one read transaction; each that names a topic is @routed, so a non-persistent topic is read
from the Broker that holds it (nonpersistent.py): read here, in the store's own environment,
it has no subscription (stats None) and no entries (mark-delete -1:-1)."""
from __future__ import annotations

from pulsarctl.broker import producers
from pulsarctl.broker.nonpersistent import routed
from pulsarctl.messages import MessageId
from pulsarctl.names import topic_name


def _now(ctx) -> int:
    return ctx.now


class ConnectionReads:
    __slots__ = ()

    def now(self) -> int:
        """The store's clock in ms (a simulated one included): what a token's expiry is checked
        against."""
        return self._read(_now)

    def allowed(self, role: str | None, topic: str, action: str, settings,
                missing: bool = False) -> bool:
        """Whether role may do action on topic under the authorization settings (see
        auth/authorization.allowed; missing: the answer when the topic's namespace does not
        exist). Not routed: permissions are namespace policies, and the namespaces of both kinds
        of topic live in the store's own environment (`namespaces grant-permission` writes
        there)."""
        from pulsarctl.auth import authorization  # lazy: only a server with authorization

        return self._read(authorization.allowed, role, topic, action, settings, missing)

    @routed
    def failover_active_name(self, topic, subscription: str) -> str | None:
        """The consumer a Failover subscription's cursor names active; None when there is no
        such subscription."""
        from pulsarctl.broker import consuming  # lazy: one-shot produce never needs it

        return self._read(consuming.failover_active_name, topic_name(topic), subscription)

    @routed
    def last_sequence_id(self, topic, producer_name: str) -> int:
        """The sequence id a producer of that name goes on from (PRODUCER_SUCCESS's
        last_sequence_id): the highest stored while deduplication is on, -1 otherwise."""
        return self._read(producers.last_sequence_id, topic_name(topic), producer_name)

    @routed
    def consumer_stats(self, topic, subscription: str, consumer_name: str) -> dict | None:
        """CONSUMER_STATS's answer: the subscription's stats with the one consumer's record
        under "consumer"; None when there is no such subscription."""
        from pulsarctl.broker import consuming  # lazy: one-shot produce never needs it

        return self._read(consuming.consumer_stats, topic_name(topic), subscription,
                          consumer_name)

    @routed
    def mark_delete_position(self, topic, subscription: str | None = None, next_offset=None,
                             start=None, inclusive: bool = False) -> MessageId:
        """GET_LAST_MESSAGE_ID's consumer_mark_delete_position: a subscription's mark-delete
        position; for a reader (subscription None) the position just before what it reads next
        (its next offset, else where its start message id puts it)."""
        from pulsarctl.broker import consuming  # lazy: one-shot produce never needs it

        return self._read(consuming.mark_delete_position, topic_name(topic), subscription,
                          next_offset, start, inclusive)

    @routed
    def reached_end(self, topic, subscription: str | None = None, next_offset=None) -> bool:
        """Whether a consumer (a reader: subscription None, at next_offset) has read all a
        terminated topic will ever hold (REACHED_END_OF_TOPIC)."""
        from pulsarctl.broker import consuming  # lazy: one-shot produce never needs it

        return self._read(consuming.reached_end, topic_name(topic), subscription, next_offset)

    @routed
    def offset_for_publish_time(self, topic, time_ms: int) -> int:
        """A reader's seek(timestamp): the offset of the first message published at or after
        time_ms (the topic's end when there is none)."""
        from pulsarctl.broker import consuming  # lazy: one-shot produce never needs it

        return self._read(consuming.offset_for_publish_time, topic_name(topic), time_ms)
