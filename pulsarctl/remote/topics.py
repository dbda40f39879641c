"""Topics and subscriptions of a remote Pulsar over its admin REST API, with the methods of
the local broker's `broker.topics` and `broker.subscription(t, s)` (pulsarctl/broker/admin).

A partitioned topic is handled as the local store handles it: stats are the whole
(partitioned-stats), skip, clear-backlog, reset-cursor and expire-messages go to each
partition and add up, peek-messages reads partition after partition. What a change did
(skipped, cleared, expired) is read from the backlog before and after it: a consumer acking
at the same time shows in the count."""
from __future__ import annotations

from urllib.parse import quote

from pulsarctl.clock import wall_ms
from pulsarctl.errors import (
    InvalidValue, MessageNotFound, NotFound, SubscriptionNotFound, TopicNotFound,
)
from pulsarctl.messages import MessageId, parse_message_id
from pulsarctl.names import parse_namespace, parse_topic
from pulsarctl.remote import messages as rmessages
from pulsarctl.remote.admin import _Noun
from pulsarctl.remote.rest import topic_path
from pulsarctl.units import parse_time_or_duration_ms

_COUNTS = ("skipped", "cleared", "expired", "msgBacklog")


def _full(name) -> str:
    return str(parse_topic(str(name)))


def id_doc(mid: MessageId) -> dict:
    """A MessageId as pulsar-admin sends it (MessageIdImpl / ResetCursorData)."""
    return {"ledgerId": mid.ledger_id, "entryId": mid.entry_id,
            "partitionIndex": mid.partition, "batchIndex": mid.batch_index}


class Topics(_Noun):
    # -- names -------------------------------------------------------------------------------
    def _ns_path(self, namespace, domain="persistent") -> str:
        tenant, ns = parse_namespace(namespace)
        return f"/admin/v2/{domain}/{quote(tenant, safe='')}/{quote(ns, safe='')}"

    def list(self, namespace):
        """Every topic of the namespace, partitions included, persistent then non-persistent,
        as pulsar-admin topics list prints them."""
        out = list(self.rest.get(self._ns_path(namespace)) or [])
        try:
            out += [t for t in self.rest.get(self._ns_path(namespace, "non-persistent")) or []
                    if t not in out]
        except NotFound:
            pass
        return out

    def list_partitioned(self, namespace):
        return self.rest.get(self._ns_path(namespace) + "/partitioned") or []

    def partitions(self, name) -> int:
        """The topic's partition count, 0 when it is not partitioned (or does not exist)."""
        doc = self.rest.get(topic_path(name) + "/partitions") or {}
        return int(doc.get("partitions") or 0)

    def partition_names(self, name) -> list[str]:
        """The topic itself, or each of its partitions."""
        n = self.partitions(name)
        t = parse_topic(str(name))
        return [str(t.partition(i)) for i in range(n)] if n else [str(t)]

    def partitioned_metadata(self, name) -> dict:
        return self.rest.get(topic_path(name) + "/partitions")

    # -- lifecycle ---------------------------------------------------------------------------
    def create(self, name):
        self.rest.put(topic_path(name))
        return _full(name)

    def create_partitioned(self, name, n: int):
        if n < 1:
            raise InvalidValue(f"a partitioned topic needs at least 1 partition, not {n}")
        self.rest.put(topic_path(name) + "/partitions", n)
        return _full(name)

    def update_partitioned(self, name, n: int):
        self.rest.post(topic_path(name) + "/partitions", n)
        return n

    def delete(self, name, force=False):
        params = {"force": "true"} if force else None
        if self.partitions(name):
            self.rest.delete(topic_path(name) + "/partitions", params)
        else:
            self.rest.delete(topic_path(name), params)
        return _full(name)

    def exists(self, name) -> bool:
        t = parse_topic(str(name))
        if self.partitions(name):
            return True
        base = t.partitioned_topic_name if t.is_partition else t
        return str(t) in self.list(base.namespace)

    def terminate(self, name):
        if self.partitions(name):
            doc = self.rest.post(topic_path(name) + "/terminate/partitions") or {}
            return {str(parse_topic(str(name)).partition(int(k))): _mid(v)
                    for k, v in doc.items()}
        return _mid(self.rest.post(topic_path(name) + "/terminate"))

    # -- stats -------------------------------------------------------------------------------
    def stats(self, name):
        """A topic's stats; a partitioned topic's are the whole of its partitions', as the
        local store shows them (Pulsar's partitioned-stats)."""
        if self.partitions(name):
            return self.partitioned_stats(name)
        return self.rest.get(topic_path(name) + "/stats")

    def partitioned_stats(self, name, per_partition: bool = False):
        if not self.partitions(name):
            raise TopicNotFound(f"{_full(name)} is not a partitioned topic",
                                hint=f"use `pulsarctl topics stats {_full(name)}`")
        return self.rest.get(topic_path(name) + "/partitioned-stats",
                             {"perPartition": "true" if per_partition else "false"})

    def internal_stats(self, name):
        if self.partitions(name):
            return self.rest.get(topic_path(name) + "/partitioned-internalStats")
        return self.rest.get(topic_path(name) + "/internalStats")

    def subscriptions(self, name):
        return self.rest.get(topic_path(name) + "/subscriptions") or []

    # -- messages ------------------------------------------------------------------------------
    def last_message_id(self, name) -> MessageId:
        return _mid(self.rest.get(topic_path(name) + "/lastMessageId"))

    def get_message_by_id(self, name, ledger_id: int, entry_id: int):
        t = parse_topic(str(name))
        resp = self.rest.get_raw(f"{topic_path(name)}/ledger/{int(ledger_id)}/entry/"
                                 f"{int(entry_id)}")
        # A batch entry shows its first message, as pulsar-admin's getMessageById does.
        return rmessages.from_rest(resp, str(t), t.partition_index)[0]

    def examine_message(self, name, initial_position: str = "latest", n: int = 1):
        t = parse_topic(str(name))
        if initial_position not in ("latest", "earliest") or n < 1:
            raise InvalidValue("examine-message takes -i latest|earliest and -m 1 or more")
        resp = self.rest.get_raw(f"{topic_path(name)}/examinemessage",
                                 {"initialPosition": initial_position, "messagePosition": str(n)})
        return rmessages.from_rest(resp, str(t), t.partition_index)[0]

    # -- compaction ----------------------------------------------------------------------------
    def compact(self, name) -> dict:
        """Start a compaction (Pulsar runs it in the background): its status once asked."""
        self.rest.put(topic_path(name) + "/compaction")
        return {"topic": _full(name), **self.compaction_status(name)}

    def compaction_status(self, name) -> dict:
        return self.rest.get(topic_path(name) + "/compaction")


