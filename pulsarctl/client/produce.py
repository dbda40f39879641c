"""What `produce` sends: messages from -m / -f, and line streams from stdin committed in
batches (every N lines or T ms, so a long-lived pipe publishes as lines arrive)."""
from __future__ import annotations

import os

from pulsarctl import clock as clocks
from pulsarctl.errors import InvalidValue, UsageError
from pulsarctl.messages import OutgoingMessage
from pulsarctl.units import parse_time_ms

BATCH_LINES = 10_000  # a fast pipe fills a batch long before BATCH_MS
BATCH_MS = 100


class Template:
    """The per-message settings given on the command line."""

    def __init__(self, key=None, ordering_key=None, properties=(), event_time=None,
                 deliver_after=None, deliver_at=None, now_ms=None):
        # units needs re and datetime: imported only when a flag needs parsing.
        if properties or event_time or deliver_after or deliver_at:
            # local: imported only where this branch runs
            from pulsarctl.units import parse_duration_ms, parse_property, parse_time_ms
        self.key = key
        self.ordering_key = ordering_key.encode() if ordering_key is not None else None
        self.properties = dict(parse_property(p) for p in properties) or None
        self.event_time = parse_time_ms(event_time, "event time") if event_time else 0
        if deliver_after and deliver_at:
            raise UsageError("give --deliver-after or --deliver-at, not both")
        self.deliver_at = 0
        if deliver_at:
            self.deliver_at = parse_time_ms(deliver_at, "delivery time")
        elif deliver_after:
            self.deliver_at = (now_ms or clocks.wall_ms()) + parse_duration_ms(deliver_after)

    def make(self, payload: bytes, seq=None) -> OutgoingMessage:
        return OutgoingMessage(payload, self.properties, self.key, self.ordering_key,
                               self.event_time, self.deliver_at, seq)


def payloads(messages=(), files=(), separator=None) -> list[bytes]:
    out: list[bytes] = []
    for m in messages:
        parts = m.split(separator) if separator else [m]
        out.extend(p.encode() for p in parts)
    for spec in files:
        for path in [p for p in spec.split(",") if p]:
            try:
                with open(path, "rb") as f:
                    out.append(f.read())
            except FileNotFoundError:
                raise InvalidValue(f"file not found: {path}") from None
            except IsADirectoryError:
                raise InvalidValue(f"{path} is a directory, not a file") from None
            except OSError as exc:
                raise InvalidValue(f"cannot read {path}: {exc.strerror}") from None
    return out


def delay_breaks(times: list, delay_ms: int) -> list[int]:
    """The indexes of the messages that start a new batch: those that arrived the batching
    publish delay or more after the first message of the batch being filled, as Pulsar's batch
    timer would have sent the earlier one. times: arrival times in ms (line_batches)."""
    out: list[int] = []
    d = max(delay_ms, 0.001)
    start = None
    for i, t in enumerate(times):
        if start is None:
            start = t
        elif t - start >= d:
            out.append(i)
            start = t
    return out


def mark_delays(msgs: list, times: list, delay_ms: int) -> None:
    """Mark the messages delay_breaks names (OutgoingMessage.new_batch)."""
    if len(times) == len(msgs):
        for i in delay_breaks(times, delay_ms):
            msgs[i].new_batch = True


def plain(template: Template) -> bool:
    """Whether the template gives its messages nothing but their payload."""
    return not (template.properties or template.key is not None
                or template.ordering_key is not None or template.event_time
                or template.deliver_at)


def build(template: Template, bodies: list[bytes], num: int = 1, sequence_id=None):
    msgs = []
    seq = sequence_id
    for _ in range(num):
        for b in bodies:
            msgs.append(template.make(b, seq))
            if seq is not None:
                seq += 1
    return msgs


