"""Redelivery backoff: Pulsar's MultiplierRedeliveryBackoff (the client's
negativeAckRedeliveryBackoff and ackTimeoutRedeliveryBackoff), and its MIN:MAX[:MULTIPLIER]
command-line form.

A leaf module: it imports nothing from pulsarctl.broker, so the nack tracker (nacks.py), the
ack-timeout tracker (unacked.py), the client and the command line all import it from below."""
from __future__ import annotations

import math

from pulsarctl.errors import InvalidValue
from pulsarctl.units import parse_duration_ms


def backoff_next(min_ms: int, max_ms: int, multiplier: float, count: int) -> int:
    """MultiplierRedeliveryBackoff.next(count)."""
    if count <= 0 or min_ms <= 0:
        return min_ms
    max_pow = int(math.log(max_ms / min_ms) / math.log(multiplier)) + 1
    if count > max_pow:
        return max_ms
    return min(int(min_ms * multiplier ** count), max_ms)


def parse_backoff(text: str) -> list:
    """MIN:MAX[:MULTIPLIER] with durations (100ms:1s:2); checked as the builder checks."""
    parts = str(text).split(":")
    if len(parts) not in (2, 3):
        raise InvalidValue(f"invalid backoff {text!r}", hint="write MIN:MAX[:MULTIPLIER], e.g. 1s:60s:2")
    lo, hi = parse_duration_ms(parts[0], "backoff minimum"), parse_duration_ms(parts[1], "backoff maximum")
    try:
        mult = float(parts[2]) if len(parts) == 3 else 2.0
    except ValueError:
        raise InvalidValue(f"invalid backoff multiplier {parts[2]!r}", hint="e.g. 2") from None
    if hi < lo:
        raise InvalidValue(f"backoff maximum {parts[1]} is below the minimum {parts[0]}")
    if not mult > 1:
        raise InvalidValue(f"backoff multiplier must be greater than 1, not {parts[2]}")
    return [lo, hi, mult]
