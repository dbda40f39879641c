"""Where `dlq drain` writes its records: a file (appended to, fsynced per batch before the
batch is acked: at-least-once) or stdout.

A drain killed while writing leaves a torn last line, which the next drain into the same file
cuts; a pipe or a device cannot be fsynced. These file rules are the drain's alone, apart from
the commands (dlq_cmd.py) and how they run (dlq_run.py).
"""
from __future__ import annotations

import os
import sys

from pulsarctl.cli import render
from pulsarctl.errors import PulsarctlError


def cut_torn_tail(f) -> None:
    """A drain killed while writing leaves a last line without its newline; that message was
    not acked, so the line is cut (only if it is one of ours: a message record)."""
    end = f.seek(0, os.SEEK_END)
    if end == 0:
        return
    f.seek(end - 1)
    if f.read(1) == b"\n":
        return
    pos, start = end, 0
    while pos > 0:
        step = min(65_536, pos)
        pos -= step
        f.seek(pos)
        i = f.read(step).rfind(b"\n")
        if i >= 0:
            start = pos + i + 1
            break
    f.seek(start)
    if f.read(14) == b'{"messageId":"':
        f.truncate(start)
    else:
        f.write(b"\n")  # someone else's last line: keep it, start ours on a line of its own
    f.flush()
    fsync(f.fileno())


def fsync(fd: int) -> None:
    """fsync, where there is something to sync: a pipe, a terminal or /dev/null has not."""
    import errno  # lazy: loaded when the command runs, not when the command tree is built

    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise


class Sink:
    """Where drain writes: a file (appended to, fsynced per batch) or stdout (-)."""

    def __init__(self, path: str):
        self.path = path
        self.f = None
        if path == "-":
            return
        created = not os.path.exists(path)
        try:
            self.f = open(path, "a+b")
        except OSError as exc:
            raise PulsarctlError(f"cannot write to {path}: {exc.strerror}",
                                 hint="give a writable file with --out FILE, or --out - for "
                                      "stdout") from None
        import stat  # lazy: loaded when the command runs, not when the command tree is built

        if not stat.S_ISREG(os.fstat(self.f.fileno()).st_mode):
            return  # a device or a pipe: appends only
        cut_torn_tail(self.f)
        if created:
            d = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
            try:
                os.fsync(d)
            finally:
                os.close(d)

    def write(self, msgs) -> None:
        """Write the records and make them durable before the caller acks them."""
        if self.f is None:
            for m in msgs:
                render.message(m, render.NDJSON)
            render.flush()
            try:
                fsync(sys.stdout.fileno())
            except ValueError:
                pass  # not a real file (a test's capture)
            return
        data = "".join(render.dumps(m.record(), pretty=False) + "\n" for m in msgs)
        self.f.write(data.encode("utf-8"))
        self.f.flush()
        fsync(self.f.fileno())

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
