"""Jobs nested in one write transaction (serve's group commits, Broker.publish_many and
Broker.ack_many): each job runs in a transaction nested in the outer one, with a Ctx of its
own, so a job that fails is undone alone and the others commit with the one fsync."""
from __future__ import annotations

from store import LedgerError, MapFullError, StoreError

from pulsarctl.broker.context import Ctx


def ack_jobs(ctx, jobs) -> list:
    """Broker.ack_many's transaction body: each (topics, subscription, ids, cumulative) ack in
    its own nested transaction (nested)."""
    from pulsarctl.broker.consuming import ack  # lazy: one-shot produce never loads it

    return [nested(ctx, ctx.now, ack, names, sub, list(ids), cumulative)
            for names, sub, ids, cumulative in jobs]


def nested(ctx, now, fn, *args):
    """fn(job's Ctx, *args) in a transaction nested in ctx's, with its own Ctx (nothing a
    failed job cached is seen by the next): its result, or its exception, undone alone. A
    store failure (a full map included, which write() grows and runs again) ends them all."""
    inner: list = []

    def job(txn):
        jc = Ctx(ctx.broker, txn, now, True)
        jc.hseq = ctx.hseq
        inner[:] = [jc]
        return fn(jc, *args)
    try:
        got = ctx.env.nested(ctx.txn, job)
    except (StoreError, LedgerError, MapFullError):
        raise
    except Exception as exc:
        return exc
    if inner:
        adopt(ctx, inner[0])
    return got


def adopt(ctx, inner) -> None:
    """A nested job committed: its history sequence and recorded events are the outer
    transaction's now (history.py)."""
    if inner.hseq is not None:
        ctx.hseq = inner.hseq
    if inner.events:
        ctx.events = (ctx.events or []) + inner.events
