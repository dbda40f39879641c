"""What `dlq replay` records of each dead letter it looks at, the same locally (broker/dlq.py)
and against a remote Pulsar (remote/dlq.py): the REPLAY_COUNT property a replayed copy carries,
and the result row a replay prints per message."""
from __future__ import annotations

REPLAY_COUNT = "REPLAY_COUNT"


def replay_count(m) -> int:
    """How often the message was replayed already (its REPLAY_COUNT; 0 when unset or unreadable)."""
    try:
        return max(0, int((m.properties_ or {}).get(REPLAY_COUNT, "0")))
    except ValueError:
        return 0


def replay_row(m, max_replays: int, dry_run: bool) -> dict:
    """The message's result row; one replayed max_replays times already is marked skipped
    ("would-skip" in a dry run) with the reason, and the caller leaves it where it is."""
    rc = replay_count(m)
    r = {"messageId": str(m.id), "action": None, "target": None, "newMessageId": None,
         "replayCount": rc, "reason": None}
    if rc >= max_replays:
        r["action"] = "would-skip" if dry_run else "skipped"
        r["reason"] = f"{REPLAY_COUNT} {rc} reached --max-replays {max_replays}"
    return r
