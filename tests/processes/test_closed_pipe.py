"""A command whose reader of stdout goes away (`pulsarctl read ... | head -1`) exits quietly
with 141, the status a shell shows when SIGPIPE ends git, cat or seq (issue 27, item 10; it was
exit 1). One place does it for every command (cli/errmap.py): the typer path, click's own
handling of a closed pipe inside a command, and produce's fast path."""
from __future__ import annotations

import pytest

from pulsarctl.broker import Broker
from pulsarctl.errors import EXIT_CODES, STDOUT_CLOSED
from pulsarctl.messages import OutgoingMessage

from procs import PATIENCE_S

TOPIC = "persistent://public/default/t"


@pytest.fixture
def filled(store_path):
    # Far more output than a pipe holds (64 KiB): the command is still writing when the
    # reader closes its end.
    b = Broker(store_path)
    try:
        b.publish(TOPIC, [OutgoingMessage(f"message {i:05d}".encode()) for i in range(20_000)])
    finally:
        b.close()


@pytest.mark.parametrize("args", [
    ("read", "t", "-m", "earliest", "-n", "0", "--until-end"),
    ("read", "t", "-m", "earliest", "-n", "0", "--until-end", "-o", "json"),
    ("consume", "t", "-s", "s", "-p", "Earliest", "-n", "0", "--idle-timeout", "1s",
     "-o", "ndjson"),
    ("produce", "other", "-m", "x", "-n", "20000"),          # the fast path
], ids=["read", "read-json", "consume", "produce"])
def test_a_closed_pipe_ends_the_command_quietly_with_141(spawn, filled, args):
    p = spawn(*args)
    first = p.stdout.readline()
    assert first, p.stderr.read()
    p.stdout.close()                                         # `| head -1` has what it wants
    code = p.wait(timeout=PATIENCE_S)
    err = p.stderr.read()
    assert code == STDOUT_CLOSED == 141, (code, err)
    assert err == "", err                                    # not an error: nothing is said
    assert 141 in EXIT_CODES
