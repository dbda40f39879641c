"""A namespace's policies as Pulsar's REST answers them: its Policies object, every field
with Pulsar's default where the namespace sets nothing."""
from __future__ import annotations

# A standalone's namespace: defaultNumberOfNamespaceBundles (4) bundles splitting the hash range
# evenly, as NamespacesBase.getBundles gives them.
BUNDLES = {"boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
           "numBundles": 4}


def pulsar_policies(own: dict, cluster: str) -> dict:
    """Pulsar's Policies JSON: the defaults of a namespace made in cluster (its only
    replication cluster), then what the namespace sets (own's fields that are not None; Pulsar
    leaves a null field out)."""
    doc = {
        "auth_policies": {"namespace_auth": {}, "destination_auth": {},
                          "subscription_auth_roles": {}},
        "replication_clusters": [cluster], "allowed_clusters": [],
        "bundles": {"boundaries": list(BUNDLES["boundaries"]),
                    "numBundles": BUNDLES["numBundles"]},
        "backlog_quota_map": {},
        "clusterDispatchRate": {}, "topicDispatchRate": {}, "subscriptionDispatchRate": {},
        "replicatorDispatchRate": {}, "clusterSubscribeRate": {}, "publishMaxMessageRate": {},
        "latency_stats_sample_rate": {},
        "deleted": False, "encryption_required": False, "subscription_auth_mode": "None",
        "offload_threshold": -1, "offload_threshold_in_seconds": -1,
        "schema_compatibility_strategy": "UNDEFINED", "is_allow_auto_update_schema": True,
        "schema_validation_enforced": False, "subscription_types_enabled": [],
        "properties": {}, "migrated": False,
    }
    doc.update({k: v for k, v in own.items() if v is not None})
    return doc
