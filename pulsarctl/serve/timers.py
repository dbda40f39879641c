"""serve runs the timers while it holds the daemon lock: nack delays, ack timeouts, delayed
delivery, lease ends, TTL and retention fire on time for every subscription, also those no wire
consumer fetches (a waiting consumer only fires its own subscription's, lazily, when it polls).

serve is then the store's active daemon (pulsarctl/daemon.py): the same lock, the same tick, the
same daemon.json, so `pulsarctl daemon status` names serve's pid. When another process holds the
lock (a `pulsarctl daemon`, another serve), serve waits as a standby would and takes over within
RETRY_S of its stopping. Each tick runs on the broker's worker thread (Server.call), between the
wire's own broker calls; when it fired something, the waiting wire consumers are woken at once.
"""
from __future__ import annotations

import asyncio
import os

from pulsarctl import daemon as daemons
from pulsarctl.serve.consumers import IDLE_POLL_S

RETRY_S = 2.0   # how often serve, without the lock, tries to take it


class Timers:
    def __init__(self, server, tick_s: float = daemons.DEFAULT_TICK_S,
                 retry_s: float = RETRY_S):
        self.server = server
        self.store = server.broker.path
        self.daemon = daemons.Daemon(server.broker, self.store, tick_s)
        self.retry_s = retry_s
        self.fd = None
        self._task = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop ticking. The lock is let go of in release(), once the worker thread is idle
        (Server.stop), so no tick in flight writes daemon.json after it was removed."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            daemons.step_down(self.store, fd)

    async def _run(self) -> None:
        log = self.server.log
        try:
            await self._take_lock()
        except OSError as exc:
            log(f"timers: cannot use {daemons.paths(self.store)['lock']} ({exc.strerror}); "
                "serve runs without them (a waiting consumer still fires its own)")
            self.server.idle_poll_s = IDLE_POLL_S   # a waiting consumer then fires its own
            return
        log(f"timers: serve (pid {os.getpid()}) holds the daemon lock and fires the timers "
            f"every {self.daemon.tick_s:g}s")
        while True:
            try:
                fired = await self.server.call(self.daemon.tick)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a server never stops serving over a failed tick
                log(f"timers: tick failed: {type(exc).__name__}: {exc}")
                fired = 0
            if fired:
                self.server.kick()
            await asyncio.sleep(self.daemon.tick_s)

    async def _take_lock(self) -> None:
        """Hold the lock: at once, or, as a standby daemon, once its holder lets go."""
        fd = daemons.try_lock(self.store)
        if fd is None:
            holder = daemons.lock_holder(self.store)
            self.server.log(f"timers: another process (pid {holder or 'unknown'}) holds the "
                            "daemon lock and runs them; serve takes over when it stops")
            marker = daemons.stand_by(self.store)
            try:
                while fd is None:
                    await asyncio.sleep(self.retry_s)
                    fd = daemons.try_lock(self.store)
            finally:
                daemons.stop_standing_by(marker)
        self.fd = fd
        daemons.took_over(self.store)
