"""The producer's batch container, as pulsar-client's: messages sent asynchronously are grouped
into batches of at most batching_max_messages messages and batching_max_allowed_size_in_bytes
bytes, and a batch waits at most batching_max_publish_delay_ms for more messages. The default
batcher fills one batch in send order; the key-based one (BatchingType.KeyBased) keeps one batch
per key, so every entry has one key and Key_Shared dispatch, which hashes the entry's key,
sends each message to its key's consumer.

The grouping itself happens in the broker's publish (pulsarctl/broker/batches.py), per
partition after routing, inside the transaction that stores the batches; this side decides
when the buffered messages go out: when a message is sent after the delay ran out, on flush()
or close(), and (for producers made by Client.create_producer) from the producer's flusher
thread once the delay has run out, as Pulsar's batch timer does."""
from __future__ import annotations

from pulsarctl import clock as clocks
from pulsarctl.broker.batches import DEFAULT, KEY_BASED, Spec, check

DEFAULT_MAX_MESSAGES = 1000          # batchingMaxMessages
DEFAULT_MAX_BYTES = 128 * 1024       # batchingMaxBytes
DEFAULT_DELAY_MS = 10                # pulsar-client-python's batching_max_publish_delay_ms
PARTITION_SWITCH_FREQUENCY = 10      # batchingPartitionSwitchFrequencyByPublishDelay

__all__ = ["Batcher", "DEFAULT", "KEY_BASED", "DEFAULT_MAX_MESSAGES", "DEFAULT_MAX_BYTES",
           "DEFAULT_DELAY_MS"]


class Batcher:
    """A producer's batching settings (validated as pulsar-client validates them) and the age
    of the batch being filled."""

    def __init__(self, max_messages: int = DEFAULT_MAX_MESSAGES,
                 max_bytes: int = DEFAULT_MAX_BYTES, delay_ms: int = DEFAULT_DELAY_MS,
                 batching_type=DEFAULT):
        kind = check(max_messages, max_bytes, delay_ms, batching_type)
        self.spec = Spec(max_messages, max_bytes, kind == KEY_BASED)
        self.delay_ms = delay_ms
        self._since: float | None = None

    @property
    def key_based(self) -> bool:
        return self.spec.key_based

    @property
    def switch_ms(self) -> int:
        """How long round robin routing stays on one partition: max(1, 10 x the delay)."""
        return max(1, PARTITION_SWITCH_FREQUENCY * self.delay_ms)

    def added(self) -> None:
        """A message joined the buffer: the first one starts the delay."""
        if self._since is None:
            self._since = clocks.monotonic()

    def due(self) -> bool:
        """Whether the buffered messages have waited the publish delay (real time)."""
        return self._since is not None and self.left_s() == 0

    def left_s(self) -> float:
        """Seconds until the buffered messages have waited the publish delay (0: now)."""
        if self._since is None:
            return 0.0
        return max(0.0, self._since + self.delay_ms / 1000 - clocks.monotonic())

    def sent(self) -> None:
        self._since = None