def stdin_batches(stream, max_lines: int = BATCH_LINES, max_ms: int = BATCH_MS,
                  times: list | None = None):
    """line_batches over a text stream's file descriptor; a stream without one (an in-memory
    stdin, as test runners give) is read line by line, batched by count only. times: see
    line_batches (an in-memory stream's lines all arrive at once)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is not None:
        yield from line_batches(fd, max_lines, max_ms, times)
        return
    raw = getattr(stream, "buffer", stream)
    batch = []
    if times is not None:
        times.clear()  # no arrival times: the publish delay never cuts a batch
    for line in raw:
        if isinstance(line, str):
            line = line.encode()
        line = line[:-1] if line.endswith(b"\n") else line
        batch.append(line[:-1] if line.endswith(b"\r") else line)
        if len(batch) >= max_lines:
            yield batch
            batch = []
    if batch:
        yield batch


def line_batches(fd: int, max_lines: int = BATCH_LINES, max_ms: int = BATCH_MS,
                 times: list | None = None):
    """Yield lists of lines (bytes, newline stripped) from fd as they arrive: a batch ends at
    max_lines, or max_ms after its first line, or at end of input. times: a list that, with
    each batch yielded, holds when each of its lines arrived (monotonic ms), for the
    producer's batching publish delay."""
    import select  # lazy: one-shot produce never needs it

    buf = b""
    batch: list[bytes] = []
    stamps: list[float] = []
    deadline = None
    eof = False

    def out(lines):
        if times is not None:
            times[:] = stamps[:len(lines)]
            del stamps[:len(lines)]
        return lines

    while not eof:
        timeout = None if deadline is None else max(0.0, deadline - clocks.monotonic())
        if timeout is not None:
            try:
                ready, _, _ = select.select([fd], [], [], timeout)
            except (OSError, ValueError):
                ready = [fd]
            if not ready:
                yield out(batch)
                batch, deadline = [], None
                continue
        chunk = os.read(fd, 1 << 16)
        now = clocks.monotonic() * 1000
        if not chunk:
            eof = True
            if buf:
                batch.append(buf[:-1] if buf.endswith(b"\r") else buf)
                stamps.append(now)
                buf = b""
        else:
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for ln in lines:
                batch.append(ln[:-1] if ln.endswith(b"\r") else ln)
            stamps.extend([now] * len(lines))
            if batch and deadline is None:
                deadline = clocks.monotonic() + max_ms / 1000
        while len(batch) >= max_lines:
            yield out(batch[:max_lines])
            batch = batch[max_lines:]
            deadline = clocks.monotonic() + max_ms / 1000 if batch else None
    if batch:
        yield out(batch)


def record_to_message(line: bytes, template: Template, lineno: int) -> OutgoingMessage:
    """An NDJSON message record (CLI.md's format) as a message; template fills what is unset."""
    import base64  # lazy: one-shot produce never needs it
    import json  # lazy: one-shot produce never needs it


    try:
        r = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise InvalidValue(f"line {lineno}: not a JSON message record",
                           hint="with --ndjson every line must be a JSON object") from None
    if not isinstance(r, dict):
        raise InvalidValue(f"line {lineno}: not a JSON object",
                           hint="with --ndjson every line must be a JSON object")
    payload = r.get("payload", "")
    enc = r.get("encoding")
    if not isinstance(payload, str):
        raise InvalidValue(f"line {lineno}: payload must be a string")
    if enc == "base64":
        try:
            body = base64.b64decode(payload, validate=True)
        except ValueError:
            raise InvalidValue(f"line {lineno}: payload is not valid base64") from None
    elif enc == "hex":
        try:
            body = bytes.fromhex(payload)
        except ValueError:
            raise InvalidValue(f"line {lineno}: payload is not valid hex") from None
    elif enc in (None, "utf-8", "utf8"):
        body = payload.encode()
    else:
        raise InvalidValue(f"line {lineno}: unknown encoding {enc!r}", hint="use base64 or omit it")
    m = template.make(body)
    if r.get("key") is not None:
        m.key = str(r["key"])
    key_enc = r.get("keyEncoding")
    if key_enc == "base64":
        # A key of bytes, as a consumer's record shows one: kept as base64 text with Pulsar's
        # partition_key_b64_encoded, so it goes back out as the bytes it was.
        try:
            base64.b64decode(m.key if m.key is not None else "-", validate=True)
        except ValueError:
            raise InvalidValue(f"line {lineno}: key is not valid base64",
                               hint='"keyEncoding": "base64" needs a base64 "key"') from None
        m.key_b64 = True
    elif key_enc is not None:
        raise InvalidValue(f"line {lineno}: unknown keyEncoding {key_enc!r}",
                           hint="use base64 or omit it")
    if r.get("orderingKey") is not None:
        m.ordering_key = str(r["orderingKey"]).encode()
    props = r.get("properties")
    if props is not None:
        if not isinstance(props, dict):
            raise InvalidValue(f"line {lineno}: properties must be an object")
        m.properties = {**(m.properties or {}), **{str(k): str(v) for k, v in props.items()}}
    if r.get("eventTime") is not None:
        m.event_time = parse_time_ms(str(r["eventTime"]), f"line {lineno}: eventTime")
    if r.get("deliverAt") is not None:
        m.deliver_at = parse_time_ms(str(r["deliverAt"]), f"line {lineno}: deliverAt")
    return m
