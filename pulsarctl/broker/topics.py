"""Topics: lookup, auto-creation, create, list (pulsar-admin topics); deleting one, which drops
its subscriptions, is cascade.py's."""
from __future__ import annotations

from pulsarctl.broker import tenants
from pulsarctl.errors import AlreadyExists, MessageNotFound, PulsarctlError, TopicNotFound
from pulsarctl.messages import MessageId
from pulsarctl.names import TopicName


def _ns_prefix(ns: str) -> str:
    return f"persistent://{ns}/"


def lookup(ctx, topic: TopicName):
    ml_id = ctx.ledgers.lookup(ctx.txn, str(topic))
    return None if ml_id is None else ctx.ledgers.info(ctx.txn, ml_id)


def require(ctx, topic: TopicName):
    info = lookup(ctx, topic)
    if info is None:
        raise TopicNotFound(f"topic {topic} does not exist")
    return info


def offset_of(ctx, info, mid: MessageId) -> int:
    """The offset of a message id on this topic; MessageNotFound if it names no message."""
    o = info.offset(mid.ledger_id, mid.entry_id)
    if o is None or mid.entry_id < 0 or not (info.first_offset <= o < info.next_offset):
        raise MessageNotFound(f"message {mid} not found on {info.name}",
                              hint=f"ids on this topic run up to {info.position(info.last_offset)}")
    return o


def ensure(ctx, topic: TopicName):
    """The topic, created on first use as Pulsar does (allowAutoTopicCreation)."""
    info = lookup(ctx, topic)
    if info is not None:
        return info
    _check_creatable(ctx, topic)
    if not ctx.setting("allowAutoTopicCreation"):
        raise TopicNotFound(f"topic {topic} does not exist and allowAutoTopicCreation is off",
                            hint=f"create it with `pulsarctl topics create {topic}`")
    return ctx.ledgers.open(ctx.txn, str(topic), ctx.now)


def _check_creatable(ctx, topic: TopicName) -> None:
    parent = getattr(ctx.broker, "parent", None)
    if topic.persistent == ctx.broker.non_persistent:
        raise PulsarctlError(f"topic {topic} belongs in the other store",  # a routing slip
                             hint="report this as a bug")
    if parent is not None:  # namespaces live in the persistent store
        parent._read(tenants.get_namespace, topic.namespace)
    else:
        tenants.get_namespace(ctx, topic.namespace)


def create_topic(ctx, topic: TopicName):
    if lookup(ctx, topic) is not None:
        raise AlreadyExists(f"topic {topic} already exists")
    _check_creatable(ctx, topic)
    return ctx.ledgers.open(ctx.txn, str(topic), ctx.now)


def list_topics(ctx, namespace: str) -> list[str]:
    tenants.get_namespace(ctx, namespace)
    prefix = _ns_prefix(namespace)
    return [name for name, _ in ctx.ledgers.names(ctx.txn, prefix) if "/" not in name[len(prefix):]]


def list_np_topics(ctx, namespace: str) -> list[str]:
    """Non-persistent topics (in the tmpfs store; the namespace was checked by the caller)."""
    prefix = f"non-persistent://{namespace}/"
    return [name for name, _ in ctx.ledgers.names(ctx.txn, prefix) if "/" not in name[len(prefix):]]


def meta(ctx, topic: TopicName) -> dict:
    return ctx.get("topicmeta", str(topic)) or {}
