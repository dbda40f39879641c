"""The subscription-wide commands of a consumer: UNSUBSCRIBE, SEEK (Pulsar's resetCursor),
CONSUMER_STATS and GET_LAST_MESSAGE_ID."""
from __future__ import annotations

from pulsarctl.serve import frames
from pulsarctl.serve import pulsar_api_pb2 as api
from pulsarctl.serve.command_sender import id_data, message_id_of
from pulsarctl.serve.wire_errors import error_text, server_error

T = api.BaseCommand


class SubscriptionCommands:
    """The subscription commands of a Connection (connection.py), which inherits them."""

    async def on_unsubscribe(self, cmd, meta, payload):
        u = cmd.unsubscribe
        c = self._consumer(u.consumer_id, u.request_id)
        if c is None:
            return
        await self.acks_landed()
        s = self.server
        # Refused unless it is the subscription's one consumer; then it goes with it, and a
        # refused one stays connected (PersistentSubscription.doUnsubscribe).
        try:
            await s.call(lambda: s.broker.subscription(c.topic, c.sub).unsubscribe(asker=c.name))
        except Exception as exc:
            self.error(u.request_id, exc)
            return
        await self._drop_consumer(c, in_store=False)
        self.reply(T.SUCCESS, "success", request_id=u.request_id)

    async def on_seek(self, cmd, meta, payload):
        """Seek by message id or publish time, as Pulsar's resetCursor: every consumer of the
        subscription on this server is sent CLOSE_CONSUMER first (the client reconnects and
        drops what it had queued, and the sought message itself unless inclusive), the
        cursor moves, then SUCCESS. A reader's position waits for its re-SUBSCRIBE, which
        carries a stale start id, in reader_resume."""
        k = cmd.seek
        c = self._consumer(k.consumer_id, k.request_id)
        if c is None:
            return
        await self.acks_landed()
        s = self.server
        mid = message_id_of(k.message_id) if k.HasField("message_id") else None
        if c.reader:
            try:
                nxt = None if mid is not None else await s.call(
                    s.broker.topics.offset_for_publish_time, c.topic, k.message_publish_time)
            except Exception as exc:
                self.error(k.request_id, exc)
                return
            self._close_by_broker(c)
            self.reader_resume[(c.topic, c.sub)] = (mid, nxt)
            self.reply(T.SUCCESS, "success", request_id=k.request_id)
            return
        sharing = [(conn, o) for conn in list(s._connections) for o in list(conn.consumers.values())
                   if not o.reader and o.topic == c.topic and o.sub == c.sub]
        for conn, o in sharing:
            conn._close_by_broker(o)
        b = s.broker

        def seek():  # one job of the worker: no fetch comes in between
            for _conn, o in sharing:
                b.close_consumer(o.topic, o.sub, o.name)
            if mid is not None:
                b.subscription(c.topic, c.sub).reset_cursor(message_id=mid)
            else:
                # seek(timestamp) serves the first message published at or after it;
                # reset-cursor's time is exclusive.
                b.subscription(c.topic, c.sub).reset_cursor(time_ms=k.message_publish_time - 1)
        try:
            await s.call(seek)
        except Exception as exc:
            self.error(k.request_id, exc)
            return
        finally:
            for _conn, o in sharing:
                s._in_use.discard((o.topic, o.sub, o.name))
        self.reply(T.SUCCESS, "success", request_id=k.request_id)

    async def on_consumer_stats(self, cmd, meta, payload):
        """CONSUMER_STATS: the consumer's record and its subscription's backlog, from the store
        (rates are not measured: 0, as `topics stats` says)."""
        q = cmd.consumerStats
        r = api.BaseCommand(type=T.CONSUMER_STATS_RESPONSE)
        out = r.consumerStatsResponse
        out.request_id = q.request_id
        c = self.consumers.get(q.consumer_id)
        st = None
        await self.acks_landed()
        if c is not None and not c.reader:
            s = self.server
            try:
                st = await s.call(lambda: s.broker.subscription(c.topic, c.sub)
                                  .consumer_stats(c.name))
            except Exception as exc:
                out.error_code, out.error_message = server_error(exc), error_text(exc)
                self.send(frames.command(r))
                return
        if st is None:
            out.error_code = api.ConsumerNotFound
            out.error_message = f"Consumer {q.consumer_id} not found"
            self.send(frames.command(r))
            return
        rec = st["consumer"]
        out.msgRateOut, out.msgThroughputOut = st["msgRateOut"], st["msgThroughputOut"]
        out.msgRateRedeliver, out.msgRateExpired = st["msgRateRedeliver"], st["msgRateExpired"]
        out.consumerName = c.name
        out.availablePermits = max(c.permits, 0)
        out.unackedMessages = rec.get("unackedMessages", 0)
        out.blockedConsumerOnUnackedMsgs = False
        out.address = self.peer
        out.connectedSince = rec.get("connectedSince") or ""
        out.type = st["type"]
        out.msgBacklog = st["msgBacklog"]
        self.send(frames.command(r))

    async def on_get_last_message_id(self, cmd, meta, payload):
        g = cmd.getLastMessageId
        c = self._consumer(g.consumer_id, g.request_id)
        if c is None:
            return
        await self.acks_landed()
        s = self.server
        try:
            mid = await s.call(s.broker.topics.last_message_id, c.topic)
            if c.reader:
                mdp = c.acked or await s.call(
                    s.broker.topics.reader_mark_delete_position, c.topic, c.base, c.start,
                    c.inclusive)
            else:
                mdp = await s.call(lambda: s.broker.subscription(c.topic, c.sub)
                                   .mark_delete_position())
        except Exception as exc:
            self.error(g.request_id, exc)
            return
        self.reply(T.GET_LAST_MESSAGE_ID_RESPONSE, "getLastMessageIdResponse",
                   request_id=g.request_id, last_message_id=id_data(mid),
                   consumer_mark_delete_position=id_data(mdp))
