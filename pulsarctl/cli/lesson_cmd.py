"""lesson list, lesson run NAME: guided scenarios of Pulsar's delivery semantics, each step a
real pulsarctl command line run on a private store with a simulated clock (the lessons are data
in pulsarctl/lessons/; its runner runs them, this module renders them)."""
from __future__ import annotations

import os
import shutil
from typing import Annotated, Optional

import typer

from pulsarctl.cli import render
from pulsarctl.cli.common import Output, fmt, state
from pulsarctl.cli.errmap import guarded

lesson = typer.Typer(help="Guided lessons on Pulsar's delivery semantics, each on a private "
                     "store with a simulated clock.", no_args_is_help=True)


@lesson.command("list", help="The lessons: name, number of steps and what each teaches.")
def list_(ctx: typer.Context, output: Output = None):
    # lazy: the lessons are built when a lesson command runs, not when the tree is built
    from pulsarctl.lessons import LESSONS

    doc = [{"name": x.name, "title": x.title, "steps": len(x.steps)} for x in LESSONS]
    render.data(doc, fmt(ctx, output), lambda d: render.table(
        ["name", "steps", "what it teaches"], [[r["name"], r["steps"], r["title"]] for r in d]))


@lesson.command("run", help="Run a lesson: each step's command is shown, run on the lesson's "
                "own store (never yours: --store and $PULSARCTL_STORE are ignored), followed by "
                "the picture of its subscription, what Pulsar did and why, and where pulsarctl "
                "goes beyond Pulsar. Enter goes to the "
                "next step, q stops; --yes (or -o json) runs every step without waiting. The "
                "lesson's store is kept so its closing question can be checked with `explain`.")
def run(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The lesson (see `pulsarctl lesson list`).",
                                        show_default=False)],
    yes: Annotated[bool, typer.Option("-y", "--yes", help="Run every step without waiting "
                                      "for Enter.")] = False,
    where: Annotated[Optional[str], typer.Option(
        "--dir", help="Make the lesson's store in this directory (default: the temporary "
        "directory).", metavar="DIR", show_default=False)] = None,
    clean: Annotated[bool, typer.Option("--clean", help="Remove the lesson's store when the "
                                        "lesson ends.")] = False,
    output: Output = None,
):
    # lazy: the lessons are built when a lesson command runs, not when the tree is built
    from pulsarctl.lessons import find, runner

    state(ctx).local_only()  # a lesson is a local store's, whatever the target (CLI.md)
    out = fmt(ctx, output)
    chosen = find(name)
    store = runner.new_store(chosen.name, where)
    execute = _in_process(ctx.find_root().command)
    try:
        if out == render.TEXT:
            _run_text(chosen, store, execute, runner, interactive=not yes)
        else:
            render.data(_run_doc(chosen, store, execute, runner), out)
    finally:
        if clean:
            shutil.rmtree(os.path.dirname(store), ignore_errors=True)
    if out == render.TEXT:
        _closing(chosen, store, clean)


# -- running a step's command line ----------------------------------------------------------
def _in_process(root):
    """Runs `pulsarctl ARGV` through the root command in this process, its output captured.

    In-process rather than a subprocess per step: a lesson runs some twenty command lines, and
    a new interpreter for each costs about 0.25 s on a quiet machine (the whole lesson suite
    of the tests, 8 lessons, would take most of a minute instead of seconds). It is the same
    command tree and the same error mapping (errmap.guarded) as the console script's; each
    command opens the store anew, as its own process would."""
    def execute(argv: list[str]):
        # lazy: the runner is loaded when a lesson runs
        from pulsarctl.lessons.runner import Outcome

        with render.captured() as (o, e):
            code = guarded(lambda: root.main(args=list(argv), prog_name="pulsarctl",
                                             standalone_mode=False), argv, _click_error)
        return Outcome(code, o.getvalue(), e.getvalue())
    return execute


def _click_error(exc) -> int | None:
    # click's own errors (a usage error in a lesson's command line): one line, their code.
    if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
        render.error_line(f"error: {exc.format_message()}")
        return exc.exit_code or 1
    return None


# -- rendering ------------------------------------------------------------------------------
def _run_text(chosen, store, execute, runner, interactive: bool) -> None:
    render.outln(f"Lesson {chosen.name}: {chosen.title}")
    render.outln(f"It runs on its own store with a simulated clock: {store}")
    render.outln("(your store is not touched; to type the commands yourself: "
                 f"export PULSARCTL_STORE={store})")
    for ran in runner.run(chosen, store, execute):
        _step_text(ran)
        if interactive and ran.index < ran.total and not ran.failed and not _next():
            render.outln("(stopped)")
            return


def _step_text(ran) -> None:
    render.outln()
    render.outln(f"== step {ran.index} of {ran.total} ==")
    render.outln(f"$ {ran.command}")
    _show(ran.outcome)
    if ran.picture is not None:
        render.outln(f"-- state: $ {ran.picture_command}")
        _show(ran.picture)
    render.outln(f"  Pulsar: {ran.step.what}")
    render.outln(f"  Why:    {ran.step.why} [{ran.step.rule}]")
    if ran.step.ours:
        # What is pulsarctl's own, on its own line: never to be read as Pulsar's rule.
        render.outln(f"  pulsarctl, not Pulsar: {ran.step.ours}")
    render.flush()


def _show(outcome) -> None:
    """A command's output as it printed it (already made safe by its own rendering): stdout,
    then what it said on stderr."""
    for text in (outcome.stdout, outcome.stderr):
        if text:
            render.out(text if text.endswith("\n") else text + "\n")


def _next() -> bool:
    """Waits for Enter (True) or q / end of input (False)."""
    render.err("-- Enter: next step, q: stop --")
    line = render.read_stdin_line()
    return bool(line) and line.strip().lower() not in ("q", "quit")


def _closing(chosen, store: str, clean: bool) -> None:
    q = chosen.question
    check = "pulsarctl --store " + store + " " + " ".join(q.explain_argv())
    render.outln()
    render.outln("== question ==")
    render.outln(q.text)
    if clean:
        render.outln("(its store was removed with --clean: run the lesson again without it to "
                     "check the answer with `pulsarctl explain`)")
    else:
        render.outln(f"Check it: {check}")
        render.outln(f"The lesson's store stays in {os.path.dirname(store)}; remove it when "
                     "done.")


def _run_doc(chosen, store, execute, runner) -> dict:
    steps = []
    for ran in runner.run(chosen, store, execute):
        steps.append({
            "step": ran.index, "command": ran.command, "exitCode": ran.outcome.code,
            "output": ran.outcome.stdout, "messages": ran.outcome.stderr,
            "pictureCommand": ran.picture_command,
            "picture": ran.picture.stdout if ran.picture is not None else None,
            "what": ran.step.what, "why": ran.step.why, "rule": ran.step.rule,
            "pulsarctl": ran.step.ours or None,
        })
    q = chosen.question
    return {"name": chosen.name, "title": chosen.title, "store": store, "steps": steps,
            "question": {"text": q.text, "check": runner.shown(q.explain_argv())}}
