"""pulsarctl explain ID [-t TOPIC] [-s SUB]: a message's life from the store's message history
(pulsarctl/broker/history.py, read back by pulsarctl/broker/explain.py), oldest first; and the
lines `--explain` prints after any command, in Pulsar's words, from the same events (phrase).
Where pulsarctl does more than Pulsar, a line says so: "(pulsarctl: ...)"."""
from __future__ import annotations

from typing import Annotated, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl import timetext
from pulsarctl.cli import render
from pulsarctl.cli.common import Output, fmt, state
from pulsarctl.messages import iso_ms, parse_message_id
from pulsarctl.names import topic_name

top = typer.Typer()


@top.command(help="A message's life, oldest first, from the store's message history: published, "
                  "delivered (to whom, which redelivery), acked, nacked, ack timeouts, "
                  "redeliveries and why, retry and dead letter moves (the broker's and a "
                  "client's, followed back to the original topic), expiry, skip and clear, and "
                  "why nothing happened (held: a delayed message not due, a Key_Shared key no "
                  "consumer's range covers, a consumer at its unacked limit; refused: a "
                  "consumer the subscription turned away). A line that shows pulsarctl doing "
                  "more than Pulsar says so, \"(pulsarctl: ...)\" (in -o json: beyondPulsar). "
                  "Without -t the id's ledger names its topic (ledger ids are unique in a "
                  "store); an id no topic holds is exit 3, an id two stores hold (the "
                  "non-persistent topics' counts its own ledgers) exit 2. A batch index on an "
                  "entry that is not a batch, or past its batch, is exit 3.")
def explain(
    ctx: typer.Context,
    message_id: Annotated[str, typer.Argument(metavar="ID", help="Message id, "
                                              "ledgerId:entryId[:partition[:batchIndex]].",
                                              show_default=False)],
    topic: Annotated[Optional[str], typer.Option(
        "-t", "--topic", help="The topic the id is on (default: the topic whose ledger the id "
        "names).", show_default=False)] = None,
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
        if e.get("due") is not None:
            e["due"] = iso_ms(e["due"])
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
    return timetext.duration_text(int(ms or 0))


def _clock(at) -> str:
    """A time of day as pulsarctl/timetext.py writes it, from epoch ms or from the ISO text
    explain's JSON carries."""
    if isinstance(at, str):
        t = at[11:23]
        return t[:-4] if t.endswith(".000") else t
    return timetext.clock_text(at)


def phrase(e: dict, mid: str = "this message") -> str:
    """One event in Pulsar's words: "1:4:-1 delivered to consumer c1 of Shared subscription
    jobs (redelivery 1: nacked at 10:00:05, nack backoff 4s)"; where pulsarctl does more than
    Pulsar, "(pulsarctl: ...)" after it."""
    s = _phrase(e, mid)
    note = e.get("beyondPulsar")
    return f"{s} (pulsarctl: {note})" if note else s


def _phrase(e: dict, mid: str) -> str:
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
        if e.get("byClient"):
            # A wire consumer's nack: its client held the message for the nack delay (or the
            # ack timeout), then asked for it again (CommandRedeliverUnacknowledgedMessages).
            return f"{mid} negatively acknowledged by consumer {who} of subscription {sub}: " \
                   f"its client held it {_dur(e.get('held'))} (its nack delay, or its ack " \
                   "timeout: a Pulsar client keeps both itself), then asked for its redelivery"
        s = f"{mid} negatively acknowledged by consumer {who} of subscription {sub}: " \
            f"redelivered after {_dur(e.get('delay'))}"
        # The timer's deadline, as the cursor picture shows it (rounded down to 256 ms by the
        # NegativeAcksTracker's trimLowerBit): a history recorded before it was kept has none.
        return s + (f", due {_clock(e['due'])}" if e.get("due") is not None else "")
    if ev == "ackTimeout":
        return f"{mid} not acknowledged by consumer {who} of subscription {sub} in time ({why})"
    if ev == "consumerGone":
        return f"{mid} given back to subscription {sub} for dispatch: {why}"
    if ev == "redelivered":
        return f"{mid} redelivered on subscription {sub}, redelivery count {rc}" + \
            (f" ({why})" if why else "")
    if ev == "retried":
        s = f"{mid} moved to retry letter topic {_short(e.get('toTopic', ''))} as " \
            f"{e.get('toMessageId')}"
        if e.get("delay") is not None:
            s += f", delivered after {_dur(e.get('delay'))}"
        if e.get("reconsumeTimes") is not None:
            s += f" (reconsume {e.get('reconsumeTimes')})"
        return s + _by_client(e)
    if ev == "deadLettered":
        s = f"{mid} dead-lettered" + (f" from subscription {sub}" if sub else "") + \
            f" to {_short(e.get('toTopic', ''))} as {e.get('toMessageId')}"
        return s + (f" ({why})" if why else "") + _by_client(e)
    if ev == "expired":
        return f"{mid} expired on subscription {sub}" + (f" ({why})" if why else "")
    if ev == "skipped":
        return f"{mid} skipped on subscription {sub}"
    if ev == "cleared":
        return f"{mid} cleared from the backlog of subscription {sub}"
    if ev == "held":
        return f"{mid} not delivered on subscription {sub}" + \
            (f" to consumer {who}" if who else "") + f": {why}"
    if ev == "refused":
        return f"{mid} waited: subscription {sub} refused consumer {who} " \
               f"({e.get('error')}: {why})"
    return f"{mid} {ev}"


def _by_client(e: dict) -> str:
    """A move a client made (its consumer published the copy, then acked this message)."""
    if not e.get("byClient"):
        return ""
    who, rc = e.get("consumerName"), e.get("redeliveryCount")
    s = ", by the client" + (f" of consumer {who}" if who else "")
    return s + (f" at redelivery count {rc}" if rc is not None else "")


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
