"""Failover: one active consumer per topic or partition, the others wait.

Consumers are sorted by priority, then name; among those with the highest priority, a
partition picks `partition index % count`, and a non-partitioned topic uses the hash ring of
Pulsar 3.0+ (100 points per consumer, the topic name's murmur3 hash, ceiling entry)."""
from __future__ import annotations

from pulsarctl.broker.dispatch import exclusive


def active(live: list[dict], partition: int = -1, topic_name: str = "") -> dict | None:
    if not live:
        return None
    from pulsarctl.broker.hashing import failover_active

    top = min(r.get("priority", 0) for r in live)
    same = sorted((r for r in live if r.get("priority", 0) == top), key=lambda r: r["name"])
    return same[failover_active([r["name"] for r in same], topic_name, partition)]


def select(ctx, info, c, consumer, live, max_n):
    from pulsarctl.names import partition_index

    act = active(live, partition_index(info.name), info.name)
    if act is None or act["name"] != consumer["name"]:
        return []
    return exclusive.take_new(ctx, info, c, max_n)
