"""Exclusive: one consumer reads the cursor in order, from the read position."""
from __future__ import annotations

from pulsarctl.broker import subscriptions as subs


def take_new(ctx, info, c, max_n: int) -> list[tuple[int, int]]:
    """Up to max_n unacknowledged offsets from the read position; advances it. A message a
    held nack keeps pending past a rewind is left to its timer (subscriptions.rewind)."""
    out = []
    held = subs.held_offsets(ctx, c)
    for o in ctx.cursors.unacked(ctx.txn, c, c.read_position, info.next_offset):
        if held is not None and held(o):
            continue
        out.append((o, 0))
        if len(out) >= max_n:
            break
    if out:
        c.read_position = out[-1][0] + 1
    return out


def select(ctx, info, c, consumer, live, max_n):
    return take_new(ctx, info, c, max_n)
