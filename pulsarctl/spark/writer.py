"""The batch write: a DataFrame's rows published to topics, each row exactly once.

Each task publishes as the producer `spark-<job>-<task partition>` with the sequence ids
0, 1, 2, ... of its rows, and deduplication in force on the target topics (the writer turns the
topic's deduplication policy on where it is off, unless the option deduplication is false). A
task Spark runs again therefore skips the rows its failed attempt stored. It is apart from the
readers because it shares nothing with them but the option parsing: it publishes through the
broker as a producer does, and reads no split.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pulsarctl.errors import InvalidValue
from pulsarctl.names import parse_topic
from pulsarctl.spark import _access as access
from pulsarctl.spark.splits import CHUNK_ENTRIES, _lower

@dataclass
class WriteCommit(WriterCommitMessage):
    partition: int
    written: int
    duplicates: int


class Writer(DataSourceArrowWriter):
    def __init__(self, options, schema: StructType, overwrite: bool):
        o = _lower(options)
        if overwrite:
            raise InvalidValue("a topic only takes appends", hint='use .mode("append")')
        names = schema.fieldNames()
        if "value" not in names:
            raise InvalidValue("the DataFrame has no value column",
                               hint="write a binary or string column named value")
        self.store = access.resolve_store(o.get("store"))
        self.topic = str(parse_topic(o["topic"])) if o.get("topic") else None
        if self.topic is None and "__topic" not in names:
            raise InvalidValue("give the option topic, or a __topic column naming each row's "
                               "topic")
        self.dedup = access.flag(o, "deduplication", True)
        self.per_txn = access.whole(o, "maxEntriesPerTransaction", CHUNK_ENTRIES)
        self.scheme = o.get("hashingscheme") or "JavaStringHash"
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.broker.routing import HASHING_SCHEMES

        if self.scheme not in HASHING_SCHEMES:
            raise InvalidValue(f"unknown hashingScheme {self.scheme!r}",
                               hint=f"use one of {', '.join(HASHING_SCHEMES)}")
        self.job = o.get("producerprefix") or f"spark-{uuid.uuid4().hex[:12]}"
        if self.topic and self.dedup:
            access.ensure_dedup(access.broker(self.store, write=True), self.topic)

    def write(self, iterator):
        from pyspark import TaskContext  # lazy: pyspark is costly to import or optional

        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.broker.routing import PartitionRouter
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.messages import OutgoingMessage
        # lazy: Spark code needs pyspark/pyarrow, the optional spark extra
        from pulsarctl.spark._arrow import rows_for_publish

        tc = TaskContext.get()
        pid = tc.partitionId() if tc is not None else 0
        producer = f"{self.job}-{pid}"
        b = access.broker(self.store, write=True)
        routers: dict = {}
        ready = {self.topic} if self.topic else set()
        seq = written = dups = 0

        def route_for(topic):
            def route(n):
                r = routers.get((topic, n))
                if r is None:
                    # Keyless rows go round robin from a start fixed by the task, so a retry
                    # routes every row as the failed attempt did.
                    r = routers[(topic, n)] = PartitionRouter(n, scheme=self.scheme,
                                                              start=pid % n)
                return r.choose
            return route

        for batch in iterator:
            n = batch.num_rows
            if not n:
                continue
            payloads, keys, props, events, topics = rows_for_publish(batch)
            keys = keys or [None] * n
            props = props or [None] * n
            events = events or [0] * n
            msgs = [OutgoingMessage(p, pr, k, None, ev or 0, 0, s) for p, pr, k, ev, s in
                    zip(payloads, props, keys, events, range(seq, seq + n))]
            seq += n
            if self.topic:
                groups = {self.topic: msgs}
            else:
                groups = {}
                for t, m in zip(topics, msgs):
                    if not t:
                        raise InvalidValue(f"row with sequence id {m.sequence_id} has no "
                                           "__topic", hint="give every row a topic, or the "
                                           "option topic")
                    groups.setdefault(t, []).append(m)
            for t, ms in groups.items():
                if t not in ready:
                    t_full = str(parse_topic(t))
                    if self.dedup:
                        access.ensure_dedup(b, t_full)
                    ready.add(t)
                for i in range(0, len(ms), self.per_txn):
                    chunk = ms[i:i + self.per_txn]
                    _name, ids = b.publish(t, chunk, producer, route_for(t))
                    d = sum(1 for x in ids if x.ledger_id == -1)
                    dups += d
                    written += len(chunk) - d
        return WriteCommit(pid, written, dups)

    def commit(self, messages):
        # Every row is durable when its task ends; nothing is left to do.
        return None

    def abort(self, messages):
        # Rows of the tasks that finished stay in their topics, as a producer's sends would.
        return None
