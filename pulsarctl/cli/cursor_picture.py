"""The cursor picture as people see it: a rich renderable built from a broker cursor view
(pulsarctl/broker/cursor_view.py), for `topics cursor`, the `top` dashboard and the lessons.

One line per entry or run of entries, oldest first: its id (or first-last ids and a count), a
mark and a label per state, and what the state says (who holds it since when, when and why it
comes back, until when it is delayed). The mark-delete and read positions are lines of their
own between the entries, exactly where they fall. Each state has its own mark as well as its
colour, so the picture reads the same with NO_COLOR, and lines stay within 80 columns for a
window's usual contents (a long consumer name wraps). A stretch of entries not drawn is one
line, cut in two where a position marker falls inside it, so the marker stands where it is.
A row that shows pulsarctl doing more than Pulsar ends in † and the picture ends with what each
such † means."""
from __future__ import annotations

from rich.console import Group
from rich.text import Text

from pulsarctl import timetext
from pulsarctl.message_events import ACK_TIMEOUT, CONSUMER_GONE, NACKED, REDELIVERED

# State -> (mark, style). The marks differ so that the picture needs no colour.
STYLES = {
    "acked": ("✓", "green"),
    "pending": ("●", "yellow"),
    "redeliver": ("↻", "bold red"),
    "delayed": ("◷", "cyan"),
    "backlog": ("○", "bright_white"),
}
_MARKER = "magenta"
_REASONS = {
    NACKED: "nacked",
    ACK_TIMEOUT: "ack timeout",
    CONSUMER_GONE: "consumer gone",
    REDELIVERED: "redelivered",
    "returned": "returned by a consumer that left",
    "keyOrder": "waiting for its key's consumer",
    "keyUncovered": "waiting: no consumer's hash range covers its key",
    "deliverAt": "deliver at",
}


def cursor_picture(view):
    """A renderable of one cursor_view.View, or of a cursor_view.Views (a partitioned topic
    gives one picture per partition, one after the other)."""
    if hasattr(view, "views"):
        parts = []
        for i, v in enumerate(view.views):
            if i:
                parts.append(Text(""))
            parts.append(_one(v))
        return Group(*parts)
    return _one(view)


def _one(v) -> Group:
    lines = [Text.assemble((v.topic, "bold"), f"  subscription {v.subscription} ({v.type})"),
             Text(f"backlog {v.backlog:,}  ·  at {_clock(v.now)}", style="dim")]
    ids = [_ids(r) for r in v.rows]
    width = max([len(s) for s in ids] + [8])
    md, rp, start, stop = v.mark_delete, v.read_position, v.start, v.stop
    # Everything goes in offset order: a row at its first offset; a position marker half an
    # entry before the entry it stands in front of (mark-delete before md + 1, the read
    # position before rp); a stretch not drawn a quarter before its first entry, cut where a
    # marker falls inside it.
    items = [((r.offset, 2), _row(r, text, width, v.now)) for r, text in zip(v.rows, ids)]
    markers = [(md + 1, 0, _marker("mark-delete", v.mark_delete_position)),
               (rp, 1, _marker("read position", v.read_position_text))]
    items += [((k - 0.5, order), line) for k, order, line in markers]
    for a, b, where in ((start - v.not_drawn_before, start, "before the window"),
                        (stop, stop + v.not_drawn_after, "after the window")):
        cuts = sorted({k for k, _o, _l in markers if a < k < b})
        for lo, hi in zip([a] + cuts, cuts + [b]):
            if hi > lo:
                items.append(((lo - 0.25, 0), _elided(hi - lo, where)))
    items.sort(key=lambda x: x[0])
    lines += [line for _k, line in items]
    if not v.rows:
        lines.append(Text("  (no entries)", style="dim"))
    notes = list(dict.fromkeys(n for r in v.rows for n in r.beyond))
    lines += [Text(f"  † pulsarctl: {n}", style="dim") for n in notes]
    return Group(*lines)


def _ids(r) -> str:
    first = f"{r.first_id.ledger_id}:{r.first_id.entry_id}"
    if r.count == 1:
        return first
    return f"{first}–{r.last_id.ledger_id}:{r.last_id.entry_id}"


def _row(r, ids: str, width: int, now: int) -> Text:
    mark, style = STYLES[r.state]
    t = Text("  ")
    t.append(ids.ljust(width), style="dim" if r.state == "acked" else None)
    t.append(f"  {mark} ", style=style)
    t.append(r.state.ljust(9), style=style)
    t.append(f" ×{r.count:,}".ljust(8) if r.count > 1 else " " * 8)
    detail = _detail(r, now)
    if detail:
        t.append(" " + detail)
    if r.beyond:
        t.append(" †", style="dim")
    t.rstrip()
    return t


def _detail(r, now: int) -> str:
    parts = []
    if r.state == "pending" and r.consumer is None:
        # a remote subscription's: Pulsar's stats do not say who holds it, nor since when
        parts.append("delivered, not acked (its consumer and time are not known remotely)")
    elif r.state == "pending":
        parts.append(f"{r.consumer} since {_clock(r.since)}")
        if r.redelivery_count:
            parts.append(f"redelivery {r.redelivery_count}")
        if r.due is not None:
            parts.append(f"ack timeout {_clock(r.due)} ({_rel(r.due, now)})")
    elif r.state == "redeliver":
        why = _REASONS.get(r.reason, r.reason or "")
        when = "next fetch" if r.due is None or r.due == now and r.reason not in (
            NACKED, ACK_TIMEOUT) else f"{_clock(r.due)} ({_rel(r.due, now)})"
        if r.why:
            why = f"{why} ({r.why})"
        parts.append(f"{why}, due {when}")
        if r.consumer:
            parts.append(f"was {r.consumer}")
        if r.redelivery_count:
            parts.append(f"redelivery {r.redelivery_count}")
    elif r.state == "delayed":
        parts.append(f"until {_clock(r.due)} ({_rel(r.due, now)})")
    elif r.state == "backlog" and r.reason:
        parts.append(_REASONS.get(r.reason, r.reason))
    if r.batch_size:
        acked = f", acked {_indexes(r.batch_acked)}" if r.batch_acked else ""
        parts.append(f"batch of {r.batch_size}{acked}")
    return " · ".join(parts)


def _indexes(idx) -> str:
    """Batch indexes as runs: 0-2,5."""
    runs, start, prev = [], None, None
    for i in list(idx) + [None]:
        if start is not None and (i is None or i != prev + 1):
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if i is not None and start is None:
            start = i
        prev = i
    return ",".join(runs)


def _marker(what: str, position: str) -> Text:
    return Text(f"  ── {what} {position} ──", style=_MARKER)


def _elided(n: int, where: str) -> Text:
    return Text(f"  ⋮ {n:,} entr{'y' if n == 1 else 'ies'} {where} not drawn "
                "(--around ID, -n N)", style="dim")


# Times and delays as everywhere else (pulsarctl/timetext.py: exact, never rounded).
_clock, _rel = timetext.clock_text, timetext.relative_text
