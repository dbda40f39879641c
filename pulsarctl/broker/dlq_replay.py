"""`dlq replay`: republishing dead letters to their origin, another topic, or one
subscription's retry letter topic.

Replay republishes a dead letter (payload, key, ordering key, event time and properties kept;
REPLAY_COUNT added or incremented) and acknowledges it on `pulsarctl-dlq` in the same write
transaction, so a replay killed at any point neither loses nor duplicates a message. A dead
letter whose REPLAY_COUNT already reached the limit is refused: it stays in the DLQ. It is the
one `dlq` command that produces (routing to partitions, retry topics): apart from the reading
of a DLQ (dlq.py) it builds on.
"""
from __future__ import annotations

from store import codec
from pulsarctl.broker import (
    chunks, topics, partitions, subscriptions as subs, batches, producers,
)
from pulsarctl.broker.dlq import (
    as_topic, ensure_subscription, open_dlq, read_message, read_messages, wanted_offsets,
)
from pulsarctl.entries import is_batch
from pulsarctl.errors import Conflict, InvalidMessageId, SubscriptionNotFound
from pulsarctl.messages import (
    MessageId, OutgoingMessage, copied, message_from_entry, parse_message_id,
)
from pulsarctl.names import ORIGIN_MESSAGE_ID, TopicName
from pulsarctl.replay import (
    REPLAY_COUNT, into_itself, replay_origin, replay_row, restart_retries,
)
from pulsarctl.broker.routing import PartitionRouter

REPLAY_PRODUCER = "pulsarctl-dlq-replay"
DEFAULT_MAX_REPLAYS = 3


def _retry_topic(ctx, origin: TopicName, subscription: str) -> TopicName:
    """The retry letter topic of a subscription of the origin (it must exist, retry enabled)."""
    for p in partitions.expand(ctx, origin):
        info = topics.lookup(ctx, p)
        c = subs.get(ctx, info, subscription) if info is not None else None
        if c is None:
            continue
        policy = subs.state(c).policy
        if not policy.get("enableRetry") or not policy.get("retryLetterTopic"):
            raise Conflict(f"retry is not enabled on subscription '{subscription}' of {origin}: "
                           f"nothing reads its retry letter topic",
                           hint="consume with --enable-retry first, or replay without "
                                "--subscription")
        return as_topic(policy["retryLetterTopic"])
    raise SubscriptionNotFound(f"subscription '{subscription}' not found on {origin}",
                               hint=f"list them with `pulsarctl topics subscriptions {origin}`")


class _Routes:
    """Where each replayed message goes: the topic, or for a partitioned topic the partition
    its ORIGIN_MESSAGE_ID names (replaying to the origin), else by key hash or round robin."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.routers: dict = {}

    def partition(self, target: TopicName, m, to_origin: bool) -> TopicName:
        if target.is_partition:
            return target
        n = partitions.get(self.ctx, target)
        if not n:
            return target
        if to_origin:
            try:
                i = parse_message_id((m.properties_ or {}).get(ORIGIN_MESSAGE_ID, "")).partition
            except InvalidMessageId:
                i = -1
            if 0 <= i < n:
                return target.partition(i)
        router = self.routers.get(str(target))
        if router is None:
            router = self.routers[str(target)] = PartitionRouter(n)
        return target.partition(router.choose(m.key, self.ctx.now))


def replay(ctx, t, ids, to=None, subscription=None, max_replays=DEFAULT_MAX_REPLAYS,
           dry_run=False, max_failures: int | None = None) -> list[dict]:
    """Republish the dead letters with these ids and ack them on pulsarctl-dlq, all in this
    transaction (with dry_run: only say what would happen). Ids already handled are left out.
    Returns one result per message: action replayed|skipped|failed (would-replay and
    would-skip on a dry run), target, newMessageId, replayCount, reason. max_failures: stop
    after that many failed (the messages after it are neither replayed nor in the results)."""
    info, c = open_dlq(ctx, t)
    if not dry_run:
        c = ensure_subscription(ctx, info)
    wanted = wanted_offsets(ctx, info, ids)
    to_t = as_topic(to) if to else None
    routes = _Routes(ctx)
    retry_topics: dict = {}
    results, acks, batch_acks = [], [], []

    def units():
        """(message, chunk copy, offsets its ack covers; None: ack its batch index)."""
        taken: set = set()  # chunks of a chunked dead letter replayed (or judged) with its first
        for o in sorted(wanted):
            if o in taken or (c is not None and ctx.cursors.is_acked(ctx.txn, c, o)):
                continue
            rec = codec.decode(ctx.ledgers.read(ctx.txn, info, o))
            if is_batch(rec):
                pick = wanted[o]
                for m in read_messages(ctx, info, t, c, o):
                    if pick is None or m.id.batch_index in pick:
                        yield m, None, None
                continue
            copy = chunks.copy_of(ctx, info, o, rec)  # a chunked message is replayed whole
            group = copy[0] if copy else [o]
            taken.update(group)
            m = read_message(ctx, info, t, copy[1]) if copy else message_from_entry(
                rec, MessageId(*info.position(o), t.partition_index), str(t))
            yield m, copy, group

    failed = 0
    for m, copy, group in units():
        if max_failures is not None and failed >= max_failures:
            break
        props = dict(m.properties_ or {})
        r = replay_row(m, max_replays, dry_run)
        rc = r["replayCount"]
        results.append(r)
        if r["action"]:
            continue
        origin = replay_origin(props, to_t, r)
        if origin is None:
            failed += 1
            continue
        if subscription is not None:
            key = str(origin)
            if key not in retry_topics:
                retry_topics[key] = _retry_topic(ctx, origin, subscription)
            target = retry_topics[key]
            restart_retries(props, origin, m)
        else:
            target = routes.partition(origin, m, to_t is None)
        props[REPLAY_COUNT] = str(rc + 1)
        r["target"], r["replayCount"] = str(target), rc + 1
        if into_itself(r, target, t):
            failed += 1
            continue
        if dry_run:
            r["action"] = "would-replay"
            continue
        out = copied(m, OutgoingMessage(m.payload, props, m.key, m.ordering_key_, m.event_time))
        out.chunks = copy[2] if copy else None
        _name, new_ids = producers.publish(ctx, target, [out], REPLAY_PRODUCER,
                                           target.partition_index)
        r["action"], r["newMessageId"] = "replayed", str(new_ids[0])
        if group is None:
            batch_acks.append(m.id)
        else:
            acks.extend(group)
    if batch_acks:
        acks.extend(batches.resolve(ctx, info, c, batch_acks)[0])
    if acks:
        subs.ack(ctx, info, c, acks)
    elif batch_acks:
        ctx.cursors.save(ctx.txn, c)
    return results

