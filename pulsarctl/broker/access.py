"""A topic's producers and their access modes (Pulsar's ProducerAccessMode, PIP-68 and PIP-161),
decided as AbstractTopic.addProducer and incrementTopicEpochIfNeeded decide them:

- Shared: refused (ProducerBusy) while an exclusive producer holds the topic or one waits for it.
- Exclusive: refused (ProducerFenced) while an exclusive producer holds the topic or waits for
  it, and while shared producers are connected; else it holds the topic, with a new topic epoch.
- WaitForExclusive: queued while any producer is connected; it holds the topic once none is
  left (the first queued first).
- ExclusiveWithFencing: fences every producer connected and every one queued, and holds the
  topic.
A producer that comes back with the topic epoch it held, after the epoch has moved on, is
fenced. A second live producer of a name already connected is refused (ProducerBusy, Pulsar's
NamingException).

Every producer that lives longer than one transaction is a durable record, as consumers are:
("producers", topic, producer name) naming its process (pid and process start time), so one that
crashes, even by kill -9, counts as gone; a wire producer's process is serve's. A partitioned
topic's producer is one record per partition, as Pulsar's partitioned producers are. A one-shot
`produce` is never recorded: it is admitted and gone inside its one transaction (check()).

A record also keeps what PublisherStats shows: the producer's id, address, client version and
metadata, and the messages and bytes it published in the last one or two minutes, for the rates.

One difference, deliberate: a producer queued behind shared producers takes the topic when the
last of them leaves (Pulsar 4.x leaves it queued for good; apache/pulsar#24516)."""
from __future__ import annotations

from pulsarctl.errors import InvalidValue, ProducerBusy, ProducerFenced
from pulsarctl.names import TopicName

SHARED, EXCLUSIVE = "Shared", "Exclusive"
WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING = "WaitForExclusive", "ExclusiveWithFencing"
MODES = (SHARED, EXCLUSIVE, WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING)

# A record's state: connected, queued for the topic (WaitForExclusive), or fenced out by an
# ExclusiveWithFencing producer (kept until its owner closes or dies, so its next send is
# refused).
READY, WAITING, FENCED = "ready", "waiting", "fenced"

KEY = "producers"          # ("producers", topic, producer name) -> record
EPOCH = "producerEpoch"    # ("producerEpoch", topic) -> the topic epoch (the managed ledger's)
SEQ = ("counter", "producerSeq")   # registration order: the queue of WaitForExclusive
# The rates are over the current window and the one before it (one to two of these), Pulsar's
# statsUpdateFrequencyInSecs.
WINDOW_MS = 60_000


def check_mode(mode: str) -> str:
    for m in MODES:
        if str(mode).lower() == m.lower():
            return m
    raise InvalidValue(f"unknown producer access mode {mode!r}", hint="use " + ", ".join(MODES))


def _alive(rec: dict) -> bool:
    # lazy: one-shot produce never needs it
    from pulsarctl.broker.consumers import process_start_time

    start = process_start_time(rec["pid"])
    return start is not None and (start == rec["pidStart"] or not rec["pidStart"])


def _targets(ctx, topic: TopicName) -> list[TopicName]:
    """The topics a producer attaches to: each partition of a partitioned topic."""
    if not topic.is_partition:
        # lazy: one-shot produce never needs it
        from pulsarctl.broker import partitions

        n = partitions.get(ctx, topic)
        if n:
            return [topic.partition(i) for i in range(n)]
    return [topic]


def _live(ctx, tkey: str, prune: bool) -> list[dict]:
    """The topic's live records in registration order. prune (a write): the records of dead
    processes go, and a queued producer takes the topic if that left it free."""
    out, dead = [], False
    for _k, rec in ctx.scan(KEY, tkey):
        if _alive(rec):
            out.append(rec)
        elif prune:
            ctx.delete(KEY, tkey, rec["name"])
            dead = True
    out.sort(key=lambda r: r["seq"])
    if dead:
        _promote(ctx, tkey, out)
    return out


def _holder(live: list[dict]) -> dict | None:
    return next((r for r in live if r["state"] == READY and r["mode"] != SHARED), None)


def _epoch(ctx, tkey: str) -> int:
    e = ctx.get(EPOCH, tkey)
    return -1 if e is None else e


def _hold(ctx, tkey: str, rec: dict) -> None:
    """rec becomes the topic's exclusive producer: the epoch it came back with, else the next
    one (PersistentTopic.setTopicEpoch / incrementTopicEpoch)."""
    given = rec.get("askedEpoch")
    epoch = given if given is not None else _epoch(ctx, tkey) + 1
    ctx.put(epoch, EPOCH, tkey)
    rec["state"], rec["epoch"] = READY, epoch


