"""Issue 28, item 2: differential tests. A hypothesis state machine draws random sequences of
operations of the real Python client (producers with keys, properties, batching on and off and
deliver-after; consumers of all four types, several at once, Key_Shared policies; receive, ack,
cumulative ack, negative ack, redeliver-unacknowledged, seek by id and by time, close and
reconnect, unsubscribe; readers; admin reads of topic stats and internal stats) and runs each
operation on the real Apache Pulsar standalone and then on `pulsarctl serve`, in lockstep. What
each side observed is compared after every operation (compare.py says what is compared where
Pulsar's choice depends on timing); the first difference fails the sequence, with the
operations so far and what each side answered, and hypothesis shrinks it. A difference that is
one of pulsarctl's deliberate stronger behaviours is let through by compare.STRONGER only.

    ORACLE_SEQUENCES   sequences to run (default 12: a few minutes); by hand 500 or more
    ORACLE_SEED        the seed (default 28): the same sequences on every run
    ORACLE_STEPS       operations per sequence (default 30)
    ORACLE_SHRINK      0: report a failing sequence as drawn, without shrinking it
    ORACLE_JOURNAL     a file each sequence's operations and answers are appended to
    ORACLE_REAL        "pulsar://127.0.0.1:6650 http://127.0.0.1:8080": a standalone already
                       running in this namespace (else the session's real_pulsar fixture)
    ORACLE_SERVE       the same for a `pulsarctl serve` already running (else one is started
                       on a store of its own)

Run (inside the lane's namespace):
    tests/oracle/pulsar.sh netns .venv/bin/python -m pytest -m oracle \\
        tests/oracle/test_differential.py -p no:cacheprovider
"""
from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine, rule, run_state_machine_as_test,
)

import compare
from compare import Context
from lockstep import PATIENCE_S, Side, TIMER_SLACK_S
from serve_procs import start_serve, stop_all

SEQUENCES = int(os.environ.get("ORACLE_SEQUENCES", "12"))
SEED = int(os.environ.get("ORACLE_SEED", "28"))
STEPS = int(os.environ.get("ORACLE_STEPS", "30"))
SHRINK = os.environ.get("ORACLE_SHRINK", "1") != "0"
JOURNAL = os.environ.get("ORACLE_JOURNAL")

TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")
SUBS = ("s0", "s1")
CONSUMER_NAMES = ("c0", "c1", "c2", "c3", "c4")
PRODUCER_NAMES = ("p0", "p1", "p2")
READER_NAMES = ("r0", "r1")
KEYS = (None, None, "k0", "k1", "k2", "k3")
# deliver_after, ms: mostly none; 100 ms (under the broker's tick: delivered at once); 1.5 s
# (held, then due: the machine waits for it before it looks); 10 minutes (held throughout)
DELAYS = (None,) * 12 + (100, 1500, 600_000, 600_000)
QUEUES = (1, 2, 5, 1000)
NACK_DELAYS_MS = (100, 200, 300)
STICKY = ([(0, 32767)], [(32768, 65535)], [(0, 65535)], [(0, 16383), (49152, 65535)],
          [(16384, 49151)])
# Pulsar switches a Failover subscription's active consumer this long after a change
# (activeConsumerFailoverDelayTimeMillis).
FAILOVER_DELAY_S = 1.0
SINGLE = ("Exclusive", "Failover")


