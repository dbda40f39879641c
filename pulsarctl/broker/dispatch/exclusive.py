"""Exclusive: one consumer reads the cursor in order, from the read position."""
from __future__ import annotations


def take_new(ctx, info, c, max_n: int) -> list[tuple[int, int]]:
    """Up to max_n unacknowledged offsets from the read position; advances it."""
    out = []
    for o in ctx.cursors.unacked(ctx.txn, c, c.read_position, info.next_offset):
        out.append((o, 0))
        if len(out) >= max_n:
            break
    if out:
        c.read_position = out[-1][0] + 1
    return out


def select(ctx, info, c, consumer, live, max_n):
    return take_new(ctx, info, c, max_n)
