"""Durations, sizes and times as the command line writes them (CLI.md, "Global behaviour")."""
from __future__ import annotations

import re

from pulsarctl.clock import MAX_MS, MAX_TEXT
from pulsarctl.errors import InvalidValue

_DUR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$", re.I)
_DUR_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)B?\s*$", re.I)
_SIZE_MUL = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_duration_ms(text: str, what: str = "duration") -> int:
    """'500ms', '10s', '5m', '2h', '1d'; a bare number is seconds, as in pulsar-admin."""
    m = _DUR.match(str(text))
    if not m:
        raise InvalidValue(f"invalid {what} {text!r}",
                           hint="write durations like 500ms, 10s, 5m, 2h or 1d")
    value, unit = float(m.group(1)), (m.group(2) or "s").lower()
    ms = value * _DUR_MS[unit]
    if not ms <= MAX_MS:  # also a number too long for a float (inf)
        raise InvalidValue(f"invalid {what} {text!r}: longer than any clock can count "
                           f"(about 8,000 years)", hint="give a shorter duration")
    return int(round(ms))


def parse_size(text: str, what: str = "size") -> int:
    m = _SIZE.match(str(text))
    if not m:
        raise InvalidValue(f"invalid {what} {text!r}", hint="write sizes like 512, 10K, 5M or 1G")
    return int(m.group(1)) * _SIZE_MUL[m.group(2).upper()]


def parse_time_ms(text: str, what: str = "time") -> int:
    """ISO 8601 (2026-01-01T10:00:00Z; no zone means UTC) or epoch milliseconds."""
    s = str(text).strip()
    if re.fullmatch(r"-?\d+", s):
        n = int(s)
        if n < 0:
            raise InvalidValue(f"invalid {what} {text!r}: negative epoch milliseconds")
        return _in_range(n, what, text)
    from datetime import datetime, timezone  # lazy: one-shot produce never needs it

    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidValue(f"invalid {what} {text!r}",
                           hint="use ISO 8601 like 2026-01-01T10:00:00Z or epoch milliseconds"
                           ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return _in_range(int(dt.timestamp() * 1000), what, text)


def _in_range(ms: int, what: str, text) -> int:
    """A time past what ISO 8601 can write (year 9999) is refused: it could never be shown."""
    if ms > MAX_MS:
        raise InvalidValue(f"invalid {what} {text!r}: after {MAX_TEXT}",
                           hint="give a time before the year 10000 (ISO 8601 or epoch "
                           "milliseconds)")
    return ms


def parse_time_or_duration_ms(text: str, now_ms: int) -> int:
    """reset-cursor -t: a relative duration (that long ago) or an absolute time. A bare number
    is seconds ago, as in pulsar-admin, unless that would lie before 1970: then it is epoch
    milliseconds."""
    s = str(text).strip()
    if s.isdigit() and int(s) * 1000 > now_ms:
        return parse_time_ms(s)
    try:
        return now_ms - parse_duration_ms(s)
    except InvalidValue:
        return parse_time_ms(s)


def parse_property(text: str) -> tuple[str, str]:  # also used on the fast path
    """k=v, split on the first '='."""
    if "=" not in text:
        raise InvalidValue(f"invalid property {text!r}", hint="write properties as key=value")
    k, v = text.split("=", 1)
    if not k:
        raise InvalidValue(f"invalid property {text!r}: empty key", hint="write key=value")
    return k, v


def one_of(table: dict, name: str, what: str):
    """table[name], or InvalidValue naming what was asked for and the names there are."""
    value = table.get(name)
    if value is None:
        raise InvalidValue(f"unknown {what} {name!r}", f"use one of {', '.join(table)}")
    return value