class Lockstep(RuleBasedStateMachine):
    """Both targets, and the model of what the sequence has made (what both agreed on)."""

    targets: tuple = ()     # ((service_url, web_url) of real Pulsar, of serve), set by the test

    def __init__(self):
        super().__init__()
        topic = f"persistent://public/default/diff-{uuid.uuid4().hex[:12]}"
        (real_url, real_web), (our_url, our_web) = self.targets
        self.real = Side("real", real_url, real_web, topic)
        self.ours = Side("serve", our_url, our_web, topic)
        self.sides = (self.real, self.ours)
        self.topic = topic
        self.producers: dict[str, bool] = {}        # name -> batching
        self.consumers: dict[str, tuple] = {}       # name -> (subscription, type)
        self.readers: set[str] = set()
        # Shared consumers that had another consumer beside them: what their receiver queue
        # holds is the dispatcher's race, so they are only ever drained with the others
        self.mixed: set[str] = set()
        # per subscription, the messages whose redelivery counts pulsarctl kept when its last
        # consumer left (compare.STRONGER "counts-outlive-consumers")
        self.kept: dict[str, set] = {}
        self.tags = 0
        self.batches = False      # a batch entry was published
        self.journal: list[str] = [f"topic {topic}"]
        self.failed = False
        self.pool = ThreadPoolExecutor(2)

    # ----- helpers -----
    def note(self, line: str) -> None:
        self.journal.append(line)

    def check(self, what: str, diff: str | None) -> None:
        if diff is None:
            return
        self.failed = True
        raise AssertionError(
            f"real Pulsar and serve differ at {what}\n  {diff}\n\nthe sequence so far:\n  "
            + "\n  ".join(self.journal))

    def both(self, what: str, fn: str, *args, ctx: Context | None = None):
        a = getattr(self.real, fn)(*args)
        b = getattr(self.ours, fn)(*args)
        self.note(f"{what} -> real {a!r}, serve {b!r}")
        self.check(what, compare.value(a, b, ctx or Context(fn)))
        return a

    def settle(self) -> None:
        """Known timers passed and dispatch still, on both sides at once."""
        list(self.pool.map(lambda s: s.settle(), self.sides))

    def wait_due(self) -> None:
        list(self.pool.map(lambda s: s.wait_due(), self.sides))

    def members(self, sub: str) -> list[str]:
        return sorted(c for c, (s, _) in self.consumers.items() if s == sub)

    def sub_type(self, sub: str) -> str | None:
        for s, t in self.consumers.values():
            if s == sub:
                return t
        return None

    def single_stream(self, cname: str) -> bool:
        """What cname gets is one stream whose order Pulsar decides alone. Not Key_Shared, even
        with one consumer: a new entry whose key has nothing to replay may overtake replayed
        entries of other keys, depending on whether the dispatcher's read at the tail was
        pending when they were redelivered and on when the client gave permits back."""
        sub, t = self.consumers[cname]
        return t in SINGLE or (t == "Shared" and len(self.members(sub)) == 1
                               and cname not in self.mixed)

    def redeliverable(self, cname: str) -> bool:
        """Not a Shared consumer with others beside it: the C++ client keeps what its queue
        holds when it asks for redelivery, and which consumer a rewound message then lands on,
        before or after the next one asks, is the dispatcher's race (so are its copies and
        redelivery counts). Nor one that had company: which copies its queue keeps is the
        race of then."""
        sub, t = self.consumers[cname]
        return t != "Shared" or (len(self.members(sub)) == 1 and cname not in self.mixed)

    def held(self, cname: str | None = None) -> list[str]:
        """Tags held (received, not acked or nacked) on both sides: by consumer, or by anyone."""
        def of(side):
            slots = [side.consumers[cname]] if cname else side.consumers.values()
            return {t for s in slots for t in s.held}
        if cname and cname not in self.real.consumers:
            return []
        return sorted(of(self.real) & of(self.ours), key=lambda t: int(t[1:]))

    def ctx(self, op: str, sub: str | None = None) -> Context:
        return Context(op, self.sub_type(sub) if sub else None,
                       frozenset(self.kept.get(sub, ())), self.batches)

    def left(self, sub: str) -> None:
        """A consumer of sub went away."""
        if not self.members(sub):
            self.kept.setdefault(sub, set()).update(f"m{i}" for i in range(self.tags))
        self.failover_changed(sub)

    def failover_changed(self, sub: str) -> None:
        if self.sub_type(sub) == "Failover" and self.members(sub):
            for s in self.sides:
                s.expect_timer(FAILOVER_DELAY_S)

    # ----- the one rule: an operation drawn by weight among those that can run -----
    @rule(data=st.data())
    def step(self, data):
        choices = Choices(data.draw(STEP_DRAWS, label="step"))
        ops = [op for op, weight, can in OPERATIONS if can(self) for _ in range(weight)]
        getattr(self, pick(choices, ops, label="operation"))(choices)

    # ----- producers -----
    def create_producer(self, data):
        batching = pick(data, (False, True), label="batching")
        name = PRODUCER_NAMES[len(self.producers)]
        if self.both(f"create_producer {name} batching={batching}", "create_producer", name,
                     batching) == "ok":
            self.producers[name] = batching

    def send(self, data):
        pname = pick(data, sorted(self.producers), label="producer")
        n = pick(data, range(1, 5), label="messages")
        specs = []
        for _ in range(n):
            tag = f"m{self.tags}"
            self.tags += 1
            key = pick(data, KEYS, label="key")
            okey = pick(data, (None,) * 5 + ("o0", "o1"), label="ordering key")
            props = (("p", tag),) if pick(data, (False, True), label="properties") else ()
            after = pick(data, DELAYS, label="deliver_after")
            specs.append((tag, key, okey, props, after))
            if after and after < 60_000:
                for s in self.sides:
                    s.expect_timer(after / 1000)
        batched = self.producers[pname]
        got = self.both(f"send {pname} batched={batched} {specs}", "send", pname, batched, specs)
        self.batches = self.batches or any(isinstance(x, tuple) and x[1] >= 0 for x in got)

    # ----- consumers -----
    def subscribe(self, data):
        free = [c for c in CONSUMER_NAMES if c not in self.consumers]
        cname = pick(data, free, label="consumer")
        sub = pick(data, SUBS, label="subscription")
        type_ = pick(data, TYPES, label="type")
        earliest = pick(data, (True, True, True, False), label="earliest")
        queue = pick(data, QUEUES, label="receiver queue")
        nack = pick(data, NACK_DELAYS_MS, label="nack delay ms")
        ks = None
        if type_ == "Key_Shared":
            mode = pick(data, ("AutoSplit", "AutoSplit", "Sticky"),
                             label="key shared mode")
            ranges = pick(data, STICKY, label="ranges") if mode == "Sticky" \
                else None
            ks = (mode, ranges, pick(data, (False, True), label="out of order"))
        args = (cname, sub, type_, earliest, queue, nack, ks)
        # What earlier operations set going (the flow permits a receive gave back) reaches the
        # consumers there before a new one changes who gets what (a Failover switch, a Shared
        # or Key_Shared share): a loaded broker may otherwise still be reading for them.
        self.settle()
        if self.both(f"subscribe {args}", "subscribe", *args) == "ok":
            self.consumers[cname] = (sub, type_)
            if type_ == "Shared" and len(self.members(sub)) > 1:
                self.mixed.update(self.members(sub))
            self.failover_changed(sub)

    def _receive(self, cname: str, n: int) -> None:
        self.wait_due()
        a = self.real.receive(cname, n)
        b = self.ours.receive(cname, n, must=len(a))
        if len(b) > len(a):   # real was slower to deliver what it had: let it catch up
            more = len(b) - len(a)
            a += self.real.receive(cname, more, must=more)
        sub, t = self.consumers[cname]
        ctx = self.ctx("receive", sub)
        self.note(f"receive {cname} ({sub}, {t}) up to {n} -> real {[g.tag for g in a]}, "
                  f"serve {[g.tag for g in b]}")
        self.check(f"receive {cname} up to {n}", compare.stream(a, b, ctx))

    def receive(self, data):
        cname = pick(data, 
            [c for c in sorted(self.consumers) if self.single_stream(c)], label="consumer")
        self._receive(cname, pick(data, range(1, 6), label="up to"))

    def _drain(self, side: Side, names: list, must: int = 0) -> dict:
        got = {c: [] for c in names}
        deadline = time.monotonic() + PATIENCE_S
        while True:
            progress = False
            for c in names:
                g = side.receive(c, 1000)
                got[c] += g
                progress = progress or bool(g)
            total = sum(len(v) for v in got.values())
            if not progress and (total >= must or time.monotonic() > deadline):
                return got

    def drain(self, data):
        """Receive on every consumer of a subscription until none gets more."""
        sub = pick(data, sorted({s for s, _ in self.consumers.values()}),
                        label="subscription")
        names = self.members(sub)
        t = self.sub_type(sub)
        self.wait_due()
        a = self._drain(self.real, names)
        b = self._drain(self.ours, names, must=sum(len(v) for v in a.values()))
        na, nb = (sum(len(v) for v in x.values()) for x in (a, b))
        if nb > na:
            more = self._drain(self.real, names, must=nb - na)
            for c in names:
                a[c] += more[c]
        self.note(f"drain {sub} ({t}) -> real {_tags(a)}, serve {_tags(b)}")
        ctx = self.ctx("drain", sub)
        if t == "Key_Shared":
            diff = compare.per_key(a, b, ctx)
        elif t in SINGLE or (len(names) == 1 and names[0] not in self.mixed):
            diff = compare.per_consumer(a, b, ctx)
        else:
            diff = compare.union(a, b, ctx)
        self.check(f"drain {sub}", diff)

    def ack(self, data):
        tag = pick(data, self.held(), label="message")
        by_id = pick(data, (False, True), label="by id")
        self.both(f"ack {tag} by_id={by_id}", "ack", tag, by_id)

    def ack_cumulative(self, data):
        cname = pick(data, [c for c in sorted(self.consumers) if self.held(c)],
                          label="consumer")
        tag = pick(data, self.held(cname), label="message")
        self.both(f"ack_cumulative {cname} {tag}", "ack_cumulative", cname, tag)

    def nack(self, data):
        tag = pick(data, self.held(), label="message")
        self.both(f"nack {tag}", "nack", tag)
        # The redelivery comes when the client's nack timer fires: whether a message sent
        # meanwhile reaches the consumer before it or after is timing (on Exclusive and Failover
        # the C++ client rewinds the whole subscription and keeps what its queue holds, so a
        # later message can come before the earlier ones). Let it happen on both sides first.
        self.settle()

    def redeliver_unacknowledged(self, data):
        cname = pick(data, [c for c in sorted(self.consumers) if self.redeliverable(c)],
                     label="consumer")
        self.settle()
        self.both(f"redeliver_unacknowledged {cname}", "redeliver", cname)
        # an ack sent right after lands before the redelivery goes out or after it, by timing
        self.settle()

    def seek_targets(self, data, with_time: bool = True):
        sent = [f"m{i}" for i in range(self.tags)
                if f"m{i}" in self.real.ids and f"m{i}" in self.ours.ids]
        # a time just before the first message of an entry: the publish time is the entry's
        firsts = [t for t in sent if self.real.ids[t].batch_index() <= 0]
        kinds = ["earliest", "latest"] + (["id"] if sent else []) \
            + (["before", "now"] if with_time and firsts else ["now"] if with_time else [])
        kind = pick(data, kinds, label="seek to")
        arg = None
        if kind == "id":
            arg = pick(data, sent, label="message")
        elif kind == "before":
            arg = pick(data, firsts, label="message")
        return (kind, arg)

    def seek(self, data):
        cname = pick(data, sorted(self.consumers), label="consumer")
        target = self.seek_targets(data)
        self.settle()
        if self.both(f"seek {cname} {target}", "seek", cname, target) == "ok":
            # a reset cursor forgets the counts, on both (the consumers are disconnected)
            sub = self.consumers[cname][0]
            self.kept.pop(sub, None)
            # ... and reconnect: a Failover subscription's active consumer is read for again
            # only after the failover delay
            self.failover_changed(sub)
        # What the broker sends again after the reset goes out as the consumer reconnects: an
        # ack or nack sent meanwhile lands before it or after it by timing. Let it go out.
        self.settle()

    def close(self, data):
        cname = pick(data, sorted(self.consumers), label="consumer")
        self.settle()
        self.both(f"close {cname}", "close", cname)
        sub, _ = self.consumers.pop(cname)
        self.mixed.discard(cname)
        self.left(sub)

    def unsubscribe(self, data):
        cname = pick(data, sorted(self.consumers), label="consumer")
        self.settle()
        if self.both(f"unsubscribe {cname}", "unsubscribe", cname) == "ok":
            sub, _ = self.consumers.pop(cname)
            self.mixed.discard(cname)
            self.kept.pop(sub, None)

    # ----- readers -----
    def create_reader(self, data):
        inclusive = pick(data, (False, True), label="inclusive")
        rname = [r for r in READER_NAMES if r not in self.readers][0]
        start = self.seek_targets(data, with_time=False)
        if self.both(f"create_reader {rname} {start} inclusive={inclusive}", "create_reader",
                     rname, start, inclusive) == "ok":
            self.readers.add(rname)

    def read(self, data):
        rname = pick(data, sorted(self.readers), label="reader")
        n = pick(data, range(1, 6), label="up to")
        a = self.real.read(rname, n)
        b = self.ours.read(rname, n, must=len(a))
        if len(b) > len(a):
            more = len(b) - len(a)
            a += self.real.read(rname, more, must=more)
        self.note(f"read {rname} up to {n} -> real {[g.tag for g in a]}, "
                  f"serve {[g.tag for g in b]}")
        self.check(f"read {rname}", compare.stream(a, b, Context("read", "Exclusive")))

    def has_message_available(self, data):
        rname = pick(data, sorted(self.readers), label="reader")
        self.both(f"has_message_available {rname}", "has_message_available", rname)

    def reader_seek(self, data):
        rname = pick(data, sorted(self.readers), label="reader")
        target = self.seek_targets(data)
        self.both(f"reader_seek {rname} {target}", "reader_seek", rname, target)

    def close_reader(self, data):
        rname = pick(data, sorted(self.readers), label="reader")
        self.both(f"close_reader {rname}", "close_reader", rname)
        self.readers.discard(rname)

    # ----- admin reads -----
    def compare_stats(self, what: str) -> None:
        self.settle()
        deadline = time.monotonic() + PATIENCE_S
        while True:   # acks reach the broker grouped: let both sides' answers converge
            a, b = self.real.stats(), self.ours.stats()
            diff = compare.stats(a, b, self.ctx("stats"))
            if diff is None or time.monotonic() > deadline:
                break
            time.sleep(TIMER_SLACK_S)
        self.note(f"{what} -> real {a}, serve {b}")
        self.check(what, diff)

    def stats(self, data):
        self.compare_stats("stats")

    def teardown(self):
        try:
            if not self.failed:
                self.compare_stats("final stats")
        finally:
            for s in self.sides:
                s.close_all()
            self.pool.shutdown()
            if JOURNAL:
                with open(JOURNAL, "a") as f:
                    f.write("\n".join(self.journal + ["", ""]))


