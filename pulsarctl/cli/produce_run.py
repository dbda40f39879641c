"""The produce loop: publish in batches (one transaction each) and print ids as they commit."""
from __future__ import annotations

import sys

from pulsarctl import clock as clocks
from pulsarctl.cli import render
from pulsarctl.client import produce as p
from pulsarctl.errors import InvalidValue, UsageError

CHUNK = 5000  # messages per transaction for -m/-f with a large -n


def _paced(msgs, rate: float):
    """Group messages so that no more than rate per second go out (real time)."""
    if not rate:
        for i in range(0, len(msgs), CHUNK):
            yield msgs[i:i + CHUNK]
        return
    start = clocks.monotonic()
    i = 0
    while i < len(msgs):
        due = int((clocks.monotonic() - start) * rate) + 1
        if due <= i:
            clocks.sleep(max(0.0, (i + 1) / rate - (clocks.monotonic() - start)))
            continue
        j = min(due, len(msgs), i + CHUNK)
        yield msgs[i:j]
        i = j


def run_produce(producer, template, bodies, num, sequence_id, rate, from_stdin, ndjson, out):
    collected = [] if out == render.JSON else None
    seq = sequence_id
    dups = 0

    def emit(ids):
        nonlocal dups
        dups += sum(1 for i in ids if i.ledger_id < 0)
        if collected is not None:
            collected.extend(ids)
        else:
            render.message_ids(ids, out, producer.topic())
            render.flush()

    if bodies:
        msgs = p.build(template, bodies, num, seq)
        if seq is not None:
            seq += len(msgs)
        # Every size is checked before anything is written.
        producer.check_sizes(msgs)
        for group in _paced(msgs, rate):
            emit(producer.send_many(group))
    if from_stdin:
        lineno = 0
        for lines in p.stdin_batches(sys.stdin):
            if not lines:
                continue
            if ndjson:
                msgs = [p.record_to_message(ln, template, lineno + i + 1) for i, ln in enumerate(lines)]
            else:
                msgs = [template.make(ln) for ln in lines]
            if seq is not None:
                for m in msgs:
                    m.sequence_id = seq
                    seq += 1
            lineno += len(lines)
            for group in _paced(msgs, rate):
                emit(producer.send_many(group))
    if collected is not None:
        render.message_ids(collected, out, producer.topic(), producer.producer_name())
    if dups:
        render.err(f"{dups} message(s) not stored: their sequence ids were already stored by "
                   f"producer {producer.producer_name()} (deduplication is on)")
    return 0


def produce_main(st, topic, out, *, messages=None, files=None, stdin=False, ndjson=False,
                 separator=None, num_produce=1, rate=0.0, key=None, ordering_key=None,
                 properties=None, event_time=None, deliver_after=None, deliver_at=None,
                 producer_name=None, sequence_id=None, chunking=False, disable_batching=False,
                 compression="none", access_mode="Shared", routing_mode="RoundRobinPartition",
                 hashing_scheme="JavaStringHash", value_schema=None) -> int:
    """The whole of `produce` after parsing; the typer command and the fast path both call it."""
    if num_produce < 0:
        raise InvalidValue(f"-n/--num-produce must be zero or more, not {num_produce}")
    if rate < 0:
        raise InvalidValue("-r/--rate must be zero or more")
    from pulsarctl.compression import code_of

    compression_code = code_of(compression)
    from pulsarctl.broker.access import check_mode

    access_mode = check_mode(access_mode)
    if routing_mode not in ("RoundRobinPartition", "SinglePartition"):
        raise InvalidValue(f"unknown routing mode {routing_mode!r}",
                           hint="use RoundRobinPartition or SinglePartition")
    if hashing_scheme not in ("JavaStringHash", "Murmur3_32Hash"):
        raise InvalidValue(f"unknown hashing scheme {hashing_scheme!r}",
                           hint="use JavaStringHash or Murmur3_32Hash")
    files = list(files or [])
    from_stdin = stdin or "-" in files
    files = [f for f in files if f != "-"]
    if ndjson and not from_stdin:
        raise UsageError("--ndjson reads records from stdin; add --stdin")
    bodies = p.payloads(messages or (), files, separator)
    if not bodies and not from_stdin:
        raise UsageError("nothing to produce", hint="give -m MESSAGE, -f FILE or --stdin")
    broker = st.broker()
    now = broker.clock_state()["now"] if deliver_after else None
    template = p.Template(key, ordering_key, properties or (), event_time, deliver_after,
                          deliver_at, now_ms=now)
    from pulsarctl.client.producer import Producer

    producer = Producer(broker, topic, producer_name, message_routing_mode=routing_mode,
                        hashing_scheme=hashing_scheme, compression_type=compression_code,
                        access_mode=access_mode, schema=value_schema, chunking=chunking)
    try:
        return run_produce(producer, template, bodies, num_produce, sequence_id, rate,
                           from_stdin, ndjson, out)
    finally:
        producer.close()  # an exclusive producer lets go of the topic
