"""What a reader reads: one topic's messages from a start position (TopicCursor), or the
partitions of a partitioned topic merged into one stream (Partitions), as Pulsar's
MultiTopicsReaderImpl gives them. client.Reader hands them out and waits for more.

A multi-topic reader in Pulsar has one consumer per partition feeding one queue: each
partition's messages come in their order, and the partitions interleave as their messages happen
to arrive. Here the interleaving is made deterministic: of the messages the partitions have
ready, the one published first goes first (ties: the lower partition index), while each
partition keeps its own order. So a read of messages already stored always gives the same
sequence, and messages that arrive while a reader follows (-n 0) come out as they come.

Start positions follow PulsarClientImpl.createSingleTopicReaderAsync: a partitioned topic is read
from earliest or latest (each partition from its own); a message id names one partition's
message, so it is refused there ("The partitioned topic startMessageId is illegal"), and the
hint names the partition to read instead. A reader does not write to the store."""
from __future__ import annotations

from pulsarctl import clock as clocks
from pulsarctl.errors import InvalidValue
from pulsarctl.messages import MessageId, parse_message_id
from pulsarctl.names import parse_topic

# Messages a cursor reads at a time (a read transaction each), and a reader hands out at a time.
READ_AHEAD = 1000
BATCH = 1000
# How often, at most, a following reader looks for partitions added to its topic (Pulsar's
# multi-topic consumers look every minute; autoUpdatePartitionsInterval).
DISCOVER_S = 1.0


def start_id(value) -> MessageId:
    return value if isinstance(value, MessageId) else parse_message_id(str(value))


def _position(m) -> tuple[int, int]:
    i = m.id
    return (i.ledger_id, i.entry_id)


class TopicCursor:
    """One topic (or one partition) read from a start position: messages in the order they
    were stored, a chunked message joined at its last chunk (chunks: client/chunks.Assembler,
    whose incomplete messages a reader simply forgets). stop_at_last() bounds it at the last
    message stored when it is called (--until-end)."""

    def __init__(self, broker, topic: str, start: MessageId, inclusive: bool = False,
                 compacted: bool = False, chunks=None):
        self.broker = broker
        self.topic = topic
        self.start, self.inclusive, self.compacted = start, inclusive, compacted
        self.chunks = chunks
        self.next_offset: int | None = None
        self.end: tuple[int, int] | None = None
        self.ended = False

    def stop_at_last(self) -> None:
        last = self.broker.topics.last_message_id(self.topic)
        self.end = (last.ledger_id, last.entry_id)

    def seek(self, mid: MessageId) -> None:
        self.start, self.next_offset, self.ended = mid, None, False
        if self.chunks is not None:
            self.chunks.clear()

    def _read(self, n: int) -> list:
        msgs, nxt, _last = self.broker.read_entries(
            self.topic, self.next_offset, n, after_id=self.start, inclusive=self.inclusive,
            compacted=self.compacted)
        self.next_offset = nxt
        return msgs

    def read(self, n: int | None = None) -> list:
        """The next messages (at most about n), or [] when none is stored yet (or, bounded,
        none is left before the bound)."""
        if self.ended:
            return []
        n = n or READ_AHEAD
        msgs = self._read(n)
        chunks = self.chunks
        while chunks is not None and msgs and (
                len(chunks) or any(m.chunk_ is not None for m in msgs)):
            now = self.broker.clock.state()["now"]
            got = chunks.take(msgs, now)
            chunks.expire(now)
            chunks.take_dropped()  # a reader holds nothing: dropped is forgotten
            if got:
                msgs = got
                break
            msgs = self._read(max(n, chunks.missing()))
        if self.end is not None and msgs and _position(msgs[-1]) > self.end:
            msgs = [m for m in msgs if _position(m) <= self.end]
            self.ended = True
        return msgs


