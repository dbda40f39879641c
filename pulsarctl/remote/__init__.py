"""The same commands against any Pulsar: a cluster, a `pulsarctl serve`, pulsar-lite.

A remote target is a context (pulsarctl/config.py: service URL, admin URL, authentication).
Data goes through the real `pulsar-client` library (connect.py, data.py: produce, consume,
read, the dead letter tools of dlq.py); administration through Pulsar's admin REST API
(rest.py: the HTTP client; admin.py: the broker's nouns, tenants, namespaces, topics,
subscriptions, policies and schemas, over it). cursor.py draws a remote subscription's cursor
from its internal stats; migrate.py copies a store up to a cluster and topics down from one.

Nothing here prints or imports the CLI: the CLI picks the local broker or this by the target
(State.remote) and renders what either returns. What Pulsar does not offer remotely (the store's
clock, the message history behind `explain`, a consumer that outlives its process) is refused
by the CLI in one line (errors.LocalOnly), never done differently.
"""
