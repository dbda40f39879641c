"""Joining chunked messages on the client, as pulsar-client's ConsumerImpl does: chunks are
buffered per message uuid (chunks of different producers may interleave), a chunk that is not
the next one expected discards its message's buffer, at most max_pending incomplete messages are
kept (the oldest is dropped to make room) and incomplete ones expire.

Dropped messages are handed back to the caller (Assembler.dropped), which nacks their chunks
so they come again (a consumer), or forgets them (a reader)."""
from __future__ import annotations

from pulsarctl.errors import InvalidValue
from pulsarctl import compression

DEFAULT_MAX_PENDING = 10          # maxPendingChunkedMessage
DEFAULT_EXPIRE_MS = 60_000        # expireTimeOfIncompleteChunkedMessage


class _Pending:
    __slots__ = ("ids", "pieces", "started")

    def __init__(self, started: int):
        self.ids: list = []
        self.pieces: list = []
        self.started = started


class Assembler:
    def __init__(self, max_pending: int = DEFAULT_MAX_PENDING,
                 expire_ms: int = DEFAULT_EXPIRE_MS):
        if max_pending is None or int(max_pending) < 1:
            raise InvalidValue(f"max_pending_chunked_message must be at least 1, not {max_pending}")
        if expire_ms is None or int(expire_ms) < 0:
            raise InvalidValue("expire_time_of_incomplete_chunked_message_ms must be zero "
                               "(never) or more")
        self.max_pending = int(max_pending)
        self.expire_ms = int(expire_ms)
        self._pending: dict[str, _Pending] = {}  # by uuid, oldest first
        self.dropped: list[list] = []  # chunk ids of messages dropped (limit, expiry)
        self.discarded = 0  # chunks that came out of order

    def __len__(self) -> int:
        return len(self._pending)

    def missing(self) -> int:
        """How many chunks the incomplete messages still lack, at most (for fetch sizes)."""
        return max((p.pieces[0].chunk_[0][2] - len(p.ids) for p in self._pending.values()),
                   default=0)

    def take(self, msgs: list, now: int) -> list:
        """msgs with chunks replaced by the messages they complete."""
        out = []
        for m in msgs:
            if m.chunk_ is None:
                out.append(m)
            else:
                whole = self.add(m, now)
                if whole is not None:
                    out.append(whole)
        return out

    def add(self, m, now: int):
        """Buffer a chunk; the whole message when this was its last chunk, else None."""
        meta, code, size = m.chunk_
        uuid, cid, n = meta[0], meta[1], meta[2]
        p = self._pending.get(uuid)
        if cid == 0:
            if p is not None:  # sent (or delivered) again: start over
                del self._pending[uuid]
            elif len(self._pending) >= self.max_pending:
                oldest = next(iter(self._pending))
                self.dropped.append(self._pending.pop(oldest).ids)
            p = self._pending[uuid] = _Pending(now)
        elif p is None or cid != len(p.ids):
            # Out of order (or its first chunk was never seen): Pulsar discards the message.
            if p is not None:
                del self._pending[uuid]
            self.discarded += 1
            return None
        p.ids.append(m.id)
        p.pieces.append(m)
        if len(p.ids) < n:
            return None
        del self._pending[uuid]
        data = b"".join(x.payload for x in p.pieces)
        if code:
            data = compression.decompress(code, data, size, str(m.id))
        m.payload = data
        m.chunk_ = None
        m.chunk_ids_ = p.ids
        return m

    def expire(self, now: int) -> None:
        """Drop the incomplete messages whose first chunk came expire_ms ago or more."""
        if not self.expire_ms:
            return
        for uuid in [u for u, p in self._pending.items() if now - p.started >= self.expire_ms]:
            self.dropped.append(self._pending.pop(uuid).ids)

    def take_dropped(self) -> list:
        out = [i for ids in self.dropped for i in ids]
        self.dropped = []
        return out

    def clear(self) -> None:
        self._pending.clear()
        self.dropped = []
