"""Pulsar's hash functions and the choices built on them: the producer's partition routing
(RoundRobinPartitionMessageRouterImpl, SinglePartitionMessageRouterImpl), the Key_Shared sticky
key and slot (Commands.peekStickyKey, StickyKeyConsumerSelectorUtils.makeStickyKeyHash) and the
Failover active consumer (AbstractDispatcherSingleActiveConsumer.pickAndScheduleActiveConsumer).

Pure functions: no I/O, no clock (callers pass now_ms), no printing."""
from __future__ import annotations

import base64
import binascii
import bisect
import random

import mmh3

from pulsarctl.errors import InvalidValue

INT_MAX = 0x7FFFFFFF  # Integer.MAX_VALUE
DEFAULT_RANGE_SIZE = 2 << 15  # StickyKeyConsumerSelector.DEFAULT_RANGE_SIZE = 65536
STICKY_KEY_HASH_NOT_SET = 0  # StickyKeyConsumerSelector: 0 means "no hash", so slots are >= 1
NONE_KEY = b"NONE_KEY"  # Commands.NONE_KEY
CONSUMER_CONSISTENT_HASH_REPLICAS = 100  # AbstractDispatcherSingleActiveConsumer


# -- hash functions ----------------------------------------------------------------------------
def _utf8(s: str | bytes) -> bytes:
    # Java's String.getBytes(UTF_8) writes '?' for a lone surrogate, as errors="replace" does.
    if isinstance(s, str):
        return s.encode("utf-8", "replace")
    return bytes(s)


def java_hash_code(s: str) -> int:
    """Java String.hashCode(): h = 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    for ch in s:
        c = ord(ch)
        if c > 0xFFFF:  # a supplementary character is two UTF-16 code units
            c -= 0x10000
            h = (31 * h + (0xD800 | (c >> 10))) & 0xFFFFFFFF
            c = 0xDC00 | (c & 0x3FF)
        h = (31 * h + c) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def java_string_hash(s: str) -> int:
    """JavaStringHash.makeHash: s.hashCode() & Integer.MAX_VALUE."""
    return java_hash_code(s) & INT_MAX


def murmur3_32_hash(s: str | bytes) -> int:
    """Murmur3_32Hash.makeHash: MurmurHash3 x86_32, seed 0, over UTF-8 bytes, & MAX_VALUE."""
    return mmh3.hash(_utf8(s), 0, signed=False) & INT_MAX


HASHING_SCHEMES = ("JavaStringHash", "Murmur3_32Hash")
_HASHES = {"JavaStringHash": java_string_hash, "Murmur3_32Hash": murmur3_32_hash}


def _check_scheme(scheme: str):
    fn = _HASHES.get(scheme)
    if fn is None:
        raise InvalidValue(f"unknown hashing scheme {scheme!r}",
                           f"use one of {', '.join(HASHING_SCHEMES)}")
    return fn


def hash_key(key: str, scheme: str) -> int:
    """The producer's key hash under a HashingScheme name (always >= 0)."""
    return _check_scheme(scheme)(key)


# -- Key_Shared sticky key and slot ------------------------------------------------------------
def sticky_key(ordering_key: bytes | str | None, key: str | None, producer_name: str | None,
               sequence_id: int | None, *, partition_key_b64_encoded: bool = False) -> bytes:
    """Commands.peekStickyKey / resolveStickyKey: the ordering key, else the partition key
    (Base64-decoded when it was set as bytes), else producerName + "-" + sequenceId, else
    NONE_KEY. None means "not set"; an empty key is set."""
    if ordering_key is not None:
        return _utf8(ordering_key) if isinstance(ordering_key, str) else bytes(ordering_key)
    if key is not None:
        if partition_key_b64_encoded:
            try:
                return base64.b64decode(key, validate=True)
            except (binascii.Error, ValueError):
                # Java's decoder throws inside peekStickyKey's try, which returns NONE_KEY.
                return NONE_KEY
        return _utf8(key)
    if producer_name is not None and sequence_id is not None:
        return _utf8(f"{producer_name}-{sequence_id}")
    return NONE_KEY