# (operation, weight, when it can run). One rule draws among them by weight (hypothesis would
# otherwise draw the rules evenly, and its swarm testing leaves many sequences without sends).
# The first ones are what a shrunk sequence tends to: the cheap ones.
OPERATIONS = (
    ("send", 6, lambda m: m.producers),
    ("create_producer", 2, lambda m: len(m.producers) < len(PRODUCER_NAMES)),
    ("subscribe", 3, lambda m: len(m.consumers) < 4),
    ("receive", 8, lambda m: any(m.single_stream(c) for c in m.consumers)),
    ("drain", 3, lambda m: m.consumers),
    ("ack", 6, lambda m: m.held()),
    ("ack_cumulative", 2, lambda m: any(m.held(c) for c in m.consumers)),
    ("nack", 3, lambda m: m.held()),
    ("redeliver_unacknowledged", 2, lambda m: any(m.redeliverable(c) for c in m.consumers)),
    ("seek", 2, lambda m: m.consumers),
    ("close", 2, lambda m: m.consumers),
    ("unsubscribe", 1, lambda m: m.consumers),
    ("create_reader", 1, lambda m: len(m.readers) < len(READER_NAMES)),
    ("read", 2, lambda m: m.readers),
    ("has_message_available", 1, lambda m: m.readers),
    ("reader_seek", 1, lambda m: m.readers),
    ("close_reader", 1, lambda m: m.readers),
    ("stats", 1, lambda m: True),
)


