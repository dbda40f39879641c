"""Partition routing: which partition of a partitioned topic a producer's message goes to, as
Pulsar's MessageRouter implementations (RoundRobinPartitionMessageRouterImpl,
SinglePartitionMessageRouterImpl) under the producer's HashingScheme (JavaStringHash,
Murmur3_32Hash; the hash functions are in hashing.py, shared with Key_Shared and Failover).

Pure functions: no I/O, no clock (callers pass now_ms), no printing."""
from __future__ import annotations

import random

from pulsarctl.broker.hashing import java_string_hash, murmur3_32_hash
from pulsarctl.errors import InvalidValue
from pulsarctl.units import one_of

HASHING_SCHEMES = ("JavaStringHash", "Murmur3_32Hash")
_HASHES = {"JavaStringHash": java_string_hash, "Murmur3_32Hash": murmur3_32_hash}


def _check_scheme(scheme: str):
    return one_of(_HASHES, scheme, "hashing scheme")


def hash_key(key: str, scheme: str) -> int:
    """The producer's key hash under a HashingScheme name (always >= 0)."""
    return _check_scheme(scheme)(key)


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
