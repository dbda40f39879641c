"""/metrics: the topic metrics of Pulsar's Prometheus endpoint (NamespaceStatsAggregator with
exposeTopicLevelMetricsInPrometheus, the default), one sample per topic (a partition is a
topic) labelled cluster, namespace and topic, and per subscription, from the store's stats."""
from __future__ import annotations

# (metric, type, help, how a topic's stats give its value)
TOPIC_METRICS = (
    ("pulsar_subscriptions_count", "gauge", "Number of subscriptions of the topic",
     lambda s: len(s["subscriptions"])),
    ("pulsar_producers_count", "gauge", "Number of active producers of the topic",
     lambda s: len(s["publishers"])),
    ("pulsar_consumers_count", "gauge", "Number of active consumers of the topic",
     lambda s: sum(len(x["consumers"]) for x in s["subscriptions"].values())),
    ("pulsar_rate_in", "gauge", "Messages per second into the topic", lambda s: s["msgRateIn"]),
    ("pulsar_rate_out", "gauge", "Messages per second out of the topic",
     lambda s: s["msgRateOut"]),
    ("pulsar_throughput_in", "gauge", "Bytes per second into the topic",
     lambda s: s["msgThroughputIn"]),
    ("pulsar_throughput_out", "gauge", "Bytes per second out of the topic",
     lambda s: s["msgThroughputOut"]),
    ("pulsar_storage_size", "gauge", "Bytes the topic's ledgers hold",
     lambda s: s["storageSize"]),
    ("pulsar_storage_backlog_size", "gauge", "Estimated bytes of the slowest subscription's "
     "backlog", lambda s: s["backlogSize"]),
    ("pulsar_msg_backlog", "gauge", "Messages not yet acknowledged, over the subscriptions",
     lambda s: sum(x["msgBacklog"] for x in s["subscriptions"].values())),
    ("pulsar_in_bytes_total", "counter", "Bytes published to the topic",
     lambda s: s["bytesInCounter"]),
    ("pulsar_in_messages_total", "counter", "Messages published to the topic",
     lambda s: s["msgInCounter"]),
    ("pulsar_out_bytes_total", "counter", "Bytes delivered from the topic",
     lambda s: s["bytesOutCounter"]),
    ("pulsar_out_messages_total", "counter", "Messages delivered from the topic",
     lambda s: s["msgOutCounter"]),
)

SUBSCRIPTION_METRICS = (
    ("pulsar_subscription_back_log", "gauge", "Messages not yet acknowledged on the subscription",
     lambda x: x["msgBacklog"]),
    ("pulsar_subscription_consumers_count", "gauge", "Consumers of the subscription",
     lambda x: len(x["consumers"])),
    ("pulsar_subscription_unacked_messages", "gauge", "Messages delivered and not acknowledged",
     lambda x: sum(c.get("unackedMessages", 0) for c in x["consumers"])),
)


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(v) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(int(v))


def collect(broker) -> list[tuple[str, str, dict]]:
    """(namespace, topic, stats) for every topic of the store."""
    out = []
    for tenant in broker.tenants.list():
        for ns in broker.namespaces.list(tenant):
            for topic in broker.topics.list(ns):
                out.append((ns, topic, broker.topics.stats(topic)))
    return out


def render(broker, cluster: str) -> str:
    topics = collect(broker)
    lines = []
    for name, typ, text, value in TOPIC_METRICS:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {typ}"]
        for ns, topic, s in topics:
            labels = f'cluster="{_label(cluster)}",namespace="{_label(ns)}",topic="{_label(topic)}"'
            lines.append(f"{name}{{{labels}}} {_number(value(s))}")
    for name, typ, text, value in SUBSCRIPTION_METRICS:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {typ}"]
        for ns, topic, s in topics:
            for sub, x in s["subscriptions"].items():
                labels = (f'cluster="{_label(cluster)}",namespace="{_label(ns)}",'
                          f'topic="{_label(topic)}",subscription="{_label(sub)}"')
                lines.append(f"{name}{{{labels}}} {_number(value(x))}")
    return "\n".join(lines) + "\n"
