"""What a lesson is, as data: steps (a real pulsarctl command line, what Pulsar did, why, the
rule it follows, and where pulsarctl goes beyond Pulsar) and a closing question the learner
checks with `explain`, with the facts its answer holds.

Lessons are records, not code, so the test suite can run every one of them (`lesson run NAME
--yes`) and a step that stops working is caught as a failing test."""
from __future__ import annotations

import shlex
from typing import NamedTuple, Optional

# The simulated time every lesson starts at: fixed, so message ids, deadlines and the texts
# the lessons print are the same on every run.
START = "2026-01-01T10:00:00Z"


class Look(NamedTuple):
    """The subscription whose state picture follows a step."""
    topic: str
    subscription: str


class Step(NamedTuple):
    argv: tuple[str, ...]     # the command line after `pulsarctl`, as the learner types it
    what: str                 # line 1: what Pulsar did
    why: str                  # line 2: why it did that
    rule: str                 # the rule cited (Pulsar's class, setting or table)
    look: Optional[Look]      # the picture shown after it; None before the subscription exists
    exit_code: int = 0        # what the command must exit with (4: a refusal the lesson shows)
    # Where pulsarctl departs from Pulsar here (a stronger guarantee, a different default), said
    # on a line of its own, so a learner never takes pulsarctl's behaviour for Pulsar's rule.
    ours: str = ""


class Question(NamedTuple):
    """The closing question, answered by the message's life story (`explain`): answer holds the
    key facts that story must show (an id, a count, a consumer, a time, a reason), so a test
    checks that the command the lesson suggests really answers the question."""
    text: str
    message_id: str
    topic: str
    subscription: Optional[str] = None
    answer: tuple[str, ...] = ()

    def explain_argv(self) -> list[str]:
        """The command that answers it: the message's life story."""
        argv = ["explain", self.message_id, "-t", self.topic]
        return argv + (["-s", self.subscription] if self.subscription else [])


class Lesson(NamedTuple):
    name: str
    title: str                # the one-line summary `lesson list` shows
    steps: tuple[Step, ...]
    question: Question


_DEFAULT = object()


class Builder:
    """Writes a lesson's steps with little noise: the command as one string (split as a shell
    would), and the subscription pictured after it defaulting to the lesson's."""

    def __init__(self, topic: str, subscription: str):
        self.look = Look(topic, subscription)
        self.steps: list[Step] = []

    def step(self, command: str, what: str, why: str, rule: str, *, look=_DEFAULT,
             exit_code: int = 0, ours: str = "") -> None:
        if look is _DEFAULT:
            look = self.look
        elif isinstance(look, tuple) and look is not None:
            look = Look(*look)
        self.steps.append(Step(tuple(shlex.split(command)), what, why, rule, look, exit_code,
                               ours))

    def simulate(self) -> None:
        """Every lesson's first step: the store's clock is simulated, so it moves only when a
        step moves it."""
        self.step(f"clock simulate --at {START}",
                  "The lesson's store now runs on a simulated clock; it moves only with "
                  "`clock advance`.",
                  "Redelivery delays, ack timeouts and delayed messages then fire exactly when a "
                  "step says, with no waiting.",
                  "pulsarctl: one clock per store, injected into the broker",
                  look=None,
                  ours="Pulsar has no such clock: its timers run on the broker's and the "
                       "clients' wall clocks.")

    def lesson(self, name: str, title: str, question: Question) -> Lesson:
        return Lesson(name, title, tuple(self.steps), question)
