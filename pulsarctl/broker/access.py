"""Producer access modes (Pulsar's ProducerAccessMode, PIP-68). Shared: any number of
producers. Exclusive: the producer becomes the topic's only writer, or fails at once if another
exclusive producer holds it. WaitForExclusive: waits (in the client) until it can become the
only writer — a leader election. ExclusiveWithFencing: takes the topic over and fences the
current exclusive producer, whose next send fails.

The holder is a durable record naming the producer and its process (pid and start time, as
consumers are), so a producer that crashes, even by kill -9, releases the topic: a dead holder
counts as none. Shared producers are not recorded (a one-shot `produce` leaves nothing behind),
so, unlike Pulsar, an exclusive producer is not refused because shared ones are connected;
their next send is fenced instead. A partitioned topic has one holder for all its partitions."""
from __future__ import annotations

from pulsarctl.errors import InvalidValue, ProducerFenced
from pulsarctl.names import TopicName

SHARED, EXCLUSIVE = "Shared", "Exclusive"
WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING = "WaitForExclusive", "ExclusiveWithFencing"
MODES = (SHARED, EXCLUSIVE, WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING)


def check_mode(mode: str) -> str:
    for m in MODES:
        if str(mode).lower() == m.lower():
            return m
    raise InvalidValue(f"unknown producer access mode {mode!r}", hint="use " + ", ".join(MODES))


def _key(topic: TopicName) -> str:
    return str(topic.partitioned_topic_name)


def holder(ctx, topic: TopicName) -> dict | None:
    """The live exclusive producer of the topic, if any."""
    rec = ctx.get("xproducer", _key(topic))
    if rec is None:
        return None
    # lazy: one-shot produce never needs it
    from pulsarctl.broker.consumers import process_start_time

    if process_start_time(rec["pid"]) != rec["pidStart"]:
        return None  # its process is gone: the topic is free
    return rec


def _is(rec: dict, name: str, pid: int, pid_start: int) -> bool:
    return rec["name"] == name and rec["pid"] == pid and rec["pidStart"] == pid_start


def acquire(ctx, topic: TopicName, name: str, mode: str, pid: int, pid_start: int) -> dict:
    """Become the topic's exclusive producer (ProducerFenced if that is not possible now)."""
    h = holder(ctx, topic)
    if h is not None and not _is(h, name, pid, pid_start) and mode != EXCLUSIVE_WITH_FENCING:
        raise ProducerFenced(f"topic {_key(topic)} has an exclusive producer '{h['name']}' "
                             f"(pid {h['pid']}, {h['mode']})")
    old = ctx.get("xproducer", _key(topic)) or {}
    rec = {"name": name, "mode": mode, "pid": pid, "pidStart": pid_start,
           "epoch": old.get("epoch", -1) + 1, "since": ctx.now}
    ctx.put(rec, "xproducer", _key(topic))
    return rec


def check(ctx, topic: TopicName, name: str) -> None:
    """Before a publish: only the exclusive producer may write while one holds the topic."""
    rec = ctx.get("xproducer", _key(topic))
    if rec is None:
        return
    from pulsarctl.broker.consumers import this_process  # lazy: one-shot produce never needs it

    if _is(rec, name, *this_process()):
        return
    if holder(ctx, topic) is None:
        return
    raise ProducerFenced(f"producer '{name}' is fenced: topic {_key(topic)} has the exclusive "
                         f"producer '{rec['name']}' (pid {rec['pid']}, {rec['mode']})")


def release(ctx, topic: TopicName, name: str, pid: int, pid_start: int) -> bool:
    rec = ctx.get("xproducer", _key(topic))
    if rec is not None and _is(rec, name, pid, pid_start):
        ctx.delete("xproducer", _key(topic))
        return True
    return False
