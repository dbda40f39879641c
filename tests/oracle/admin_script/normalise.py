"""What differs between two runs of the same script for reasons that say nothing about
behaviour, replaced by placeholders, so that what is left to compare is behaviour:

- the run's own names: its tenant ({tenant}) and scratch directory ({dir}); the tenants other
  tests made in the same standalone;
- addresses: the target's web and broker ports (<web>, <broker>), a client's port (<addr>);
- times: epoch milliseconds and ISO-8601 instants in time fields (<time>; 0 and -1, "never",
  are kept), "Publish time:" lines of peeked messages, reset-cursor's timestamp;
- rates and averages, computed over a window that neither side has closed alike (<rate>);
- sizes in bytes of stored entries (<size>; 0 and -1 kept): an entry's size depends on its
  metadata (the producer's name, say), which each broker fills in its own way;
- the order of a set: a role's actions, requests pulsar-admin sends at once;
- ledger ids (in get-message-by-id's request path too): numbered in ascending order within one answer (L0, L1, ...), so "the second
  ledger's entry 4" compares equal while BookKeeper's ids and the store's differ. Entry ids
  are kept: they count entries within a ledger on both sides.
"""
from __future__ import annotations

import re

ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?")
POSITION = re.compile(r"^(-?\d+):(-?\d+)$")
PEEK_ID = re.compile(r"^(Message ID: )(\d+):(-?\d+)(.*)$", re.M)
PEEK_TIME = re.compile(r"^(Publish time: )\d+$", re.M)
TERMINATED_AT = re.compile(r"(terminated at )(\d+):")
# pulsar-admin prints a role's actions as a Java Set: in no fixed order.
ACTIONS = re.compile(r"\[([a-z, ]*)\]$", re.M)

TIME_KEY = re.compile(r"(?i)(timestamp|publishtime|since$|^last.*time$|durationtime)")
RATE_KEYS = {"messageAckRate", "chunkedMessageRate", "averageMsgSize", "avgMsgSize"}
SIZE_KEYS = {"bytesInCounter", "bytesOutCounter", "bytesOutInternalCounter", "storageSize",
             "backlogSize", "totalSize", "currentLedgerSize", "size",
             "systemTopicBytesInCounter"}
LEDGER_KEYS = {"ledgerId", "cursorLedger", "lastOffloadLedgerId"}
KEEP = (0, -1)


class Context:
    """One run's own names: its tenant, scratch directory and ports."""

    def __init__(self, tenant: str, work_dir: str, web_port: int, broker_port: int):
        self.subs = [(work_dir, "{dir}"), (tenant, "{tenant}"),
                     (f"127.0.0.1:{web_port}", "<web>"), (f"127.0.0.1:{broker_port}", "<broker>"),
                     (f"localhost:{web_port}", "<web>"), (f"localhost:{broker_port}", "<broker>")]

    def text(self, s: str) -> str:
        for old, new in self.subs:
            s = s.replace(old, new)
        s = re.sub(r"127\.0\.0\.1:\d+", "<addr>", s)
        return ISO_TIME.sub("<time>", s)


def is_rate(key: str) -> bool:
    return key.startswith(("msgRate", "msgThroughput")) or key in RATE_KEYS


def ledgers_in(doc, found: set) -> None:
    """Every ledger id the answer names: ledger fields and "ledger:entry" positions."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k in LEDGER_KEYS and isinstance(v, int) and v not in KEEP:
                found.add(v)
            ledgers_in(v, found)
    elif isinstance(doc, list):
        for v in doc:
            ledgers_in(v, found)
    elif isinstance(doc, str):
        m = POSITION.match(doc)
        if m and int(m.group(1)) not in KEEP:
            found.add(int(m.group(1)))
        for m in PEEK_ID.finditer(doc):
            found.add(int(m.group(2)))
        for m in TERMINATED_AT.finditer(doc):
            found.add(int(m.group(2)))


def _value(key, v, ctx: Context, ledger: dict):
    if isinstance(v, (dict, list)):
        return _doc(v, ctx, ledger)
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        if key is None:
            return v
        if is_rate(key):
            return "<rate>"
        if v in KEEP:
            return v
        if key in LEDGER_KEYS:
            return ledger.get(v, v)
        if TIME_KEY.search(key):
            return "<time>"
        if key in SIZE_KEYS:
            return "<size>"
        return v
    if isinstance(v, str):
        if key is not None and TIME_KEY.search(key) and ISO_TIME.fullmatch(v):
            return "<time>"
        m = POSITION.match(v)
        if m and int(m.group(1)) in ledger:
            return f"{ledger[int(m.group(1))]}:{m.group(2)}"
        return ctx.text(v)
    return v


def _doc(doc, ctx: Context, ledger: dict):
    if isinstance(doc, dict):
        return {ctx.text(k): _value(k, v, ctx, ledger) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_value(None, v, ctx, ledger) for v in doc]
    return _value(None, doc, ctx, ledger)


def _text(text: str, ledger: dict) -> str:
    text = PEEK_ID.sub(lambda m: f"{m.group(1)}{ledger.get(int(m.group(2)), m.group(2))}:"
                       f"{m.group(3)}{m.group(4)}", text)
    text = TERMINATED_AT.sub(lambda m: f"{m.group(1)}{ledger[int(m.group(2))]}:", text)
    text = ACTIONS.sub(lambda m: "[" + ", ".join(sorted(m.group(1).split(", "))) + "]", text)
    return PEEK_TIME.sub(r"\1<time>", text)


def _request(line: str, ctx: Context) -> str:
    line = re.sub(r"/ledger/\d+/entry/", "/ledger/L/entry/", line)
    line = re.sub(r"/resetcursor/\d+ ", "/resetcursor/<time> ", line)
    return ctx.text(line)


# The standalone is shared by the oracle lane's tests: `tenants list` keeps the run's tenant
# and the two every standalone has, not the tenants other tests make.
OWN_TENANTS = ("{tenant}", "public", "pulsar")


def normalise(record: dict, ctx: Context) -> dict:
    """One recorded answer ({line, command, rc, stdout, stderr, http}) with the placeholders."""
    if record["command"] == "tenants list" and isinstance(record["stdout"], str):
        names = ctx.text(record["stdout"]).splitlines()
        record = {**record, "stdout": "\n".join(n for n in names if n in OWN_TENANTS)}
    found: set = set()
    ledgers_in(record["stdout"], found)
    ledger = {lid: f"L{i}" for i, lid in enumerate(sorted(found))}
    out = record["stdout"]
    if isinstance(out, str):
        out = ctx.text(_text(out, ledger))
    else:
        out = _doc(out, ctx, ledger)
    # sorted: pulsar-admin sends some requests at once (topics list asks both domains)
    http = sorted(_request(h, ctx) for h in record["http"])
    return {**record, "stdout": out, "stderr": ctx.text(record["stderr"]), "http": http}
