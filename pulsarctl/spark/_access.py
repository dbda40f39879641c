"""The data source's one door to the store: open a Broker (once per worker process and store),
resolve the topics a read names, take the metadata a plan needs, turn message ids and times into
offsets, scan entries in chunks, publish, and acknowledge.

Nothing here imports pyspark or pyarrow, so planning errors can be raised (and tested) without a
Spark session, and the CLI can check its arguments before it starts one.

Offsets are the managed ledger's entry indexes (store/ledger.py): they count from 0 across all
ledgers of a topic partition, never change for an entry, and survive trimming. Plans and
streaming checkpoints hold offsets; users see and give message ids.

Reads go through the Broker's bulk reads, `broker.scans` (broker/admin/scans.py: one read
transaction per chunk, so no read transaction stays open while Spark works on a batch, and raw
records rather than a Message per entry); publishing and acknowledging through the Broker's own
methods. Nothing here runs code inside a Broker transaction.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import json
from datetime import datetime, timezone
# IdColumns and DataLoss are what scan_chunk hands out and raises: the source and the tests
# take them from here.
from pulsarctl.broker.scan import IdColumns  # noqa: F401
from pulsarctl.errors import (  # noqa: F401
    AlreadyExists, DataLoss, InvalidValue, MessageNotFound, TopicNotFound,
)
from pulsarctl.messages import MessageId, parse_message_id
from pulsarctl.names import parse_topic

# -- Broker handles, one per worker process and store ------------------------------------------
# Spark reuses a Python worker for many tasks, possibly of different jobs on different stores,
# so a handle is kept only under the store's identity: its path and the inode of its data file
# (a store deleted and created again at the same path is another store), and the process id (an
# LMDB environment never crosses fork()).
_BROKERS: dict[tuple, object] = {}


def _identity(path: str) -> tuple:
    path = os.path.abspath(path)
    try:
        st = os.stat(os.path.join(path, "data.mdb"))
        inode = (st.st_dev, st.st_ino)
    except OSError:
        inode = None
    return path, inode, os.getpid()


def broker(path: str, write: bool = False):
    """A Broker on the store at path, shared by the tasks this process runs. A read-only one
    never creates a store (StoreUnavailable when there is none)."""
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.broker import Broker

    key = _identity(path) + (write,)
    b = _BROKERS.get(key)
    if b is None:
        # Handles on a store that was replaced (same path, another data file), or made in a
        # parent process, are dropped; a handle of the other mode on this store stays.
        for k in [k for k in _BROKERS if k[2] != key[2] or (k[0] == key[0] and k[1] != key[1])]:
            old = _BROKERS.pop(k)
            if k[2] == key[2]:
                try:
                    old.close()
                except Exception:  # noqa: BLE001 - a stale handle may fail to close
                    pass
        b = Broker(path, readonly=not write, create=write)
        # Opening may have created the store (a writer): file it under what it is now.
        _BROKERS[_identity(path) + (write,)] = b
    return b


def resolve_store(value: str | None) -> str:
    """The `store` option, else the CLI's resolution ($PULSARCTL_STORE, the config file, the
    default). Resolved once on the driver so every task uses the same store."""
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.config import resolve_store as resolve

    return os.path.abspath(resolve(value or None))


# -- options -----------------------------------------------------------------------------------
def flag(options: dict, name: str, default: bool) -> bool:
    v = options.get(name.lower())
    if v is None or v == "":
        return default
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise InvalidValue(f"option {name} takes true or false, not {v!r}")


def whole(options: dict, name: str, default: int | None, low: int = 1) -> int | None:
    v = options.get(name.lower())
    if v is None or v == "":
        return default
    try:
        n = int(str(v).strip())
    except ValueError:
        raise InvalidValue(f"option {name} takes a whole number, not {v!r}") from None
    if n < low:
        raise InvalidValue(f"option {name} must be at least {low}, not {n}")
    return n


def parse_time_ms(value, what: str) -> int:
    """Epoch milliseconds, or an ISO 8601 time (UTC unless it names an offset)."""
    text = str(value).strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)

    try:
        dt = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise InvalidValue(f"{what} {value!r} is neither epoch milliseconds nor an ISO 8601 "
                           "time", hint="e.g. 1767225600000 or 2026-01-01T00:00:00Z") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


EARLIEST, LATEST = "earliest", "latest"


def parse_offsets(value, what: str):
    """startingOffsets / endingOffsets: "earliest", "latest", or a JSON object of topic ->
    message id ("3:10:-1"), "earliest" or "latest". Returns a string or {full name: value}."""
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()

    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise InvalidValue(f"{what} must be earliest, latest or a JSON object of topic to "
                           f"message id, not {text[:80]!r}",
                           hint='e.g. {"persistent://public/default/t": "3:10:-1"}')
    out = {}
    for k, v in doc.items():
        name = str(parse_topic(k))
        if isinstance(v, str) and v.strip().lower() in (EARLIEST, LATEST):
            out[name] = v.strip().lower()
        elif isinstance(v, str):
            mid = parse_message_id(v)
            if mid in (MessageId.earliest, MessageId.latest):
                out[name] = EARLIEST if mid == MessageId.earliest else LATEST
            else:
                out[name] = mid
        else:
            raise InvalidValue(f"{what}: the position of {k} must be a message id string "
                               f"like \"3:10:-1\", not {v!r}")
    return out


# -- topics ------------------------------------------------------------------------------------
def topic_options(options: dict) -> tuple[str, object]:
    """Exactly one of topic, topics, topicsPattern: ("names", [TopicName]) or ("pattern", re)."""
    given = [k for k in ("topic", "topics", "topicspattern") if options.get(k)]
    if len(given) != 1:
        raise InvalidValue("give exactly one of the options topic, topics and topicsPattern"
                           + (f" (got {', '.join(given)})" if given else ""),
                           hint='e.g. .option("topic", "persistent://public/default/t")')
    k = given[0]
    v = str(options[k])
    if k == "topic":
        return "names", [parse_topic(v.strip())]
    if k == "topics":
        names = [s.strip() for s in v.split(",") if s.strip()]
        if not names:
            raise InvalidValue("option topics is empty", hint="give a comma-separated list")
        out = []
        for n in names:
            t = parse_topic(n)
            if t not in out:
                out.append(t)
        return "names", out
    text = v.strip()
    if "://" not in text and "/" not in text:
        text = "persistent://public/default/" + text
    try:
        return "pattern", re.compile(text)
    except re.error as exc:
        raise InvalidValue(f"option topicsPattern {v!r} is not a valid regular expression: "
                           f"{exc}") from None


@dataclass
class Part:
    """One topic partition (or non-partitioned topic) as a plan sees it."""
    name: str                 # full name of the partition, as __topic shows it
    partition: int            # -1 for a non-partitioned topic
    ml_id: int                # the managed ledger: a topic deleted and created again differs
    first: int                # lowest offset not trimmed
    next: int                 # offset the next entry will get
    ledgers: list = field(default_factory=list)
    # Offloaded ledgers (pulsarctl/offload.py): [(ledger id, first offset, entries, file)]
    offloaded: list = field(default_factory=list)


def without_offloaded(part: Part, start: int, end: int) -> list[tuple[int, int]]:
    """[start, end) minus the offsets of the part's offloaded ledgers."""
    out, s = [], start
    for _lid, first, n, _f in sorted(part.offloaded, key=lambda x: x[1]):
        a, z = max(first, s), min(first + n, end)
        if a >= z:
            continue
        if s < a:
            out.append((s, a))
        s = z
    if s < end:
        out.append((s, end))
    return out


