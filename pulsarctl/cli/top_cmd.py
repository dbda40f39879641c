"""pulsarctl top [NS]: a live dashboard of a namespace (every namespace without NS) on a terminal,
and `--once` for one snapshot (text, or -o json for scripts).

The data comes from pulsarctl/dashboard.py (the broker's snapshot, one read transaction, the
daemon's state and the rates since the snapshot before); this module only draws it with rich
and reads keys. The live view is rich's Live in the terminal's alternate screen, redrawn about
once a second and at once after a key; keys are read without blocking the refresh (cbreak mode,
select on stdin with the time left to the next refresh), and the terminal is restored in a
finally, whatever ends the view."""
from __future__ import annotations

import os
import select
import sys
from typing import Annotated, Optional

import typer

from pulsarctl import clock as clocks
from pulsarctl.cli import render
from pulsarctl.cli.common import Output, fmt, state
from pulsarctl.errors import PulsarctlError, UsageError

top = typer.Typer()

REFRESH_S = 1.0

HELP = (
    "A live view of the topics of namespace NS (every namespace without it) on a terminal, "
    "refreshed every second until q or Ctrl-C: per topic messages in and out per second, "
    "backlog, unacked messages; per subscription its type, the messages waiting to be "
    "redelivered and delayed, redeliveries per minute and each consumer with how many "
    "messages it holds; the dead letter topics and their sizes; who runs the timers (a "
    "`pulsarctl daemon`, or `pulsarctl serve` holding the daemon lock) and the store's clock. "
    "Keys: up/down or j/k pick a topic, Enter opens its detail (subscriptions, consumers and "
    "what each holds), Esc or Backspace goes back, q quits. "
    "--once prints one snapshot and exits (its rates from two snapshots 1 s apart). With "
    "-o json it is an object with: namespace; clock (mode, now, nowMs); daemon (running, "
    "kind: daemon, serve, process or null, pid, lastTick, timersScheduled, timersDue, "
    "standbyPids); intervalMs; topics, a list of (topic, partitions, msgInCounter, "
    "msgOutCounter, bytesInCounter, storageSize, msgBacklog, unackedMessages, "
    "redeliveredCounter, consumers, msgRateIn, msgRateOut, redeliveriesPerMinute, "
    "isDeadLetterTopic, subscriptions: a list of (name, type, msgBacklog, msgOutCounter, "
    "unackedMessages, awaitingRedelivery, delayedMessages, redeliveredCounter, "
    "deadLetterTopic, msgRateOut, redeliveriesPerMinute, consumers: a list of (consumerName, "
    "unackedMessages, alive, isActive))); deadLetterTopics, a list of (topic, messages, "
    "originTopic, originSubscription). Rates are per second of the store's clock between the "
    "two "
"snapshots (per real second when a simulated clock stood still), null when unknown.")

Namespace = Annotated[Optional[str], typer.Argument(
    help="Namespace (tenant/namespace); every namespace when omitted.", metavar="NS",
    show_default=False)]
Once = Annotated[bool, typer.Option("--once", help="Print one snapshot and exit (for scripts "
                                    "with -o json).")]


