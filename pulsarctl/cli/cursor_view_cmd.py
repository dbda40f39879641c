"""`topics cursor TOPIC -s SUB`: the picture of a subscription's cursor (the states come from
pulsarctl/broker/cursor_view.py, the picture from pulsarctl/cli/cursor_picture.py)."""
from __future__ import annotations

from typing import Annotated, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl.cli import render
from pulsarctl.cli.common import Output, Sub, Topic, fmt, positive, state
from pulsarctl.cli.topics_cmd import topics

HELP = (
    "Show a subscription's cursor over its ledger: each entry (or run of entries) acked, "
    "pending (for which consumer, since when), awaiting redelivery (when, and why: nacked, ack "
    "timeout, consumer gone, redelivered, returned, Key_Shared key order), delayed (until "
    "when) or backlog, with the mark-delete and read positions marked. The window holds N "
    "entries around the mark-delete position, or around a message id; the acked entries "
    "before it are one folded row, the rest are counted. Changes nothing. "
    "-o json: one document with markDeletePosition, readPosition, msgBacklog and entries, "
    "each with messageId, state (acked, pending, redeliver, delayed or backlog), count, "
    "consumerName, redeliveryCount and due (and reason, since, batch where they apply); a run "
    "of one state is one entry with its count and lastMessageId. A partitioned topic gives "
    "topic, subscription and partitions: that document for each partition, in order."
)


@topics.command("cursor", help=HELP)
def cursor(
    ctx: typer.Context, topic: Topic, subscription: Sub,
    around: Annotated[Optional[str], typer.Option(
        "--around", help="Centre the window on this message id (ledgerId:entryId[:partition]).",
        metavar="ID", show_default=False)] = None,
    count: Annotated[int, typer.Option(
        "-n", "--entries", help="How many entries the window holds.", metavar="N")] = 40,
    output: Output = None,
):
    positive(count, "-n/--entries", allow_zero=False)
    views = state(ctx).broker().subscription(topic, subscription).cursor_view(around, count)
    out = fmt(ctx, output)
    if out != render.TEXT:
        render.data(views.to_json(), out)
        return
    # lazy: rich is loaded only when a picture is drawn, not when the command tree is built
    from pulsarctl.cli.cursor_picture import cursor_picture

    render.show(cursor_picture(views))
