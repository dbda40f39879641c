"""pulsarctl explain ID -t TOPIC [-s SUB]: a message's life from the store's message history
(pulsarctl/broker/history.py), oldest first; and the lines `--explain` prints after any
command, in Pulsar's words, from the same events (phrase)."""
from __future__ import annotations

from typing import Annotated, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl.cli import render
from pulsarctl.cli.common import Output, fmt, state
from pulsarctl.messages import iso_ms, parse_message_id
from pulsarctl.names import topic_name

top = typer.Typer()


@top.command(help="A message's life, oldest first, from the store's message history: published, "
                  "delivered (to whom, which redelivery), acked, nacked, ack timeouts, "
                  "redeliveries and why, retry and dead letter moves (followed back to the "
                  "original topic), expiry, skip and clear.")
def explain(
    ctx: typer.Context,
    message_id: Annotated[str, typer.Argument(metavar="ID", help="Message id, "
                                              "ledgerId:entryId[:partition[:batchIndex]].",
                                              show_default=False)],
    topic: Annotated[str, typer.Option("-t", "--topic", help="The topic the id is on.",
                                       show_default=False)],
    subscription: Annotated[Optional[str], typer.Option(
        "-s", "--subscription", help="Only this subscription's events (and the publish).",
        show_default=False)] = None,
    output: Output = None,
):
    mid = parse_message_id(message_id)
    doc = state(ctx).broker().explain(topic, mid, subscription)
    out = fmt(ctx, output)
    for e in doc["events"]:
        e["at"] = iso_ms(e["at"])
    render.data(doc, out, _text)


def _text(doc: dict) -> None:
    if not doc["events"]:
        render.err(f"no history for {doc['messageId']} on {doc['topic']} (recorded before "
                   "the history existed, or messageHistoryEnabled is false)")
        return
    here = doc["topic"]
    for e in doc["events"]:
        mid = doc["messageId"] if e["topic"] == here else "the original"
        render.outln(render.safe(f"{e['at']}  {phrase(e, mid)}"))


def _short(topic: str) -> str:
    """persistent://public/default/t as t; any other namespace in full."""
    return topic[len("persistent://public/default/"):] \
        if topic.startswith("persistent://public/default/") else topic


def _dur(ms) -> str:
    # lazy: the broker's formatter, loaded only when a line needs a duration
    from pulsarctl.broker.history import duration_text

    return duration_text(int(ms or 0))


def phrase(e: dict, mid: str = "this message") -> str:
    """One event in Pulsar's words: "1:4:-1 delivered to consumer c1 of Shared subscription
    jobs (redelivery 1: nacked at 10:00:05, nack backoff 4s)"."""
    ev, sub, who, rc = e["event"], e.get("subscription"), e.get("consumerName"), \
        e.get("redeliveryCount")
    why = e.get("reason")
    if ev == "published":
        s = f"{mid} published to {_short(e['topic'])} by producer {e.get('producer')} " \
            f"(sequence id {e.get('sequenceId')})"
        if e.get("fromTopic"):
            s += f", a copy of {e.get('fromMessageId')} on {_short(e['fromTopic'])}"
        return s
    if ev == "delayed":
        return f"{mid} held back by delayed delivery until {iso_ms(e.get('until'))}"
    if ev == "delivered":
        s = f"{mid} delivered to consumer {who} of {e.get('type', '')} subscription {sub}"
        if rc:
            s += f" (redelivery {rc}" + (f": {why})" if why else ")")
        return s
    if ev == "acked":
        return f"{mid} acknowledged on subscription {sub}" + \
            (" (cumulatively)" if e.get("cumulative") else "")
    if ev == "nacked":
        return f"{mid} negatively acknowledged by consumer {who} of subscription {sub}: " \
               f"redelivered after {_dur(e.get('delay'))}"
    if ev == "ackTimeout":
        return f"{mid} not acknowledged by consumer {who} of subscription {sub} in time ({why})"
    if ev == "consumerGone":
        return f"{mid} given back to subscription {sub} for dispatch: {why}"
    if ev == "redelivered":
        return f"{mid} redelivered on subscription {sub}, redelivery count {rc}" + \
            (f" ({why})" if why else "")
    if ev == "retried":
        return f"{mid} moved to retry letter topic {_short(e.get('toTopic', ''))} as " \
               f"{e.get('toMessageId')}, delivered after {_dur(e.get('delay'))} " \
               f"(reconsume {e.get('reconsumeTimes')})"
    if ev == "deadLettered":
        return f"{mid} dead-lettered from subscription {sub} to " \
               f"{_short(e.get('toTopic', ''))} as {e.get('toMessageId')}" + \
            (f" ({why})" if why else "")
    if ev == "expired":
        return f"{mid} expired on subscription {sub}" + (f" ({why})" if why else "")
    if ev == "skipped":
        return f"{mid} skipped on subscription {sub}"
    if ev == "cleared":
        return f"{mid} cleared from the backlog of subscription {sub}"
    return f"{mid} {ev}"


def explain_lines(watched: list) -> list[str]:
    """--explain: one line per event a command's transactions recorded, as (topic, position,
    stored value) from history.watched()."""
    # lazy: the broker's history module, loaded only with --explain
    from pulsarctl.broker.history import as_doc

    out = []
    for topic, pos, value in watched:
        e = as_doc(value)
        e["topic"] = topic
        t = topic_name(topic)
        out.append(phrase(e, f"{pos}:{t.partition_index}"))
    return out
