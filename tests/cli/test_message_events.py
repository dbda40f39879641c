"""One vocabulary of event names (issue 29 item 7): each kind of event has one name, in
pulsarctl/message_events.py, that the history's writers, the timers, what a clock move fired,
explain and the cursor picture all use; no module spells one itself."""
from __future__ import annotations

import io
import tokenize
from pathlib import Path

from pulsarctl import message_events as names
from pulsarctl.broker import cursor_view, fired, history, records
from pulsarctl.cli import cursor_picture, explain_cmd

ROOT = Path(__file__).resolve().parents[2]


def test_each_kind_has_one_name():
    assert records.ACK_TIMEOUT is history.ACK_TIMEOUT is cursor_view.ACK_TIMEOUT \
        is names.ACK_TIMEOUT
    assert records.NACK is cursor_view.NACK is names.NACK
    assert fired.TIMER_KINDS == (names.NACK, names.ACK_TIMEOUT)
    assert history.EVENTS is names.EVENTS and len(set(names.EVENTS)) == len(names.EVENTS)
    for reason in (names.NACKED, names.ACK_TIMEOUT, names.CONSUMER_GONE, names.REDELIVERED):
        assert reason in cursor_picture._REASONS


def test_explain_tells_every_kind_in_words():
    for kind in names.EVENTS:
        e = {"event": kind, "subscription": "s", "consumerName": "c", "redeliveryCount": 1,
             "reason": "r", "topic": "persistent://public/default/t"}
        assert explain_cmd.phrase(e, "1:0:-1") != f"1:0:-1 {kind}", kind


def _literals(path: Path):
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if tok.type == tokenize.STRING:
            yield tok.start[0], tok.string


def test_no_module_spells_a_kind_itself():
    """The kinds that name nothing else (ackTimeout once had three constants)."""
    own = {names.ACK_TIMEOUT, names.CONSUMER_GONE, names.DEAD_LETTERED, names.RETRIED}
    quoted = {q + k + q for k in own for q in "\"'"}
    found = [f"{p.relative_to(ROOT)}:{line}: {s}"
             for p in sorted((ROOT / "pulsarctl").rglob("*.py")) if p.name != "message_events.py"
             for line, s in _literals(p) if s in quoted]
    assert not found, "\n".join(found)
