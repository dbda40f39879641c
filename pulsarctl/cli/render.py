"""The only module that prints. Data goes to stdout, everything else to stderr.

rich is imported only for text output that needs it (tables), so the start-up path of a
one-shot command stays light.
"""
from __future__ import annotations

import os
import sys

TEXT, JSON, NDJSON = "text", "json", "ndjson"
FORMATS = (TEXT, JSON, NDJSON)

# Control characters and escapes shown as \xNN so a payload can never drive the terminal.
_SAFE = {c: f"\\x{c:02x}" for c in list(range(0, 32)) + [127] if c not in (9,)}
_SAFE.update({c: f"\\u{c:04x}" for c in range(0x80, 0xA0)})
_SAFE[0x9B] = "\\u009b"


def safe(text: str) -> str:
    return text.translate(_SAFE)


def out(text: str) -> None:
    sys.stdout.write(text)


def outln(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def err(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def flush() -> None:
    sys.stdout.flush()


def error_line(message: str) -> None:
    """Errors are exactly one line, never wrapped."""
    err(" ".join(safe(message).split()))


def json_doc(data) -> None:
    import json

    outln(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def ndjson_rows(rows) -> None:
    import json

    w = sys.stdout.write
    for r in rows:
        w(json.dumps(r, ensure_ascii=False, separators=(",", ":"), default=str) + "\n")


def _console(stderr: bool = False):
    from rich.console import Console

    no_color = bool(os.environ.get("NO_COLOR"))
    return Console(stderr=stderr, no_color=no_color, highlight=False, soft_wrap=True,
                   markup=False, emoji=False)


def table(columns: list[str], rows: list[list], title: str | None = None) -> None:
    from rich.table import Table

    t = Table(title=title, show_lines=False, header_style="bold")
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[safe("" if v is None else str(v)) for v in r])
    _console().print(t)


def kv(data: dict, title: str | None = None) -> None:
    """A dict as a two-column table for people."""
    import json

    rows = []
    for k, v in data.items():
        if isinstance(v, (dict, list)):
            v = json.dumps(v, ensure_ascii=False, default=str)
        rows.append([k, v])
    table(["key", "value"], rows, title)


def data(obj, fmt: str, text=None) -> None:
    """Render a document: JSON for json, one line per item for ndjson (lists; a dict is one
    line), and text(obj) — or a key/value table — for people."""
    if fmt == JSON:
        json_doc(obj)
    elif fmt == NDJSON:
        ndjson_rows(obj if isinstance(obj, list) else [obj])
    elif text is not None:
        text(obj)
    elif isinstance(obj, dict):
        kv(obj)
    elif isinstance(obj, list):
        for x in obj:
            outln(safe(str(x)))
    elif obj is None or isinstance(obj, bool):
        outln({None: "null", True: "true", False: "false"}[obj])  # as pulsar-admin prints them
    else:
        outln(safe(str(obj)))


def names(items: list[str], fmt: str, key: str = "name") -> None:
    if fmt == JSON:
        json_doc(items)
    elif fmt == NDJSON:
        ndjson_rows({key: x} for x in items)
    else:
        for x in items:
            outln(safe(x))


def message_ids(ids, fmt: str, topic: str | None = None, producer: str | None = None) -> None:
    if fmt == JSON:
        json_doc({"topic": topic, "producerName": producer, "messageIds": [str(i) for i in ids]})
    elif fmt == NDJSON:
        ndjson_rows({"messageId": str(i), "topic": topic} for i in ids)
    else:
        sys.stdout.write("".join(f"{i}\n" for i in ids))


def message(m, fmt: str, *, hide_content=False, hex_=False, metadata=False, with_id=False) -> None:
    """One message: a record for json/ndjson; pulsar-client's layout for people."""
    if fmt in (JSON, NDJSON):
        import json

        r = m.record()
        if hide_content:
            r.pop("payload", None)
            r.pop("encoding", None)
        elif hex_:
            r["payload"] = m.payload.hex()
            r["encoding"] = "hex"
        line = json.dumps(r, ensure_ascii=False, separators=(",", ":") if fmt == NDJSON else None,
                          indent=None if fmt == NDJSON else 2, default=str)
        sys.stdout.write(line + "\n")
        return
    props = ", ".join(f"{safe(k)}={safe(v)}" for k, v in (m.properties_ or {}).items())
    key = "null" if m.key is None else safe(m.key)
    lines = ["----- got message -----"]
    if with_id or metadata:
        lines.append(f"messageId:{m.id}")
    if metadata:
        from pulsarctl.messages import iso_ms

        lines.append(f"publishTime:[{iso_ms(m.publish_time)}], eventTime:[{iso_ms(m.event_time)}], "
                     f"producerName:[{safe(m.producer_name)}], sequenceId:[{m.sequence_id}], "
                     f"redeliveryCount:[{m.redelivery_count_}]")
    if hide_content:
        content = ""
    elif hex_:
        content = ", content:" + m.payload.hex()
    else:
        content = ", content:" + safe(m.payload.decode("utf-8", errors="backslashreplace"))
    lines.append(f"key:[{key}], properties:[{props}]{content}")
    sys.stdout.write("\n".join(lines) + "\n")


def stderr_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """A rich progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, total: int | None, what: str):
        self._p = None
        if total and stderr_tty():
            from rich.progress import (
                BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn,
            )

            self._p = Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(),
                               TimeRemainingColumn(), console=_console(stderr=True),
                               transient=True, redirect_stdout=False, redirect_stderr=False)
            self._task = self._p.add_task(what, total=total)
            self._p.start()

    def advance(self, n: int) -> None:
        if self._p is not None and n:
            self._p.advance(self._task, n)

    def close(self) -> None:
        if self._p is not None:
            self._p.stop()
            self._p = None