def resolve_parts(b, kind: str, spec, missing_ok: bool = False) -> list[Part]:
    """The topic partitions a read covers, sorted by name, with their offsets now."""
    if kind == "names":
        rows = b.scans.parts(spec, missing_ok)
    else:
        rows = b.scans.parts_matching(spec)
    return [Part(*r) for r in rows]


# -- positions -----------------------------------------------------------------------------
def offset_of_id(part: Part, mid: MessageId) -> int:
    """The offset a message id starts at. An entry id of -1 means the start of its ledger.
    Ids in trimmed ledgers are earlier than every entry still stored."""
    for lid, first, n in part.ledgers:
        if lid == mid.ledger_id:
            if not -1 <= mid.entry_id <= n:
                break
            return first + max(mid.entry_id, 0)
    if part.ledgers and mid.ledger_id < part.ledgers[0][0]:
        return part.first
    raise MessageNotFound(f"message {mid} is not on {part.name}",
                          hint="ids look like ledgerId:entryId:partition, as `pulsarctl "
                          "topics last-message-id` prints them")


def position_at(part: Part, offset: int) -> tuple[int, int]:
    """(ledger id, entry id) of an offset inside part's ledgers."""
    for lid, first, n in part.ledgers:
        if first <= offset < first + max(n, 1):
            return lid, offset - first
    raise MessageNotFound(f"offset {offset} is not on {part.name}")


