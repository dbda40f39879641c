"""The one place errors become exit codes and a single line on stderr."""
from __future__ import annotations

import os
import sys

from pulsarctl.cli import render
from pulsarctl.errors import STDOUT_CLOSED, PulsarctlError


def guarded(fn, argv: list[str], extra=None) -> int:
    """Run fn() and turn whatever it raises into (one line on stderr, exit code).

    extra(exc) may map framework exceptions (click's usage errors) first; it returns an exit
    code or None."""
    want_tb = "--traceback" in argv
    try:
        return _run(fn)
    except PulsarctlError as exc:
        if want_tb:
            raise
        render.error_line(exc.line())
        return exc.exit_code
    except KeyboardInterrupt:
        render.error_line("interrupted")
        return 130
    except BrokenPipeError:
        return _stdout_closed()
    except SystemExit as exc:
        if isinstance(exc.__context__, BrokenPipeError):
            # click meets the closed pipe first (inside the command) and exits 1 for it.
            return _stdout_closed()
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:
        code = extra(exc) if extra is not None else None
        if code is not None:
            return code
        if want_tb:
            raise
        render.error_line(f"error: unexpected {type(exc).__name__}: {exc}; run again with "
                          f"--traceback and report it")
        return 1


def _stdout_closed() -> int:
    """The reader of stdout went away (`| head`): not an error of ours, so nothing is said;
    the exit status is the one a shell shows for a program SIGPIPE ends (141), as git, cat or
    seq give, so a pipeline under `set -o pipefail` sees what it sees for them. stdout goes to
    /dev/null first: what Python flushes at exit must not fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return STDOUT_CLOSED


def _run(fn) -> int:
    try:
        rv = fn()
    finally:
        # An array of message records begun with -o json is closed whatever ended the
        # command (done, an error, Ctrl-C), so what was printed stays one JSON document.
        try:
            render.end_messages()
        except OSError:
            pass
    render.flush()
    return rv if isinstance(rv, int) else 0
