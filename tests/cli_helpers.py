"""Assertions shared by the CLI tests: success, the one-line error contract, ndjson rows."""
import json


def ok(r):
    assert r.exit_code == 0, f"exit {r.exit_code}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    assert "Traceback" not in r.stderr
    return r


def assert_error(r, code, *, stdout_empty=False):
    """CLI.md: an error is one line on stderr starting with "error:" (never a traceback, never
    an unmapped exception) and a documented exit code; with stdout_empty, nothing on stdout
    either (a command that reports per item, as dlq's do, may print them first). The line."""
    assert r.exit_code == code, f"exit {r.exit_code} != {code}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1, f"stderr is not exactly one line: {r.stderr!r}"
    assert lines[0].startswith("error:"), lines[0]
    assert "unexpected" not in lines[0], f"an unmapped exception: {lines[0]}"
    if stdout_empty:
        assert r.stdout == "", r.stdout
    return lines[0]


def rows(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def pjson(r):
    return json.loads(ok(r).stdout)


def one_error_line(stderr: str) -> str:
    """The one line a failed command says on stderr (never a traceback)."""
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {stderr!r}"
    assert "Traceback" not in stderr
    return lines[0]
