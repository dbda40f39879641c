"""The streaming read: Spark's micro-batches over a store's topics, with admission control.

StreamReader answers Spark's offsets ({partition name: {"ml", "offset"}}), bounds each
micro-batch by maxEntriesPerTrigger or Trigger.AvailableNow, tells data loss (a topic deleted
and created again, entries trimmed before they were read) and, with the option subscription,
acknowledges each batch on that subscription once Spark has committed it. It is apart from
the batch reader (spark/source.py) because it plans from the offsets Spark hands it rather than
from bounds fixed at planning; both read their splits with spark/splits.py.
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.types import StructType

from pulsarctl.names import parse_topic
from pulsarctl.spark import _access as access
from pulsarctl.spark.splits import _ReadOptions, plan_splits, read_split

try:  # pyspark >= 4.2: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older pyspark: no maxEntriesPerTrigger
    ReadAllAvailable = ReadMaxRows = None

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {partition name: {"ml": managed ledger id, "offset": next offset to read}},
    sorted by name. A topic partition that appears later (a partitioned topic grown, a new
    topic matching topicsPattern) is read from its earliest entry."""

    def __init__(self, options, schema: StructType):
        self.o = _ReadOptions(options, schema, streaming=True)
        self.schema = schema
        self.target = None     # Trigger.AvailableNow: {name: (ml, offset)} to stop at
        self.committed = {}    # name -> offset acknowledged through on the subscription
        self.initial = None    # what initialOffset() answered in this run

    def _parts(self, b):
        return access.resolve_parts(b, self.o.kind, self.o.spec, missing_ok=True)

    def initialOffset(self):
        o = self.o
        b = access.broker(o.store)
        parts = self._parts(b)
        access.check_offset_keys(o.starting, parts, "startingOffsets")
        out = {}
        for p in parts:
            if o.starting is None and o.starting_ms is not None:
                s = p.first
            else:
                s = access.bound(p, o.starting, access.LATEST, "startingOffsets")
            if o.starting_ms is not None:
                s = access.first_at_or_after(b, p, s, p.next, o.starting_ms)
            out[p.name] = {"ml": p.ml_id, "offset": s}
        self.initial = out
        return out

    def getDefaultReadLimit(self):
        if self.o.max_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.o.max_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self):
        b = access.broker(self.o.store)
        self.target = {p.name: (p.ml_id, p.next) for p in self._parts(b)}

    def _start_of(self, start: dict, p) -> tuple[int, bool]:
        """Where p's next read begins, and whether a gap there is data loss."""
        cur = (start or {}).get(p.name)
        if cur is None:
            return p.first, False  # a partition new to this query: from its earliest entry
        if cur.get("ml") != p.ml_id:
            if self.o.fail_on_loss:
                raise access.DataLoss(f"topic {p.name} was deleted and created again while "
                                      "the query read it")
            return p.first, False
        s = int(cur["offset"])
        if s < p.first and self.o.fail_on_loss:
            raise access.DataLoss(f"entries {s}..{p.first - 1} of {p.name} were trimmed "
                                  "before the query read them")
        return max(s, p.first), True

    def latestOffset(self, start=None, limit=None):
        if self.o.subscription and start and start != self.initial:
            # Spark plans the batch after `start` only once the batch ending there is in its
            # commit log; commit(end) for the last batch of a run comes only with the next
            # batch, which a Trigger.AvailableNow run never plans.
            self.commit(start)
        b = access.broker(self.o.store)
        parts = self._parts(b)
        start = start or {}
        out = {k: dict(v) for k, v in start.items()}
        lag = {}
        for p in parts:
            s, _ = self._start_of(start, p)
            e = p.next
            if self.target is not None:
                ml, t = self.target.get(p.name, (None, None))
                e = t if ml == p.ml_id else s
            e = max(e, s)
            if p.name not in start or start[p.name].get("ml") != p.ml_id:
                out[p.name] = {"ml": p.ml_id, "offset": s}
            lag[p.name] = (s, e)
        budget = None
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            budget = max(1, int(limit.max_rows))
        elif limit is None and self.o.max_per_trigger:
            budget = self.o.max_per_trigger
        total = sum(e - s for s, e in lag.values())
        if budget is not None and total > budget:
            give = {k: budget * (e - s) // total for k, (s, e) in lag.items()}
            left = budget - sum(give.values())
            for k, (s, e) in sorted(lag.items()):
                if left <= 0:
                    break
                extra = min(left, e - s - give[k])
                give[k] += extra
                left -= extra
            lag = {k: (s, s + give[k]) for k, (s, _e) in lag.items()}
        for k, (_s, e) in lag.items():
            out[k]["offset"] = e
        return {k: out[k] for k in sorted(out)}

    def partitions(self, start, end):
        ranges = []
        start = start or {}
        for name in sorted(end):
            e = end[name]
            s = start.get(name)
            if s is not None and s.get("ml") == e["ml"]:
                a, fail = int(s["offset"]), True
            else:
                a, fail = 0, False
            if int(e["offset"]) > a:
                part = access.Part(name, parse_topic(name).partition_index, e["ml"], 0, 0)
                ranges.append((part, a, int(e["offset"]), fail))
        if not ranges:
            return []
        return plan_splits(ranges, self.o.min_partitions, self.o.max_per_partition,
                           self.o.split_entries)

    def read(self, partition):
        return read_split(self.o.store, self.schema, partition, None, None,
                          self.o.fail_on_loss)

    def commit(self, end):
        """The batch ending at end is in the sink: acknowledge it on the subscription."""
        if not self.o.subscription:
            return
        todo = {name: (v["ml"], self.committed.get(name, 0), int(v["offset"]))
                for name, v in end.items()
                if int(v["offset"]) > self.committed.get(name, -1)}
        if todo:
            access.ack_through(access.broker(self.o.store, write=True), self.o.subscription,
                               todo)
            self.committed.update({name: r[2] for name, r in todo.items()})
