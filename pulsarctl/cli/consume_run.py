"""The loops behind consume, receive and read: take the next message, print it, ack it (for
consume), until -n messages, --idle-timeout, or Ctrl-C. Waits are real time."""
from __future__ import annotations

from pulsarctl.broker.batches import message_count
from pulsarctl.cli import render
from pulsarctl.errors import InvalidValue, NothingToDo, Timeout
from pulsarctl.units import parse_duration_ms


def _idle_ms(idle_timeout):
    return parse_duration_ms(idle_timeout, "--idle-timeout") if idle_timeout else None


def finish(count: int, fail_if_empty: bool) -> int:
    """consume's, receive's and read's exit status (remote targets' too): 0, or NothingToDo
    (exit 3) with --fail-if-empty when nothing came."""
    if count == 0 and fail_if_empty:
        raise NothingToDo("no message was received", hint="nothing was waiting; try again later")
    return 0


def run_consume(st, opts) -> int:
    """consume (opts.ack) or receive: opts is a ConsumeOptions (pulsarctl/cli/consume_options.py),
    every flag already checked."""
    if not opts.durable:
        start = "earliest" if opts.position == "Earliest" else "latest"
        return run_read(st, opts.topic, start, False, opts.num, False, opts.idle_timeout,
                        opts.fail_if_empty, opts.hide_content, opts.hex_, opts.metadata, opts.out)
    ack, num, out, idle = opts.ack, opts.num, opts.out, opts.idle_ms
    client = st.client()
    consumer = client.subscribe(opts.topic, opts.subscription, opts.sub_type, opts.position,
                                opts.consumer_name, priority_level=opts.priority,
                                lease_ms=opts.lease_ms, key_shared_policy=opts.key_shared,
                                settings=opts.policy)
    count = 0
    show = opts.show(with_id=not ack)
    render.begin_messages(out, many=num != 1)
    _say_waiting(consumer.topics(), f"{opts.sub_type} subscription {opts.subscription}", num,
                 opts.idle_timeout)
    guard = _PrintThenAck()
    # consume -o ndjson prints and acks in runs: what the receiver queue holds, batch entries
    # whole (no Message per index), one write, then the acks.
    bulk = ack and out == render.NDJSON and opts.exec_cmd is None
    if bulk:
        consumer.whole_batches = True
    results = {ACKED: 0, NACKED: 0, LATER: 0}
    retry, retry_delay = False, None
    exec_cmd = opts.exec_cmd
    if exec_cmd is not None:
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.broker.nacks import DEFAULT_NACK_DELAY_MS
        # lazy: loaded when the command runs, not when the command tree is built
        from pulsarctl.consumer_policy import ConsumerPolicy

        # The stored policy decides, so retry enabled by an earlier command counts too.
        stored = ConsumerPolicy.from_store(
            st.broker().subscription(consumer.topics()[0], opts.subscription).policy())
        retry = bool(stored.enable_retry)
        retry_delay = (opts.exec_retry_delay_ms if opts.exec_retry_delay_ms is not None
                       else (stored.nack_delay_ms or DEFAULT_NACK_DELAY_MS))
    try:
        while num == 0 or count < num:
            want = min(consumer.receiver_queue_size, num - count) if num else None
            if bulk:
                try:
                    run = consumer.receive_run(idle, BULK if not num else min(BULK, num - count),
                                               max_fetch=want,
                                               limit=None if not num else num - count)
                except Timeout:
                    break
                with guard:
                    render.messages(run, out, **show)
                    render.flush()
                    consumer.acknowledge_many(run)
                    count += message_count(run)
                continue
            try:
                m = consumer.receive(idle, max_fetch=want)
            except Timeout:
                break
            if exec_cmd is not None:
                results[exec_one(consumer, exec_cmd, m, retry, retry_delay)] += 1
                count += 1
                continue
            with guard:
                render.message(m, out, **show)
                render.flush()
                if ack:
                    consumer.acknowledge(m)
                count += 1
    finally:
        guard.restore()
        if ack:
            # Its nacks stay held after it closes: each comes back, counted, once its delay
            # has passed (nack timers are durable), whichever process runs then.
            consumer.close()
        else:
            consumer.detach()
        if exec_cmd is not None:
            render.err(f"handled {count} message(s): {results[ACKED]} acked, "
                       f"{results[NACKED]} nacked"
                       + (f", {results[LATER]} reconsumed later" if retry else ""))
    return finish(count, opts.fail_if_empty)


# Messages printed and acked together when the receiver queue holds them (a batch entry goes
# whole): about as often as the client's ack grouping would send them anyway.
BULK = 64

EX_TEMPFAIL = 75
ACKED, NACKED, LATER = "acked", "nacked", "later"


def exec_one(consumer, cmd: str, m, retry: bool, retry_delay) -> str:
    """Hand one message to the --exec command and settle it by the exit status: 0 acks, 75
    (EX_TEMPFAIL) reconsumes later with retry enabled, anything else nacks, and so does a
    message that cannot be handed over at all (the command cannot start): that is said in one
    line on stderr, and the next message is handed over as usual. The same for a remote
    target's consumer (cli/remote_run.py): the real client's consumer has the same calls."""
    try:
        outcome = spawn_exec(cmd, m)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        render.err(render.safe(f"warning: message {m.id} could not be handed to the --exec "
                               f"command ({reason}); it was nacked"))
        outcome = None
    if outcome == 0:
        consumer.acknowledge(m)
        return ACKED
    if outcome == EX_TEMPFAIL and retry:
        consumer.reconsume_later(m, retry_delay)
        return LATER
    # Without a retry topic, 75 is a nack, as is any failure.
    consumer.negative_acknowledge(m)
    return NACKED


