"""The produce loop: publish in batches (one transaction each) and print ids as they commit."""
from __future__ import annotations

import sys

from pulsarctl.cli import render
from pulsarctl.cli.pacing import paced
from pulsarctl.client import produce as p
from pulsarctl.errors import InvalidValue, UsageError

CHUNK = 5000  # messages per transaction for -m/-f with a large -n


CLI_DELAY_MS = 1  # pulsar-client (Java): batchingMaxPublishDelay 1 ms


def _batching_options(max_messages, max_bytes, delay, batching_type):
    """The --batching-* options as the Producer takes them, with pulsar-client's defaults."""
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_duration_ms, parse_size

    kind = None
    if batching_type is not None:
        kind = {"default": "Default", "key-based": "KeyBased", "keybased": "KeyBased",
                "key_based": "KeyBased"}.get(str(batching_type).lower())
        if kind is None:
            raise InvalidValue(f"unknown --batching-type {batching_type!r}",
                               hint="use default or key-based")
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.client import batcher

    opts = {
        "batching_max_messages": max_messages,
        "batching_max_bytes": (parse_size(max_bytes, "--batching-max-bytes")
                               if max_bytes is not None else None),
        "batching_max_publish_delay_ms": (
            parse_duration_ms(delay, "--batching-max-publish-delay") if delay is not None
            else CLI_DELAY_MS),
        "batching_type": kind,
    }
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.broker.batches import check

    check(batcher.DEFAULT_MAX_MESSAGES if max_messages is None else max_messages,
          batcher.DEFAULT_MAX_BYTES if opts["batching_max_bytes"] is None
          else opts["batching_max_bytes"],
          opts["batching_max_publish_delay_ms"], kind or batcher.DEFAULT,
          names=("--batching-max-messages", "--batching-max-bytes",
                 "--batching-max-publish-delay", "--batching-type"))
    return opts.items()


def run_produce(producer, template, bodies, num, sequence_id, rate, from_stdin, ndjson, out,
                batch_bodies=False, window_ms=p.BATCH_MS, delay_ms=None):
    """batch_bodies: -m/-f messages go into batches too (else one entry each, as
    pulsar-client's synchronous sends store them); window_ms: how long stdin lines gather
    before a commit; delay_ms: the batching publish delay (None: not batching stdin)."""
    collected = [] if out == render.JSON else None
    seq = sequence_id
    dups = 0
    sent = 0
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.names import parse_topic

    topic = str(parse_topic(producer.topic()))  # records name the full topic
    progress = render.Counter("produced", "message") if from_stdin else None

    def emit(ids):
        nonlocal dups, sent
        dups += sum(1 for i in ids if i.ledger_id < 0)
        sent += len(ids)
        if collected is not None:
            collected.extend(ids)
        else:
            render.message_ids(ids, out, topic)
            render.flush()
        if progress is not None:
            progress.update(sent)

    if bodies:
        msgs = p.build(template, bodies, num, seq)
        if seq is not None:
            seq += len(msgs)
        # Every size is checked before anything is written.
        producer.check_sizes(msgs)
        for group in paced(msgs, rate, CHUNK):
            emit(producer.send_many(group, batching=batch_bodies))
    def emit_runs(runs):
        nonlocal sent
        n = sum(r[3] for r in runs)
        sent += n
        render.message_id_runs(runs, out, topic)
        render.flush()
        if progress is not None:
            progress.update(sent)

    # Plain lines (no --ndjson, key, properties, times, sequence id or rate) go out from their
    # payloads alone (Producer.send_payloads), in the same transactions of CHUNK lines and
    # the same batches; the producer says when it cannot (then the messages are made).
    bulk = not ndjson and seq is None and not rate and collected is None and p.plain(template)
    if from_stdin:
        try:
            lineno = 0
            times: list = []
            for lines in p.stdin_batches(sys.stdin, max_ms=window_ms, times=times):
                if not lines:
                    continue
                if bulk:
                    timed = delay_ms is not None and len(times) == len(lines)
                    breaks = p.delay_breaks(times, delay_ms) if timed else []
                    done = 0
                    while done < len(lines):
                        stop = min(done + CHUNK, len(lines))
                        runs = producer.send_payloads(
                            lines[done:stop], [b - done for b in breaks if done < b < stop])
                        if runs is None:
                            bulk = False   # the producer cannot: make the messages from now on
                            break
                        emit_runs(runs)
                        done = stop
                    if done == len(lines):
                        lineno += len(lines)
                        continue
                    lines = lines[done:]
                    times[:] = times[done:] if timed else times
                if ndjson:
                    msgs = [p.record_to_message(ln, template, lineno + i + 1) for i, ln in enumerate(lines)]
                else:
                    msgs = [template.make(ln) for ln in lines]
                if delay_ms is not None:
                    p.mark_delays(msgs, times, delay_ms)
                if seq is not None:
                    for m in msgs:
                        m.sequence_id = seq
                        seq += 1
                lineno += len(lines)
                for group in paced(msgs, rate, CHUNK):
                    emit(producer.send_many(group))
        finally:
            progress.close()
        if render.stderr_tty():
            render.err(render.safe(f"produced {sent - dups} message(s) to {topic}"))
    if collected is not None:
        render.message_ids(collected, out, topic, producer.producer_name())
    if dups:
        render.err(f"{dups} message(s) not stored: their sequence ids were already stored by "
                   f"producer {producer.producer_name()} (deduplication is on)")
    return 0


