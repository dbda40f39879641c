"""Data over the binary protocol, through the real pulsar-client library: a connection to the
target, producers, consumers and readers, their errors turned into pulsarctl's, their messages
into pulsarctl's Message (remote/messages.py).

A consumer's policy flags are the library's consumer configuration, for the life of the
command only, as in Pulsar (locally they are stored with the subscription): --ack-timeout,
--nack-delay, --max-redeliver-count with --dead-letter-topic and --initial-subscription-name
(the library's dead letter policy), --key-shared-policy sticky with --sticky-ranges. Retry
(--enable-retry, reconsume later) is done as Pulsar's Java client does it, the Python library
having none: the consumer also subscribes to the retry letter topic, and a message to retry
is published there (deliver after the delay) with REAL_TOPIC, ORIGIN_MESSAGE_ID, RECONSUMETIMES
and DELAY_TIME, or to the dead letter topic past --max-redeliver-count, then acknowledged.
What the library cannot do is refused before anything is sent (errors.LocalOnly): the nack and
ack-timeout backoffs, --ack-timeout-tick, a consumer priority, the consistent-hashing Key_Shared
selector (a broker setting in Pulsar)."""
from __future__ import annotations

import contextlib

from pulsarctl import clock as clocks, errors
from pulsarctl.clock import wall_ms
from pulsarctl.messages import MessageId, OutgoingMessage
from pulsarctl.names import (
    DELAY_TIME, ORIGIN_MESSAGE_ID, REAL_SUBSCRIPTION, REAL_TOPIC, RECONSUMETIMES, dlq_topic,
    parse_topic, retry_topic,
)
from pulsarctl.remote import credentials
from pulsarctl.remote.messages import from_client

SEND_TIMEOUT_S = 30    # the library's default send timeout
POLL_MS = 200          # a receive waits at most this long at a time: Ctrl-C stays prompt
MAX_RECONSUMETIMES = 16  # Java's RetryMessageUtil.MAX_RECONSUME_TIMES


def _logger(pulsar):
    """The library's log, to $PULSARCTL_CLIENT_LOG (a file) or nowhere: its errors come back
    as exceptions, said in one line. A file logger of the C++ library, not a Python logger: a
    Python logger is called from the library's threads, and one still logging while the
    interpreter exits aborts the process ("terminate called without an active exception")."""
    import os  # lazy: loaded when the command runs

    return pulsar.FileLogger(pulsar.LoggerLevel.Info if os.environ.get("PULSARCTL_CLIENT_LOG")
                             else pulsar.LoggerLevel.Error,
                             os.environ.get("PULSARCTL_CLIENT_LOG") or os.devnull)


def _pulsar():
    import pulsar  # lazy: only remote data commands load the client library (and its C++)

    return pulsar


