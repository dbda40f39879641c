"""The only module that prints. Data goes to stdout, everything else to stderr.

rich is imported only for text output that needs it (tables), so the start-up path of a
one-shot command stays light.
"""
from __future__ import annotations

import contextlib
import io
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


def out_bytes(data: bytes) -> None:
    """Raw bytes on stdout (`tokens create-secret-key` writes the key as Pulsar does)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@contextlib.contextmanager
def captured():
    """What is printed inside the block (stdout, stderr) kept as text instead: `lesson run`
    runs each step's command line in-process and shows its output within the lesson's own.
    Yields the two buffers; read them with getvalue() after the block."""
    out, err_ = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err_):
        yield out, err_


def read_stdin_line() -> str:
    """One line of standard input (`tokens validate --stdin`)."""
    return sys.stdin.readline()


def err(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def flush() -> None:
    sys.stdout.flush()


def error_line(message: str) -> None:
    """Errors are exactly one line, never wrapped."""
    err(" ".join(safe(message).split()))


# C1 controls (U+0080-U+009F; U+009B is a CSI on many terminals) are escaped in JSON too:
# json.dumps(ensure_ascii=False) writes them raw, and `cat` of a record must not drive the
# terminal. They only ever occur inside JSON strings, where \u00XX is the same text.
_JSON_C1 = {c: f"\\u{c:04x}" for c in range(0x80, 0xA0)}


_COMPACT = None  # the json encoder of NDJSON lines, made once (json.dumps makes one a call)


def _line(data) -> str:
    """One compact JSON line, as dumps(data, pretty=False) + newline writes it: a consume of
    plain messages writes one a message, so the encoder is made once and the C1 escape runs
    only on text that is not ASCII (dumps and json.dumps together were 30% of a consume)."""
    global _COMPACT
    if _COMPACT is None:
        import json  # lazy: loaded when the command runs, not when the command tree is built

        _COMPACT = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"))
    text = _COMPACT.encode(data)
    return (text if text.isascii() else text.translate(_JSON_C1)) + "\n"


_STR = None  # json's string encoder (C), for _record_line
_SHAPES: dict = {}  # _record_line's shared fields, by what they are made of


def _encoder():
    """json's string encoder (C), loaded once."""
    global _STR
    if _STR is None:
        # lazy: loaded when the command runs, not when the command tree is built
        from json.encoder import encode_basestring

        _STR = encode_basestring
    return _STR


def _shared(topic, key, props, publish_time, event_time, producer, rc, sub, consumer):
    """A message record's NDJSON line around its id, payload and sequence id, in three parts
    (after the id, between the payload and the sequence id, after it). What the messages of
    one batch (one producer, publish time, consumer) share is made once and kept."""
    shape = None if props else (topic, key, publish_time, event_time, producer, rc, sub,
                                consumer)
    parts = _SHAPES.get(shape) if shape is not None else None
    if parts is not None:
        return parts
    # lazy: messages imports nothing of the CLI; iso_ms keeps the last time it wrote
    from pulsarctl.messages import iso_ms

    enc = _encoder()
    event = iso_ms(event_time)
    parts = (
        '","topic":' + enc(topic) + ',"payload":',
        ',"key":' + ("null" if key is None else enc(key)) + ',"orderingKey":null,"properties":'
        + (_line(dict(props))[:-1] if props else "{}") + ',"publishTime":'
        + ("null" if not publish_time else '"' + iso_ms(publish_time) + '"')
        + ',"eventTime":' + ("null" if event is None else '"' + event + '"')
        + ',"producerName":' + ("null" if producer is None else enc(producer))
        + ',"sequenceId":',
        ',"redeliveryCount":' + str(rc)
        + ("}" if sub is None else ',"subscription":' + enc(sub) + ',"consumerName":'
           + ("null" if consumer is None else enc(consumer)) + "}"))
    if shape is not None:
        if len(_SHAPES) > 1024:
            _SHAPES.clear()
        _SHAPES[shape] = parts
    return parts