def _promote(ctx, tkey: str, live: list[dict]) -> dict | None:
    """With no producer connected, the first queued one takes the topic."""
    if any(r["state"] == READY for r in live):
        return None
    nxt = next((r for r in live if r["state"] == WAITING), None)
    if nxt is not None:
        _hold(ctx, tkey, nxt)
        ctx.put(nxt, KEY, tkey, nxt["name"])
    return nxt


def _fence_moved(ctx, tkey: str, asked: int | None) -> None:
    current = _epoch(ctx, tkey)
    if asked is not None and asked < current:
        raise ProducerFenced(f"Topic epoch has already moved. Current epoch: {current}, "
                             f"Producer epoch: {asked}")


def add(ctx, topic: TopicName, name: str, mode: str, who: dict,
        topic_epoch: int | None = None) -> dict:
    """Attach producer `name` (mode, and who: token, pid, pidStart, id, address,
    clientVersion, metadata) to the topic, on every partition of a partitioned one. Raises
    ProducerBusy or ProducerFenced as Pulsar refuses it (nothing is written then). Called again
    with the same token, it answers how the producer stands now (a queued one polls so).
    Returns {"state": ready|waiting|fenced, "epoch": the topic epoch it holds or None,
    "fenced": [(topic, name, token) of the producers it fenced]}."""
    # lazy: one-shot produce never needs it
    from pulsarctl.broker import topics

    states, epochs, fenced = [], [], []
    for target in _targets(ctx, topic):
        topics.ensure(ctx, target)   # a producer creates its topic (getOrCreateTopic)
        tkey = str(target)
        live = _live(ctx, tkey, prune=True)
        mine = ctx.get(KEY, tkey, name)
        if mine is not None and mine.get("token") == who["token"]:
            states.append(mine["state"])
            epochs.append(mine.get("epoch"))
            continue
        rec = _admit(ctx, tkey, live, name, mode, who, topic_epoch, fenced)
        states.append(rec["state"])
        epochs.append(rec.get("epoch"))
    state = FENCED if FENCED in states else WAITING if WAITING in states else READY
    epoch = epochs[0] if len(epochs) == 1 else None
    return {"state": state, "epoch": epoch, "fenced": fenced}


def _admit(ctx, tkey, live, name, mode, who, asked, fenced: list) -> dict:
    holder = _holder(live)
    waiting = [r for r in live if r["state"] == WAITING]
    shared = [r for r in live if r["state"] == READY and r["mode"] == SHARED]
    held_by = holder["name"] if holder is not None else "null"
    state = READY
    if mode == SHARED:
        if holder is not None or waiting:
            raise ProducerBusy(f"Topic has an existing exclusive producer: {held_by}")
    elif mode == EXCLUSIVE:
        if holder is not None or waiting:
            raise ProducerFenced(f"Topic has an existing exclusive producer: {held_by}")
        if shared:
            raise ProducerFenced("Topic has existing shared producers")
        _fence_moved(ctx, tkey, asked)
    elif mode == WAIT_FOR_EXCLUSIVE:
        if holder is not None or shared:
            state = WAITING
        else:
            _fence_moved(ctx, tkey, asked)
    else:   # ExclusiveWithFencing: every producer connected or queued is fenced out
        _fence_moved(ctx, tkey, asked)
        if holder is not None or shared:
            for r in live:
                if r["state"] in (READY, WAITING):
                    r["state"] = FENCED
                    ctx.put(r, KEY, tkey, r["name"])
                    fenced.append((tkey, r["name"], r.get("token")))
    same = next((r for r in live if r["name"] == name and r["state"] != FENCED), None)
    if same is not None:
        raise ProducerBusy(f"Producer with name '{name}' is already connected to topic '{tkey}'")
    seq = (ctx.get(*SEQ) or 0) + 1
    ctx.put(seq, *SEQ)
    rec = {"name": name, "mode": mode, "state": state, "seq": seq, "token": who["token"],
           "pid": who["pid"], "pidStart": who["pidStart"], "id": who.get("id", 0),
           "address": who.get("address"), "clientVersion": who.get("clientVersion"),
           "metadata": who.get("metadata") or {}, "since": ctx.now, "epoch": None,
           "askedEpoch": asked, "w": [ctx.now, 0, 0, 0], "p": None}
    if state == READY and mode != SHARED:
        _hold(ctx, tkey, rec)
    ctx.put(rec, KEY, tkey, name)
    return rec


def remove(ctx, topic: TopicName, name: str, token: str) -> list[tuple]:
    """Detach the producer (its records on every partition), whatever its state. Returns
    [(topic, name, token)] of the queued producers that took the topic because of it."""
    promoted = []
    for target in _targets(ctx, topic):
        tkey = str(target)
        rec = ctx.get(KEY, tkey, name)
        if rec is None or rec.get("token") != token:
            continue
        ctx.delete(KEY, tkey, name)
        if rec["state"] == READY:
            nxt = _promote(ctx, tkey, _live(ctx, tkey, prune=True))
            if nxt is not None:
                promoted.append((tkey, nxt["name"], nxt.get("token")))
    return promoted


