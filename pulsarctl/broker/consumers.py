"""Consumers across processes: durable records (records.Consumer) with a pid (plus the process
start time, against pid reuse) or a lease, admission by subscription type, and disconnection of
the dead.

A consumer whose process is gone, or whose lease has ended, is disconnected: its pending
messages go back to dispatch (Shared) or the cursor rewinds (Exclusive, Failover), as when a
Pulsar consumer's connection drops, uncounted. Not the ones it nacked: nack timers are durable
here, so those stay held until their timer fires and brings them back counted.
"""
from __future__ import annotations

import os

from pulsarctl.broker import history, redelivery_state, subscriptions as subs, delayed
from pulsarctl.broker.subscription_state import state
from pulsarctl.broker.records import Consumer
from pulsarctl.errors import ConsumerBusy, ConsumerNotFound, UnsubscribeRefused
from pulsarctl.broker.dispatch import key_shared
from pulsarctl.broker.dispatch.failover import active
from pulsarctl.names import partition_index

DEFAULT_LEASE_MS = 5 * 60 * 1000


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of pid (clock ticks since boot), or None if there is no such
    process. Together with the pid it names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()
        # A zombie has closed its files: its connection is gone even before it is reaped.
        if fields[0] in (b"Z", b"X"):
            return None
        return int(fields[19])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, IndexError):
        try:
            os.kill(pid, 0)
            return 0
        except ProcessLookupError:
            return None
        except PermissionError:
            return 0


def this_process() -> tuple[int, int]:
    pid = os.getpid()
    return pid, process_start_time(pid) or 0


def alive(ctx, rec: Consumer) -> bool:
    pid = rec.pid
    if pid:
        start = process_start_time(pid)
        if start is not None and (start == rec.pid_start or not rec.pid_start):
            return True
        if not rec.lease_until:
            return False
    until = rec.lease_until
    return bool(until) and until > ctx.now


def _order(rec: Consumer):
    return rec.priority, rec.name


def records(ctx, c) -> list[Consumer]:
    return [Consumer.from_stored(v) for _, v in ctx.scan("consumer", c.id)]


def _get(ctx, c, name: str) -> Consumer | None:
    stored = ctx.get("consumer", c.id, name)
    return None if stored is None else Consumer.from_stored(stored)


def _put(ctx, c, rec: Consumer) -> None:
    ctx.put(rec.to_stored(), "consumer", c.id, rec.name)


def sweep(ctx, info, c) -> list[Consumer]:
    """Disconnect consumers that are gone; return the live ones, ordered by priority, name."""
    live, dead = [], []
    for rec in records(ctx, c):
        (live if alive(ctx, rec) else dead).append(rec)
    for rec in dead:
        remove(ctx, info, c, rec, remaining=len(live), why="gone")
    live.sort(key=_order)
    if dead:
        note_active(ctx, info, c, live)
        ctx.cursors.save(ctx.txn, c)
    return live


def remove(ctx, info, c, rec: Consumer | dict, remaining: int | None = None,
           why: str = "closed") -> None:
    """Disconnect one consumer and give its pending messages back. rec: its record (or the
    stored map of it); why: "closed" or "gone" (its process or lease ended), for the message
    history."""
    rec = Consumer.of(rec)
    if history.on(ctx):
        # What it held and had not nacked goes back (a nacked message waits for its timer).
        # A consumer of no process that is gone was held by its lease alone: pulsarctl's.
        lease = {"reason": f"consumer {rec.name}'s lease ended",
                 history.BEYOND: history.LEASE_NOTE} if why == "gone" and not rec.pid else {}
        history.record_many(ctx, info, [o for o, p in subs.pending_items(ctx, c.id)
                                        if p.consumer == rec.name and not p.nacked],
                            history.CONSUMER_GONE, c.name, rec.name,
                            **{"reason": f"consumer {rec.name} {why}", **lease})
    ctx.delete("consumer", c.id, rec.name)
    typ = subs.type_of(c)
    if remaining is None:
        remaining = len(records(ctx, c))
    if typ == subs.FAILOVER and remaining:
        # Only a change of the active consumer rewinds (pickAndScheduleActiveConsumer): an
        # inactive consumer leaving holds nothing and changes nothing.
        live = sorted((r for r in records(ctx, c) if alive(ctx, r)), key=_order)
        note_active(ctx, info, c, live)
    elif typ in subs.SINGLE_ACTIVE or remaining == 0:
        # Exclusive rewinds; and when the last consumer of a Shared subscription leaves,
        # Pulsar rewinds the cursor too.
        subs.rewind(ctx, c)
        del state(c).active
    else:
        for o, prec in list(subs.pending_items(ctx, c.id)):
            # A nacked message stays held until its nack timer gives it back, counted.
            if prec.consumer == rec.name and not prec.nacked:
                subs.forget_pending(ctx, c.id, o)
                # Back to dispatch without a redelivery count increment (Pulsar's removeConsumer).
                redelivery_state.replay_add(ctx, c.id, o, prec.redelivery_count)
    ctx.cursors.save(ctx.txn, c)


