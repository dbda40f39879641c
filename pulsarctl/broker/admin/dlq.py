"""One dead letter topic (broker.dlq(topic)) and the list of them (broker.dlqs()): the `dlq`
commands' transactions.

Each method of the handle is one transaction (a read one where it changes nothing) over the
DLQ concept modules: dlq.py (the lock, reading the waiting dead letters), dlq_list.py,
dlq_stats.py and dlq_replay.py. It is apart from them as the other admin nouns are apart from
their concepts (subscription.py): the semantics there, the transactions here.
"""
from __future__ import annotations

from pulsarctl.broker import chunks, subscriptions as subs, batches
from pulsarctl.broker.dlq import (
    ALL, MISSING, as_topic, count, ensure_subscription, id_offsets, locked, open_dlq, select,
)
from pulsarctl.broker.dlq_list import list_dlqs
from pulsarctl.broker.dlq_replay import DEFAULT_MAX_REPLAYS, replay
from pulsarctl.broker.dlq_stats import stats
from pulsarctl.errors import InvalidValue
from pulsarctl.names import parse_namespace, check_subscription


def list_all(broker, namespace: str | None = None) -> list[dict]:
    """Every dead letter topic (of a namespace), with what waits in it (Broker.dlqs)."""
    if namespace:
        parse_namespace(namespace)
    return broker._read(list_dlqs, namespace)


class Dlq:
    """One dead letter topic and its subscription pulsarctl-dlq. Each method is one transaction
    (a read one where it changes nothing). missing_ok: a DLQ that does not exist is an empty
    one."""
    __slots__ = ("_broker", "topic")

    def __init__(self, broker, topic):
        self._broker = broker
        self.topic = as_topic(topic)

    def stats(self, by_property: str | None = None, missing_ok: bool = False) -> dict:
        """Counts of the waiting dead letters (messages, not entries)."""
        t = self.topic
        return self._broker._read(
            lambda ctx: stats(ctx, t, *open_dlq(ctx, t, missing_ok), by_property))

    def peek(self, n: int = 10, filters=None, missing_ok: bool = False) -> list:
        """The first n waiting dead letters (n=0: all) that pass the filters; changes nothing."""
        t = self.topic

        def run(ctx):
            info, c = open_dlq(ctx, t, missing_ok)
            # n=0: no limit (not the entry count: a batch entry holds many messages)
            return select(ctx, info, t, c, -1, n or ALL, filters)[0]
        return self._broker._read(run)

    def check(self, missing_ok: bool = False) -> bool:
        """Whether the DLQ exists: a missing one is TopicNotFound (exit 3), or False with
        missing_ok; a partitioned topic's name is InvalidValue. Creates nothing."""
        t = self.topic
        return self._broker._read(lambda ctx: open_dlq(ctx, t, missing_ok)[0].ml_id != MISSING)

    def count(self, filters=None, ids=None, older_than_ms: int | None = None,
              missing_ok: bool = False) -> int:
        """How many waiting dead letters (messages) pass the filters, the ids and the age
        limit."""
        t = self.topic

        def run(ctx):
            info, c = open_dlq(ctx, t, missing_ok)
            cutoff = ctx.now - older_than_ms if older_than_ms is not None else None
            return count(ctx, info, t, c, filters, ids, cutoff)
        return self._broker._read(run)

    def subscribe(self) -> bool:
        """Create pulsarctl-dlq at Earliest if it is missing. Returns whether it was created."""
        t = self.topic

        def run(ctx):
            info, c = open_dlq(ctx, t)
            if c is None:
                ensure_subscription(ctx, info)
            return c is None
        return self._broker._write(run)

    def fetch(self, after: int = -1, limit: int = 100, filters=None, ids=None,
              older_than_ms: int | None = None) -> dict:
        """The next waiting dead letters after the scan position `after` (-1: from the start):
        {"messages", "after" (pass it to the next call), "done"}. Reads only."""
        t = self.topic

        def run(ctx):
            info, c = open_dlq(ctx, t)
            cutoff = ctx.now - older_than_ms if older_than_ms is not None else None
            msgs, last, done = select(ctx, info, t, c, after, limit, filters, ids, cutoff)
            return {"messages": msgs, "after": last, "done": done}
        return self._broker._read(run)

    def ack(self, ids) -> int:
        """Acknowledge dead letters on pulsarctl-dlq (they are handled). Returns how many."""
        t = self.topic
        ids = list(ids)

        def run(ctx):
            info, _c = open_dlq(ctx, t)
            c = ensure_subscription(ctx, info)
            if any(m.batch_index >= 0 for m in ids):
                # A batch's dead letters are handled one by one: acked by their batch index.

                offsets, newly, completed, _held = batches.resolve(ctx, info, c, ids)
                n = newly - completed
                if offsets:
                    n += subs.ack(ctx, info, c, sorted(set(offsets)))[0]
                else:
                    ctx.cursors.save(ctx.txn, c)
                return n
            offsets = id_offsets(ctx, info, ids)
            if not offsets:
                return 0
            # A chunked dead letter's id is its last chunk's: its other chunks go with it.
            rest = chunks.earlier(ctx, info, offsets)
            n = subs.ack(ctx, info, c, sorted(set(offsets) | set(rest)))[0]
            return n - len(rest) if rest else n
        return self._broker._write(run)

    def replay(self, ids, *, to=None, subscription: str | None = None,
               max_replays: int = DEFAULT_MAX_REPLAYS, dry_run: bool = False,
               max_failures: int | None = None) -> list[dict]:
        """Replay these dead letters: republish and ack in one write transaction (a read one
        for dry_run). to=None replays each to its REAL_TOPIC; subscription replays through that
        subscription's retry letter topic; max_failures stops after that many failed."""
        t = self.topic
        ids = list(ids)
        if max_replays < 0:
            raise InvalidValue(f"--max-replays must be zero or more, not {max_replays}")
        if to is not None and as_topic(to).partitioned_topic_name == t.partitioned_topic_name:
            raise InvalidValue(f"cannot replay {t} into itself", hint="give another --to TOPIC")
        if subscription is not None:
            check_subscription(subscription)
        run = (self._broker._read if dry_run else self._broker._write)
        return run(replay, t, ids, to, subscription, max_replays, dry_run, max_failures)

    def lock(self, wait: bool = True):
        """A context manager holding the DLQ's exclusive lock (LockBusy when wait=False and
        another command holds it)."""
        return locked(self._broker.path, self.topic, wait)