def _record_line(m) -> str | None:
    """The NDJSON line of a plain message (a UTF-8 payload, no ordering key, delivery time,
    schema version or chunk), written field by field: byte for byte _line(m.record())
    (tests/cli/test_render_lines.py), without the dict and the encoder's walk over it, a
    quarter of what a consume spends a message. None for any other message."""
    if (m.ordering_key_ is not None or m.deliver_at or m.schema_version_ is not None
            or m.chunk_ids_ or m.chunk_ is not None or m.null_value_ or m.key_b64_
            or m.topic is None
            or m.redelivery_count_ is None):
        return None
    try:
        payload = m.payload.decode("utf-8")
    except UnicodeDecodeError:
        return None
    seq = m.sequence_id
    head, middle, tail = _shared(m.topic, m.key, m.properties_, m.publish_time, m.event_time,
                                 m.producer_name, m.redelivery_count_, m.subscription,
                                 m.consumer_name)
    text = ('{"messageId":"' + str(m.id) + head + _encoder()(payload) + middle
            + ("null" if seq is None else str(seq)) + tail)
    return (text if text.isascii() else text.translate(_JSON_C1)) + "\n"


def dumps(data, pretty: bool = True) -> str:
    import json  # lazy: loaded when the command runs, not when the command tree is built

    text = json.dumps(data, indent=2 if pretty else None, ensure_ascii=False, default=str,
                      separators=None if pretty else (",", ":"))
    return text.translate(_JSON_C1)


def json_doc(data) -> None:
    outln(dumps(data))


def ndjson_rows(rows) -> None:
    w = sys.stdout.write
    for r in rows:
        w(dumps(r, pretty=False) + "\n")


def _console(stderr: bool = False):
    # lazy: loaded when the command runs, not when the command tree is built
    from rich.console import Console

    no_color = bool(os.environ.get("NO_COLOR"))
    return Console(stderr=stderr, no_color=no_color, highlight=False, soft_wrap=True,
                   markup=False, emoji=False)


def stdout_tty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def table(columns: list[str], rows: list[list], title: str | None = None) -> None:
    """A table for people: rich's boxes on a terminal; otherwise plain aligned columns, one
    line per row, never wrapped, so `| grep` and `| cut` see whole rows."""
    if not stdout_tty():
        _plain_table(columns, [[safe("" if v is None else str(v)) for v in r] for r in rows],
                     title)
        return
    # lazy: loaded when the command runs, not when the command tree is built
    from rich.table import Table

    t = Table(title=title, show_lines=False, header_style="bold")
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[safe("" if v is None else str(v)) for v in r])
    _console().print(t)


def show(renderable) -> None:
    """A rich renderable (a picture: `topics cursor`) on stdout; no colour with NO_COLOR or
    off a terminal, as rich decides; wrapped at the terminal's width (COLUMNS, else 80)."""
    _console().print(renderable)


def _plain_table(columns: list[str], rows: list[list[str]], title: str | None) -> None:
    # A cell's own newlines would split its row: shown escaped, as safe() shows controls.
    rows = [[c.replace("\n", "\\n") for c in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in rows if i < len(r)])
              for i, c in enumerate(columns)]
    lines = [title] if title else []
    for r in [columns] + rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    sys.stdout.write("".join(line + "\n" for line in lines))


def kv(data: dict, title: str | None = None) -> None:
    """A dict as a two-column table for people."""
    import json  # lazy: loaded when the command runs, not when the command tree is built

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


class _Records:
    """`-o json` prints one JSON document: a command that may print several message records
    (consume/receive/read with -n other than 1) writes them as one array. Each record is
    written (and flushed by the caller) as it comes, before its message is acked, so nothing
    is held back in memory; the array is closed when the command ends, whatever ends it."""

    def __init__(self):
        self.open_ = False
        self.n = 0

    def begin(self) -> None:
        self.open_, self.n = True, 0

    def write(self, text: str) -> None:
        sys.stdout.write(("[\n" if self.n == 0 else ",\n") + text)
        self.n += 1

    def end(self) -> None:
        if self.open_:
            self.open_ = False
            sys.stdout.write("[]\n" if self.n == 0 else "\n]\n")
            sys.stdout.flush()


