"""The broker's administration, as small noun objects the Broker hands out (the way sqlite-utils'
Database hands out Tables): broker.tenants, broker.namespaces, broker.topics,
broker.subscription(topic, name), broker.dlq(topic) (dlq.py),
broker.policies, broker.schemas, broker.clock and broker.chores. Each method is one transaction
over the concept modules, as the Broker's own data-plane methods are; a method whose first
argument names topics runs on the Broker that owns them (nonpersistent.routed)."""
