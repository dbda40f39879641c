"""Dead letter topics of a remote Pulsar: what `broker.dlq(topic)` does locally
(pulsarctl/broker/dlq.py), through the DLQ's durable subscription `pulsarctl-dlq`.

- The lock is the subscription itself: drain, replay and purge hold an Exclusive consumer on
  `pulsarctl-dlq` for the whole command, so two of them (two cron jobs, two machines) never
  take the same dead letter; the second waits for it (ConsumerBusy, asked again each second),
  or with --no-wait exits 5. Pulsar drops the consumer when its connection dies.
- Drain and purge receive, handle and then acknowledge (at-least-once: a crash between
  writing and acking leaves the dead letter in the DLQ, written twice at worst). Replay
  publishes (REAL_TOPIC, ORIGIN_MESSAGE_ID and every property kept; REPLAY_COUNT added), waits
  for the receipt, then acknowledges: a crash between the two replays it again (at-least-once;
  locally the two are one transaction).
- A dead letter skipped in a run (a filter, --ids, a failure) is left unacknowledged: it goes
  back to the subscription when the consumer closes, for the next run.
- A run ends at the DLQ's last message (its id asked when the lock is taken), or after
  IDLE_MS without one (the last messages were already handled).
- list, stats, peek and a --dry-run replay change nothing and create no subscription: they peek
  on `pulsarctl-dlq` over the admin REST API when it exists (what it has not acknowledged), or
  read the whole topic with a Reader when it does not.
"""
from __future__ import annotations

import contextlib

from pulsarctl import clock as clocks, errors
from pulsarctl.messages import MessageId, OutgoingMessage
from pulsarctl.names import (
    DLQ_SUFFIX, REAL_SUBSCRIPTION, REAL_TOPIC, parse_topic, retry_topic,
)
from pulsarctl.replay import (
    REPLAY_COUNT, into_itself, replay_origin, replay_row, restart_retries,
)

SUBSCRIPTION = "pulsarctl-dlq"
IDLE_MS = 3000       # a run ends after this long without a message (all handled already)
LOCK_RETRY_S = 1.0   # how often a waiting command asks for the subscription again
ALL = 1 << 62


def _matches(m, filters) -> bool:
    props = m.properties_ or {}
    return all(props.get(k) == v for k, v in filters or ())


def _wanted(m, ids) -> bool:
    """Whether m is one of ids: an id without a batch index names every message of its entry."""
    for i in ids:
        if (i.ledger_id, i.entry_id) == (m.id.ledger_id, m.id.entry_id) and (
                i.batch_index < 0 or i.batch_index == m.id.batch_index):
            return True
    return False