def bound(part: Part, spec, default: str, what: str) -> int:
    """A starting/ending offset for part from parsed startingOffsets/endingOffsets."""
    v = spec
    if isinstance(spec, dict):
        v = spec.get(part.name)
        if v is None and part.partition >= 0:
            base = str(parse_topic(part.name).partitioned_topic_name)
            v = spec.get(base)
            if isinstance(v, MessageId) and v.partition != part.partition:
                v = None
        if v is None:
            v = default
    if v is None:
        v = default
    if v == EARLIEST:
        return part.first
    if v == LATEST:
        return part.next
    return min(max(offset_of_id(part, v), part.first), part.next)


def check_offset_keys(spec, parts: list[Part], what: str) -> None:
    """Every topic a JSON offsets option names must be one the read covers."""
    if not isinstance(spec, dict):
        return
    known = {p.name for p in parts}
    known |= {str(parse_topic(p.name).partitioned_topic_name) for p in parts if p.partition >= 0}
    for k in spec:
        if k not in known:
            raise InvalidValue(f"{what} names {k}, which this read does not cover",
                               hint="name the topic (or its partitions) in topic, topics or "
                               "topicsPattern too")


def first_at_or_after(b, part: Part, lo: int, hi: int, ms: int) -> int:
    """The first offset in [lo, hi) whose publish time is >= ms (hi if none). Publish times do
    not go down along a topic, so a binary search over a few entries finds it."""
    if lo >= hi:
        return hi
    return b.scans.first_at_or_after(part.name, part.ml_id, lo, hi, ms)


# -- scanning ------------------------------------------------------------------------------
class _Columns:
    """Decodes a chunk's entries straight into spark/_columnar.py's columns (fields, types),
    for Broker.scans.chunk: None where it cannot (the chunk is then decoded record by
    record)."""
    __slots__ = ("fields", "types")

    def __init__(self, fields, types):
        self.fields, self.types = fields, types

    def pieces(self, pieces):
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.spark import _columnar

        return _columnar.decode_pieces(pieces, self.fields, self.types)

    def values(self, values):
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.spark import _columnar

        return _columnar.decode(values, self.fields, self.types)

    def batched(self, runs, recs):
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.spark import _batched

        return _batched.decode(runs, recs, self.fields, self.types)


def scan_chunk(b, name: str, ml_id: int, start: int, end: int, max_entries: int,
               max_bytes: int, fail_on_loss: bool, columnar=None):
    """One chunk of the offsets [start, end) in one read transaction: up to max_entries
    entries, fewer when they are large (broker/admin/scans.chunk_entries). Returns (next
    offset, rows, records): rows are (offset, ledger id, entry id, raw) and records the decoded
    entries, [publishTime, producer, sequenceId, payload, properties, key, orderingKey,
    eventTime, ...] (pulsarctl/messages.py's layout) with payloads as readers see them
    (broker/scan.py's whole_messages).
    With columnar, (fields, types) for spark/_columnar.py, records may instead be a
    arrow_columns.Columns of those fields, when every entry of the chunk is a plain one."""
    decoder = None if columnar is None else _Columns(*columnar)
    return b.scans.chunk(name, ml_id, start, end, max_entries, max_bytes, fail_on_loss,
                         decoder)


