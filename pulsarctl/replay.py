"""What `dlq replay` records of each dead letter it looks at, the same locally (broker/dlq.py)
and against a remote Pulsar (remote/dlq.py): the REPLAY_COUNT property a replayed copy carries,
and the result row a replay prints per message."""
from __future__ import annotations

from pulsarctl.errors import UsageError
from pulsarctl.names import (
    DELAY_TIME, ORIGIN_MESSAGE_ID, REAL_TOPIC, RECONSUMETIMES, parse_topic,
)

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


def replay_origin(props: dict, to_t, r: dict):
    """Where a dead letter goes back to: --to's topic, else the topic its REAL_TOPIC property
    names; None, with its row r marked failed and why, when there is neither."""
    if to_t is not None:
        return to_t
    real = props.get(REAL_TOPIC)
    try:
        origin = parse_topic(real) if real else None
    except UsageError:
        origin = None
    if origin is None:
        r["action"] = "failed"
        r["reason"] = (f"invalid {REAL_TOPIC} {real!r}" if real else
                       f"no {REAL_TOPIC} property") + "; replay it with --to TOPIC"
    return origin


def restart_retries(props: dict, origin, m) -> None:
    """A copy replayed through origin's retry topic (--subscription): where it came from, and
    a fresh retry budget (the next reconsume-later counts from 1 again)."""
    props.setdefault(REAL_TOPIC, str(origin.partitioned_topic_name))
    props.setdefault(ORIGIN_MESSAGE_ID, str(m.id))
    props[RECONSUMETIMES] = "0"
    props[DELAY_TIME] = "0"


def into_itself(r: dict, target, dlq) -> bool:
    """The target is the dead letter topic itself: r is marked failed."""
    if target.partitioned_topic_name != dlq.partitioned_topic_name:
        return False
    r["action"] = "failed"
    r["reason"] = "its target is the dead letter topic itself; replay it with --to TOPIC"
    return True
