"""A namespace's policies as Pulsar's REST answers them: its Policies object, every field
with Pulsar's default where the namespace sets nothing; its backlog quotas."""
from __future__ import annotations

from aiohttp import web

from pulsarctl.broker import policies
from pulsarctl.errors import InvalidValue
from pulsarctl.rest.base import body, done, namespace_of, ok, worker
from pulsarctl.rest.errors import reason

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
    doc["backlog_quota_map"] = {t: _pulsar_quota(q) for t, q in doc["backlog_quota_map"].items()}
    return doc


# -- backlog quotas ---------------------------------------------------------------------------------
QUOTA_TYPES = ("destination_storage", "message_age")


def _quota_type(request) -> str:
    typ = request.query.get("backlogQuotaType") or "destination_storage"
    if typ not in QUOTA_TYPES:
        raise InvalidValue(f"backlogQuotaType must be one of {', '.join(QUOTA_TYPES)}, not "
                           f"{typ!r}")
    return typ


def _pulsar_quota(q: dict) -> dict:
    # BacklogQuotaImpl: "limit" is the deprecated name of limitSize, still answered.
    return {"limit": q.get("limitSize", -1), "limitSize": q.get("limitSize", -1),
            "limitTime": q.get("limitTime", -1), "policy": q.get("policy")}


def _within_retention(q: dict, retention: dict | None) -> bool:
    """AdminResource.checkBacklogQuota: a size quota must stay below the retention size and
    its time limit below the retention time (a time quota is checked as the default quota,
    which has neither)."""
    if not retention:
        return True
    size_mb, minutes = retention["retentionSizeInMB"], retention["retentionTimeInMinutes"]
    if size_mb <= 0 and minutes <= 0:
        return True
    if size_mb > 0 and q.get("limitSize", -1) >= size_mb * 1024 * 1024:
        return False
    return not (minutes > 0 and q.get("limitTime", -1) >= minutes * 60)


async def backlog_quota_map(request):
    ns = namespace_of(request)
    own = await worker(request).run(
        lambda b: b.policies.get("namespace", ns, policies.BACKLOG_QUOTA)) or {}
    return ok({typ: _pulsar_quota(q) for typ, q in own.items()})


async def backlog_quota_set(request):
    """POST .../backlogQuota?backlogQuotaType=T with a BacklogQuota; Pulsar's 412 when a size
    quota would not fit in the namespace's retention."""
    ns, typ = namespace_of(request), _quota_type(request)
    doc = await body(request)
    if not isinstance(doc, dict):
        raise InvalidValue("a backlog quota is a JSON object (limitSize, limitTime, policy)")
    size = doc.get("limitSize", doc.get("limit", -1))
    q = {"limitSize": size, "limitTime": doc.get("limitTime", -1), "policy": doc.get("policy")}

    def run(b):
        retention = b.policies.get("namespace", ns, policies.RETENTION)
        if typ == "destination_storage" and not _within_retention(q, retention):
            return reason(412, "Backlog Quota exceeds configured retention quota for namespace."
                               " Please increase retention quota and retry")
        b.policies.set("namespace", ns, policies.BACKLOG_QUOTA, {typ: q})
        return done()
    return await worker(request).run(run)


async def backlog_quota_remove(request):
    ns, typ = namespace_of(request), _quota_type(request)
    await worker(request).run(
        lambda b: b.policies.remove("namespace", ns, policies.BACKLOG_QUOTA, typ))
    return done()


def routes(ns_path: str) -> list:
    return [web.get(ns_path + "/backlogQuotaMap", backlog_quota_map),
            web.post(ns_path + "/backlogQuota", backlog_quota_set),
            web.delete(ns_path + "/backlogQuota", backlog_quota_remove)]