def _mid(doc) -> MessageId:
    doc = doc or {}
    return MessageId(int(doc.get("ledgerId", -1)), int(doc.get("entryId", -1)),
                     int(doc.get("partitionIndex", -1)), int(doc.get("batchIndex", -1)))


class Subscription(_Noun):
    def __init__(self, remote, topic, name: str):
        super().__init__(remote)
        self.topic = _full(topic)
        self.name = name

    def _path(self, topic=None) -> str:
        return f"{topic_path(topic or self.topic)}/subscription/{quote(self.name, safe='')}"

    # -- lifecycle -----------------------------------------------------------------------------
    def create(self, position=MessageId.latest):
        if not isinstance(position, MessageId):
            position = MessageId.earliest if str(position).lower() == "earliest" \
                else MessageId.latest
        self.rest.put(self._path(), id_doc(position))

    def unsubscribe(self, force=False):
        self.rest.delete(self._path(), {"force": "true"} if force else None)

    # -- looking inside ------------------------------------------------------------------------
    def _stats(self, topic) -> dict:
        subs = (self._remote.topics.stats(topic) or {}).get("subscriptions") or {}
        if self.name not in subs:
            raise SubscriptionNotFound(f"subscription '{self.name}' not found on {topic}",
                                       hint=f"list them with `pulsarctl topics subscriptions "
                                            f"{topic}`")
        return subs[self.name]

    def consumers(self):
        return self._stats(self.topic).get("consumers") or []

    def cursor_view(self, around=None, n: int = 40):
        """`topics cursor`: the picture drawn from internal stats (remote/cursor.py)."""
        # lazy: only topics cursor needs it
        from pulsarctl.remote.cursor import cursor_view

        return cursor_view(self._remote, self.topic, self.name, around, n)

    def peek(self, n: int = 1):
        """peek-messages: the next n messages after the mark-delete position that are not
        acknowledged (a batch: its messages), partition after partition; changes nothing."""
        out = []
        for part in self._remote.topics.partition_names(self.topic):
            t = parse_topic(part)
            k = 1
            while len(out) < n:
                try:
                    resp = self.rest.get_raw(f"{self._path(part)}/position/{k}")
                except MessageNotFound:
                    break
                except NotFound as exc:
                    if "message not found" in str(exc).lower():
                        break
                    raise
                out.extend(rmessages.from_rest(resp, part, t.partition_index)[:n - len(out)])
                k += 1
        return out

    # -- cursor administration ------------------------------------------------------------------
    def _summary(self, topic) -> dict:
        """msgBacklog, markDeletePosition, readPosition of one topic or partition."""
        backlog = self._stats(topic).get("msgBacklog", 0)
        internal = self._remote.topics.internal_stats(topic) or {}
        cursor = (internal.get("cursors") or {}).get(self.name) or {}
        return {"msgBacklog": backlog, "markDeletePosition": cursor.get("markDeletePosition"),
                "readPosition": cursor.get("readPosition")}

    def _each_partition(self, fn, only=None) -> dict:
        """fn(topic) -> its document, on the topic or each partition (added up), as the local
        store does."""
        parts = self._remote.topics.partition_names(self.topic)
        if parts == [self.topic]:
            return fn(self.topic)
        if only is not None:
            parts = [p for p in parts if parse_topic(p).partition_index == only]
            if not parts:
                raise MessageNotFound(f"no partition {only} on {self.topic}")
        docs = {p: fn(p) for p in parts}
        out = {"topic": self.topic}
        for k in _COUNTS:
            if any(k in d for d in docs.values()):
                out[k] = sum(d.get(k, 0) for d in docs.values())
        out["partitions"] = docs
        return out

    def _counted(self, key: str, action) -> dict:
        def run(topic):
            before = self._stats(topic).get("msgBacklog", 0)
            action(topic, before)
            after = self._summary(topic)
            return {"topic": topic, "subscription": self.name,
                    key: max(0, before - after["msgBacklog"]), **after}
        return self._each_partition(run)

    def skip(self, n: int) -> dict:
        return self._counted("skipped", lambda t, _b: self.rest.post(
            f"{self._path(t)}/skip/{int(n)}"))

    def clear_backlog(self) -> dict:
        return self._counted("cleared", lambda t, _b: self.rest.post(
            f"{self._path(t)}/skip_all"))

    def expire_messages(self, ttl_ms: int) -> dict:
        def expire(t, before):
            # Pulsar refuses (409) an expiry on a subscription with nothing to expire; the
            # local store's answer is "expired 0", so a remote one gives the same.
            if before:
                self.rest.post(f"{self._path(t)}/expireMessages/{ttl_ms // 1000}")
        doc = self._counted("expired", expire)
        doc["expireTimeMs"] = ttl_ms
        return doc

    def reset_cursor(self, time_ms=None, message_id=None, exclude: bool = False) -> dict:
        if (time_ms is None) == (message_id is None):
            raise InvalidValue("reset-cursor needs exactly one of a time and a message id",
                               hint="pass -t TIME_OR_DURATION or -m MESSAGE_ID")
        if isinstance(message_id, str):
            message_id = parse_message_id(message_id)
        when = None
        if time_ms is not None:
            when = time_ms
            if isinstance(time_ms, str):
                # read against the real clock: a remote Pulsar's is real
                when = parse_time_or_duration_ms(time_ms, wall_ms())

        def run(topic):
            if message_id is not None:
                body = {**id_doc(message_id), "isExcluded": bool(exclude)}
                self.rest.post(f"{self._path(topic)}/resetcursor", body)
            else:
                self.rest.post(f"{self._path(topic)}/resetcursor/{int(when)}")
            after = self._summary(topic)
            doc = {"topic": topic, "subscription": self.name,
                   "nextMessageId": after["readPosition"]}
            if message_id is None:
                doc["timestamp"] = when
            else:
                doc["messageId"] = str(message_id)
            doc.update(after)
            return doc
        only = None
        if message_id is not None and message_id not in (MessageId.earliest, MessageId.latest) \
                and message_id.partition >= 0:
            only = message_id.partition
        return self._each_partition(run, only)
