"""Failover: consumers sorted by priority then name; one of them is active and reads the cursor
like an Exclusive consumer, the others wait. (The 3.x+ hash ring for non-partitioned topics and
partition-index selection come with partitioned topics.)"""
from __future__ import annotations

from pulsarctl.broker.dispatch import exclusive


def active(live: list[dict], partition: int = -1) -> dict | None:
    if not live:
        return None
    top = live[0].get("priority", 0)
    same = [r for r in live if r.get("priority", 0) == top]
    return same[partition % len(same)] if partition >= 0 else same[0]


def select(ctx, info, c, consumer, live, max_n):
    act = active(live)
    if act is None or act["name"] != consumer["name"]:
        return []
    return exclusive.take_new(ctx, info, c, max_n)
