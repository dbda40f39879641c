"""Topic names exactly as Pulsar's TopicName parses them, plus the -DLQ / -RETRY names (the
current <topic>-<subscription>-DLQ and the older <namespace>/<subscription>-DLQ) and the
properties a dead or retry letter carries (RetryMessageUtil's constants). Every -partition-N,
-DLQ and -RETRY name is built here."""
from __future__ import annotations

from pulsarctl.errors import InvalidTopicName, InvalidValue

PUBLIC_TENANT = "public"
DEFAULT_NAMESPACE = "default"
PARTITIONED_TOPIC_SUFFIX = "-partition-"
DLQ_SUFFIX = "-DLQ"
RETRY_SUFFIX = "-RETRY"
# The properties of a dead or retry letter (RetryMessageUtil): where it came from, kept from the
# first origin (putIfAbsent), and the retry count and delay.
REAL_TOPIC = "REAL_TOPIC"
REAL_SUBSCRIPTION = "REAL_SUBSCRIPTION"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
ORIGIN_MESSAGE_ID_DEPRECATED = "ORIGIN_MESSAGE_IDY_TIME"  # sic: Pulsar's constant has the typo
RECONSUMETIMES = "RECONSUMETIMES"
DELAY_TIME = "DELAY_TIME"
DOMAINS = ("persistent", "non-persistent")


class TopicName:
    __slots__ = ("domain", "tenant", "namespace_portion", "local_name", "cluster")

    def __init__(self, domain: str, tenant: str, namespace_portion: str, local_name: str,
                 cluster: str | None = None):
        self.domain = domain
        self.tenant = tenant
        self.namespace_portion = namespace_portion
        self.local_name = local_name
        self.cluster = cluster  # the legacy 4-part form tenant/cluster/ns/topic

    def __eq__(self, other):
        return isinstance(other, TopicName) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))

    def __repr__(self) -> str:
        return f"TopicName({self})"

    @property
    def namespace(self) -> str:
        if self.cluster:
            return f"{self.tenant}/{self.cluster}/{self.namespace_portion}"
        return f"{self.tenant}/{self.namespace_portion}"

    def __str__(self) -> str:
        return f"{self.domain}://{self.namespace}/{self.local_name}"

    @property
    def persistent(self) -> bool:
        return self.domain == "persistent"

    @property
    def partition_index(self) -> int:
        return partition_index(self.local_name)

    @property
    def is_partition(self) -> bool:
        return self.partition_index >= 0

    @property
    def partitioned_topic_name(self) -> "TopicName":
        """The name without the -partition-N suffix (the topic itself if it has none)."""
        i = self.partition_index
        if i < 0:
            return self
        base = self.local_name[: self.local_name.rindex(PARTITIONED_TOPIC_SUFFIX)]
        return TopicName(self.domain, self.tenant, self.namespace_portion, base, self.cluster)

    def partition(self, index: int) -> "TopicName":
        if index == -1 or PARTITIONED_TOPIC_SUFFIX in self.local_name:
            return self
        return TopicName(self.domain, self.tenant, self.namespace_portion,
                         f"{self.local_name}{PARTITIONED_TOPIC_SUFFIX}{index}", self.cluster)


def partition_index(local_name: str) -> int:
    """Pulsar's getPartitionIndex: the int after the last -partition-, else -1 (also for a
    negative number or one with a leading zero)."""
    if PARTITIONED_TOPIC_SUFFIX not in local_name:
        return -1
    text = local_name[local_name.rindex(PARTITIONED_TOPIC_SUFFIX) + len(PARTITIONED_TOPIC_SUFFIX):]
    if not text.isdigit() or not text.isascii():
        return -1
    if len(text) > 1 and text[0] == "0":
        return -1
    n = int(text)
    return n if n <= 2**31 - 1 else -1


_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-=:._")


def _check_part(value: str, what: str, full: str) -> None:
    if not value:
        raise InvalidTopicName(f"invalid topic name '{full}': empty {what}")
    if not set(value) <= _NAME_CHARS:
        raise InvalidTopicName(
            f"invalid topic name '{full}': {what} '{value}' may only contain letters, digits "
            f"and - = : . _")


def topic_name(name) -> TopicName:
    """A TopicName as it is, or parsed from its text."""
    return name if isinstance(name, TopicName) else parse_topic(name)


