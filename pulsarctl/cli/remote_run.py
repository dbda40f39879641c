"""produce, consume and read against a remote Pulsar (pulsarctl/remote/data.py, the real
pulsar-client library), printed as locally: the same message records, the same ids, the same
exit codes. The command bodies hand their parsed arguments here when the target is remote.

consume acks each message after printing it (or after --exec: 0 acks, 75 reconsumes later
with --enable-retry and nacks without, anything else nacks), as locally: a crash between the
two redelivers the message (at-least-once). Messages are sent asynchronously and flushed per
group (one -m/-f run, or one window of --stdin lines), their ids printed in order once
the group is stored."""
from __future__ import annotations

import sys

from pulsarctl import clock as clocks
from pulsarctl.cli import render
from pulsarctl.cli.pacing import paced
from pulsarctl.errors import LocalOnly, Timeout, UsageError

_COMPRESSION = {0: "NONE", 1: "LZ4", 2: "ZLib", 3: "ZSTD", 4: "SNAPPY"}


def _refuse(flag: str, why: str):
    raise LocalOnly(f"{flag} works on a local store only: {why}",
                    hint="leave it out for a remote target, or run it with --context local")


# -- produce -----------------------------------------------------------------------------------
def _producer_config(pulsar, *, producer_name, chunking, batching,
                     batching_opts, compression_code, access_mode, routing_mode,
                     hashing_scheme, value_schema) -> dict:
    cfg = {"compression_type": getattr(pulsar.CompressionType, _COMPRESSION[compression_code]),
           "batching_enabled": batching, "chunking_enabled": chunking,
           "block_if_queue_full": True,
           "access_mode": getattr(pulsar.ProducerAccessMode, access_mode)}
    if producer_name:
        cfg["producer_name"] = producer_name
    if batching:
        if batching_opts["batching_max_messages"] is not None:
            cfg["batching_max_messages"] = batching_opts["batching_max_messages"]
        if batching_opts["batching_max_bytes"] is not None:
            cfg["batching_max_allowed_size_in_bytes"] = batching_opts["batching_max_bytes"]
        cfg["batching_max_publish_delay_ms"] = batching_opts["batching_max_publish_delay_ms"]
        if batching_opts["batching_type"] == "KeyBased":
            cfg["batching_type"] = pulsar.BatchingType.KeyBased
    cfg["message_routing_mode"] = (pulsar.PartitionsRoutingMode.UseSinglePartition
                                   if routing_mode == "SinglePartition"
                                   else pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    # The library's own router hashes keys with BoostHash (the C++ client's default), and
    # routes with it whatever the Java default: partitions are chosen here, by the router the
    # local producer uses (broker/routing.py), under --hashing-scheme.
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.broker.routing import PartitionRouter

    routers: dict = {}
    mode = "SinglePartition" if routing_mode == "SinglePartition" else "RoundRobinPartition"

    def route(msg, n: int) -> int:
        router = routers.get(n)
        if router is None:
            router = routers[n] = PartitionRouter(n, mode, hashing_scheme, batching=batching)
        return router.choose(msg.partition_key() or None, clocks.wall_ms())
    cfg["message_router"] = route
    if value_schema is not None:
        schema = value_schema.lower()
        if schema == "string":
            cfg["schema"] = pulsar.schema.StringSchema()
        elif schema != "bytes":
            _refuse(f"--value-schema {value_schema}", "the Python pulsar-client needs a record "
                    "class for a JSON schema")
    return cfg


def produce(st, topic, out, *, template, bodies, num_produce, rate, from_stdin, ndjson,
            sequence_id, chunking, batching, asked, batching_opts, compression_code,
            access_mode, producer_name, routing_mode, hashing_scheme, value_schema) -> int:
    """produce_main's work for a remote target, every flag already checked."""
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.client import produce as p
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.names import parse_topic
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.remote.data import Connection

    name = str(parse_topic(topic))
    with Connection(st.remote) as conn:
        cfg = _producer_config(conn.pulsar, producer_name=producer_name,
                               chunking=chunking, batching=batching,
                               batching_opts=batching_opts, compression_code=compression_code,
                               access_mode=access_mode, routing_mode=routing_mode,
                               hashing_scheme=hashing_scheme, value_schema=value_schema)
        producer = conn.producer(name, **cfg)
        collected = [] if out == render.JSON else None
        counts = {"sent": 0, "dups": 0}
        progress = render.Counter("produced", "message") if from_stdin else None

        def emit(ids):
            counts["dups"] += sum(1 for i in ids if i.ledger_id < 0)
            counts["sent"] += len(ids)
            if collected is not None:
                collected.extend(ids)
            else:
                render.message_ids(ids, out, name)
                render.flush()
            if progress is not None:
                progress.update(counts["sent"])

        seq = sequence_id
        try:
            if bodies:
                msgs = p.build(template, bodies, num_produce, seq)
                if seq is not None:
                    seq += len(msgs)
                for group in paced(msgs, rate, CHUNK):
                    emit(producer.send_many(group))
            if from_stdin:
                lineno = 0
                for lines in p.stdin_batches(sys.stdin):
                    if ndjson:
                        msgs = [p.record_to_message(ln, template, lineno + i + 1)
                                for i, ln in enumerate(lines)]
                    else:
                        msgs = [template.make(ln) for ln in lines]
                    lineno += len(lines)
                    if seq is not None:
                        for m in msgs:
                            m.sequence_id = seq
                            seq += 1
                    for group in paced(msgs, rate, CHUNK):
                        emit(producer.send_many(group))
        finally:
            if progress is not None:
                progress.close()
            pname = producer.producer_name()
            producer.close()
        if from_stdin and render.stderr_tty():
            render.err(render.safe(f"produced {counts['sent'] - counts['dups']} message(s) "
                                   f"to {name}"))
        if collected is not None:
            render.message_ids(collected, out, name, pname)
        if counts["dups"]:
            render.err(f"{counts['dups']} message(s) not stored: their sequence ids were "
                       f"already stored by producer {pname} (deduplication is on)")
    return 0


CHUNK = 1000  # messages sent before waiting for their receipts


# -- consume -----------------------------------------------------------------------------------
def _consumer_config(pulsar, opts) -> dict:
    """The library's consumer configuration of consume's flags; a flag it cannot honour is
    refused (errors.LocalOnly), before anything is sent."""
    pol = opts.policy
    why = "the Python pulsar-client has no such setting"
    for flag, given in (("--nack-backoff", pol.nack_backoff),
                        ("--ack-timeout-backoff", pol.ack_timeout_backoff),
                        ("--ack-timeout-tick", pol.ack_timeout_tick_ms)):
        if given is not None:
            _refuse(flag, why)
    if opts.priority:
        _refuse("--priority", why)
    cfg = {"consumer_type": getattr(pulsar.ConsumerType, opts.sub_type.replace("_", "")),
           "initial_position": (pulsar.InitialPosition.Earliest if opts.position == "Earliest"
                                else pulsar.InitialPosition.Latest)}
    if opts.consumer_name:
        cfg["consumer_name"] = opts.consumer_name
    if pol.ack_timeout_ms:
        cfg["unacked_messages_timeout_ms"] = pol.ack_timeout_ms
    if pol.nack_delay_ms is not None:
        cfg["negative_ack_redelivery_delay_ms"] = pol.nack_delay_ms
    if pol.max_redeliver_count is not None:
        cfg["dead_letter_policy"] = pulsar.ConsumerDeadLetterPolicy(
            pol.max_redeliver_count, pol.dead_letter_topic, pol.initial_subscription_name)
    elif pol.dead_letter_topic or pol.initial_subscription_name:
        raise UsageError("--dead-letter-topic and --initial-subscription-name need "
                         "--max-redeliver-count for a remote target (the library's dead "
                         "letter policy)")
    ks = opts.key_shared
    if ks is not None:
        if ks["keySharedPolicy"] == "consistent-hashing":
            _refuse("--key-shared-policy consistent-hashing", "in Pulsar the broker chooses "
                    "its Key_Shared selector (subscriptionKeySharedUseConsistentHashing)")
        policy = pulsar.ConsumerKeySharedPolicy(
            key_shared_mode=(pulsar.KeySharedMode.Sticky if ks["keySharedPolicy"] == "sticky"
                             else pulsar.KeySharedMode.AutoSplit),
            sticky_ranges=[tuple(r) for r in ks.get("ranges", [])] or None)
        cfg["key_shared_policy"] = policy
    return cfg


def consume(st, opts) -> int:
    """consume for a remote target (ConsumeOptions, every flag checked)."""
    if not opts.ack:
        raise LocalOnly("`pulsarctl receive` works on a local store only: in Pulsar a "
                        "consumer's unacknowledged messages go back to the subscription when "
                        "it disconnects, so nothing could `ack` them from another command",
                        hint="use consume (with --exec for work per message), or --context "
                             "local")
    if not opts.durable:
        start = "earliest" if opts.position == "Earliest" else "latest"
        return read(st, opts.topic, start, False, opts.num, False, opts.idle_timeout,
                    opts.fail_if_empty, opts.hide_content, opts.hex_, opts.metadata, opts.out)
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.consume_run import (
        ACKED, LATER, NACKED, _PrintThenAck, exec_one, finish)
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.remote.data import Connection, retry_config

    num, out = opts.num, opts.out
    retry = None
    if isinstance(opts.topic, str):
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.names import parse_topic

        retry = retry_config(str(parse_topic(opts.topic)), opts.subscription, opts.policy)
    elif opts.policy.enable_retry:
        raise UsageError("--enable-retry takes one topic for a remote target")
    with Connection(st.remote) as conn:
        cfg = _consumer_config(conn.pulsar, opts)
        if retry is not None:
            cfg["retry"] = retry
        consumer = conn.consumer(opts.topic, opts.subscription, **cfg)
        show = opts.show(with_id=False)
        render.begin_messages(out, many=num != 1)
        guard = _PrintThenAck()
        results = {ACKED: 0, NACKED: 0, LATER: 0}
        count = 0
        delay = opts.exec_retry_delay_ms if opts.exec_retry_delay_ms is not None else (
            opts.policy.nack_delay_ms or 60_000)
        try:
            while num == 0 or count < num:
                try:
                    m = consumer.receive(opts.idle_ms)
                except Timeout:
                    break
                if opts.exec_cmd is not None:
                    results[exec_one(consumer, opts.exec_cmd, m, retry, delay)] += 1
                    count += 1
                    continue
                with guard:
                    render.message(m, out, **show)
                    render.flush()
                    consumer.acknowledge(m)
                    count += 1
        finally:
            guard.restore()
            consumer.close()
            if opts.exec_cmd is not None:
                render.err(f"handled {count} message(s): {results[ACKED]} acked, "
                           f"{results[NACKED]} nacked"
                           + (f", {results[LATER]} reconsumed later" if retry else ""))
    return finish(count, opts.fail_if_empty)


# -- read ----------------------------------------------------------------------------------------
def read(st, topic, start, inclusive, num, until_end, idle_timeout, fail_if_empty,
         hide_content, hex_, metadata, out) -> int:
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.cli.consume_run import finish, read_into
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.messages import parse_message_id
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.names import parse_topic
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.remote.data import Connection
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_duration_ms

    idle = parse_duration_ms(idle_timeout, "--idle-timeout") if idle_timeout else None
    sid = parse_message_id(start)
    with Connection(st.remote) as conn:
        reader = conn.reader(str(parse_topic(topic)), sid, inclusive)
        show = dict(hide_content=hide_content, hex_=hex_, metadata=metadata, with_id=True)
        try:
            count = read_into(reader, out, num, until_end, idle, show)
        finally:
            reader.close()
    return finish(count, fail_if_empty)