def attach(ctx, info, c, name: str, sub_type: str, *, priority: int = 0, pid: int | None = None,
           pid_start: int | None = None, lease_ms: int | None = None,
           policy: dict | None = None) -> Consumer:
    """Admit a consumer to a subscription (Pulsar's addConsumer rules) and record it."""
    live = sweep(ctx, info, c)
    others = [r for r in live if r.name != name]
    current = subs.type_of(c)
    if others and current != sub_type:
        raise ConsumerBusy(
            f"subscription '{c.name}' is {current} with {len(others)} connected consumer(s); "
            f"{'an' if sub_type[:1] in 'AEIOU' else 'a'} {sub_type} consumer cannot join it",
            hint=f"use -t {current}, or wait until its consumers have gone")
    if sub_type == subs.EXCLUSIVE and others:
        holder = others[0]
        how = (f"its lease ends in {max(0, holder.lease_until - ctx.now) // 1000}s"
               if not holder.pid and holder.lease_until else
               f"process {holder.pid} holds it")
        raise ConsumerBusy(
            f"Exclusive consumer is already connected to subscription '{c.name}' "
            f"(consumer '{holder.name}', {how})",
            hint="use another subscription, a Shared subscription (-t Shared), or wait")
    if not others and subs.stored_type(c) != sub_type:  # (none yet: its first consumer)
        # A new type starts from the first unacked message: the old dispatcher's pending and
        # replay state means nothing to the new one (Shared's replay set is invisible to an
        # Exclusive cursor, and the other way round). Exclusive and Failover deliver delayed
        # messages at once, so the delayed index of a Shared past means nothing to them either.
        if sub_type in subs.SINGLE_ACTIVE:
            delayed.clear(ctx, c.id)
        subs.rewind(ctx, c)
        del state(c).active
        subs.set_type(c, sub_type)
    if not pid and not lease_ms:
        # A consumer tied to no process needs a lease, or it would be gone on arrival.
        lease_ms = DEFAULT_LEASE_MS
    rec = _get(ctx, c, name) or Consumer(name, since=ctx.now)
    rec = rec._replace(name=name, priority=priority, pid=pid, pid_start=pid_start,
                       lease_ms=lease_ms, last_active=ctx.now,
                       lease_until=(ctx.now + lease_ms) if lease_ms else None)
    if policy:
        rec = rec._replace(policy=policy)
    _put(ctx, c, rec)
    live = sweep(ctx, info, c)
    if sub_type == subs.KEY_SHARED:
        # A policy mismatch or a sticky range conflict refuses the consumer now (exit 4), and
        # the transaction leaves no trace of it.
        key_shared.check_policy(c, live, rec)
        key_shared.reconcile(ctx, c, live)
    note_active(ctx, info, c, live)
    ctx.cursors.save(ctx.txn, c)
    return rec


def note_active(ctx, info, c, live: list[dict]) -> None:
    """Failover: when the active consumer changes, rewind so that the unacked messages of the
    old one go to the new one (Pulsar does this after activeConsumerFailoverDelayTimeMillis;
    here every hand-over is a transaction, so it happens at once)."""
    if subs.stored_type(c) != subs.FAILOVER:
        return

    act = active(live, partition_index(info.name), info.name)
    name = act.name if act else None
    s = state(c)
    if s.active != name:
        if s.active is not None:
            subs.rewind(ctx, c)
        s.active = name


def renew(ctx, c, names) -> None:
    for name in names:
        rec = _get(ctx, c, name)
        if rec is None:
            continue
        rec = rec._replace(last_active=ctx.now)
        if rec.lease_ms:
            rec = rec._replace(lease_until=ctx.now + rec.lease_ms)
        _put(ctx, c, rec)


def require(ctx, c, name: str) -> Consumer:
    rec = _get(ctx, c, name)
    if rec is None:
        raise ConsumerNotFound(f"consumer '{name}' is not connected to subscription '{c.name}'",
                               hint="its lease may have ended; receive again to reconnect")
    return rec


def detach(ctx, info, c, name: str) -> None:
    rec = _get(ctx, c, name)
    if rec is not None:
        remove(ctx, info, c, rec)


def unsubscribe(ctx, info, name: str, force: bool = False, asker: str | None = None) -> None:
    """Delete a subscription (subs.drop), refused while consumers are connected unless force:
    it asks who is connected (sweep), so it lives here, above subscriptions.py. asker: the
    connected consumer that asks (a client's unsubscribe), allowed only as the subscription's
    one consumer (the dispatcher's canUnsubscribe), and then closed with it."""
    c = subs.require(ctx, info, name)
    live = sweep(ctx, info, c)
    if asker is not None and not force:
        if [r.name for r in live] != [asker]:
            raise UnsubscribeRefused("Unconnected or shared consumer attempting to unsubscribe")
        live = []
    if live and not force:
        raise ConsumerBusy(
            f"subscription '{name}' has {len(live)} connected consumer(s): "
            + ", ".join(r.name for r in live[:5]),
            hint="close them (their leases end, or their processes exit) or pass --force")
    subs.drop(ctx, info, c)