def produce_main(st, topic, out, *, messages=None, files=None, stdin=False, ndjson=False,
                 separator=None, num_produce=1, rate=0.0, key=None, ordering_key=None,
                 properties=None, event_time=None, deliver_after=None, deliver_at=None,
                 producer_name=None, sequence_id=None, chunking=False, disable_batching=False,
                 batching_max_messages=None, batching_max_bytes=None,
                 batching_max_publish_delay=None, batching_type=None,
                 compression="none", access_mode="Shared", routing_mode="RoundRobinPartition",
                 hashing_scheme="JavaStringHash", value_schema=None) -> int:
    """The whole of `produce` after parsing; the typer command and the fast path both call it.

    Batching is on unless -db or -c, as in pulsar-client (whose -c turns batching off). Its
    synchronous sends store each -m/-f message alone (a batch of one is a plain message), so
    -m/-f messages go into batches only when a --batching-* option asks for them; the bulk
    input, --stdin, is sent asynchronously and batched by count, bytes and publish delay."""
    if num_produce < 0:
        raise InvalidValue(f"-n/--num-produce must be zero or more, not {num_produce}")
    if rate < 0:
        raise InvalidValue("-r/--rate must be zero or more")
    batching_opts = dict(_batching_options(batching_max_messages, batching_max_bytes,
                                           batching_max_publish_delay, batching_type))
    asked = any(v is not None for v in (batching_max_messages, batching_max_bytes,
                                        batching_max_publish_delay, batching_type))
    if chunking and asked and not disable_batching:
        raise InvalidValue("Batching and chunking of messages can't be enabled together",
                           hint="drop the --batching-* options, or -c")
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.compression import code_of

    compression_code = code_of(compression)
    # lazy: loaded when the command runs, not when the command tree is built
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
    batching = not (disable_batching or chunking) and (asked or from_stdin)
    if st.remote is not None:
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.cli import remote_run
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.clock import wall_ms

        template = p.Template(key, ordering_key, properties or (), event_time, deliver_after,
                              deliver_at, now_ms=wall_ms() if deliver_after else None)
        return remote_run.produce(
            st, topic, out, template=template, bodies=bodies, num_produce=num_produce,
            rate=rate, from_stdin=from_stdin, ndjson=ndjson, sequence_id=sequence_id,
            chunking=chunking, batching=batching, asked=asked, batching_opts=batching_opts,
            compression_code=compression_code, access_mode=access_mode,
            producer_name=producer_name, routing_mode=routing_mode,
            hashing_scheme=hashing_scheme, value_schema=value_schema)
    broker = st.broker()
    now = broker.clock.state()["now"] if deliver_after else None
    template = p.Template(key, ordering_key, properties or (), event_time, deliver_after,
                          deliver_at, now_ms=now)
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.client.producer import Producer

    # Only what is batched makes a batching producer (whose round robin routing switches
    # partitions by time, as Pulsar's does when batching): -m/-f alone are sent one by one.
    # A produce that outlives one transaction (stdin, a rate, more than one chunk of messages)
    # is a connected producer while it runs, listed by `topics stats`; a one-shot one is
    # admitted inside its one transaction and leaves nothing behind.
    lasting = from_stdin or bool(rate) or len(bodies) * max(num_produce, 1) > CHUNK
    producer = Producer(broker, topic, producer_name, message_routing_mode=routing_mode,
                        hashing_scheme=hashing_scheme, compression_type=compression_code,
                        access_mode=access_mode, schema=value_schema, chunking=chunking,
                        batching=batching, register=lasting, **batching_opts)
    delay = batching_opts["batching_max_publish_delay_ms"]
    try:
        return run_produce(producer, template, bodies, num_produce, sequence_id, rate,
                           from_stdin, ndjson, out, batch_bodies=batching and asked,
                           window_ms=max(p.BATCH_MS, delay) if batching else p.BATCH_MS,
                           delay_ms=delay if batching else None)
    finally:
        producer.close()  # an exclusive producer lets go of the topic