_records = _Records()


def begin_messages(fmt: str, many: bool) -> None:
    """Call before printing messages: with -o json and many=True they form one array."""
    if fmt == JSON and many:
        _records.begin()


def end_messages() -> None:
    _records.end()


def message_ids(ids, fmt: str, topic: str | None = None, producer: str | None = None) -> None:
    if fmt == JSON:
        json_doc({"topic": topic, "producerName": producer, "messageIds": [str(i) for i in ids]})
    elif fmt == NDJSON:
        ndjson_rows({"messageId": str(i), "topic": topic} for i in ids)
    else:
        sys.stdout.write("".join(f"{i}\n" for i in ids))


def message_id_runs(runs, fmt: str, topic: str) -> None:
    """message_ids of (ledger id, entry id, partition, messages in the entry) runs, as a bulk
    produce returns them (a batch entry's messages have the batch indexes 0 to n-1): the same
    lines, written without a MessageId each. Text or NDJSON (JSON collects ids instead)."""
    parts = []
    add = parts.append
    if fmt == NDJSON:
        tail = '","topic":' + _encoder()(topic) + "}\n"
        if not tail.isascii():
            tail = tail.translate(_JSON_C1)
        head = '{"messageId":"'
    else:
        head, tail = "", "\n"
    for lid, eid, part, n in runs:
        if n == 1:
            add(f"{head}{lid}:{eid}:{part}{tail}")
            continue
        prefix = f"{head}{lid}:{eid}:{part}:"
        add(tail.join(map(prefix.__add__, map(str, range(n)))) + tail)
    _write_long("".join(parts))


def messages(ms: list, fmt: str, **show) -> None:
    """message of each of ms (Messages, or batches.Batch entries given whole: their messages);
    NDJSON lines written together, one write for the run."""
    if fmt == NDJSON and not (show.get("hide_content") or show.get("hex_")):
        lines: list = []
        for m in ms:
            if hasattr(m, "columns"):   # a batch entry, whole
                if not _batch_lines(m, lines):
                    lines.extend(_record_line(x) or _line(x.record()) for x in m.messages())
                continue
            line = _record_line(m)
            lines.append(line if line is not None else _line(m.record()))
        _write_long("".join(lines))
        return
    for m in ms:
        for x in (m.messages() if hasattr(m, "columns") else (m,)):
            message(x, fmt, **show)


_PIECE = 2048  # characters: at most 8 KiB encoded, the size of stdout's buffer


def _write_long(text: str) -> None:
    """Write a long text in pieces that fit stdout's buffer. One write of more than the buffer
    goes straight to the pipe, and if a signal comes while it blocks (Ctrl-C, held by the
    print-then-ack guard) Python's text layer drops what the pipe had not taken yet; written
    through the buffer, every byte goes out."""
    w = sys.stdout.write
    for k in range(0, len(text), _PIECE):
        w(text[k:k + _PIECE])