def current(b, names_ml: dict) -> dict:
    """{name: (first, next)} now for topics whose managed ledger is still ml_id."""
    return b.scans.current(names_ml)


# -- writing --------------------------------------------------------------------------------
def ensure_dedup(b, topic: str) -> None:
    """Make sure the topic exists (created as produce would create it) and deduplication is in
    force on it, so a message whose sequence id its producer already stored is dropped."""
    # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
    from pulsarctl.broker.policies import DEDUP

    t = parse_topic(topic)
    try:
        on = b.policies.get("topic", t, DEDUP, applied=True)
    except TopicNotFound:
        if not b.policies.settings().get("allowAutoTopicCreation", True):
            raise TopicNotFound(f"topic {t} does not exist and allowAutoTopicCreation is off",
                                hint=f"create it with `pulsarctl topics create {t}`") from None
        try:
            b.topics.create(t)
        except AlreadyExists:
            pass
        on = b.policies.get("topic", t, DEDUP, applied=True)
    if not on:
        b.policies.set("topic", t, DEDUP, True)


def ids_between(part: Part, lo: int, hi: int) -> list[MessageId]:
    """The message ids of the offsets [lo, hi) of part."""
    out = []
    for lid, first, n in part.ledgers:
        a, z = max(lo, first), min(hi, first + n)
        out += [MessageId(lid, o - first, part.partition) for o in range(a, z)]
    return out


def ack_through(b, subscription: str, ranges: dict) -> int:
    """Acknowledge on a durable subscription what a batch read: ranges is {partition name:
    (ml id, start offset, end offset)}. Where the subscription type allows it (Exclusive,
    Failover) that is a cumulative ack of the entry before end, else individual acks of
    [start, end). The subscription is created at Earliest where it is missing. Returns how many
    were newly acked."""
    n = 0
    names = [parse_topic(k) for k in sorted(ranges)]
    for part in resolve_parts(b, "names", names, missing_ok=True):
        ml, start, end = ranges[part.name]
        start, end = max(start, part.first), min(end, part.next)
        if part.ml_id != ml or end <= start:
            continue
        try:
            b.subscription(part.name, subscription).create("Earliest")
        except AlreadyExists:
            pass
        kind = b.subscription(part.name, subscription).describe()["type"]
        if kind in ("Exclusive", "Failover"):
            lid, eid = position_at(part, end - 1)
            n += b.ack(part.name, subscription, [MessageId(lid, eid, part.partition)],
                       cumulative=True)
            continue
        for lo in range(start, end, 10_000):
            n += b.ack(part.name, subscription, ids_between(part, lo, min(end, lo + 10_000)))
    return n


def ack_ids(b, topic: str, subscription: str, ids: list[str]) -> int:
    """Acknowledge message ids (strings) individually on a subscription, in one transaction."""
    if not ids:
        return 0
    return b.ack(topic, subscription, [parse_message_id(i) for i in ids])


def boundary_id(part: Part, offset: int) -> str:
    """A message id string naming offset as a bound (offset may be the next one to be written:
    the entry id one past the last ledger's end)."""
    for lid, first, n in reversed(part.ledgers):
        if first <= offset <= first + n:
            return f"{lid}:{offset - first}:{part.partition}"
    raise MessageNotFound(f"offset {offset} is not on {part.name}")


# -- dead letter topics -----------------------------------------------------------------------
def dlq_waiting(b, dlq: str) -> tuple[Part, list[tuple[int, int]]]:
    """The DLQ's partition snapshot and the runs [start, end) of offsets its pulsarctl-dlq
    subscription has not acknowledged (everything while the subscription is missing), as the
    `dlq` commands count them."""
    part, runs = b.scans.dlq_waiting(parse_topic(dlq))
    return Part(*part), runs
