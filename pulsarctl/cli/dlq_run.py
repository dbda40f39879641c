"""How drain, replay and purge run (pulsarctl dlq): batch by batch, at a --rate, with a
progress bar, and the one last line (or exit 7 / 6) that ends every `dlq` command.

A batch is fetched (a read transaction), then handled and acknowledged on `pulsarctl-dlq` in one
write transaction, guarded against Ctrl-C falling between the two. The three commands differ
only in how they handle a batch (dlq_cmd.py); the driving loop, its pacing and the counting
towards --max and --max-failures are the same for all, so they are apart from the commands.
"""
from __future__ import annotations

from pulsarctl import clock as clocks
from pulsarctl.cli import render
from pulsarctl.errors import InvalidValue, NothingToDo, PartlyFailed


def plural(n: int, word: str = "dead letter") -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class Pace:
    """--rate R: batches of at most R messages, each started no earlier than its share of real
    time allows."""

    def __init__(self, rate: float | None):
        if rate is not None and not rate > 0:
            raise InvalidValue(f"--rate must be positive, not {rate}",
                               hint="give messages per second, e.g. --rate 50 or --rate 0.5")
        self.rate = rate
        self.start = None
        self.done = 0

    def size(self, batch: int) -> int:
        return batch if not self.rate else max(1, min(batch, int(self.rate)))

    def wait(self) -> None:
        if not self.rate:
            return
        if self.start is None:
            self.start = clocks.monotonic()
            return
        delay = self.start + self.done / self.rate - clocks.monotonic()
        if delay > 0:
            clocks.sleep(delay)

    def add(self, n: int) -> None:
        self.done += n


class Guard:
    """Ctrl-C never falls between writing a batch and acking it (consume's print-then-ack
    guard): a SIGINT inside is raised right after."""

    def __init__(self):
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.cli.consume_run import _PrintThenAck

        self.g = _PrintThenAck()

    def __enter__(self):
        return self.g.__enter__()

    def __exit__(self, *exc):
        return self.g.__exit__(*exc)

    def restore(self):
        self.g.restore()


def drive(broker, topic, sel: dict, max_n: int, pace: Pace, batch: int, bar: "render.Progress",
          handle, stop=lambda: False) -> None:
    """Fetch waiting dead letters batch by batch; handle(messages, guard) handles one batch
    (guarding what must not be split by Ctrl-C) and returns how many count against --max: the
    ones handled, not the ones that failed (else three poison messages at the head would use
    up `--max 3` in every run, for ever). A failed one is not tried again in this run: the next
    batch is selected after it. Stops at the end of the DLQ, at --max, or once stop() says so
    (--max-failures)."""
    guard = Guard()
    after, counted = -1, 0
    try:
        while not max_n or counted < max_n:
            want = pace.size(batch)
            if max_n:
                want = min(want, max_n - counted)
            got = broker.dlq(topic).fetch(after, want, **sel)
            msgs = got["messages"]
            if msgs:
                pace.wait()
                n = handle(msgs, guard)
                counted += n
                pace.add(len(msgs))
                bar.advance(n if max_n else len(msgs))  # towards the bar's total (bar_total)
            after = got["after"]
            if got["done"] or stop():
                break
    finally:
        guard.restore()
        bar.close()


def finish(summary: str, empty: bool, fail_if_empty: bool, topic: str, quiet: bool = False,
           failed: int = 0, hint: str = "") -> None:
    """The last word: exit 7 when some failed (its one line is the summary, -q or not), exit
    6 when there was nothing to do and --fail-if-empty, else the summary line (not with -q)."""
    if failed:
        raise PartlyFailed(f"{summary} on {topic}", hint=hint)
    if empty and fail_if_empty:
        raise NothingToDo(f"nothing to do on {topic} ({summary})",
                          hint="no dead letter waits there that matches; try again later")
    if not quiet:
        render.err(render.safe(summary))


def full_name(topic: str) -> str:
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.names import parse_topic

    return str(parse_topic(topic))


def bar_total(broker, topic, max_n: int, **sel) -> int | None:
    """The progress bar's total, in messages: what waits (and matches), or --max of it. Counted
    only when there is a terminal to show a bar on."""
    if not render.stderr_tty():
        return None
    n = broker.dlq(topic).count(**sel)
    return min(n, max_n) if max_n else n


def kept_hint(name: str, max_failures: int, failed: int, why: str = "") -> str:
    """What a PartlyFailed line says to do next."""
    stopped = (f"stopped at --max-failures {max_failures}; " if max_failures
               and failed >= max_failures else "")
    return (f"{stopped}{why}the failed stay in the DLQ for the next run; see what waits with "
            f"`pulsarctl dlq peek {name}`")