def parse_topic(name: str) -> TopicName:
    """Parse any topic name form Pulsar accepts."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidTopicName("invalid topic name '': it is empty")
    full = name
    if "://" not in name:
        parts = name.split("/")
        if len(parts) == 3:
            name = "persistent://" + name
        elif len(parts) == 1:
            name = f"persistent://{PUBLIC_TENANT}/{DEFAULT_NAMESPACE}/{name}"
        else:
            raise InvalidTopicName(
                f"Invalid short topic name '{full}', it should be in the format of "
                f"<tenant>/<namespace>/<topic> or <topic>", hint="")
    domain, rest = name.split("://", 1)
    if domain not in DOMAINS:
        raise InvalidTopicName(f"invalid topic name '{full}': unknown domain '{domain}'")
    parts = rest.split("/")
    if len(parts) == 3:
        tenant, ns, local = parts
        cluster = None
    elif len(parts) == 4:
        tenant, cluster, ns, local = parts
        _check_part(cluster, "cluster", full)
    else:
        raise InvalidTopicName(f"invalid topic name '{full}'")
    _check_part(tenant, "tenant", full)
    _check_part(ns, "namespace", full)
    if not local:
        raise InvalidTopicName(f"invalid topic name '{full}': empty local name")
    if any(c in local for c in "\x00\n\r\t") or not local.isprintable():
        raise InvalidTopicName(f"invalid topic name '{full}': control characters in the name")
    if len(str(full)) > 2048:
        raise InvalidTopicName(f"invalid topic name: longer than 2048 characters")
    return TopicName(domain, tenant, ns, local, cluster)


def parse_namespace(name: str) -> tuple[str, str]:
    """tenant/namespace -> (tenant, namespace)."""
    parts = (name or "").split("/")
    if len(parts) != 2 or not all(parts):
        raise InvalidValue(f"invalid namespace name '{name}'",
                           hint="namespaces are written <tenant>/<namespace>, e.g. public/default")
    for p in parts:
        if not set(p) <= _NAME_CHARS:
            raise InvalidValue(f"invalid namespace name '{name}'",
                               hint="use letters, digits and - = : . _")
    return parts[0], parts[1]


def check_tenant(name: str) -> str:
    if not name or not set(name) <= _NAME_CHARS:
        raise InvalidValue(f"invalid tenant name '{name}'", hint="use letters, digits and - = : . _")
    return name


def check_subscription(name: str) -> str:
    if not name or not name.strip():
        raise InvalidValue("the subscription name is empty", hint="give one with -s NAME")
    if any(not c.isprintable() for c in name) or "/" in name:
        raise InvalidValue(f"invalid subscription name {name!r}",
                           hint="use printable characters and no '/'")
    return name


def letter_topic(topic: str, subscription: str, suffix: str) -> str:
    """<topic>-<subscription><suffix>: the default dead letter (DLQ_SUFFIX) or retry letter
    (RETRY_SUFFIX) topic name since Pulsar 2.8."""
    return f"{topic}-{subscription}{suffix}"


def dlq_topic(topic: str, subscription: str) -> str:
    """Pulsar's default dead letter topic name: <topic>-<subscription>-DLQ."""
    return letter_topic(topic, subscription, DLQ_SUFFIX)


def retry_topic(topic: str, subscription: str) -> str:
    """Pulsar's default retry letter topic name: <topic>-<subscription>-RETRY."""
    return letter_topic(topic, subscription, RETRY_SUFFIX)


def dlq_producer_name(topic: str, subscription: str, consumer: str, rand: str) -> str:
    """The name of the producer a consumer moves dead letters with (Pulsar 4.x):
    <topic>-<subscription>-<consumerName>-<rand>-DLQ."""
    return f"{topic}-{subscription}-{consumer}-{rand}{DLQ_SUFFIX}"


def group_letter_topic(topic: str, subscription: str, suffix: str) -> str:
    """The default name before Pulsar 2.8 (RetryMessageUtil's RETRY_GROUP_TOPIC_SUFFIX and
    DLQ_GROUP_TOPIC_SUFFIX): persistent://<tenant>/<namespace>/<subscription>-RETRY (or -DLQ),
    one per namespace and subscription. The Java client still uses it where it exists as a
    partitioned topic (ConsumerBuilderImpl, issue 9327; deadletter.settings_for)."""
    return f"persistent://{parse_topic(str(topic)).namespace}/{subscription}{suffix}"
