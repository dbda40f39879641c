"""Failover: one active consumer per topic or partition, the others wait.

Consumers are sorted by priority, then name; among those with the highest priority, a
partition picks `partition index % count`, and a non-partitioned topic uses the hash ring of
Pulsar 3.0+ (100 points per consumer, the topic name's murmur3 hash, ceiling entry)."""
from __future__ import annotations

import bisect

from pulsarctl.broker.dispatch import exclusive
from pulsarctl.broker.hashing import murmur3_32_hash
from pulsarctl.names import partition_index

CONSUMER_CONSISTENT_HASH_REPLICAS = 100  # AbstractDispatcherSingleActiveConsumer


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


def active(live: list, partition: int = -1, topic_name: str = ""):
    """The active consumer among live (records.Consumer), or None."""
    if not live:
        return None
    top = min(r.priority for r in live)
    same = sorted((r for r in live if r.priority == top), key=lambda r: r.name)
    return same[failover_active([r.name for r in same], topic_name, partition)]


def select(ctx, info, c, consumer, live, max_n):
    act = active(live, partition_index(info.name), info.name)
    if act is None or act.name != consumer.name:
        return []
    return exclusive.take_new(ctx, info, c, max_n)