def check(ctx, topic: TopicName, name: str, token: str | None) -> dict | None:
    """Before a publish by producer `name`: token names a recorded producer (its record comes
    back, to count what it publishes); None, a one-shot producer, which is admitted here as a
    Shared producer would be, and leaves nothing behind. Raises ProducerFenced for a producer
    fenced out, ProducerBusy as a Shared producer is refused."""
    tkey = str(topic)
    rec = ctx.get(KEY, tkey, name)
    if rec is not None and token is not None and rec.get("token") == token:
        if rec["state"] == READY:
            return rec
        if rec["state"] == FENCED:
            raise ProducerFenced(f"producer '{name}' was fenced out of {tkey} by an "
                                 "ExclusiveWithFencing producer")
        raise ProducerBusy(f"producer '{name}' is waiting for exclusive access to {tkey}")
    if rec is not None and rec["state"] != FENCED and _alive(rec):
        if token is not None:   # another producer took the name after ours was fenced
            raise ProducerFenced(f"producer '{name}' was fenced out of {tkey}")
        raise ProducerBusy(f"Producer with name '{name}' is already connected to topic '{tkey}'")
    for _k, r in ctx.scan(KEY, tkey):
        exclusive = r["state"] == WAITING or (r["state"] == READY and r["mode"] != SHARED)
        if exclusive and _alive(r):
            held = r["name"] if r["state"] == READY else "null"
            raise ProducerBusy(f"Topic has an existing exclusive producer: {held}")
    return None


def published(ctx, topic: TopicName, rec: dict, messages: int, nbytes: int,
              chunks: int = 0) -> None:
    """Count a publish of a recorded producer: messages and bytes (as the topic counts them,
    the stored entries) in the current window; a window older than WINDOW_MS is closed and
    kept as the one before."""
    now = ctx.now
    w = rec["w"]
    if now - w[0] >= WINDOW_MS:
        rec["p"] = [now - w[0], w[1], w[2], w[3]]
        w = rec["w"] = [now, 0, 0, 0]
    w[1] += messages
    w[2] += nbytes
    w[3] += chunks
    ctx.put(rec, KEY, str(topic), rec["name"])


def _rates(rec: dict, now: int) -> tuple[float, float, float, float]:
    """(msgRateIn, msgThroughputIn, chunkedMessageRate, averageMsgSize). Approximate: Pulsar
    rates what came in during the last statsUpdateFrequencyInSecs; here it is what came in
    since the start of the window before the current one (one to two minutes), or of the
    current one once that is a full window old, so an idle producer's rate falls off with
    time instead of dropping to 0 at the next interval."""
    start, msgs, nbytes, chunks = rec["w"]
    span = now - start
    p = rec.get("p")
    if p is not None and span < WINDOW_MS:
        span += p[0]
        msgs, nbytes, chunks = msgs + p[1], nbytes + p[2], chunks + p[3]
    avg = nbytes / msgs if msgs else 0.0
    if span <= 0:
        return 0.0, 0.0, 0.0, avg
    secs = span / 1000
    return msgs / secs, nbytes / secs, chunks / secs, avg


def publishers(ctx, topic: str) -> tuple[list[dict], int]:
    """(PublisherStats of the topic's connected producers, by name, as TopicStatsImpl sorts
    them; how many wait for exclusive access: waitingPublishers). Pulsar's JSON leaves out
    what is null."""
    # lazy: stats only
    from pulsarctl.messages import iso_ms

    out, waiting = [], 0
    for _k, r in ctx.scan(KEY, topic):
        if r["state"] == FENCED or not _alive(r):
            continue
        if r["state"] == WAITING:
            waiting += 1
            continue
        rate, throughput, chunked, avg = _rates(r, ctx.now)
        s = {"accessMode": r["mode"], "msgRateIn": rate, "msgThroughputIn": throughput,
             "averageMsgSize": avg, "chunkedMessageRate": chunked, "producerId": r["id"],
             # only with aggregatePublisherStatsByProducerName, which is off by default
             "supportsPartialProducer": False, "producerName": r["name"],
             "address": r["address"], "connectedSince": iso_ms(r["since"]),
             "clientVersion": r["clientVersion"], "metadata": r["metadata"]}
        out.append({k: v for k, v in s.items() if v is not None})
    out.sort(key=lambda s: s["producerName"])
    return out, waiting


def topic_epoch(ctx, topic: str) -> int | None:
    return ctx.get(EPOCH, topic)