class Partitions:
    """The partitions of a partitioned topic read as one stream (see the module's text). Each
    partition's cursor fills a buffer; the message published first among the buffers' heads
    goes next. A partition whose buffer runs out is read again before the next pick, so no
    stored message is overtaken by a later one of another partition; one that had nothing is
    asked again only when no partition has anything left (then the reader waits)."""

    def __init__(self, broker, topic: str, count: int, start: MessageId, inclusive: bool,
                 compacted: bool, make_chunks):
        self.broker, self.topic = broker, parse_topic(topic)
        self._args = (inclusive, compacted)
        self._make_chunks = make_chunks
        self.cursors: list[TopicCursor] = []
        self.buffers: list[list] = []
        self.heads: list[int] = []
        self.dry: list[bool] = []
        self._bounded = False
        self._looked = clocks.monotonic()
        self._add(range(count), start)

    def _add(self, indexes, start: MessageId) -> None:
        inclusive, compacted = self._args
        for i in indexes:
            self.cursors.append(TopicCursor(self.broker, str(self.topic.partition(i)), start,
                                            inclusive, compacted, self._make_chunks()))
            self.buffers.append([])
            self.heads.append(0)
            self.dry.append(False)

    def stop_at_last(self) -> None:
        self._bounded = True
        for c in self.cursors:
            c.stop_at_last()

    def seek(self, mid: MessageId) -> None:
        """earliest or latest, every partition (MultiTopicsConsumerImpl.seekAsync refuses a
        message id: it is one partition's)."""
        if mid not in (MessageId.earliest, MessageId.latest):
            raise InvalidValue("Illegal messageId, messageId can only be earliest/latest",
                               hint=f"{self.topic} is a partitioned topic: read the message's "
                                    f"partition, {self.topic.partition(max(mid.partition, 0))}")
        for i, c in enumerate(self.cursors):
            c.seek(mid)
            self.buffers[i], self.heads[i], self.dry[i] = [], 0, False

    def _refill(self, ask_dry: bool) -> None:
        for i, c in enumerate(self.cursors):
            if self.heads[i] < len(self.buffers[i]) or (self.dry[i] and not ask_dry):
                continue
            got = c.read()
            self.buffers[i], self.heads[i] = got, 0
            self.dry[i] = not got

    def _discover(self) -> None:
        """Partitions added to the topic while a reader follows it are read from their start,
        as Pulsar's multi-topic consumers pick them up."""
        if self._bounded or clocks.monotonic() - self._looked < DISCOVER_S:
            return
        self._looked = clocks.monotonic()
        n = self.broker.topics.partitioned_metadata(str(self.topic))["partitions"]
        if n > len(self.cursors):
            self._add(range(len(self.cursors), n), MessageId.earliest)

    def read(self, n: int | None = None) -> list:
        """Up to n messages in the merged order; [] when no partition has one now."""
        n = n or BATCH
        out: list = []
        self._refill(ask_dry=False)
        if not any(h < len(b) for h, b in zip(self.heads, self.buffers)):
            self._discover()
            self._refill(ask_dry=True)
        buffers, heads = self.buffers, self.heads
        while len(out) < n:
            best, key = -1, None
            for i, b in enumerate(buffers):
                h = heads[i]
                if h < len(b):
                    k = (b[h].publish_time, i)
                    if key is None or k < key:
                        best, key = i, k
            if best < 0:
                break
            out.append(buffers[best][heads[best]])
            heads[best] += 1
            if heads[best] == len(buffers[best]):
                self._refill(ask_dry=False)  # that partition may have more stored
        return out


def open_source(client, topic: str, start, inclusive: bool, compacted: bool, make_chunks):
    """The source a reader of topic reads: a TopicCursor, or Partitions for a partitioned
    topic (InvalidValue, exit 2, for a start that is a message id there)."""
    broker = client.broker
    start = start_id(start)
    count = broker.topics.partitioned_metadata(topic)["partitions"]
    if not count:
        return TopicCursor(broker, topic, start, inclusive, compacted, make_chunks())
    if start not in (MessageId.earliest, MessageId.latest):
        t = parse_topic(topic)
        where = t.partition(start.partition) if 0 <= start.partition < count else \
            f"{t}-partition-<n>"
        raise InvalidValue(
            f"The partitioned topic startMessageId is illegal: {t} is read from earliest or "
            f"latest, and {start} is one partition's message",
            hint=f"read that partition from it, e.g. `pulsarctl read {where} -m {start}`")
    return Partitions(broker, topic, count, start, inclusive, compacted, make_chunks)
