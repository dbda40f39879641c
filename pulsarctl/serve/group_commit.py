"""Group commit: the SENDs that arrive while a publish is committing (from any producer, any
connection, any topic) are published together in one write transaction by the worker
(Broker.publish_many), then each gets its result; ACKs likewise, in a group commit of their own
(Broker.ack_many). A commit costs an fsync whatever it holds, so
under load each one carries many sends instead of one; an idle server commits a lone send at
once, never waiting for company.

Order is kept: jobs are published in the order they were handed in, and the commits run one
after the other on the broker's worker thread, so one producer's ids increase in its send order.
Nothing is answered before its commit: a job's future is set only after its commit returned."""
from __future__ import annotations

import asyncio


class GroupCommit:
    def __init__(self, call, commit_many):
        """call(fn, *args): an awaitable of fn(*args) run on the broker's worker thread
        (Server.call); commit_many(jobs): a list of results or exceptions, one per job, all
        committed in one transaction (Broker.publish_many, Broker.ack_many)."""
        self._call = call
        self._commit_many = commit_many
        self._pending: list = []     # (job, future), in arrival order
        self._task: asyncio.Task | None = None

    def submit(self, *job) -> asyncio.Future:
        """The job (commit_many's, as a tuple) with the next commit: a future of its result
        (publish's (producer name, ids), ack's count), or of its error."""
        fut = asyncio.get_running_loop().create_future()
        # An error nobody awaits (its connection closed first) is not logged as unretrieved.
        fut.add_done_callback(_retrieve)
        self._pending.append((job, fut))
        if self._task is None:
            self._task = asyncio.ensure_future(self._commit())
        return fut

    async def _commit(self):
        """Commit what is pending, then what arrived meanwhile, until nothing is left."""
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    results = await self._call(self._commit_many, [job for job, _ in batch])
                except asyncio.CancelledError:
                    for _, fut in batch + self._pending:
                        fut.cancel()
                    self._pending = []
                    raise
                except Exception as exc:   # commit_many answers per job; this is a last guard
                    results = [exc] * len(batch)
                for (_, fut), result in zip(batch, results):
                    if fut.done():
                        continue
                    if isinstance(result, BaseException):
                        fut.set_exception(result)
                    else:
                        fut.set_result(result)
        finally:
            self._task = None

    async def close(self):
        """Wait for the commits under way (the server is stopping)."""
        if self._task is not None:
            try:
                await self._task
            except asyncio.CancelledError:
                pass


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()