@top.command("top", help=HELP, short_help="A live view of topics, consumers and dead letters.")
def top_cmd(ctx: typer.Context, namespace: Namespace = None, once: Once = False,
            output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import dashboard

    out = fmt(ctx, output)
    if not once:
        if out != render.TEXT:
            raise UsageError(f"-o {out} needs --once: the live view is for a terminal",
                             hint="run `pulsarctl top --once -o json` for one snapshot")
        if not render.stdout_tty():
            raise UsageError("top is a live view and standard output is not a terminal",
                             hint="run `pulsarctl top --once` (or --once -o json) for one "
                                  "snapshot")
    b = state(ctx).broker()
    if once:
        snap = dashboard.once(b, namespace)
        render.data(snap, out, lambda s: render.rich(screen(s)))
        return 0
    return _live(dashboard.Dashboard(b, namespace), b)


# -- drawing ------------------------------------------------------------------------------------
def _rate(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def _short(topic: str, namespace: str | None) -> str:
    """A topic as a person names it: without persistent://, and without the namespace when the
    view is of one namespace."""
    name = topic.split("://", 1)[-1]
    if namespace and name.startswith(namespace + "/"):
        return name[len(namespace) + 1:]
    return name


def _timers(d: dict) -> str:
    if not d["running"]:
        return "timers: no daemon (they fire when a command touches the subscription)"
    who = {"serve": "serve", "daemon": "daemon"}.get(d["kind"], "a process")
    tick = f", last tick {d['lastTick']}" if d.get("lastTick") else ""
    return f"timers: {who} pid {d['pid']}{tick}, {d['timersScheduled'] or 0} scheduled"


def _header(snap: dict):
    # lazy: loaded when the command runs, not when the command tree is built
    from rich.text import Text

    c = snap["clock"]
    scope = snap["namespace"] or "all namespaces"
    interval = snap.get("intervalMs")
    rates = f"rates over {round(interval / 1000, 1):g}s" if interval else "rates: at the next refresh"
    line1 = Text(f"pulsarctl top · {scope} · clock {c['now']} ({c['mode']})", style="bold")
    return Text("\n").join([line1, Text(f"{_timers(snap['daemon'])} · {rates}")])


def _consumer_name(x: dict) -> str:
    flags = [] if x["alive"] else ["gone"]
    if x.get("isActive"):
        flags.append("active")
    return x["consumerName"] + (f" ({', '.join(flags)})" if flags else "")


def _msgs(x: dict) -> str:
    """The messages in a backlog: exact, or "~n" where a long batched backlog was estimated."""
    n = x.get("backlogMessages", x["msgBacklog"])
    return str(n) if x.get("backlogMessagesExact", True) else f"~{n}"


def _topic_blocks(snap: dict, selected: str | None):
    """Per topic, its table rows: the topic's, one per subscription (its name and type), and
    under each one per consumer, with the messages it holds in the UNACKED column."""
    blocks = []
    for t in snap["topics"]:
        picked = t["topic"] == selected
        name = ("▶ " if picked else "  ") + _short(t["topic"], snap["namespace"])
        if t["isDeadLetterTopic"]:
            name += " (DLQ)"
        elif t["partitions"]:
            name += f" ({t['partitions']} partitions)"
        rows = [([name, _rate(t["msgRateIn"]), _rate(t["msgRateOut"]), str(t["msgBacklog"]),
                  _msgs(t), str(t["unackedMessages"]), "", "",
                  _rate(t["redeliveriesPerMinute"])],
                 "reverse" if picked else "bold")]
        for s in t["subscriptions"]:
            rows.append(([f"    {s['name']} · {s['type']}", "", _rate(s["msgRateOut"]),
                          str(s["msgBacklog"]), _msgs(s), str(s["unackedMessages"]),
                          str(s["awaitingRedelivery"]), str(s["delayedMessages"]),
                          _rate(s["redeliveriesPerMinute"])], None))
            for x in s["consumers"]:
                rows.append(([f"      {_consumer_name(x)}", "", "", "", "",
                              str(x["unackedMessages"]), "", "", ""], "dim"))
        blocks.append((t["topic"], rows))
    return blocks


# BACKLOG is Pulsar's msgBacklog, which counts entries (a batch is one entry); MSGS beside it
# counts the messages in them.
_COLUMNS = ("TOPIC", "IN/s", "OUT/s", "BACKLOG", "MSGS", "UNACKED",
            "REDELIVER", "DELAYED", "REDEL/min")
# Narrower than the table: these columns go first, in this order; TOPIC, BACKLOG and MSGS stay.
_DROP_FIRST = ("REDEL/min", "DELAYED", "REDELIVER", "IN/s", "OUT/s", "UNACKED")
_TOPIC_MIN = 24   # the topic column's least width when the terminal allows it


class _TopicsTable:
    """The topics table, its columns chosen at the width it is drawn at: under it, the columns
    of _DROP_FIRST go one by one, so the topic's name is never what is cut short first."""

    def __init__(self, rows, caption):
        self.rows, self.caption = rows, caption

    def __rich_console__(self, console, options):
        # lazy: loaded when the command runs, not when the command tree is built
        from rich import box
        # lazy: loaded when the command runs, not when the command tree is built
        from rich.table import Table

        widths = {c: max([len(c)] + [len(cells[i]) for cells, _s in self.rows])
                  for i, c in enumerate(_COLUMNS) if i}
        # The topic column wants its longest name whole (and at least _TOPIC_MIN).
        topic_w = max([_TOPIC_MIN] + [len(cells[0]) for cells, _s in self.rows])
        keep = list(_COLUMNS)

        def others() -> int:   # what the table takes besides TOPIC's text: each column's
            return 1 + sum(widths[k] + 2 for k in keep[1:])   # padding and divider
        for c in _DROP_FIRST:
            if topic_w + others() <= options.max_width:
                break
            keep.remove(c)
        topic_min = max(len("TOPIC"), min(topic_w, options.max_width - others()))
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, caption=self.caption,
                  header_style="bold", padding=(0, 1, 0, 0))
        for c in keep:
            i = _COLUMNS.index(c)
            # the numbers never wrap; a long name is cut short
            t.add_column(c, justify="right" if i else "left", no_wrap=bool(i),
                         overflow="ellipsis", min_width=len(c) if i else topic_min)
        at = [_COLUMNS.index(c) for c in keep]
        for cells, style in self.rows:
            t.add_row(*[render.safe(cells[i]) for i in at], style=style)
        yield t


def _window(blocks, selected: str | None, max_lines: int | None):
    """The blocks to show: all, or (within max_lines) a run of them that holds the selected."""
    if max_lines is None or sum(len(r) for _, r in blocks) <= max_lines:
        return blocks, 0
    at = next((i for i, (name, _) in enumerate(blocks) if name == selected), 0)
    start, used = at, len(blocks[at][1])
    while start > 0 and used + len(blocks[start - 1][1]) <= max_lines // 2:
        start -= 1
        used += len(blocks[start][1])
    end = at + 1
    while end < len(blocks) and used + len(blocks[end][1]) <= max_lines:
        used += len(blocks[end][1])
        end += 1
    return blocks[start:end], start


def screen(snap: dict, selected: str | None = None, height: int | None = None, keys=False):
    """The dashboard as a rich renderable: the header, a table of topics and their
    subscriptions, the dead letter topics; with keys, the keys' help (the live view)."""
    # lazy: loaded when the command runs, not when the command tree is built
    from rich import box
    # lazy: loaded when the command runs, not when the command tree is built
    from rich.console import Group
    # lazy: loaded when the command runs, not when the command tree is built
    from rich.table import Table
    # lazy: loaded when the command runs, not when the command tree is built
    from rich.text import Text

    dlqs = snap["deadLetterTopics"]
    # header 2, the tables' headers and blank lines, the DLQ rows, the keys' line
    budget = None if height is None else max(3, height - 9 - len(dlqs))
    blocks, first = _window(_topic_blocks(snap, selected), selected, budget)
    n = len(snap["topics"])
    caption = None
    if len(blocks) < n:
        caption = f"topics {first + 1}-{first + len(blocks)} of {n}"
    t = _TopicsTable([r for _name, rows in blocks for r in rows], caption)
    parts = [_header(snap), Text(""), t if n else Text("no topics")]
    if any(_msgs(x) != str(x["msgBacklog"]) for x in snap["topics"]):
        parts.append(Text("BACKLOG counts entries, as Pulsar's msgBacklog does (a batch is one "
                          "entry); MSGS counts the messages in them", style="dim"))
    if dlqs:
        d = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
        for c in ("DEAD LETTER TOPIC", "MESSAGES", "FROM TOPIC / SUBSCRIPTION"):
            d.add_column(c, justify="right" if c == "MESSAGES" else "left")
        ns = snap["namespace"]
        for x in dlqs:
            origin = "-" if not x["originTopic"] else \
                f"{_short(x['originTopic'], ns)} / {x['originSubscription']}"
            d.add_row(render.safe(_short(x["topic"], ns)), str(x["messages"]),
                      render.safe(origin))
        parts += [Text(""), d]
    if keys:
        parts += [Text(""), Text("↑/↓ or j/k pick a topic · Enter open it · q quit", style="dim")]
    return Group(*parts)


def detail_renderable(broker, topic: str):
    """What the detail pane shows of one topic: its subscriptions and their consumers, with what
    each holds (`topics stats`, read now), then each subscription's cursor picture
    (pulsarctl/cli/cursor_picture.py, as `topics cursor` draws it)."""
    # lazy: loaded when the command runs, not when the command tree is built
    from rich import box
    # lazy: loaded when the command runs, not when the command tree is built
    from rich.console import Group
    # lazy: loaded when the command runs, not when the command tree is built
    from rich.table import Table
    # lazy: loaded when the command runs, not when the command tree is built
    from rich.text import Text

    try:
        st = broker.topics.stats(topic)
    except PulsarctlError as exc:
        return Text(exc.line())
    head = Text(render.safe(f"{topic}: {st['msgInCounter']} in, {st['msgOutCounter']} out, "
                            f"{st['storageSize']} bytes stored"), style="bold")
    subs = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for c in ("SUBSCRIPTION", "TYPE", "BACKLOG", "UNACKED", "TO REDELIVER", "DELAYED"):
        subs.add_column(c, justify="left" if c in ("SUBSCRIPTION", "TYPE") else "right")
    cons = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for c in ("SUBSCRIPTION", "CONSUMER", "HOLDS", "PERMITS", "PRIORITY", "STATE"):
        cons.add_column(c, justify="right" if c in ("HOLDS", "PERMITS", "PRIORITY") else "left")
    for name, s in sorted(st["subscriptions"].items()):
        subs.add_row(render.safe(name), s["type"], str(s["msgBacklog"]),
                     str(s["unackedMessages"]), str(s["replayCount"]),
                     str(s["delayedMessages"]))
        for x in s["consumers"]:
            what = "connected" if x["alive"] else "gone"
            if x.get("isActive"):
                what += ", active"
            elif "isActive" in x:
                what += ", standing by"
            if x.get("keyHashRanges"):
                what += ", hashes " + " ".join(x["keyHashRanges"])
            cons.add_row(render.safe(name), render.safe(x["consumerName"]),
                         str(x["unackedMessages"]), str(x["availablePermits"]),
                         str(x["priorityLevel"]), what)
    if not st["subscriptions"]:
        return Group(head, Text(""), Text("no subscriptions"))
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.cursor_picture import cursor_picture

    # Each subscription's cursor as `topics cursor` draws it, in a window that fits a screen.
    pictures = []
    for name in sorted(st["subscriptions"]):
        try:
            view = broker.subscription(topic, name).cursor_view(n=PICTURE_WINDOW)
        except PulsarctlError as exc:   # deleted meanwhile
            pictures += [Text(""), Text(exc.line())]
            continue
        pictures += [Text(""), Text(render.safe(f"cursor of {name}"), style="bold"),
                     cursor_picture(view)]
    return Group(head, Text(""), subs, Text(""), cons, *pictures)


PICTURE_WINDOW = 12  # entries of each subscription's cursor picture in the detail pane


# -- the live view ------------------------------------------------------------------------------
UP, DOWN, OPEN, BACK, QUIT = "up", "down", "open", "back", "quit"
_ARROWS = {b"\x1b[A": UP, b"\x1bOA": UP, b"\x1b[B": DOWN, b"\x1bOB": DOWN}
_SINGLE = {b"k": UP, b"j": DOWN, b"\r": OPEN, b"\n": OPEN, b"\x1b": BACK, b"\x7f": BACK,
           b"\x08": BACK, b"q": QUIT, b"Q": QUIT, b"\x03": QUIT}


def keys_of(data: bytes) -> list[str]:
    """The keys in what one read of the terminal returned: an arrow is an escape sequence
    (ESC [ A), a lone ESC is Esc; other sequences (F-keys, Page Up) and bytes that are no key
    of ours are skipped."""
    out, i = [], 0
    while i < len(data):
        arrow = _ARROWS.get(data[i:i + 3])
        if arrow is not None:
            out.append(arrow)
            i += 3
        elif data[i:i + 2] in (b"\x1b[", b"\x1bO"):
            i += 2  # a sequence ends at its first byte from @ to ~
            while i < len(data) and not 0x40 <= data[i] <= 0x7E:
                i += 1
            i += 1
        else:
            key = _SINGLE.get(data[i:i + 1])
            if key is not None:
                out.append(key)
            i += 1
    return out


class View:
    """What the live view shows: the topic picked, and whether its detail pane is open."""

    def __init__(self):
        self.selected: str | None = None
        self.detail: str | None = None

    def on(self, key: str, topics: list[str]) -> bool:
        """Apply one key; False when it quits."""
        if key == QUIT:
            return False
        if self.detail is not None:
            if key == BACK:
                self.detail = None
            return True
        if not topics:
            return True
        at = topics.index(self.selected) if self.selected in topics else 0
        if key == UP:
            self.selected = topics[max(0, at - 1)]
        elif key == DOWN:
            self.selected = topics[min(len(topics) - 1, at + 1)]
        elif key == OPEN:
            self.selected = topics[at]
            self.detail = self.selected
        return True

    def renderable(self, snap: dict, broker, height: int):
        # lazy: loaded when the command runs, not when the command tree is built
        from rich.console import Group
        # lazy: loaded when the command runs, not when the command tree is built
        from rich.text import Text

        topics = [t["topic"] for t in snap["topics"]]
        if self.selected not in topics:
            self.selected = topics[0] if topics else None
        if self.detail is None:
            return screen(snap, self.selected, height, keys=True)
        return Group(_header(snap), Text(""), detail_renderable(broker, self.detail), Text(""),
                     Text("Esc or Backspace back · q quit", style="dim"))


class _Keyboard:
    """stdin in cbreak mode (keys arrive one by one, unechoed; Ctrl-C still interrupts), put
    back as it was on leaving. Without a terminal on stdin there are no keys: the view runs
    until Ctrl-C."""

    def __init__(self):
        self.fd = None
        self._saved = None

    def __enter__(self):
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, ValueError, OSError):
            return self
        if os.isatty(fd):
            import termios  # lazy: only the live view reads keys
            import tty  # lazy: only the live view reads keys

            self._saved = termios.tcgetattr(fd)
            tty.setcbreak(fd)
            self.fd = fd
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            import termios  # lazy: only the live view reads keys

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
        return False

    def read(self, timeout: float) -> list[str]:
        """The keys pressed within timeout seconds (none if none was)."""
        if self.fd is None:
            clocks.sleep(timeout)
            return []
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return []
        return keys_of(os.read(self.fd, 64))


def _live(dash, broker) -> int:
    view = View()
    try:
        with _Keyboard() as keyboard, render.live_screen() as live:
            snap, due = None, 0.0
            while True:
                if clocks.monotonic() >= due:
                    snap = dash.take()
                    due = clocks.monotonic() + REFRESH_S
                live.update(view.renderable(snap, broker, live.console.size.height),
                            refresh=True)
                topics = [t["topic"] for t in snap["topics"]]
                for key in keyboard.read(due - clocks.monotonic()):
                    if not view.on(key, topics):
                        return 0
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how a live view is left, as q is: not an error