@contextlib.contextmanager
def translated(target, what: str = ""):
    """pulsar-client's exceptions as pulsarctl's errors (each with its exit code)."""
    pulsar = _pulsar()
    try:
        yield
    except pulsar.Timeout:
        raise errors.RemoteUnavailable(
            f"no answer from {target.service_url} (context {target.name}) {what}".strip()) from None
    except (pulsar.ConnectError, pulsar.LookupError, pulsar.NotConnected) as exc:
        raise errors.RemoteUnavailable(f"cannot reach {target.service_url} (context "
                                       f"{target.name}): {_text(exc)}") from None
    except pulsar.TopicNotFound as exc:
        raise errors.TopicNotFound(f"topic not found {what}: {_text(exc)}".strip()) from None
    except pulsar.SubscriptionNotFound as exc:
        raise errors.SubscriptionNotFound(f"subscription not found {what}: {_text(exc)}") from None
    except pulsar.ConsumerBusy as exc:
        raise errors.ConsumerBusy(f"consumer busy {what}: {_text(exc)}",
                                  hint="another consumer holds the Exclusive subscription: "
                                       "use -t Shared, or another subscription") from None
    except pulsar.ProducerFenced as exc:
        raise errors.ProducerFenced(f"producer fenced {what}: {_text(exc)}") from None
    except pulsar.ProducerBusy as exc:
        raise errors.ProducerBusy(f"producer busy {what}: {_text(exc)}") from None
    except pulsar.TopicTerminated as exc:
        raise errors.TopicTerminated(f"topic terminated {what}: {_text(exc)}") from None
    except pulsar.AuthenticationError as exc:
        raise errors.AuthenticationFailed(f"authentication failed at {target.service_url}: "
                                          f"{_text(exc)}",
                                          hint="check the context's token or credentials") from None
    except pulsar.AuthorizationError as exc:
        raise errors.NotAuthorized(f"not authorized {what}: {_text(exc)}") from None
    except pulsar.MessageTooBig as exc:
        raise errors.MessageTooLarge(f"message too large for {target.service_url}: "
                                     f"{_text(exc)}", hint="send it with -c/--chunking") from None
    except pulsar.IncompatibleSchema as exc:
        raise errors.IncompatibleSchema(f"incompatible schema {what}: {_text(exc)}") from None
    except pulsar.CumulativeAcknowledgementNotAllowedError as exc:
        raise errors.CumulativeAckNotAllowed(f"{_text(exc)}") from None
    except pulsar.InvalidTopicName as exc:
        raise errors.InvalidTopicName(f"invalid topic name {what}: {_text(exc)}") from None
    except (pulsar.ProducerBlockedQuotaExceededError,
            pulsar.ProducerBlockedQuotaExceededException) as exc:
        raise errors.BacklogQuotaExceeded(f"backlog quota exceeded {what}: {_text(exc)}") from None
    except pulsar.ConsumerAssignError as exc:
        raise errors.ConsumerAssignError(f"{_text(exc)}") from None
    except pulsar.InvalidConfiguration as exc:
        raise errors.InvalidValue(f"invalid configuration {what}: {_text(exc)}") from None
    except pulsar.PulsarException as exc:
        raise errors.RemoteError(f"{type(exc).__name__} {what}: {_text(exc)}".strip()) from None