def sticky_key_hash(key: bytes | str, range_start: int = 0,
                    range_end: int = DEFAULT_RANGE_SIZE - 1) -> int:
    """StickyKeyConsumerSelectorUtils.makeStickyKeyHash (4.x): the slot of a sticky key in the
    inclusive range [range_start, range_end]. Range.size() is end - start + 1 in
    pulsar-client-api's Range, so [0, 65535] gives h % 65536 and [1, 65535] gives h % 65535 + 1.
    A result of 0 (STICKY_KEY_HASH_NOT_SET) becomes 1."""
    slot = murmur3_32_hash(key) % (range_end - range_start + 1) + range_start
    return STICKY_KEY_HASH_NOT_SET + 1 if slot == STICKY_KEY_HASH_NOT_SET else slot


# -- partition routing -------------------------------------------------------------------------
ROUND_ROBIN = "RoundRobinPartition"
SINGLE = "SinglePartition"
ROUTING_MODES = (ROUND_ROBIN, SINGLE)


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - 0x100000000 if n & 0x80000000 else n


class PartitionRouter:
    """A partitioned producer's MessageRouter. A key always wins: hash(key) % n. Without one,
    RoundRobinPartition takes a counter that starts at `start` and goes up per message (an int
    that wraps like Java's), or with batching the partition of the current switch_ms window;
    SinglePartition always takes `start`. start=None picks it at random, as
    PartitionedProducerImpl does with ThreadLocalRandom.nextInt(n).

    `start` and `counter` are plain ints, so a caller can keep them between processes."""

    def __init__(self, num_partitions: int, mode: str = ROUND_ROBIN,
                 scheme: str = "JavaStringHash", start: int | None = None,
                 batching: bool = False, switch_ms: int = 10):
        if mode not in ROUTING_MODES:
            raise InvalidValue(f"unknown message routing mode {mode!r}",
                               f"use one of {', '.join(ROUTING_MODES)}")
        self._hash = _check_scheme(scheme)
        if not isinstance(num_partitions, int) or num_partitions < 1:
            raise InvalidValue(f"a partitioned topic needs at least 1 partition, "
                               f"got {num_partitions!r}")
        if start is None:
            start = random.randrange(num_partitions)
        elif mode == SINGLE and not 0 <= start < num_partitions:
            raise InvalidValue(f"partition {start} is out of range for {num_partitions} "
                               f"partitions", f"use 0..{num_partitions - 1}")
        self.num_partitions = num_partitions
        self.mode = mode
        self.scheme = scheme
        self.start = start
        self.counter = start
        self.batching = batching
        self.switch_ms = max(1, switch_ms)  # partitionSwitchMs = max(1, ...)

    def choose(self, key: str | None, now_ms: int = 0) -> int:
        n = self.num_partitions
        if key is not None:  # msg.hasKey(): an empty key is a key
            return self._hash(key) % n
        if self.mode == SINGLE:
            return self.start
        if self.batching:
            return (now_ms // self.switch_ms + self.start) % n
        i = self.counter
        self.counter = _int32(i + 1)  # PARTITION_INDEX_UPDATER.getAndIncrement
        return i % n  # Python's % is MathUtils.signSafeMod


# -- Failover active consumer ------------------------------------------------------------------
def _failover_ring(names: list[str]) -> tuple[list[int], list[int]]:
    ring: dict[int, int] = {}
    for i, name in enumerate(names):
        for j in range(CONSUMER_CONSISTENT_HASH_REPLICAS):
            ring[murmur3_32_hash(f"{name}{j}")] = i  # TreeMap.put: a later insert overwrites
    keys = sorted(ring)
    return keys, [ring[k] for k in keys]


def failover_active(consumer_names_sorted: list[str], topic_name: str, partition_index: int,
                    *, consistent_hashing: bool = False) -> int:
    """AbstractDispatcherSingleActiveConsumer (3.0+): the index of the active consumer among
    the highest-priority consumers, already sorted by (priority, name). A partition takes
    partition_index % n; a non-partitioned topic (and, with the broker's 4.x
    activeConsumerFailoverConsistentHashing, a partition too) takes the hash ring: 100 points
    murmur3(name + j) per consumer, the ceiling of murmur3(topic_name), else the first point."""
    n = len(consumer_names_sorted)
    if n == 0:
        raise ValueError("failover_active needs at least one consumer")
    if partition_index >= 0 and not consistent_hashing:
        return partition_index % n
    keys, owners = _failover_ring(consumer_names_sorted)
    i = bisect.bisect_left(keys, murmur3_32_hash(topic_name))
    return owners[i] if i < len(keys) else owners[0]