class RemoteDlq:
    """One remote dead letter topic (RemoteBroker.dlq(topic) hands the same one out for the
    whole command)."""

    def __init__(self, remote, topic):
        self._remote = remote
        self.topic = parse_topic(str(topic))
        self.name = str(self.topic)
        self._conn = None
        self._consumer = None
        self._last = None       # the DLQ's last message id when the lock was taken
        self._end = False       # that message was received: nothing more to wait for
        self._fetched: dict = {}  # id -> Message received and neither acked nor left
        self._listed = None     # the waiting dead letters, read without a consumer
        self._producers: dict = {}

    # -- reading without changing anything --------------------------------------------------
    def _has_subscription(self) -> bool:
        return SUBSCRIPTION in (self._remote.topics.subscriptions(self.name) or [])

    def _waiting(self) -> list:
        """Every dead letter pulsarctl-dlq has not acknowledged, read without a consumer."""
        if self._remote.target.admin_url and self._has_subscription():
            return self._remote.subscription(self.name, SUBSCRIPTION).peek(ALL)
        # lazy: only a DLQ never subscribed to is read whole, with a Reader
        from pulsarctl.remote.data import Connection

        out = []
        with Connection(self._remote.target) as conn:
            reader = conn.reader(self.name, MessageId.earliest)
            try:
                while reader.has_message_available():
                    out.append(reader.read_next(IDLE_MS))
            finally:
                reader.close()
        return out

    def check(self, missing_ok: bool = False) -> bool:
        if self.topic.is_partition or not self._remote.target.admin_url:
            return True  # (without an admin URL, the subscription is what tells)
        if self._remote.topics.partitions(self.name):
            raise errors.InvalidValue(f"{self.name} is a partitioned topic; a dead letter "
                                      f"topic is not", hint="name one of its partitions")
        if self._remote.topics.exists(self.name):
            return True
        if missing_ok:
            return False
        raise errors.TopicNotFound(f"topic {self.name} not found",
                                   hint="list the dead letter topics with `pulsarctl dlq list`")

    def count(self, filters=None, ids=None, older_than_ms=None, missing_ok=False) -> int:
        return len(self._select(self._waiting(), filters, ids, older_than_ms))

    def _select(self, msgs, filters=None, ids=None, older_than_ms=None) -> list:
        cutoff = clocks.wall_ms() - older_than_ms if older_than_ms is not None else None
        return [m for m in msgs if _matches(m, filters)
                and (ids is None or _wanted(m, ids))
                and (cutoff is None or m.publish_time < cutoff)]

    def peek(self, n: int = 10, filters=None, missing_ok: bool = False) -> list:
        if not self.check(missing_ok):
            return []
        got = self._select(self._waiting(), filters)
        return got[:n] if n else got

    def stats(self, by_property=None, missing_ok: bool = False) -> dict:
        # lazy: the age buckets and orderings are the local command's
        from pulsarctl.broker.dlq_stats import (
            AGE_BUCKETS, AGE_OLDEST, NO_VALUE, _sorted, age_bucket,
        )
        # lazy: loaded when the command runs
        from pulsarctl.messages import iso_ms

        msgs = self._waiting() if self.check(missing_ok) else []
        now = clocks.wall_ms()
        by_topic, by_sub, by_prop = {}, {}, {}
        ages = {name: 0 for name, _ in AGE_BUCKETS}
        ages[AGE_OLDEST] = 0
        for m in msgs:
            props = m.properties_ or {}
            for counts, key in ((by_topic, REAL_TOPIC), (by_sub, REAL_SUBSCRIPTION),
                                (by_prop, by_property)):
                if key is not None:
                    v = props.get(key, NO_VALUE)
                    counts[v] = counts.get(v, 0) + 1
            ages[age_bucket(max(0, now - m.publish_time))] += 1
        doc = {"topic": self.name, "total": len(msgs),
               "oldestPublishTime": iso_ms(msgs[0].publish_time) if msgs else None,
               "newestPublishTime": iso_ms(msgs[-1].publish_time) if msgs else None,
               "byRealTopic": _sorted(by_topic), "byRealSubscription": _sorted(by_sub),
               "byAge": ages}
        if by_property is not None:
            doc["byProperty"] = {"name": by_property, "counts": _sorted(by_prop)}
        return doc

    # -- the consumer: lock, fetch, ack ---------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, wait: bool = True):
        # lazy: loaded when the command runs
        from pulsarctl.remote.data import Connection, _mid

        conn = Connection(self._remote.target)
        try:
            while True:
                try:
                    self._consumer = conn.consumer(
                        self.name, SUBSCRIPTION,
                        consumer_type=conn.pulsar.ConsumerType.Exclusive,
                        initial_position=conn.pulsar.InitialPosition.Earliest)
                    break
                except errors.ConsumerBusy:
                    if not wait:
                        raise errors.LockBusy(
                            f"another command holds {self.name} (its subscription "
                            f"{SUBSCRIPTION} has a consumer)",
                            hint="run again later, or leave out --no-wait to wait") from None
                    clocks.sleep(LOCK_RETRY_S)
            self._conn = conn
            with errors_translated(conn):
                self._last = _mid(self._consumer.consumer.get_last_message_id())
            self._end = self._last.entry_id < 0 or self._nothing_waits()
            yield self
        finally:
            for p in self._producers.values():
                p.close()
            if self._consumer is not None:
                self._consumer.close()
            self._consumer = None
            conn.close()

    def _nothing_waits(self) -> bool:
        """The subscription's backlog is 0 (asked over REST, when there is an admin URL): the
        run ends at once instead of waiting IDLE_MS for a message that will not come."""
        if not self._remote.target.admin_url:
            return False
        subs = (self._remote.topics.stats(self.name) or {}).get("subscriptions") or {}
        return (subs.get(SUBSCRIPTION) or {}).get("msgBacklog", 1) == 0

    def subscribe(self) -> bool:
        """The Exclusive consumer of lock() made the subscription (at Earliest)."""
        return False

    def fetch(self, after=-1, limit: int = 100, filters=None, ids=None,
              older_than_ms=None) -> dict:
        if self._consumer is None:  # a dry run: the waiting ones, read without a consumer
            if self._listed is None:
                self._listed = self._select(self._waiting(), filters, ids, older_than_ms)
            start = after + 1
            got = self._listed[start:start + limit]
            for m in got:
                self._fetched[m.id] = m
            return {"messages": got, "after": start + len(got) - 1,
                    "done": start + len(got) >= len(self._listed)}
        cutoff = clocks.wall_ms() - older_than_ms if older_than_ms is not None else None
        out, done = [], False
        while len(out) < limit:
            if self._end:
                done = True
                break
            try:
                m = self._consumer.receive(IDLE_MS)
            except errors.Timeout:
                done = True
                break
            if (m.id.ledger_id, m.id.entry_id) >= (self._last.ledger_id, self._last.entry_id):
                self._end = True
            if cutoff is not None and m.publish_time >= cutoff:
                done = True  # publish times only grow: the rest is younger still
                break
            if (ids is None or _wanted(m, ids)) and _matches(m, filters):
                self._fetched[m.id] = m
                out.append(m)
            # else: left unacknowledged, back to the subscription when the consumer closes
        return {"messages": out, "after": after + len(out), "done": done}

    def ack(self, ids) -> int:
        n = 0
        for i in ids:
            m = self._fetched.pop(i, None)
            if m is not None:
                self._consumer.acknowledge(m)
                n += 1
        return n

    # -- replay ---------------------------------------------------------------------------------
    def _producer(self, topic: str):
        p = self._producers.get(topic)
        if p is None:
            p = self._producers[topic] = self._conn.producer(topic)
        return p

    def replay(self, ids, *, to=None, subscription=None, max_replays: int = 3,
               dry_run: bool = False, max_failures=None) -> list:
        if to is not None and parse_topic(to).partitioned_topic_name == \
                self.topic.partitioned_topic_name:
            raise errors.InvalidValue(f"cannot replay {self.name} into itself",
                                      hint="give another --to TOPIC")
        to_t = parse_topic(to) if to else None
        results, failed = [], 0
        for i in ids:
            m = self._fetched.get(i)
            if m is None:
                continue
            if max_failures is not None and failed >= max_failures:
                break
            props = dict(m.properties_ or {})
            r = replay_row(m, max_replays, dry_run)
            rc = r["replayCount"]
            results.append(r)
            if r["action"]:
                self._fetched.pop(i, None)
                continue
            origin = replay_origin(props, to_t, r)
            if origin is None:
                failed += 1
                self._fetched.pop(i, None)
                continue
            target = origin
            if subscription is not None:
                target = parse_topic(retry_topic(str(origin.partitioned_topic_name),
                                                 subscription))
                restart_retries(props, origin, m)
            props[REPLAY_COUNT] = str(rc + 1)
            r["target"], r["replayCount"] = str(target), rc + 1
            if into_itself(r, target, self.topic):
                failed += 1
                self._fetched.pop(i, None)
                continue
            if dry_run:
                r["action"] = "would-replay"
                continue
            out = OutgoingMessage(m.payload, props, m.key, m.ordering_key_, m.event_time)
            new_id = self._producer(str(target)).send(out)
            self.ack([i])  # after the receipt: a crash in between replays it again
            r["action"], r["newMessageId"] = "replayed", str(new_id)
        return results


