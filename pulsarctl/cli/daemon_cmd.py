"""pulsarctl daemon run|start|stop|status|run-once."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Annotated

import typer

from pulsarctl import clock as clocks
from pulsarctl.cli import render
from pulsarctl.cli.common import Output, fmt, state

daemon = typer.Typer(help="The timer daemon: one active per store, elected by a file lock.",
                     no_args_is_help=True)

Standby = Annotated[bool, typer.Option("--standby", help="Wait for the lock and take over when "
                                       "the active daemon stops.")]
Tick = Annotated[float, typer.Option("--tick", help="Seconds between ticks.")]


def _store(ctx) -> str:
    return state(ctx).broker().path


@daemon.command("run", help="Run the daemon in the foreground (exit 5 if one already runs).")
def run(ctx: typer.Context, standby: Standby = False, tick: Tick = 1.0):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.daemon import Daemon, check_tick

    check_tick(tick)
    st = state(ctx)
    return Daemon(st.broker(), _store(ctx), tick).run(standby)


@daemon.command("start", help="Start the daemon in the background; prints its pid once it holds "
                "the lock (or, with --standby, once it waits for it).")
def start(ctx: typer.Context, standby: Standby = False, tick: Tick = 1.0, output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.daemon import acquire, check_tick, open_log, paths, read_state, standbys
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.errors import LockBusy, PulsarctlError

    check_tick(tick)
    store = _store(ctx)
    if not standby:
        fd = acquire(store)
        if fd is None:
            raise LockBusy(f"a daemon already runs for the store at {store} "
                           f"(pid {read_state(store).get('pid')})",
                           hint="use --standby to start one that takes over when it stops")
        os.close(fd)
    # -P: the working directory must not shadow our packages (a directory named store would);
    # and a daemon keeps no directory busy.
    args = [sys.executable, "-P", "-m", "pulsarctl", "--store", store, "daemon", "run",
            "--tick", str(tick)]
    if standby:
        args.append("--standby")
    with open_log(store) as logf:  # 0600, as the store's files
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                start_new_session=True, cwd="/")
    deadline = clocks.monotonic() + 10
    while clocks.monotonic() < deadline:
        if proc.poll() is not None:
            raise PulsarctlError(f"the daemon exited at once (code {proc.returncode})",
                                 hint=f"see {paths(store)['log']}")
        if (proc.pid in standbys(store)) if standby else read_state(store).get("pid") == proc.pid:
            break
        if standby and read_state(store).get("pid") == proc.pid:
            break  # nobody held the lock: the standby became the active daemon
        clocks.sleep(0.02)
    else:
        raise PulsarctlError("the daemon did not take the lock within 10 s",
                             hint=f"see {paths(store)['log']}")
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.outln(str(proc.pid))
    else:
        render.data({"pid": proc.pid, "standby": standby}, out)


@daemon.command("stop", help="Stop the running daemon; returns when it has exited.")
def stop(ctx: typer.Context, output: Output = None):
    import signal  # lazy: loaded when the command runs, not when the command tree is built

    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.daemon import lock_holder, status
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.errors import PulsarctlError

    store = _store(ctx)
    st = status(store)
    pid = st.get("pid")
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.broker.consumers import process_start_time

    def exited() -> bool:
        # The daemon lets go of the lock a moment before its process ends: wait for both, so a
        # script running `stop` then `start` or removing the store never races the old daemon.
        if lock_holder(store) is not None:
            return False
        return not pid or process_start_time(pid) is None

    deadline = clocks.monotonic() + 15
    while clocks.monotonic() < deadline:
        if exited():
            break
        clocks.sleep(0.02)
    else:
        raise PulsarctlError(f"the daemon (pid {pid}) did not stop within 15 s",
                             hint=f"kill it with `kill {pid}`")
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.err(f"stopped daemon {pid}")
    else:
        render.data({"stopped": True, "pid": pid}, out)


@daemon.command("status", help="Is a daemon running (exit 3 if not)? pid, last tick, timers "
                "scheduled (every nack delay and ack timeout waiting) and due (left to fire at "
                "the last tick).")
def status_cmd(ctx: typer.Context, output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.daemon import status

    st = status(_store(ctx))
    render.data(st, fmt(ctx, output),
                lambda d: render.outln(f"running pid {d['pid']}, last tick {d['lastTick']}, "
                                       f"{d['timersScheduled']} timer(s) scheduled, "
                                       f"{d['timersDue']} due"))


@daemon.command("run-once", help="Fire everything due, then exit (for cron); works whether or "
                "not a daemon runs.")
def run_once(ctx: typer.Context, output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.daemon import timer_text

    b = state(ctx).broker()
    kinds = b.chores.fire_due(by_kind=True)
    swept = b.chores.sweep_consumers()
    pol = b.chores.enforce_policies()
    fired = sum(kinds.values())
    doc = {"fired": fired, "firedByKind": kinds, "disconnected": swept, **b.chores.timer_counts(),
           **pol}
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.err(f"fired {fired} timer(s) ({timer_text(kinds)}), disconnected {swept} "
                   f"consumer(s), expired {pol['expired']} message(s) by TTL, trimmed "
                   f"{pol['trimmedLedgers']} ledger(s); {doc['timersScheduled']} timer(s) "
                   "still scheduled")
    else:
        render.data(doc, out)
