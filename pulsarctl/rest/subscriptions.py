"""A topic's subscriptions over REST: create, delete, and the cursor administration of
pulsar-admin (skip, clear-backlog, reset-cursor, expire-messages)."""
from __future__ import annotations

from aiohttp import web

from pulsarctl.messages import MessageId
from pulsarctl.rest.base import body, done, flag, message_id_of, topic_of, whole, worker
from pulsarctl.rest.errors import reason

COMPACTION_SUBSCRIPTION = "__compaction"


def _sub(request):
    return topic_of(request), request.match_info["sub"]


async def subscription_create(request):
    t, name = _sub(request)
    doc = await body(request)
    position = MessageId.latest if doc is None else message_id_of(doc)
    await worker(request).run(lambda b: b.subscription(t, name).create(position))
    return done()


async def subscription_delete(request):
    t, name = _sub(request)
    force = flag(request, "force")

    def run(b):
        if name not in b.topics.subscriptions(t):
            return False
        b.subscription(t, name).unsubscribe(force)
        return True
    if not await worker(request).run(run):
        return reason(404, f"Subscription {name} not found for topic {t}")
    return done()


async def subscription_skip(request):
    t, name = _sub(request)
    n = whole(request.match_info["n"], "the number of messages to skip")
    await worker(request).run(lambda b: b.subscription(t, name).skip(n))
    return done()


async def subscription_skip_all(request):
    t, name = _sub(request)
    await worker(request).run(lambda b: b.subscription(t, name).clear_backlog())
    return done()


async def subscription_reset_time(request):
    t, name = _sub(request)
    ts = whole(request.match_info["timestamp"], "the timestamp (epoch ms)")
    await worker(request).run(lambda b: b.subscription(t, name).reset_cursor(time_ms=ts))
    return done()


async def subscription_reset_id(request):
    t, name = _sub(request)
    doc = await body(request)
    mid = message_id_of(doc)
    # ResetCursorData's isExcluded travels as "excluded" (its getter is isExcluded()).
    excluded = bool(doc.get("excluded") or doc.get("isExcluded"))
    await worker(request).run(
        lambda b: b.subscription(t, name).reset_cursor(message_id=mid, exclude=excluded))
    return done()


# Pulsar's answer (409) to an expiry it did not issue: the subscription had no backlog.
NOT_ISSUED = ("Expire message by timestamp not issued on topic {topic} for subscription {sub} "
              "due to ongoing message expiration not finished or subscription almost catch  up. "
              "If it's performed on a partitioned topic operation might succeeded on other "
              "partitions, please check stats of individual partition.")


def _not_issued(name: str, doc: dict) -> str | None:
    """Pulsar's refusal when a topic (or partition) of the expiry had no backlog for the
    subscription: what it has now and what the expiry took add up to what it had."""
    for topic, d in (doc["partitions"].items() if "partitions" in doc else [(doc["topic"], doc)]):
        if d["msgBacklog"] + d["expired"] == 0:
            return NOT_ISSUED.format(topic=topic, sub=name)
    return None


async def subscription_expire(request):
    t, name = _sub(request)
    secs = whole(request.match_info["seconds"], "expireTimeInSeconds")
    doc = await worker(request).run(lambda b: b.subscription(t, name).expire_messages(secs * 1000))
    refused = _not_issued(name, doc)
    return reason(409, refused) if refused else done()


async def all_subscriptions_expire(request):
    """Every subscription but the compactor's is expired; one that had no backlog makes the
    answer Pulsar's 409, the others' expiries done all the same."""
    t = topic_of(request)
    secs = whole(request.match_info["seconds"], "expireTimeInSeconds")

    def run(b):
        refused = [_not_issued(name, b.subscription(t, name).expire_messages(secs * 1000))
                   for name in b.topics.subscriptions(t) if name != COMPACTION_SUBSCRIPTION]
        return next((r for r in refused if r), None)
    refused = await worker(request).run(run)
    return reason(409, refused) if refused else done()


def routes(topic_path: str, sub_path: str) -> list:
    return [
        web.post(topic_path + "/all_subscription/expireMessages/{seconds}",
                 all_subscriptions_expire),
        web.put(sub_path, subscription_create),
        web.delete(sub_path, subscription_delete),
        web.post(sub_path + "/skip/{n}", subscription_skip),
        web.post(sub_path + "/skip_all", subscription_skip_all),
        web.post(sub_path + "/resetcursor/{timestamp}", subscription_reset_time),
        web.post(sub_path + "/resetcursor", subscription_reset_id),
        web.post(sub_path + "/expireMessages/{seconds}", subscription_expire),
    ]
