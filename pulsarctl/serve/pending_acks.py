"""A consumer's acks and redelivery requests (Pulsar's Consumer.messageAcked and
redeliverUnacknowledgedMessages): an ACK's ids are read by what the consumer was sent
(Consumer.delivered: a batch's indexes, an ack set's cleared bits), then acknowledged in the
store; ACK_RESPONSE, when the client asked for a receipt, goes out after the commit. A reader's
acks move nothing in the store."""
from __future__ import annotations

import asyncio

from pulsarctl.messages import MessageId
from pulsarctl.serve.consumers import Consumer
from pulsarctl.serve import pulsar_api_pb2 as api
from pulsarctl.serve.wire_errors import error_text, server_error

T = api.BaseCommand


def _acked_indexes(ack_set, size: int) -> list[int]:
    """An ack's ack set: the bits cleared are the batch indexes acknowledged."""
    bits = [(w + (1 << 64)) % (1 << 64) for w in ack_set]
    return [i for i in range(size) if not (i // 64 < len(bits) and bits[i // 64] >> (i % 64) & 1)]


class PendingAcks:
    """The ack commands of a Connection (connection.py), which inherits them."""

    def _ids_of(self, c: Consumer, d: api.MessageIdData, ack: bool = False) -> list[MessageId]:
        """What an acked MessageIdData stands for: the message, or the batch's messages it
        acknowledges (all delivered ones, or those its ack set clears)."""
        lid, eid = key = (d.ledgerId, d.entryId)
        sent = c.delivered.get(key)
        if not sent:
            return [MessageId(lid, eid, d.partition, d.batch_index)]
        part, known = sent
        if -1 in known:
            del c.delivered[key]
            return [MessageId(lid, eid, part)]
        if ack and not len(d.ack_set) and d.batch_index < 0:
            # The batch's own id: the client acks the entry once every message of it is
            # acked, and Pulsar's broker acks the entry: one id, not one per index (a batch
            # of 1000 resolved index by index cost its consumer a tenth of its time).
            del c.delivered[key]
            return [MessageId(lid, eid, part)]
        if len(d.ack_set):
            size = max(known) + 1 if not d.HasField("batch_size") else d.batch_size
            idx = _acked_indexes(d.ack_set, size)
        elif d.batch_index >= 0 and d.HasField("batch_size"):
            idx = [d.batch_index]
        else:
            idx = sorted(known)
        out = [MessageId(lid, eid, part, i) for i in idx if i in known]
        known.difference_update(idx)
        if not known:
            c.delivered.pop(key, None)
        return out

    async def on_ack(self, cmd, meta, payload):
        a = cmd.ack
        c = self.consumers.get(a.consumer_id)
        if c is None:
            return
        if c.reader:
            # A reader's acks move nothing in the store (it has no cursor there); the highest
            # one is its mark-delete position for hasMessageAvailable.
            for d in a.message_id:
                mid = MessageId(d.ledgerId, d.entryId, d.partition)
                if c.acked is None or (mid.ledger_id, mid.entry_id) > (c.acked.ledger_id,
                                                                       c.acked.entry_id):
                    c.acked = mid
            return
        s = self.server
        cumulative = a.ack_type == 1
        ids = []
        for d in a.message_id:
            if cumulative:
                sent = c.delivered.get((d.ledgerId, d.entryId))
                top = max(sent[1]) if sent else d.batch_index
                ids.append(MessageId(d.ledgerId, d.entryId, d.partition, top))
                for key in [k for k in c.delivered if k <= (d.ledgerId, d.entryId)]:
                    c.delivered.pop(key, None)
            else:
                ids += self._ids_of(c, d, ack=True)
        # The ack joins the next group commit; the connection reads on meanwhile. The client's
        # receipt (ACK_RESPONSE) goes out once it committed.
        fut = s.acks.submit(c.topic, c.sub, ids, cumulative)
        rid = a.request_id if a.HasField("request_id") else None
        self.acks_in_flight.add(fut)
        fut.add_done_callback(lambda f: self._acked(c, rid, f))

    def _acked(self, c: Consumer, rid: int | None, fut: asyncio.Future) -> None:
        self.acks_in_flight.discard(fut)
        if fut.cancelled():   # the server stopped before it committed
            return
        exc = fut.exception()
        if exc is None:
            # ack() counts what it acknowledged; Pulsar answers an ack of nothing new alike
            if rid is not None:
                self.reply(T.ACK_RESPONSE, "ackResponse", consumer_id=c.id, request_id=rid)
            return
        self.server.log(f"ack on {c.topic} ({c.sub}): {error_text(exc)}")
        if rid is not None:
            self.reply(T.ACK_RESPONSE, "ackResponse", consumer_id=c.id, request_id=rid,
                       error=server_error(exc), message=error_text(exc))

    async def acks_landed(self) -> None:
        """Wait for this connection's acks still committing: what the client asks next of
        its subscription (a redelivery, a seek, closing a consumer, stats) sees them, as the
        one ordered stream of commands it sent."""
        if self.acks_in_flight:
            await asyncio.wait(list(self.acks_in_flight))

    async def on_redeliver(self, cmd, meta, payload):
        r = cmd.redeliverUnacknowledgedMessages
        c = self.consumers.get(r.consumer_id)
        if c is None:
            return
        if c.reader:
            c.kick.set()
            return
        if c.hold_until > asyncio.get_running_loop().time():
            return   # a Failover consumer waiting for its rewind: Pulsar ignores the request
        await self.acks_landed()
        s = self.server
        try:
            if len(r.message_ids):
                ids = []
                for d in r.message_ids:
                    ids += self._ids_of(c, d)
                # The client held them for its nack delay: redelivered now (as Pulsar does).
                await s.call(s.broker.redeliver_unacked, c.topic, c.sub, c.name, ids)
            else:
                c.delivered.clear()
                await s.call(s.broker.redeliver_unacked, c.topic, c.sub, c.name)
        except Exception as exc:
            s.log(f"redeliver on {c.topic} ({c.sub}): {error_text(exc)}")
        c.kick.set()