def _batch_lines(b, out: list) -> bool:
    """The NDJSON lines of a batch entry's plain messages (payloads and sequence ids only, a
    UTF-8 payload each), straight from its columns into out: byte for byte the lines of its
    Messages (tests/cli/test_render_lines.py). False, with nothing added, for any other."""
    from pulsarctl.entries import (  # lazy: the CLI's consume only
        F_PRODUCER_NAME, F_PUBLISH_TIME, F_SCHEMA_VERSION, F_SEQUENCE_ID)

    rec, cols = b.rec, b.columns
    if any(cols[1:6]) or len(cols) > 6 or (len(rec) > F_SCHEMA_VERSION
                                            and rec[F_SCHEMA_VERSION] is not None) \
            or b.topic is None or b.redelivery_count is None:
        return False   # keys, properties, times, sequence ids or nulls of their own
    try:
        texts = [p.decode("utf-8") for p in cols[0]]
    except UnicodeDecodeError:
        return False
    enc = _encoder()
    first, i = rec[F_SEQUENCE_ID], b.id
    mid, middle, tail = _shared(b.topic, None, None, rec[F_PUBLISH_TIME], 0,
                                rec[F_PRODUCER_NAME], b.redelivery_count, b.subscription,
                                b.consumer)
    head = f'{{"messageId":"{i.ledger_id}:{i.entry_id}:{i.partition}:'
    tail += "\n"
    skip = b.skip
    for k, text in enumerate(texts):
        if skip and k in skip:
            continue
        seq = "null" if first is None else str(first + k)
        line = head + str(k) + mid + enc(text) + middle + seq + tail
        out.append(line if line.isascii() else line.translate(_JSON_C1))
    return True


def message(m, fmt: str, *, hide_content=False, hex_=False, metadata=False, with_id=False) -> None:
    """One message: a record for json/ndjson; pulsar-client's layout for people."""
    if fmt == NDJSON and not (hide_content or hex_):
        line = _record_line(m)
        if line is not None:
            sys.stdout.write(line)
            return
    if fmt in (JSON, NDJSON):
        r = m.record()
        if hide_content:
            r.pop("payload", None)
            r.pop("encoding", None)
        elif hex_:
            r["payload"] = m.payload.hex()
            r["encoding"] = "hex"
        if fmt == JSON and _records.open_:
            _records.write(dumps(r))
        elif fmt == NDJSON:
            sys.stdout.write(_line(r))
        else:
            sys.stdout.write(dumps(r, pretty=fmt == JSON) + "\n")
        return
    props = ", ".join(f"{safe(k)}={safe(v)}" for k, v in (m.properties_ or {}).items())
    key = "null" if m.key is None else safe(m.key)
    lines = ["----- got message -----"]
    if with_id or metadata:
        lines.append(f"messageId:{m.id}")
    if metadata:
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.messages import iso_ms

        # An unset time shows as null, as the records and pulsar-admin print it (not None).
        lines.append(f"publishTime:[{iso_ms(m.publish_time) or 'null'}], "
                     f"eventTime:[{iso_ms(m.event_time) or 'null'}], "
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
            # lazy: loaded when the command runs, not when the command tree is built
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


class Counter:
    """A running count on stderr ("produced 1200 messages"), only when stderr is a terminal:
    for input of unknown length, where a bar has no total."""

    def __init__(self, verb: str, noun: str):
        self._status = None
        self._text = f"{verb} {{n}} {noun}s"
        if stderr_tty():
            # lazy: loaded when the command runs, not when the command tree is built
            from rich.live import Live
            # lazy: loaded when the command runs, not when the command tree is built
            from rich.spinner import Spinner

            self._spinner = Spinner("dots", self._text.format(n=0))
            # stdout is data (message ids): never redirected into the display.
            self._status = Live(self._spinner, console=_console(stderr=True), transient=True,
                                redirect_stdout=False, redirect_stderr=False,
                                refresh_per_second=8)
            self._status.start()

    def update(self, n: int) -> None:
        if self._status is not None:
            self._spinner.update(text=self._text.format(n=n))

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def rich(renderable) -> None:
    """A rich renderable (a table, a group of them) on stdout for people, at the terminal's
    width (COLUMNS when stdout is not a terminal): `top --once`."""
    _console().print(renderable)


def live_screen():
    """A rich Live on stdout, in the terminal's alternate screen, refreshed only when the caller
    updates it (`top`): leaving it (its context manager) gives the terminal its screen back.
    stdout is the view itself, so nothing is redirected into it."""
    # lazy: loaded when the command runs, not when the command tree is built
    from rich.live import Live

    return Live(console=_console(), screen=True, auto_refresh=False, transient=True,
                redirect_stdout=False, redirect_stderr=False)
