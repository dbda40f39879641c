"""The entry cache: batch payloads as their producers sent them to this serve, kept by entry, as
Pulsar's broker keeps the entries it just added in its managed-ledger cache
(managedLedgerCacheSizeMB) so that a consumer reading near the tail is not served from the
bookies. What it saves here is the writing: a batch MESSAGE's payload is otherwise written
again, message by message, from the stored columns (frames.columns_payload), and that was 40%
of serve's event-loop time while delivering batches.

Only a batch whose bytes are exactly what columns_payload writes is kept: plain messages, each
with its size and its sequence id, the ids consecutive (frames.PlainBatch.canonical), published
whole into one entry. A hit is checked against the stored record it stands for (producer, first
sequence id, message count, payload bytes), so a store restored under a running serve, whose
ledger ids start over, cannot hand out another entry's bytes. Oldest out first, by bytes: the
tail is what consumers read."""
from __future__ import annotations

from collections import OrderedDict

from pulsarctl.entries import F_PRODUCER_NAME, F_SEQUENCE_ID

DEFAULT_SIZE_MB = 32


class EntryCache:
    def __init__(self, max_bytes: int = DEFAULT_SIZE_MB * 1024 * 1024):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict = OrderedDict()   # (topic, ledger, entry) -> (check, payload)

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, topic: str, ids, producer: str, batch, payload: bytes) -> None:
        """A batch just published (a messages.SentBatch, its bytes as sent: payload; ids: its
        messages' ids, as the publish returned them), kept if all of it went into one entry
        (not split to fit, nothing dropped as a duplicate)."""
        if not ids or len(payload) > self.max_bytes:
            return
        first, last = ids[0], ids[-1]
        if (first.batch_index != 0 or last.batch_index != len(ids) - 1
                or last.entry_id != first.entry_id or last.ledger_id != first.ledger_id):
            return
        key = (topic, first.ledger_id, first.entry_id)
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= len(old[1])
        check = (producer, batch.first_sequence_id, len(ids), sum(map(len, batch.payloads)))
        self._entries[key] = (check, payload)
        self.bytes += len(payload)
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= len(dropped)

    def payload(self, topic: str, b) -> bytes | None:
        """The bytes of Batch b's whole payload as its producer sent them, or None (not kept,
        or not sent whole: an ack set leaves some out)."""
        if b.skip:
            return None
        i = b.id
        got = self._entries.get((topic, i.ledger_id, i.entry_id))
        if got is None:
            return None
        check, payload = got
        rec = b.rec
        if check[:3] != (rec[F_PRODUCER_NAME], rec[F_SEQUENCE_ID], b.size) \
                or check[3] != sum(map(len, b.columns[0])):
            return None
        return payload
