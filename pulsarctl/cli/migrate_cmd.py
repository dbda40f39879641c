"""pulsarctl migrate --to CONTEXT | --from CONTEXT TOPIC..: the local store up to a remote
Pulsar, or remote topics (a DLQ, a range) down into the local store (pulsarctl/remote/migrate.py:
idempotent and resumable). Progress on a terminal, a summary line on stderr with the rate."""
from __future__ import annotations

from typing import Annotated, List, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl import clock as clocks
from pulsarctl.cli import render
from pulsarctl.cli.common import Output, fmt, state
from pulsarctl.errors import UsageError

top = typer.Typer()


def _remote(name: str):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.config import resolve_target

    target = resolve_target(None, name, {})
    if target is None:
        raise UsageError(f"the context {name} is the local store; migrate copies between the "
                         f"local store and a remote one", hint="give a remote context: "
                         "`pulsarctl context list`")
    return target


@top.command("migrate", short_help="Copy the local store up to a remote Pulsar, or remote topics "
             "down into it.", help="Copy the local store up to a remote Pulsar (--to CONTEXT: "
             "tenants, namespaces and policies, topics and partitions, subscriptions at their "
             "cursor positions, the unacknowledged backlog), or remote topics down into the "
             "local store (--from CONTEXT TOPIC..: all, a --since/--until range, or what "
             "-s SUB has not acknowledged). Idempotent and resumable: each copied message "
             "carries MIGRATED_FROM, its source id, and a run goes on after the last one copied.")
def migrate(
    ctx: typer.Context,
    names: Annotated[Optional[List[str]], typer.Argument(
        metavar="[NS|TOPIC..]", help="Up: only these namespaces or topics (default: all). "
        "Down: the remote topics to copy.", show_default=False)] = None,
    to_context: Annotated[Optional[str], typer.Option(
        "--to", help="Copy the local store up to this remote context.", metavar="CONTEXT",
        show_default=False)] = None,
    from_: Annotated[Optional[str], typer.Option(
        "--from", help="Copy remote topics of this context down into the local store.",
        metavar="CONTEXT", show_default=False)] = None,
    subscription: Annotated[Optional[str], typer.Option(
        "-s", "--subscription", help="Down: only what this subscription has not acknowledged.",
        metavar="SUB", show_default=False)] = None,
    since: Annotated[Optional[str], typer.Option(
        "--since", help="Down: only messages published since (a time, or a duration ago).",
        metavar="T", show_default=False)] = None,
    until: Annotated[Optional[str], typer.Option(
        "--until", help="Down: only messages published until (a time, or a duration ago).",
        metavar="T", show_default=False)] = None,
    backlog: Annotated[bool, typer.Option(
        "--include-backlog/--no-backlog", help="Up: copy the unacknowledged backlog too.")] = True,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.remote import migrate as m
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.remote.broker import RemoteBroker
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.remote.data import Connection
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_time_or_duration_ms

    out = fmt(ctx, output)
    if (to_context is None) == (from_ is None):
        raise UsageError("give --to CONTEXT (up) or --from CONTEXT TOPIC.. (down)")
    if from_ is not None and not names:
        raise UsageError("--from needs the remote topics to copy", hint="e.g. `pulsarctl "
                         "migrate --from prod orders-billing-DLQ`")
    if to_context is not None and (subscription or since or until):
        raise UsageError("-s, --since and --until are for --from")
    now = clocks.wall_ms()
    since_ms = parse_time_or_duration_ms(since, now) if since else None
    until_ms = parse_time_or_duration_ms(until, now) if until else None
    broker = state(ctx).broker()
    target = _remote(to_context or from_)
    remote = RemoteBroker(target, "pulsarctl migrate")
    counter = render.Counter("migrated", "message")
    moved = [0]

    def progress(n):
        moved[0] += n
        counter.update(moved[0])

    start = clocks.monotonic()
    try:
        with Connection(target) as conn:
            if to_context is not None:
                doc = m.up(broker, remote, conn, names, backlog, progress)
            else:
                doc = m.down(broker, remote, conn, names, subscription, since_ms, until_ms,
                             progress)
    finally:
        counter.close()
        remote.close()
    seconds = max(clocks.monotonic() - start, 1e-6)
    doc = {"direction": "up" if to_context else "down", "context": target.name, **doc,
           "seconds": round(seconds, 3), "messagesPerSecond": round(doc["messages"] / seconds, 1)}
    for w in doc["warnings"]:
        render.err(render.safe(f"warning: {w}"))
    if out != render.TEXT:
        render.data(doc, out)
    c = doc
    render.err(render.safe(
        f"migrated {'to' if to_context else 'from'} {target.name}: {c['tenants']} tenant(s), "
        f"{c['namespaces']} namespace(s), {c['policies']} polic(ies), {c['topics']} topic(s), "
        f"{c['subscriptions']} subscription(s), {c['messages']} message(s) in "
        f"{c['seconds']} s ({c['messagesPerSecond']} msg/s)"))
