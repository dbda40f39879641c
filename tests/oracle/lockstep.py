"""One target of the differential tests (real Pulsar or `pulsarctl serve`): the real Python
client on it, and every operation of the state machine as that target answers it, reduced to
observations that mean the same on both targets.

Identity: every message's payload is its tag (m0, m1, ... in the order the sequence publishes
them), so what a consumer got is known by tag on both sides. Message ids are normalised to
(entry ordinal, batch index): the ordinal of an entry is its place among the entries this
sequence published on that target, learnt from the ids the sends returned; a position of the
admin's internal stats becomes the ordinal of the last entry at or before it (-1: none).

Time: what Pulsar does by the clock (the client's nack delay and ack grouping, delayed
delivery, the failover switch) is waited for with deadlines this side knows (`due`), then for
the broker's dispatch to be still (`settle`), never for a fixed sleep before an observation."""
from __future__ import annotations

import datetime
import json
import time
from dataclasses import dataclass, field

import pulsar
import requests

from serve_procs import quiet_logger

# How long a receive waits for one more message once what it expected came (a message in
# flight on a loaded machine arrives well within it; a wrong "nothing" is caught up by the
# other side's answer, see test_differential.receive).
IDLE_S = 0.25
# How long one side waits for what the other side already got.
PATIENCE_S = 10.0
# The Python (C++) client sends acknowledgements grouped, every 100 ms.
ACK_GROUPING_S = 0.1
# Slack after a client or broker timer's due time before its effect is looked for.
TIMER_SLACK_S = 0.3
# Two stats readings this far apart that agree: the broker's dispatch is still.
STILL_S = 0.12
SETTLE_LIMIT_S = 15.0
HTTP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Got:
    """A message as a consumer or reader got it."""

    tag: str
    entry: object          # the entry's ordinal (or "?ledger:entry" if unknown)
    index: int             # batch index, -1 outside a batch
    key: str
    ordering_key: str
    props: tuple
    redeliveries: int


def error_name(exc: BaseException) -> str:
    return type(exc).__name__


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Slot:
    """A consumer of this side, as the machine opened it."""

    consumer: object
    sub: str
    type: str
    nack_delay_ms: int
    held: dict = field(default_factory=dict)     # tag -> pulsar.Message, received, unacked


