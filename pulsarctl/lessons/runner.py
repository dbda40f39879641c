"""Runs a lesson: each step's command line on the lesson's private store, then the picture of
the subscription it is about. It prints nothing: it hands each step's outcome to its caller
(pulsarctl/cli/lesson_cmd.py renders them), and runs command lines through the `execute`
function it is given, so this package never imports the CLI."""
from __future__ import annotations

import os
import shlex
import tempfile
from typing import Callable, Iterator, NamedTuple, Optional

from pulsarctl.errors import InvalidValue, LessonFailed
from pulsarctl.lessons.model import Lesson, Step

def picture_argv(topic: str, sub: str) -> list[str]:
    """The command whose output is the state picture after a step: the cursor picture (each
    entry acked, pending for whom, awaiting redelivery and why, delayed, or backlog)."""
    return ["topics", "cursor", topic, "-s", sub]


class Outcome(NamedTuple):
    """What a command line did: its exit code and what it wrote."""
    code: int
    stdout: str
    stderr: str


# Runs `pulsarctl ARGV` (global options included) and returns its outcome.
Execute = Callable[[list[str]], Outcome]


class StepRun(NamedTuple):
    index: int                      # 1-based
    total: int
    step: Step
    command: str                    # as the learner types it: `pulsarctl ...`
    outcome: Outcome
    picture_command: Optional[str]
    picture: Optional[Outcome]

    @property
    def failed(self) -> bool:
        return (self.outcome.code != self.step.exit_code
                or (self.picture is not None and self.picture.code != 0))


def shown(argv: list[str] | tuple[str, ...]) -> str:
    """A command line as the learner would type it (quoted as a shell needs)."""
    return "pulsarctl " + shlex.join(argv)


def new_store(name: str, parent: str | None = None) -> str:
    """A new, empty store directory for one run of a lesson (never the user's store):
    <parent or the temporary directory>/pulsarctl-lesson-NAME-XXXX/store."""
    try:
        if parent:
            os.makedirs(parent, exist_ok=True)
        home = tempfile.mkdtemp(prefix=f"pulsarctl-lesson-{name}-", dir=parent)
    except OSError as exc:
        where = parent or tempfile.gettempdir()
        raise InvalidValue(f"cannot make the lesson's store under {where}: "
                           f"{exc.strerror or exc}",
                           hint="give --dir a directory you can write to") from None
    return os.path.join(home, "store")


def steps_of(lesson: Lesson) -> list[Step]:
    """The steps run: the lesson's. Its question's check (`explain ID -t TOPIC`) is left to
    the learner, after the question (run first, it would answer it before it is asked)."""
    return list(lesson.steps)


def run(lesson: Lesson, store: str, execute: Execute) -> Iterator[StepRun]:
    """Run the lesson's steps on store, yielding each as it ran. A step that did not end as
    the lesson says (a command's exit code, a picture that failed) is yielded, so it can be
    shown, and then stops the lesson with LessonFailed."""
    steps = steps_of(lesson)
    for i, step in enumerate(steps, 1):
        outcome = execute(["--store", store, *step.argv])
        picture_cmd = picture = None
        if step.look is not None and outcome.code == step.exit_code:
            argv = picture_argv(*step.look)
            picture_cmd = shown(argv)
            picture = execute(["--store", store, *argv])
        ran = StepRun(i, len(steps), step, shown(step.argv), outcome, picture_cmd, picture)
        yield ran
        if ran.failed:
            raise LessonFailed(_failure(lesson, ran))


def _failure(lesson: Lesson, ran: StepRun) -> str:
    if ran.outcome.code != ran.step.exit_code:
        cmd, got, want = ran.command, ran.outcome, ran.step.exit_code
    else:
        cmd, got, want = ran.picture_command, ran.picture, 0
    said = next((ln for ln in got.stderr.splitlines() if ln.strip()), "")
    return (f"lesson {lesson.name}, step {ran.index}: `{cmd}` exited {got.code}, not {want}"
            + (f" ({said})" if said else ""))