# Every step draws the same number of integers up front, and its operation takes its choices
# from them: what the targets answered decides which operation runs and how many choices it
# uses (a send of four messages, a subscribe of a Key_Shared consumer), and hypothesis requires
# the same draws, in shape, wherever two test cases share a prefix (FlakyStrategyDefinition).
MAX_CHOICES = 24      # the most an operation uses: a send of four messages takes 19
STEP_DRAWS = st.tuples(*[st.integers(0, 999)] * MAX_CHOICES)


class Choices:
    """One step's draws, taken in turn."""

    def __init__(self, drawn: tuple):
        self.left = list(drawn)

    def take(self) -> int:
        assert self.left, f"an operation used more than MAX_CHOICES ({MAX_CHOICES}) choices"
        return self.left.pop(0)


def pick(choices: Choices, options, label: str | None = None):
    """One of options, by one of the step's drawn integers (label: what it picks, for the
    reader of the code; the journal says what was picked)."""
    options = list(options)
    return options[choices.take() % len(options)]


def _tags(d: dict) -> dict:
    return {c: [g.tag for g in gs] for c, gs in d.items()}


def _endpoint(env: str):
    v = os.environ.get(env)
    return tuple(v.split()) if v else None


@pytest.fixture(scope="module")
def targets(request, tmp_path_factory):
    real = _endpoint("ORACLE_REAL")
    if real is None:
        rp = request.getfixturevalue("real_pulsar")
        real = (rp.service_url, rp.web_url)
    ours = _endpoint("ORACLE_SERVE")
    started = []
    if ours is None:
        store = tmp_path_factory.mktemp("diff-serve") / "store"
        s = start_serve(dict(os.environ, PULSARCTL_STORE=str(store), NO_COLOR="1"))
        started.append(s)
        ours = (s.url, s.http_url)
    yield real, ours
    stop_all(started)


def test_real_pulsar_and_serve_agree_on_random_sequences(targets):
    Lockstep.targets = targets
    compare.USED.clear()
    try:
        _run()
    finally:
        if JOURNAL:
            with open(JOURNAL, "a") as f:
                f.write(f"stronger behaviours let through: {dict(compare.USED)}\n")


def _run():
    run_state_machine_as_test(
        seed(SEED)(Lockstep),
        settings=settings(max_examples=SEQUENCES, stateful_step_count=STEPS, deadline=None,
                          database=None, derandomize=False,
                          phases=(Phase.generate, Phase.target)
                          + ((Phase.shrink,) if SHRINK else ()),
                          suppress_health_check=list(HealthCheck)))
