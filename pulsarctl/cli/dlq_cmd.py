"""pulsarctl dlq list|stats|peek|drain|replay|purge: dead letter topics (the semantics are in
pulsarctl/broker/dlq.py; the batch-by-batch run is dlq_run.py, drain's output file dlq_sink.py).

Drain, replay and purge hold the DLQ's lock for the whole command and work batch by batch: a
batch is fetched (read), then handled and acknowledged on `pulsarctl-dlq` in one write
transaction. Drain writes and fsyncs a batch before acking it (at-least-once); replay publishes
and acks in the same transaction (exactly once).

Fit for cron: a dead letter that fails (drain --exec's command exits non-zero, replay finds no
target) stays in the DLQ, is not tried again in the same run (the next batch is selected after
it) and does not count against --max, which bounds the ones handled; --max-failures N stops a
run early. Any failure makes the exit 7 (PartlyFailed), its one error line the summary. Every
count is of messages (a batch entry holds many). -q prints no summary unless something failed;
--missing-ok reads a DLQ that does not exist as an empty one and creates nothing.
"""
from __future__ import annotations

import sys
from typing import Annotated, List, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl.cli import render
from pulsarctl.cli.common import Output, fmt, positive, state
from pulsarctl.cli.dlq_run import Pace, bar_total, drive, finish, full_name, kept_hint, plural
from pulsarctl.cli.dlq_sink import Sink
from pulsarctl.errors import Declined, InvalidValue, UsageError

dlq = typer.Typer(short_help="Dead letter topics: list, inspect, drain, replay and purge them.",
                  help="Dead letter topics: list, inspect, drain, replay and purge them, through "
                  "each DLQ's own subscription pulsarctl-dlq.", no_args_is_help=True)

Dlq = Annotated[str, typer.Argument(
    metavar="DLQ", help="The dead letter topic: t, tenant/ns/t or persistent://tenant/ns/t.",
    show_default=False)]
FailIfEmpty = Annotated[bool, typer.Option(
    "--fail-if-empty", help="Exit 6 when there is nothing to do.")]
NoWait = Annotated[bool, typer.Option(
    "--no-wait", help="Exit 5 at once when another dlq command holds this DLQ's lock (default: "
    "wait for it).")]
Yes = Annotated[bool, typer.Option(
    "-y", "--yes", help="Do not ask for confirmation (asked only when stdin is a terminal).")]
Rate = Annotated[Optional[float], typer.Option(
    "--rate", help="At most R messages per second (real time, also on a simulated clock).",
    metavar="R", show_default=False)]
Max = Annotated[int, typer.Option(
    "--max", help="Handle at most N dead letters (0: all).", metavar="N")]
MaxDone = Annotated[int, typer.Option(
    "--max", help="Stop once N dead letters were handled (0: all); one that fails does not "
    "count (see --max-failures).", metavar="N")]
MaxFailures = Annotated[int, typer.Option(
    "--max-failures", help="Stop once N dead letters failed in this run (0: no bound). Each is "
    "tried at most once per run; the failed stay in the DLQ and the exit is 7.", metavar="N")]
Quiet = Annotated[bool, typer.Option(
    "-q", "--quiet", help="No summary line unless something failed (errors always print): "
    "cron mails only the runs with a problem.")]
MissingOk = Annotated[bool, typer.Option(
    "--missing-ok", help="A DLQ that does not exist (yet) is empty: exit 0 (6 with "
    "--fail-if-empty), not 3; nothing is created.")]
Filters = Annotated[Optional[List[str]], typer.Option(
    "--filter", help="Only dead letters whose property K equals V (repeatable: all must match).",
    metavar="K=V", show_default=False)]
Batch = Annotated[int, typer.Option(
    "--batch", help="Dead letters per transaction.", metavar="N")]

FILTER_HINT = "write filters as property=value, e.g. --filter REAL_SUBSCRIPTION=billing"


# -- small helpers ----------------------------------------------------------------------------
def _filters(values) -> list[tuple[str, str]]:
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_property

    out = []
    for v in values or ():
        try:
            out.append(parse_property(v))
        except InvalidValue:
            raise InvalidValue(f"invalid --filter {v!r}", hint=FILTER_HINT) from None
    return out