def _text(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _reachable(target) -> None:
    """Fail at once, in one line, when no host of the service URL accepts a connection: the
    library would retry for its whole operation timeout (30 s) before saying so."""
    import socket  # lazy: loaded when the command runs
    from urllib.parse import urlsplit  # lazy: loaded when the command runs

    url = target.service_url
    rest = url.split("://", 1)[1].split("/", 1)[0]
    default = 6651 if url.startswith("pulsar+ssl") else 6650
    reasons = []
    for hostport in rest.split(","):
        parts = urlsplit("//" + hostport)
        try:
            with socket.create_connection((parts.hostname, parts.port or default), timeout=10):
                return
        except OSError as exc:
            reasons.append(exc.strerror or str(exc))
    raise errors.RemoteUnavailable(f"cannot reach {url} (context {target.name}): "
                                   f"{'; '.join(dict.fromkeys(reasons)).lower()}")


class Connection:
    """One pulsar-client Client to the target's service URL, closed by close()."""

    def __init__(self, target):
        if not target.service_url:
            raise errors.UsageError(
                f"the context {target.name} has no service URL, which messaging needs",
                hint=f"add one: `pulsarctl context set {target.name} --service-url "
                     f"pulsar://HOST:6650` (or --service-url on the command line)")
        pulsar = _pulsar()
        self.target = target
        self.pulsar = pulsar
        kwargs = {"authentication": credentials.client_authentication(target),
                  "operation_timeout_seconds": 30, "logger": _logger(pulsar),
                  "tls_allow_insecure_connection": bool(target.get("tls-allow-insecure"))}
        if target.get("tls-trust-certs-file"):
            kwargs["tls_trust_certs_file_path"] = target.get("tls-trust-certs-file")
        _reachable(target)
        with translated(target):
            self.client = pulsar.Client(target.service_url, **kwargs)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- producing ---------------------------------------------------------------------------
    def producer(self, topic: str, **config) -> "Producer":
        # A string schema's producer takes text: the payload is sent as its UTF-8 text.
        text = type(config.get("schema")).__name__ == "StringSchema"
        with translated(self.target, f"on {topic}"):
            return Producer(self, topic, self.client.create_producer(topic, **config), text)

    # -- consuming ---------------------------------------------------------------------------
    def consumer(self, topics, subscription: str, **config) -> "Consumer":
        retry = config.pop("retry", None)
        names = topics
        if retry is not None and not hasattr(topics, "pattern"):
            names = ([topics] if isinstance(topics, str) else list(topics)) + [retry["topic"]]
        with translated(self.target, f"on {_shown(topics)}"):
            c = self.client.subscribe(names, subscription, **config)
        return Consumer(self, c, subscription, retry)

    def reader(self, topic: str, start: MessageId, inclusive: bool = False) -> "Reader":
        pulsar = self.pulsar
        if start == MessageId.earliest:
            sid = pulsar.MessageId.earliest
        elif start == MessageId.latest:
            sid = pulsar.MessageId.latest
        else:
            sid = pulsar.MessageId(start.partition, start.ledger_id, start.entry_id,
                                   start.batch_index)
        with translated(self.target, f"on {topic}"):
            r = self.client.create_reader(topic, sid, start_message_id_inclusive=inclusive)
        return Reader(self, r)


def _shown(topics) -> str:
    if hasattr(topics, "pattern"):
        return topics.pattern
    return topics if isinstance(topics, str) else ", ".join(topics)


def _mid(mid) -> MessageId:
    return MessageId(mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index())


class Producer:
    def __init__(self, conn: Connection, topic: str, producer, text: bool = False):
        self.conn, self.topic, self.producer = conn, topic, producer
        self.text = text

    def _body(self, m):
        if self.text:
            return m.payload.decode("utf-8", "replace") if isinstance(m.payload, bytes) \
                else m.payload
        return m.payload

    def producer_name(self) -> str:
        return self.producer.producer_name()

    def send_many(self, msgs) -> list[MessageId]:
        """Send OutgoingMessages asynchronously (the library batches them if it may), wait
        for every receipt, and return their ids in order; the first failure raises."""
        import threading  # lazy: loaded when the command runs

        results: list = [None] * len(msgs)
        failures: list = []
        left = [len(msgs)]
        all_done = threading.Event()
        lock = threading.Lock()

        def done(i):
            def callback(res, mid):
                if res == self.conn.pulsar.Result.Ok:
                    results[i] = _mid(mid)
                else:
                    failures.append((i, res))
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        all_done.set()
            return callback

        with translated(self.conn.target, f"sending to {self.topic}"):
            for i, m in enumerate(msgs):
                kwargs = _send_kwargs(m)
                self.producer.send_async(self._body(m), done(i), **kwargs)
        # Not producer.flush(): it waits without a bound, and a broker that keeps closing the
        # connection on a send error keeps the library reconnecting and resending for ever.
        # The receipts are awaited for the send timeout and a margin, then it is said.
        if msgs and not all_done.wait(SEND_TIMEOUT_S + 10):
            raise errors.RemoteUnavailable(
                f"no receipt from {self.conn.target.service_url} for {left[0]} message(s) sent "
                f"to {self.topic} within {SEND_TIMEOUT_S + 10} s; they may or may not be stored",
                hint=f"see the library's log: PULSARCTL_CLIENT_LOG=FILE pulsarctl ...")
        if failures:
            i, res = min(failures)
            raise _result_error(self.conn, res, self.topic)
        return results

    def stream(self, window: int) -> "Stream":
        return Stream(self, window)

    def send(self, m) -> MessageId:
        with translated(self.conn.target, f"sending to {self.topic}"):
            return _mid(self.producer.send(self._body(m), **_send_kwargs(m)))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.producer.close()


class Stream:
    """Messages sent one after another with at most `window` of them waiting for their
    receipts (a sliding window: the next is sent as soon as one comes back, so the sender never
    idles while a whole window drains); finish() waits for the rest and returns every id in
    order. The window is kept here, not by the library's blocking queue, which would block the
    sending thread inside the library."""

    def __init__(self, producer: Producer, window: int):
        import threading  # lazy: loaded when the command runs

        self.p, self.window = producer, window
        self.ids: list = []
        self.failures: list = []
        self.back = 0
        self.cond = threading.Condition()

    def _done(self, i):
        def callback(res, mid):
            with self.cond:
                if res == self.p.conn.pulsar.Result.Ok:
                    self.ids[i] = _mid(mid)
                else:
                    self.failures.append((i, res))
                self.back += 1
                self.cond.notify_all()
        return callback

    def _wait(self, most_in_flight: int) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.ids) - self.back <= most_in_flight
                                      or self.failures, SEND_TIMEOUT_S + 10):
                raise errors.RemoteUnavailable(
                    f"no receipt from {self.p.conn.target.service_url} for "
                    f"{len(self.ids) - self.back} message(s) sent to {self.p.topic} within "
                    f"{SEND_TIMEOUT_S + 10} s; they may or may not be stored",
                    hint="see the library's log: PULSARCTL_CLIENT_LOG=FILE pulsarctl ...")
            if self.failures:
                raise _result_error(self.p.conn, min(self.failures)[1], self.p.topic)

    def send(self, m) -> int:
        """Send m once fewer than `window` wait; returns how many receipts are back."""
        self._wait(self.window - 1)
        with self.cond:
            i = len(self.ids)
            self.ids.append(None)
        with translated(self.p.conn.target, f"sending to {self.p.topic}"):
            self.p.producer.send_async(self.p._body(m), self._done(i), **_send_kwargs(m))
        return self.back

    def finish(self) -> list[MessageId]:
        self._wait(0)
        return self.ids