@contextlib.contextmanager
def errors_translated(conn):
    # lazy: loaded when the command runs
    from pulsarctl.remote.data import translated

    with translated(conn.target):
        yield


def list_dlqs(remote, namespace=None) -> list:
    """`dlq list` of a remote Pulsar: the topics named *-DLQ, or that have a pulsarctl-dlq
    subscription (Pulsar keeps no record of which topic is whose dead letter topic: that is a
    consumer's setting), with what waits in each."""
    # lazy: loaded when the command runs
    from pulsarctl.messages import iso_ms

    if namespace:
        spaces = [namespace]
    else:
        spaces = [ns for t in remote.tenants.list() for ns in remote.namespaces.list(t)]
    now = clocks.wall_ms()
    out = []
    for ns in spaces:
        retention = remote.policies.get("namespace", ns, "retention_policies") or {}
        for name in remote.topics.list(ns):
            t = parse_topic(name)
            if t.domain != "persistent":
                continue
            subs = remote.topics.subscriptions(name) or []
            if not (t.partitioned_topic_name.local_name.endswith(DLQ_SUFFIX)
                    or SUBSCRIPTION in subs):
                continue
            d = remote.dlq(name)
            msgs = d._waiting()
            first = msgs[0] if msgs else None
            props = (first.properties_ or {}) if first is not None else {}
            out.append({
                "topic": str(t),
                "originTopic": props.get(REAL_TOPIC),
                "originSubscription": props.get(REAL_SUBSCRIPTION),
                "backlog": len(msgs),
                "oldestPublishTime": iso_ms(first.publish_time) if first else None,
                "oldestAgeMs": max(0, now - first.publish_time) if first else None,
                "retained": bool(subs),
                "retention": bool(retention.get("retentionTimeInMinutes")
                                  or retention.get("retentionSizeInMB")),
                "subscriptions": list(subs),
            })
    return out