def _say_waiting(topics, what: str, num: int, idle_timeout) -> None:
    """On a terminal, say what the command waits for, so a person knows it is not hung."""
    if not render.stderr_tty():
        return
    names = ", ".join(topics[:3]) + (f" and {len(topics) - 3} more" if len(topics) > 3 else "")
    count = "messages" if num != 1 else "a message"
    until = f", or {idle_timeout} idle" if idle_timeout else ""
    render.err(render.safe(f"waiting for {count} on {names} ({what}); Ctrl-C to stop{until}"))


ENCODING_SUFFIX = "_ENCODING"


def _holdable(value: str) -> bool:
    """Whether the environment can hold value as it is: a NUL would end its C string, and a
    lone surrogate has no bytes to be."""
    if "\0" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def exec_env(m) -> dict:
    """The message's metadata for --exec: never interpolated into the command line. A value
    the environment cannot hold as it is (one with a NUL) is given base64-encoded (its UTF-8
    bytes) and VARIABLE_ENCODING=base64 says so, as a message record's "encoding" does for a
    payload; nothing is dropped. PULSAR_PROP_* and *_ENCODING variables inherited from the
    environment are left out: they would pass for this message's."""
    import base64  # lazy: loaded when the command runs, not when the command tree is built
    import os  # lazy: loaded when the command runs, not when the command tree is built
    import re  # lazy: loaded when the command runs, not when the command tree is built

    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("PULSAR_PROP_") or
                   (k.startswith("PULSAR_") and k.endswith(ENCODING_SUFFIX)))}
    values = {
        "PULSAR_MESSAGE_ID": str(m.id), "PULSAR_TOPIC": m.topic or "",
        "PULSAR_KEY": m.key or "", "PULSAR_REDELIVERY_COUNT": str(m.redelivery_count_),
        "PULSAR_SUBSCRIPTION": m.subscription or "", "PULSAR_PUBLISH_TIME": str(m.publish_time),
    }
    for k, v in (m.properties_ or {}).items():
        values["PULSAR_PROP_" + re.sub(r"[^A-Z0-9_]", "_", str(k).upper())] = str(v)
    encoded = []
    for name, v in values.items():
        if not _holdable(v):
            v = base64.b64encode(v.encode("utf-8", "surrogatepass")).decode("ascii")
            encoded.append(name)
        env[name] = v
    for name in encoded:  # last: a property of that name does not hide the marker
        env[name + ENCODING_SUFFIX] = "base64"
    return env


def spawn_exec(cmd: str, m) -> int:
    """Run cmd (through sh) with the payload on stdin and return its exit status; OSError when
    it cannot start (no /bin/sh, an environment over the system's limit: E2BIG)."""
    import subprocess  # lazy: loaded when the command runs, not when the command tree is built

    return subprocess.run(["/bin/sh", "-c", cmd], input=m.payload, env=exec_env(m)).returncode


def run_exec(cmd: str, m) -> int:
    """Run cmd (through sh) with the payload on stdin; its exit status decides the message."""
    try:
        return spawn_exec(cmd, m)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidValue(f"cannot run --exec command: {reason}") from None


class _PrintThenAck:
    """Ctrl-C must not fall between printing a message and acking it: inside the section a
    SIGINT is only noted (an interrupted write is retried, PEP 475) and raised right after."""

    def __init__(self):
        import signal  # lazy: loaded when the command runs, not when the command tree is built
        import threading  # lazy: loaded when the command runs, not when the command tree is built

        self._signal = signal
        self._inside = False
        self._pending = False
        self._old = None
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum, frame):
        if self._inside:
            self._pending = True
        else:
            raise KeyboardInterrupt

    def __enter__(self):
        self._inside = True

    def __exit__(self, *exc):
        self._inside = False
        if self._pending and exc[0] is None:
            self._pending = False
            raise KeyboardInterrupt
        return False

    def restore(self):
        if self._old is not None:
            self._signal.signal(self._signal.SIGINT, self._old)
            self._old = None


def run_read(st, topic, start, inclusive, num, until_end, idle_timeout, fail_if_empty,
             hide_content, hex_, metadata, out):
    """read (and consume -m NonDurable): a reader from start; on a partitioned topic every
    partition, merged (client/reading.py). --until-end stops at the last message each
    partition held when the reader was made."""
    idle = _idle_ms(idle_timeout)
    reader = st.client().create_reader(topic, start, inclusive)
    if until_end:
        reader.stop_at_last()
    show = dict(hide_content=hide_content, hex_=hex_, metadata=metadata, with_id=True)
    return finish(read_into(reader, out, num, until_end, idle, show), fail_if_empty)


def read_into(reader, out, num: int, until_end: bool, idle, show: dict) -> int:
    """Print what the reader reads (num messages, 0: all; until_end: stop at the last one
    there was when it started; idle: how long to wait for the next) and say how many. A
    remote target's reader (cli/remote_run.py) has the same calls."""
    count = 0
    render.begin_messages(out, many=num != 1)
    while num == 0 or count < num:
        if until_end and not reader.has_message_available():
            break
        try:
            m = reader.read_next(idle)
        except Timeout:
            break
        render.message(m, out, **show)
        render.flush()
        count += 1
    return count