def _send_kwargs(m) -> dict:
    kwargs = {}
    if m.properties:
        kwargs["properties"] = {str(k): str(v) for k, v in m.properties.items()}
    if m.key is not None:
        kwargs["partition_key"] = m.key
    if m.ordering_key is not None:
        okey = m.ordering_key
        kwargs["ordering_key"] = okey.decode("utf-8", "replace") if isinstance(okey, bytes) \
            else okey
    if m.event_time:
        kwargs["event_timestamp"] = m.event_time
    if m.deliver_at:
        kwargs["deliver_at"] = m.deliver_at
    if m.sequence_id is not None:
        kwargs["sequence_id"] = m.sequence_id
    return kwargs


def _result_error(conn, res, topic):
    """A send's failed Result as the error its exception would be."""
    pulsar = conn.pulsar
    name = str(res).rsplit(".", 1)[-1]
    exc_class = getattr(pulsar, name, None)
    try:
        with translated(conn.target, f"sending to {topic}"):
            if isinstance(exc_class, type) and issubclass(exc_class, Exception):
                raise exc_class(name)
            raise pulsar.PulsarException(name)
    except errors.PulsarctlError as exc:
        return exc
    return errors.RemoteError(f"sending to {topic} failed: {name}")


class Consumer:
    """A subscription's consumer: messages come as pulsarctl Messages; the library's own are
    kept until acknowledged, nacked or retried."""

    def __init__(self, conn: Connection, consumer, subscription: str, retry: dict | None):
        self.conn, self.consumer, self.subscription = conn, consumer, subscription
        self.retry = retry
        self._held: dict = {}
        self._producers: dict = {}
        self.name = consumer.consumer_name()

    def receive(self, timeout_ms: int | None):
        """The next message; errors.Timeout when none came within timeout_ms (None: wait)."""
        pulsar = self.conn.pulsar
        deadline = None if timeout_ms is None else clocks.monotonic() + timeout_ms / 1000
        while True:
            wait = POLL_MS if deadline is None else max(
                0, min(POLL_MS, int((deadline - clocks.monotonic()) * 1000)))
            try:
                with translated(self.conn.target, f"receiving on {self.subscription}"):
                    try:
                        raw = self.consumer.receive(wait)
                    except pulsar.Timeout:
                        raw = None
            except errors.RemoteUnavailable:
                raw = None
            if raw is not None:
                m = from_client(raw, self.subscription, self.name)
                self._held[m.id] = raw
                return m
            if deadline is not None and clocks.monotonic() >= deadline:
                raise errors.Timeout("no message was received")

    def _raw(self, m):
        return self._held.pop(m.id)

    def acknowledge(self, m) -> None:
        with translated(self.conn.target, "acknowledging"):
            self.consumer.acknowledge(self._raw(m))

    def acknowledge_ids(self, ids) -> None:
        """Acknowledge messages by their ids, received or not: a migration acknowledges the
        copies of what was acknowledged one by one at the source (Pulsar acknowledges any
        position of the subscription's topic; the acks are sent at close() at the latest)."""
        pulsar = self.conn.pulsar
        with translated(self.conn.target, "acknowledging"):
            for i in ids:
                self.consumer.acknowledge(pulsar.MessageId(i.partition, i.ledger_id, i.entry_id,
                                                           i.batch_index))

    def negative_acknowledge(self, m) -> None:
        with translated(self.conn.target, "nacking"):
            self.consumer.negative_acknowledge(self._raw(m))

    def reconsume_later(self, m, delay_ms: int) -> str:
        """Publish m to the retry letter topic (after delay_ms), or past the limit to the dead
        letter topic, with Pulsar's properties, then acknowledge it; returns where it went."""
        r = self.retry
        props = dict(m.properties_ or {})
        origin = str(parse_topic(m.topic).partitioned_topic_name)
        props.setdefault(REAL_TOPIC, origin)
        props.setdefault(ORIGIN_MESSAGE_ID, str(m.id))
        try:
            times = int(props.get(RECONSUMETIMES, "0")) + 1
        except ValueError:
            times = 1
        props[RECONSUMETIMES] = str(times)
        props[DELAY_TIME] = str(max(delay_ms, 0))
        if times > (r.get("max") or MAX_RECONSUMETIMES) and r.get("dlq"):
            target, where, deliver_at = r["dlq"], "dlq", 0
            props.setdefault(REAL_SUBSCRIPTION, self.subscription)
        else:
            target, where = r["topic"], "retry"
            deliver_at = wall_ms() + delay_ms if delay_ms > 0 else 0
        out = OutgoingMessage(m.payload, props, m.key, m.ordering_key_, m.event_time,
                              deliver_at)
        producer = self._producers.get(target)
        if producer is None:
            producer = self._producers[target] = self.conn.producer(target)
        producer.send(out)
        self.acknowledge(m)
        return where

    def close(self) -> None:
        for p in self._producers.values():
            p.close()
        with contextlib.suppress(Exception):
            self.consumer.close()


