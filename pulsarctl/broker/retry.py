"""Retry letters (reconsumeLater) move with dead letters: both moves are in deadletter.py
(Pulsar's DeadLetterPolicy holds both topics). These names stay here for the callers that
still import them from retry (service.py, dlq.py)."""
from __future__ import annotations

from pulsarctl.broker.deadletter import (  # noqa: F401
    DELAY_TIME, MAX_RECONSUMETIMES, RECONSUMETIMES, level_delay_ms, reconsume_later,
    settings_for,
)