def _age(ms) -> str:
    if ms is None:
        return ""
    s = ms // 1000
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def _interactive() -> bool:
    """stdin is a terminal: a person may be asked."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def _confirm(question: str, yes: bool) -> None:
    """Destructive commands ask when stdin is a terminal, unless -y."""
    if yes or not _interactive():
        return
    render.err(f"{question} [y/N]")
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise Declined("cancelled; nothing was changed")


def _start(ctx, topic: str, max_n: int, batch: int, sel: dict, yes: bool, question,
           missing_ok: bool = False) -> tuple:
    """What drain, replay and purge check before taking the lock: the numbers, that the DLQ
    exists, and (stdin a terminal, no -y) the person's yes. Returns (full name, broker, whether
    the DLQ exists: with --missing-ok a missing one is empty, and nothing is created)."""
    positive(max_n, "--max")
    positive(batch, "--batch", allow_zero=False)
    name = full_name(topic)
    b = state(ctx).admin()
    # the DLQ must exist (exit 3, unless --missing-ok), before any lock file is made
    if not b.dlq(topic).check(missing_ok):
        return name, b, False
    if question is not None and not yes and _interactive():
        n = b.dlq(topic).count(**sel)
        if n:
            _confirm(question(min(n, max_n) if max_n else n, name), yes)
    return name, b, True


# -- list, stats, peek: read only -----------------------------------------------------------
@dlq.command("list", help="List dead letter topics (all namespaces, or one) with what waits in "
                          "each; warns about a DLQ that nothing retains.")
def list_(
    ctx: typer.Context,
    namespace: Annotated[Optional[str], typer.Argument(
        metavar="[NS]", help="A namespace, tenant/ns (default: all).", show_default=False)] = None,
    fail_if_empty: FailIfEmpty = False,
    quiet: Quiet = False,
    output: Output = None,
):
    out = fmt(ctx, output)
    rows = state(ctx).admin().dlqs(namespace)
    for r in rows:
        if not r["retained"] and not r["retention"]:
            render.err(render.safe(
                f"warning: {r['topic']} has no subscription and no retention: in Pulsar its dead "
                f"letters can be deleted; keep them with `pulsarctl topics create-subscription "
                f"{r['topic']} -s pulsarctl-dlq -m earliest`"))
    if out == render.TEXT:
        if rows:
            render.table(["topic", "origin", "subscription", "backlog", "oldest", "retained"],
                         [[r["topic"], r["originTopic"], r["originSubscription"], r["backlog"],
                           _age(r["oldestAgeMs"]), "yes" if r["retained"] else "no"]
                          for r in rows])
    else:
        render.data(rows, out)
    waiting = sum(r["backlog"] for r in rows)
    finish(f"{plural(len(rows), 'dead letter topic')}, {plural(waiting)} waiting",
           not rows, fail_if_empty, namespace or "any namespace", quiet)


@dlq.command(short_help="Count the waiting dead letters by REAL_TOPIC, REAL_SUBSCRIPTION, age "
             "and a property.",
             help="Count the waiting dead letters (messages: a batch counts each of its "
                  "messages) by REAL_TOPIC, REAL_SUBSCRIPTION, age (<1m, <1h, <1d, <7d, >=7d "
                  "since they were dead-lettered) and a property.")
def stats(
    ctx: typer.Context, topic: Dlq,
    by_property: Annotated[Optional[str], typer.Option(
        "--by-property", help="Also count by this property.", metavar="NAME",
        show_default=False)] = None,
    fail_if_empty: FailIfEmpty = False,
    missing_ok: MissingOk = False,
    quiet: Quiet = False,
    output: Output = None,
):
    out = fmt(ctx, output)
    d = state(ctx).admin().dlq(topic).stats(by_property, missing_ok=missing_ok)
    if out == render.TEXT:
        groups = [("REAL_TOPIC", d["byRealTopic"]), ("REAL_SUBSCRIPTION", d["byRealSubscription"])]
        if by_property is not None and by_property not in dict(groups):  # shown once
            groups.append((by_property, d["byProperty"]["counts"]))
        groups.append(("age", d["byAge"]))
        render.table(["by", "value", "count"],
                     [[by, value, n] for by, counts in groups for value, n in counts.items()],
                     title=f"{d['topic']}: {plural(d['total'])} waiting")
    else:
        render.data(d, out)
    finish(f"{plural(d['total'])} waiting in {d['topic']}", d["total"] == 0, fail_if_empty,
           d["topic"], quiet)


@dlq.command(help="Show waiting dead letters (message records with their properties); creates "
                  "no subscription and moves no cursor.")
def peek(
    ctx: typer.Context, topic: Dlq,
    num: Annotated[int, typer.Option("-n", "--num-messages", help="How many (0: all).")] = 10,
    filters: Filters = None,
    fail_if_empty: FailIfEmpty = False,
    missing_ok: MissingOk = False,
    quiet: Quiet = False,
    output: Output = None,
):
    out = fmt(ctx, output)
    positive(num, "-n/--num-messages")
    sel = _filters(filters)
    b = state(ctx).admin()
    msgs = b.dlq(topic).peek(num, sel, missing_ok=missing_ok)
    if out == render.JSON:
        render.json_doc([m.record() for m in msgs])
    else:
        for m in msgs:
            render.message(m, out, with_id=True, metadata=True)
    total = b.dlq(topic).count(sel) if msgs else 0
    finish(f"showed {len(msgs)} of {plural(total)} waiting", not msgs, fail_if_empty,
           full_name(topic), quiet)


# -- drain ------------------------------------------------------------------------------------
@dlq.command(short_help="Write each waiting dead letter as an NDJSON record, or hand it to "
             "--exec, and ack it.",
             help="Write each waiting dead letter as an NDJSON message record (as consume -o "
                  "ndjson prints it) and ack it once written and fsynced; or hand each to "
                  "--exec CMD (exit 0 acks, anything else leaves it: failed, exit 7).")
def drain(
    ctx: typer.Context, topic: Dlq,
    out_path: Annotated[str, typer.Option(
        "--out", help="File to append the records to, or - for stdout.", metavar="FILE")] = "-",
    exec_cmd: Annotated[Optional[str], typer.Option(
        "--exec", help="Run CMD per dead letter instead (payload on stdin, metadata in PULSAR_* "
        "variables, as consume --exec): exit 0 acks, anything else leaves it (failed: not tried "
        "again in this run; the exit is 7).", metavar="CMD", show_default=False)] = None,
    max_n: MaxDone = 0,
    max_failures: MaxFailures = 0,
    filters: Filters = None,
    rate: Rate = None,
    batch: Batch = 100,
    fail_if_empty: FailIfEmpty = False,
    missing_ok: MissingOk = False,
    no_wait: NoWait = False,
    yes: Yes = False,
    quiet: Quiet = False,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.broker.dlq import SUBSCRIPTION

    out = fmt(ctx, output)
    positive(max_failures, "--max-failures")
    sel = {"filters": _filters(filters)}
    pace = Pace(rate)
    where = f"to `{exec_cmd}`" if exec_cmd else ("to stdout" if out_path == "-" else f"to {out_path}")
    name, b, found = _start(ctx, topic, max_n, batch, sel, yes, lambda n, name: (
        f"drain {plural(n)} of {name} {where} (they leave the DLQ)?"), missing_ok)
    counts = {"drained": 0, "failed": 0}

    def enough() -> bool:
        return bool(max_failures) and counts["failed"] >= max_failures

    def handle(msgs, guard):
        for m in msgs:
            m.subscription = m.consumer_name = SUBSCRIPTION
        before = counts["drained"]
        if exec_cmd is None:
            with guard:
                sink.write(msgs)
                counts["drained"] += b.dlq(topic).ack([m.id for m in msgs])
            return counts["drained"] - before
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.cli.consume_run import run_exec

        for m in msgs:
            if enough():
                break
            with guard:
                if run_exec(exec_cmd, m) == 0:
                    counts["drained"] += b.dlq(topic).ack([m.id])
                else:
                    counts["failed"] += 1
        return counts["drained"] - before

    if found:  # with --missing-ok, a missing DLQ is empty: no lock, no subscription, no file
        with b.dlq(topic).lock(wait=not no_wait):
            b.dlq(topic).subscribe()
            bar = render.Progress(bar_total(b, topic, max_n, **sel), "draining")
            sink = None if exec_cmd else Sink(out_path)
            try:
                drive(b, topic, sel, max_n, pace, batch, bar, handle, enough)
            finally:
                if sink is not None:
                    sink.close()
    summary = f"drained {counts['drained']}, failed {counts['failed']}"
    if out != render.TEXT and (exec_cmd or out_path != "-"):
        render.data({"topic": name, **counts, "out": None if exec_cmd else out_path}, out)
    finish(summary, not any(counts.values()), fail_if_empty, name, quiet, counts["failed"],
           kept_hint(name, max_failures, counts["failed"]))


# -- replay -----------------------------------------------------------------------------------
def _read_ids(source: str) -> list:
    """Message ids, one a line, or message records (a messageId key), from stdin (-) or FILE."""
    import json  # lazy: loaded when the command runs, not when the command tree is built

    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.messages import parse_message_id

    def parse(lines):
        ids = []
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    text = json.loads(line)["messageId"]
                except (ValueError, KeyError, TypeError):
                    raise InvalidValue(f"--ids line {n}: not a message record with a "
                                       f"messageId") from None
                ids.append(parse_message_id(str(text)))
            else:
                ids.append(parse_message_id(line))
        return ids

    if source == "-":
        return parse(sys.stdin)
    try:
        with open(source, encoding="utf-8") as f:
            return parse(f)
    except OSError as exc:
        raise UsageError(f"cannot read --ids {source}: {exc.strerror}",
                         hint="give - for stdin or a file of message ids") from None


def _replay_line(r: dict) -> str:
    mid, action = r["messageId"], r["action"]
    if action in ("replayed", "would-replay"):
        verb = "replayed" if action == "replayed" else "would replay"
        new = f" as {r['newMessageId']}" if r["newMessageId"] else ""
        return f"{verb} {mid} -> {r['target']}{new} ({r['replayCount']} replay(s))"
    verb = {"skipped": "skipped", "would-skip": "would skip", "failed": "failed"}[action]
    return f"{verb} {mid}: {r['reason']}"


@dlq.command(short_help="Republish waiting dead letters to their REAL_TOPIC (or --to TOPIC), "
             "counting REPLAY_COUNT.",
             help="Republish waiting dead letters to their REAL_TOPIC (or --to TOPIC) with "
                  "payload, key, ordering key, event time and properties, adding REPLAY_COUNT; "
                  "publish and ack are one transaction per batch.")
def replay(
    ctx: typer.Context, topic: Dlq,
    to_origin: Annotated[bool, typer.Option(
        "--to-origin", help="Replay each to its REAL_TOPIC (the default).")] = False,
    to: Annotated[Optional[str], typer.Option(
        "--to", help="Replay to this topic instead.", metavar="TOPIC", show_default=False)] = None,
    subscription: Annotated[Optional[str], typer.Option(
        "--subscription", help="Replay to this subscription only, through its retry letter topic "
        "(it must consume with --enable-retry).", metavar="SUB", show_default=False)] = None,
    filters: Filters = None,
    ids: Annotated[Optional[str], typer.Option(
        "--ids", help="Replay only these message ids (or message records), one a line: - reads "
        "stdin, else a file.", metavar="-|FILE", show_default=False)] = None,
    max_n: MaxDone = 0,
    max_failures: MaxFailures = 0,
    max_replays: Annotated[int, typer.Option(
        "--max-replays", help="Refuse (skip, leave in the DLQ) dead letters replayed this often "
        "already (their REPLAY_COUNT).", metavar="N")] = 3,
    rate: Rate = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Change nothing; print what would be replayed.")] = False,
    batch: Batch = 100,
    fail_if_empty: FailIfEmpty = False,
    missing_ok: MissingOk = False,
    no_wait: NoWait = False,
    yes: Yes = False,
    quiet: Annotated[bool, typer.Option(
        "-q", "--quiet", help="No summary line unless something failed (errors always print), "
        "and in text output only the lines of the failed: cron mails only the runs with a "
        "problem.")] = False,
    output: Output = None,
):
    out = fmt(ctx, output)
    if to_origin and to:
        raise UsageError("give --to-origin or --to TOPIC, not both")
    positive(max_replays, "--max-replays")
    positive(max_failures, "--max-failures")
    sel = {"filters": _filters(filters)}
    if ids is not None:
        sel["ids"] = _read_ids(ids)
    pace = Pace(rate)
    target = to or "their REAL_TOPIC"
    if subscription:
        target += f" (subscription {subscription}, through its retry letter topic)"
    name, b, found = _start(ctx, topic, max_n, batch, sel, yes, None if dry_run else (
        lambda n, name: f"replay up to {plural(n)} of {name} to {target}?"), missing_ok)
    counts = {"replayed": 0, "skipped": 0, "failed": 0}
    collected = []

    def enough() -> bool:
        return bool(max_failures) and counts["failed"] >= max_failures

    def handle(msgs, guard):
        with guard:
            results = b.dlq(topic).replay([m.id for m in msgs], to=to, subscription=subscription,
                                   max_replays=max_replays, dry_run=dry_run,
                                   max_failures=max_failures - counts["failed"]
                                   if max_failures else None)
            _show(results)
        n = 0
        for r in results:
            key = {"would-replay": "replayed", "would-skip": "skipped"}.get(r["action"],
                                                                           r["action"])
            counts[key] += 1
            n += key == "replayed"  # --max counts the replayed: not the skipped, not the failed
        return n

    def _show(results):
        if out == render.NDJSON:
            render.ndjson_rows(results)
            render.flush()
        elif out == render.JSON:
            collected.extend(results)
        else:
            for r in results:
                if not quiet or r["action"] == "failed":
                    render.outln(render.safe(_replay_line(r)))
            render.flush()

    if not found:
        pass  # with --missing-ok, a missing DLQ is empty: no lock, no subscription
    elif dry_run:
        bar = render.Progress(bar_total(b, topic, max_n, **sel), "dry run")
        drive(b, topic, sel, max_n, pace, batch, bar, handle, enough)
    else:
        with b.dlq(topic).lock(wait=not no_wait):
            b.dlq(topic).subscribe()
            bar = render.Progress(bar_total(b, topic, max_n, **sel), "replaying")
            drive(b, topic, sel, max_n, pace, batch, bar, handle, enough)
    if out == render.JSON:
        render.json_doc({"topic": name, **counts, "dryRun": dry_run, "messages": collected})
    if dry_run:
        summary = (f"would replay {counts['replayed']}, would skip {counts['skipped']}, failed "
                   f"{counts['failed']} (dry run: nothing changed)")
    else:
        summary = (f"replayed {counts['replayed']}, skipped {counts['skipped']}, failed "
                   f"{counts['failed']}")
    finish(summary, not (counts["replayed"] or counts["failed"]), fail_if_empty, name, quiet,
           counts["failed"], kept_hint(name, max_failures, counts["failed"],
                                       "each failed result says why (--to TOPIC replays "
                                       "those without a REAL_TOPIC); "))


# -- purge ------------------------------------------------------------------------------------
@dlq.command(help="Remove (ack) waiting dead letters, or only those dead-lettered longer ago "
                  "than --older-than.")
def purge(
    ctx: typer.Context, topic: Dlq,
    older_than: Annotated[Optional[str], typer.Option(
        "--older-than", help="Only those published to the DLQ longer ago than this (10m, 2h, 7d; "
        "store time).", metavar="DUR", show_default=False)] = None,
    filters: Filters = None,
    max_n: Max = 0,
    rate: Rate = None,
    batch: Batch = 1000,
    fail_if_empty: FailIfEmpty = False,
    missing_ok: MissingOk = False,
    no_wait: NoWait = False,
    yes: Yes = False,
    quiet: Quiet = False,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_duration_ms

    out = fmt(ctx, output)
    sel = {"filters": _filters(filters)}
    if older_than is not None:
        sel["older_than_ms"] = parse_duration_ms(older_than, "--older-than")
    pace = Pace(rate)
    name, b, found = _start(ctx, topic, max_n, batch, sel, yes, lambda n, name: (
        f"purge {plural(n)} of {name}? They are gone for good."), missing_ok)
    counts = {"purged": 0}

    def handle(msgs, guard):
        with guard:
            n = b.dlq(topic).ack([m.id for m in msgs])
        counts["purged"] += n
        return n

    if found:  # with --missing-ok, a missing DLQ is empty: no lock, no subscription
        with b.dlq(topic).lock(wait=not no_wait):
            b.dlq(topic).subscribe()
            bar = render.Progress(bar_total(b, topic, max_n, **sel), "purging")
            drive(b, topic, sel, max_n, pace, batch, bar, handle)
    if out != render.TEXT:
        render.data({"topic": name, **counts, "olderThanMs": sel.get("older_than_ms")}, out)
    finish(f"purged {counts['purged']}", not counts["purged"], fail_if_empty, name, quiet)