class Reader:
    def __init__(self, conn: Connection, reader):
        self.conn, self.reader = conn, reader

    def has_message_available(self) -> bool:
        with translated(self.conn.target, "reading"):
            return self.reader.has_message_available()

    def read_next(self, timeout_ms: int | None):
        pulsar = self.conn.pulsar
        deadline = None if timeout_ms is None else clocks.monotonic() + timeout_ms / 1000
        while True:
            wait = POLL_MS if deadline is None else max(
                0, min(POLL_MS, int((deadline - clocks.monotonic()) * 1000)))
            with translated(self.conn.target, "reading"):
                try:
                    raw = self.reader.read_next(wait)
                except pulsar.Timeout:
                    raw = None
            if raw is not None:
                return from_client(raw)
            if deadline is not None and clocks.monotonic() >= deadline:
                raise errors.Timeout("no message was received")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.reader.close()


def retry_config(topic: str, subscription: str, policy) -> dict | None:
    """The retry letter set-up of --enable-retry (None without it): the retry topic, the
    dead letter topic and the limit, Pulsar's defaults as the Java client derives them."""
    if not policy.enable_retry:
        return None
    return {"topic": policy.retry_letter_topic or retry_topic(topic, subscription),
            "dlq": policy.dead_letter_topic or dlq_topic(topic, subscription),
            "max": policy.max_redeliver_count}
