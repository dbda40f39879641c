"""Guided lessons (`pulsarctl lesson list`, `pulsarctl lesson run NAME`): scenarios of Pulsar's
delivery semantics, each run step by step on a private store with a simulated clock.

model.py says what a lesson is, catalog.py holds the lessons, runner.py runs one."""
from __future__ import annotations

from pulsarctl.errors import NotFound
from pulsarctl.lessons.catalog import LESSONS
from pulsarctl.lessons.model import Lesson

__all__ = ["LESSONS", "Lesson", "find"]


def find(name: str) -> Lesson:
    for lesson in LESSONS:
        if lesson.name == name:
            return lesson
    raise NotFound(f"no lesson named {name!r}",
                   hint="list them with `pulsarctl lesson list`")
