"""How a time or a duration reads wherever a person is shown one (explain and --explain, the
cursor picture, top's detail pane, the lessons): one rule, in one place, so a due time reads the
same in all of them.

The rule: never rounded. A time of day is HH:MM:SS (UTC), with .mmm when its milliseconds are
not zero (a nack deadline rounded down to 256 ms by Pulsar's NegativeAcksTracker reads
09:00:09.856 everywhere, never 09:00:10 in one place and 09:00:09.86 in another). A duration is
its hours, minutes and seconds, the seconds with their milliseconds when there are any (4s,
1m30s, 4.864s, 1m0.5s, 250ms). A time against now is "in 4.864s", "4.864s ago" or "now".
Machine output (-o json) keeps ISO 8601 with milliseconds (messages.iso_ms): exact too."""
from __future__ import annotations


def clock_text(ms: int | None) -> str:
    """10:00:05, or 09:00:09.856: the time of day (UTC) of ms since the epoch; "-" for None."""
    if ms is None:
        return "-"
    s, rest = divmod(int(ms), 1000)
    s %= 86400
    text = f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{text}.{rest:03d}" if rest else text


def duration_text(ms: int) -> str:
    """4s, 1m30s, 4.864s, 1m0.5s, 250ms, 0ms: a delay, exactly."""
    ms = int(ms)
    if ms < 0:
        return "-" + duration_text(-ms)
    if ms < 1000:
        return f"{ms}ms"
    s, rest = divmod(ms, 1000)
    h, m, sec = s // 3600, s // 60 % 60, s % 60
    out = "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m")) if v)
    if rest:
        return out + f"{sec}.{rest:03d}".rstrip("0") + "s"
    return out + (f"{sec}s" if sec or not out else "")


def relative_text(at: int, now: int) -> str:
    """in 4.864s, 4.864s ago, now: when at is, seen from now."""
    d = int(at) - int(now)
    if d == 0:
        return "now"
    return f"in {duration_text(d)}" if d > 0 else f"{duration_text(-d)} ago"