class Side:
    def __init__(self, name: str, service_url: str, web_url: str, topic: str):
        self.name = name
        self.web = web_url.rstrip("/")
        self.topic = topic
        self.client = pulsar.Client(service_url, operation_timeout_seconds=30,
                                    logger=quiet_logger())
        self.producers: dict = {}
        self.consumers: dict[str, Slot] = {}
        self.readers: dict = {}
        self.entries: dict = {}       # (ledger, entry) -> ordinal
        self.ids: dict = {}           # tag -> pulsar.MessageId as the send returned it
        self.marks: dict = {}         # tag -> a time (ms) after every earlier publish, before its
        self.last_sent_ms = 0
        self.due = 0.0                # monotonic time every known timer's effect is due by

    # ----- bookkeeping -----
    def wait_due(self) -> None:
        left = self.due - time.monotonic()
        if left > 0:
            time.sleep(left)   # a timer of the client or broker whose due time is known

    def expect_timer(self, seconds: float) -> None:
        self.due = max(self.due, time.monotonic() + seconds + TIMER_SLACK_S)

    def ordinal(self, ledger: int, entry: int):
        o = self.entries.get((ledger, entry))
        return o if o is not None else f"?{ledger}:{entry}"

    def _learn(self, mid) -> None:
        key = (mid.ledger_id(), mid.entry_id())
        if key not in self.entries:
            self.entries[key] = len(self.entries)

    def got(self, msg) -> Got:
        mid = msg.message_id()
        return Got(msg.data().decode(), self.ordinal(mid.ledger_id(), mid.entry_id()),
                   mid.batch_index(), msg.partition_key(), msg.ordering_key(),
                   tuple(sorted(msg.properties().items())), msg.redelivery_count())

    def position(self, text: str) -> int:
        """An internal-stats position "ledger:entry" as the ordinal of the last entry this
        side published at or before it, -1 when there is none."""
        ledger, entry = (int(x) for x in text.split(":")[:2])
        best = -1
        for (lg, en), o in self.entries.items():
            if (lg, en) <= (ledger, entry):
                best = max(best, o)
        return best

    def ranges(self, text: str) -> list:
        """individuallyDeletedMessages "[(3:0..3:2], (3:4..3:5]]" as the ordinals it holds."""
        out = []
        body = text.strip()[1:-1].strip()
        if not body:
            return out
        for part in body.split(","):
            a, b = part.strip()[1:-1].split("..")
            lo, hi = self.position(a) + 1, self.position(b)
            out.extend(range(lo, hi + 1))
        return sorted(out)

    # ----- producers -----
    def create_producer(self, name: str, batching: bool) -> str:
        try:
            self.producers[name] = self.client.create_producer(
                self.topic, producer_name=name, batching_enabled=batching,
                # a batch is cut by flush() alone, so its messages are the same on both sides
                batching_max_publish_delay_ms=3_600_000, batching_max_messages=10_000,
                batching_max_allowed_size_in_bytes=1 << 20, send_timeout_millis=30_000)
            return "ok"
        except pulsar.PulsarException as exc:
            return error_name(exc)

    def _mark(self, tag: str) -> None:
        # publishTime is the producer's clock at send: a time after every earlier publish and
        # before this one separates them for a seek by time.
        while now_ms() <= self.last_sent_ms:
            time.sleep(0.001)
        self.marks[tag] = now_ms()

    def send(self, pname: str, batched: bool, specs: list) -> list:
        """specs: [(tag, key, ordering_key, props, deliver_after_ms)]. The normalised ids."""
        p = self.producers[pname]
        results: list = [None] * len(specs)
        if batched:
            pending = []

            def callback(i):
                def cb(res, mid):
                    results[i] = (res, mid)
                return cb

            for i, (tag, key, okey, props, after) in enumerate(specs):
                self._mark(tag)
                p.send_async(tag.encode(), callback(i), **_send_args(key, okey, props, after))
                pending.append(i)
            p.flush()
            deadline = time.monotonic() + PATIENCE_S
            while any(r is None for r in results) and time.monotonic() < deadline:
                time.sleep(0.005)   # the callbacks run on the client's thread after flush
        else:
            for i, (tag, key, okey, props, after) in enumerate(specs):
                self._mark(tag)
                try:
                    results[i] = (pulsar.Result.Ok,
                                  p.send(tag.encode(), **_send_args(key, okey, props, after)))
                except pulsar.PulsarException as exc:
                    results[i] = (error_name(exc), None)
                self.last_sent_ms = now_ms()
        self.last_sent_ms = now_ms()
        out = []
        for (tag, *_), r in zip(specs, results):
            if r is None:
                out.append("no callback")
                continue
            res, mid = r
            if mid is None or res != pulsar.Result.Ok:
                out.append(str(res))
                continue
            self.ids[tag] = mid
            self._learn(mid)
            out.append((self.ordinal(mid.ledger_id(), mid.entry_id()), mid.batch_index()))
        return out

    # ----- consumers -----
    def subscribe(self, cname: str, sub: str, type_: str, earliest: bool, queue: int,
                  nack_delay_ms: int, ks) -> str:
        kwargs = {}
        if ks is not None:
            mode, ranges, ooo = ks
            kwargs["key_shared_policy"] = pulsar.ConsumerKeySharedPolicy(
                key_shared_mode=getattr(pulsar.KeySharedMode, mode),
                allow_out_of_order_delivery=ooo, sticky_ranges=ranges)
        try:
            c = self.client.subscribe(
                self.topic, sub, consumer_type=getattr(pulsar.ConsumerType,
                                                       type_.replace("_", "")),
                consumer_name=cname, receiver_queue_size=queue,
                negative_ack_redelivery_delay_ms=nack_delay_ms,
                initial_position=(pulsar.InitialPosition.Earliest if earliest
                                  else pulsar.InitialPosition.Latest), **kwargs)
        except pulsar.PulsarException as exc:
            return error_name(exc)
        self.consumers[cname] = Slot(c, sub, type_, nack_delay_ms)
        return "ok"

    def receive(self, cname: str, n: int, must: int = 0, patience: float = PATIENCE_S) -> list:
        """Up to n messages: the first `must` waited for up to `patience` in all, then more
        while each comes within IDLE_S."""
        slot = self.consumers[cname]
        out: list[Got] = []
        deadline = time.monotonic() + patience
        while len(out) < n:
            if len(out) < must:
                wait = max(0.01, deadline - time.monotonic())
            else:
                wait = IDLE_S
            try:
                msg = slot.consumer.receive(timeout_millis=max(1, int(wait * 1000)))
            except pulsar.Timeout:
                if len(out) < must and time.monotonic() < deadline:
                    continue
                break
            g = self.got(msg)
            slot.held[g.tag] = msg
            out.append(g)
        return out

    def holder(self, tag: str) -> Slot | None:
        for slot in self.consumers.values():
            if tag in slot.held:
                return slot
        return None

    def ack(self, tag: str, by_id: bool) -> str:
        slot = self.holder(tag)
        msg = slot.held.pop(tag)
        self.expect_timer(ACK_GROUPING_S)
        try:
            slot.consumer.acknowledge(msg.message_id() if by_id else msg)
            return "ok"
        except pulsar.PulsarException as exc:
            return error_name(exc)

    def ack_cumulative(self, cname: str, tag: str) -> str:
        slot = self.consumers[cname]
        msg = slot.held[tag]
        self.expect_timer(ACK_GROUPING_S)
        try:
            slot.consumer.acknowledge_cumulative(msg)
        except pulsar.PulsarException as exc:
            return error_name(exc)
        top = msg.message_id()
        for t, m in list(slot.held.items()):
            if _id_key(m.message_id()) <= _id_key(top):
                del slot.held[t]
        return "ok"

    def nack(self, tag: str) -> str:
        slot = self.holder(tag)
        msg = slot.held.pop(tag)
        # The client's NegativeAcksTracker looks every delay/3 for what is due.
        self.expect_timer(slot.nack_delay_ms / 1000 * 4 / 3)
        try:
            slot.consumer.negative_acknowledge(msg)
            return "ok"
        except pulsar.PulsarException as exc:
            return error_name(exc)

    def redeliver(self, cname: str) -> str:
        slot = self.consumers[cname]
        try:
            slot.consumer.redeliver_unacknowledged_messages()
            return "ok"
        except pulsar.PulsarException as exc:
            return error_name(exc)

    def seek_target(self, target):
        kind, arg = target
        if kind == "earliest":
            return pulsar.MessageId.earliest
        if kind == "latest":
            return pulsar.MessageId.latest
        if kind == "id":
            return self.ids[arg]
        if kind == "before":            # a time between arg's publish and the one before it
            return self.marks[arg] - 1
        return now_ms()                 # "now": after every publish so far

    def seek(self, cname: str, target) -> str:
        slot = self.consumers[cname]
        try:
            slot.consumer.seek(self.seek_target(target))
            return "ok"
        except pulsar.PulsarException as exc:
            return error_name(exc)

    def close(self, cname: str) -> str:
        slot = self.consumers.pop(cname)
        try:
            slot.consumer.close()
            return "ok"
        except pulsar.PulsarException as exc:
            return error_name(exc)

    def unsubscribe(self, cname: str) -> str:
        slot = self.consumers[cname]
        try:
            slot.consumer.unsubscribe()
        except pulsar.PulsarException as exc:
            return error_name(exc)
        self.consumers.pop(cname)
        try:
            slot.consumer.close()
        except pulsar.PulsarException:
            pass
        return "ok"

    # ----- readers -----
    def create_reader(self, rname: str, start, inclusive: bool) -> str:
        try:
            self.readers[rname] = self.client.create_reader(
                self.topic, self.seek_target(start), receiver_queue_size=10,
                start_message_id_inclusive=inclusive)
            return "ok"
        except pulsar.PulsarException as exc:
            return error_name(exc)

    def read(self, rname: str, n: int, must: int = 0, patience: float = PATIENCE_S) -> list:
        r = self.readers[rname]
        out: list[Got] = []
        deadline = time.monotonic() + patience
        while len(out) < n:
            wait = max(0.01, deadline - time.monotonic()) if len(out) < must else IDLE_S
            try:
                msg = r.read_next(timeout_millis=max(1, int(wait * 1000)))
            except pulsar.Timeout:
                if len(out) < must and time.monotonic() < deadline:
                    continue
                break
            out.append(self.got(msg))
        return out

    def has_message_available(self, rname: str):
        try:
            return self.readers[rname].has_message_available()
        except pulsar.PulsarException as exc:
            return error_name(exc)

    def reader_seek(self, rname: str, target) -> str:
        try:
            self.readers[rname].seek(self.seek_target(target))
            return "ok"
        except pulsar.PulsarException as exc:
            return error_name(exc)

    def close_reader(self, rname: str) -> str:
        r = self.readers.pop(rname)
        try:
            r.close()
            return "ok"
        except pulsar.PulsarException as exc:
            return error_name(exc)

    # ----- admin reads -----
    def _admin(self, what: str) -> dict:
        short = self.topic.split("://", 1)[1]
        r = requests.get(f"{self.web}/admin/v2/persistent/{short}/{what}",
                         timeout=HTTP_TIMEOUT_S)
        if r.status_code != 200:
            # the status only: the texts of REST errors are compared by the admin lane
            return {"status": r.status_code}
        return r.json()

    def raw_stats(self) -> tuple[dict, dict]:
        return self._admin("stats"), self._admin("internalStats")

    def stats(self) -> dict:
        """What the comparison looks at: per durable subscription its type, backlog, unacked
        messages, consumers, and the cursor's mark-delete position and individually deleted
        messages (as entry ordinals). Not msgDelayed: it counts the delayed messages the
        dispatcher has read so far, and how far it reads ahead of its consumers' permits
        (Key_Shared's look-ahead, the replay set) is the broker's business, not a promise."""
        st, ist = self.raw_stats()
        if "subscriptions" not in st:
            return {"stats": st}
        subs = {}
        for name, s in st["subscriptions"].items():
            if s.get("isDurable") is False or name.startswith("reader-"):
                continue
            cur = ist.get("cursors", {}).get(name, {})
            subs[name] = {
                "type": s.get("type"),
                "msgBacklog": s.get("msgBacklog"),
                "unackedMessages": s.get("unackedMessages"),
                "consumers": sorted(c.get("consumerName") for c in s.get("consumers", [])),
                "consumerUnacked": sorted(
                    (c.get("consumerName"), c.get("unackedMessages"))
                    for c in s.get("consumers", [])),
                "markDeletePosition": (self.position(cur["markDeletePosition"])
                                       if "markDeletePosition" in cur else None),
                "individuallyDeletedMessages": (
                    self.ranges(cur["individuallyDeletedMessages"])
                    if "individuallyDeletedMessages" in cur else None),
            }
        return {"msgInCounter": st.get("msgInCounter"), "subscriptions": subs}

    def _still_view(self):
        st = self._admin("stats")
        return json.dumps({n: (s.get("msgOutCounter"), s.get("msgBacklog"),
                               s.get("unackedMessages"))
                           for n, s in st.get("subscriptions", {}).items()}, sort_keys=True)

    def settle(self) -> bool:
        """Wait for known timers, then until the broker's dispatch is still: three readings
        of its counters STILL_S apart agree (a loaded broker may take a gap's time to start
        what a command asked). False if it never was within SETTLE_LIMIT_S."""
        self.wait_due()
        deadline = time.monotonic() + SETTLE_LIMIT_S
        last = self._still_view()
        same = 0
        while time.monotonic() < deadline:
            time.sleep(STILL_S)   # the gap that defines "still"; polled, not slept on blindly
            cur = self._still_view()
            same = same + 1 if cur == last else 0
            if same == 2:
                return True
            last = cur
        return False

    def close_all(self) -> None:
        try:
            self.client.close()
        except Exception:   # closing after a failed sequence: nothing to learn from it
            pass
        short = self.topic.split("://", 1)[1]
        try:
            requests.delete(f"{self.web}/admin/v2/persistent/{short}?force=true",
                            timeout=HTTP_TIMEOUT_S)
        except requests.RequestException:
            pass


def _send_args(key, okey, props, after) -> dict:
    args = {}
    if key is not None:
        args["partition_key"] = key
    if okey is not None:
        args["ordering_key"] = okey
    if props:
        args["properties"] = dict(props)
    if after:
        args["deliver_after"] = datetime.timedelta(milliseconds=after)
    return args


def _id_key(mid) -> tuple:
    return (mid.ledger_id(), mid.entry_id(), mid.batch_index())
