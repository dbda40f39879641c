"""The broker's administration nouns over a remote Pulsar's admin REST API: tenants,
namespaces (and their permissions), policies, schemas and the broker's dynamic settings; topics
and subscriptions are in topics.py. RemoteBroker (broker.py) hands them out as the local Broker
does (`broker.tenants`, `broker.topics`, `broker.subscription(t, s)` ...), with the same
methods and arguments, so a command runs either by the target alone (State.admin()).

What each returns: a read returns Pulsar's REST JSON as it comes (the JSON shape both targets
print: the local store's keys are Pulsar's names too, README "From your laptop to a cluster");
a change returns what the local one returns (REST answers 204 No Content), read back where it
has to be (a tenant's roles, the backlog after a skip). Anything a command asks for that a
remote Pulsar has no REST for raises LocalOnly, named: never a silent difference."""
from __future__ import annotations

from urllib.parse import quote

from pulsarctl.errors import NotFound, UsageError
from pulsarctl.remote.rest import namespace_path, topic_path

# pulsarctl's policy fields (broker/policies.py: Pulsar's Policies names) -> the REST resource
# of a namespace and of a topic (pulsar-admin's NamespacesImpl / TopicPoliciesImpl).
NS_RESOURCE = {
    "message_ttl_in_seconds": "messageTTL",
    "retention_policies": "retention",
    "deduplicationEnabled": "deduplication",
    "delayed_delivery_policies": "delayedDelivery",
    "max_unacked_messages_per_consumer": "maxUnackedMessagesPerConsumer",
    "max_unacked_messages_per_subscription": "maxUnackedMessagesPerSubscription",
}
TOPIC_RESOURCE = {
    "message_ttl_in_seconds": "messageTTL",
    "retention_policies": "retention",
    "deduplicationEnabled": "deduplicationEnabled",
    "delayed_delivery_policies": "delayedDelivery",
    "max_unacked_messages_per_consumer": "maxUnackedMessagesOnConsumer",
    "max_unacked_messages_per_subscription": "maxUnackedMessagesOnSubscription",
}
BACKLOG_QUOTA = "backlog_quota_map"
DEAD_LETTER = "deadLetterPolicy"


class _Noun:
    """A noun of the remote broker; a method it does not have is a command that works on a
    local store only."""

    def __init__(self, remote):
        self._remote = remote

    @property
    def rest(self):
        return self._remote.rest  # made when first needed (RemoteBroker.rest)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise self._remote.local_only()


def _split(role_lists) -> list:
    return list(role_lists or [])


# -- tenants ----------------------------------------------------------------------------------------
class Tenants(_Noun):
    def list(self):
        return self.rest.get("/admin/v2/tenants")

    def get(self, name):
        return self.rest.get(f"/admin/v2/tenants/{quote(name, safe='')}")

    def _clusters(self) -> list:
        # pulsar-admin tenants create without -c allows every cluster of the instance.
        return self.rest.get("/admin/v2/clusters") or []

    def create(self, name, admin_roles=(), allowed_clusters=()):
        info = {"adminRoles": _split(admin_roles),
                "allowedClusters": _split(allowed_clusters) or self._clusters()}
        self.rest.put(f"/admin/v2/tenants/{quote(name, safe='')}", info)
        return info

    def update(self, name, admin_roles=None, allowed_clusters=None):
        info = dict(self.get(name))
        if admin_roles is not None:
            info["adminRoles"] = list(admin_roles)
        if allowed_clusters is not None:
            info["allowedClusters"] = list(allowed_clusters) or self._clusters()
        self.rest.post(f"/admin/v2/tenants/{quote(name, safe='')}", info)
        return info

    def delete(self, name, force=False):
        self.rest.delete(f"/admin/v2/tenants/{quote(name, safe='')}",
                         {"force": "true"} if force else None)


# -- namespaces ---------------------------------------------------------------------------------------
class Namespaces(_Noun):
    def list(self, tenant):
        return self.rest.get(f"/admin/v2/namespaces/{quote(tenant, safe='')}")

    def create(self, name):
        self.rest.put(namespace_path(name))

    def delete(self, name, force=False):
        self.rest.delete(namespace_path(name), {"force": "true"} if force else None)

    def policies(self, name):
        return self.rest.get(namespace_path(name))

    def grant_permission(self, name, role, actions):
        given = list(dict.fromkeys(actions or []))
        # In AuthAction's order, as the local store and Pulsar list them.
        acts = [a for a in _ACTION_ORDER if a in given] + [a for a in given
                                                           if a not in _ACTION_ORDER]
        if not acts:
            raise UsageError("give at least one action", hint="e.g. --actions produce,consume")
        self.rest.post(f"{namespace_path(name)}/permissions/{quote(role, safe='')}", acts)
        return acts

    def revoke_permission(self, name, role):
        had = role in (self.permissions(name) or {})
        self.rest.delete(f"{namespace_path(name)}/permissions/{quote(role, safe='')}")
        return had

    def permissions(self, name):
        return self.rest.get(f"{namespace_path(name)}/permissions")


_ACTION_ORDER = ["produce", "consume", "functions", "sources", "sinks", "packages"]


# -- policies -------------------------------------------------------------------------------------------
class Policies(_Noun):
    """set-/get-/remove- of namespace and topic policies, by pulsarctl's field names."""

    def _base(self, scope, target) -> tuple[str, dict]:
        if scope == "namespace":
            return namespace_path(target), NS_RESOURCE
        return topic_path(target), TOPIC_RESOURCE

    def _refuse_dead_letter(self, field):
        if field == DEAD_LETTER:
            raise self._remote.local_only(
                "a dead letter policy on a namespace or topic (pulsarctl's own: Pulsar keeps "
                "one per consumer, given with consume --max-redeliver-count)")

    def set(self, scope, target, field, value):
        self._refuse_dead_letter(field)
        base, resources = self._base(scope, target)
        if field == BACKLOG_QUOTA:
            for typ, q in value.items():
                self.rest.post(f"{base}/backlogQuota", q, {"backlogQuotaType": typ})
            return value
        resource = resources[field]
        if scope == "topic" and resource == "messageTTL":
            # TopicPoliciesImpl sends the TTL as a query parameter, not a body.
            self.rest.post(f"{base}/{resource}", None, {"messageTTL": str(value)})
        else:
            self.rest.post(f"{base}/{resource}", value)
        return value

    def get(self, scope, target, field, applied=False):
        self._refuse_dead_letter(field)
        base, resources = self._base(scope, target)
        params = {"applied": "true"} if applied and scope == "topic" else None
        if field == BACKLOG_QUOTA:
            return self.rest.get(f"{base}/backlogQuotaMap", params) or {}
        return self.rest.get(f"{base}/{resources[field]}", params)

    def remove(self, scope, target, field, part=None):
        self._refuse_dead_letter(field)
        base, resources = self._base(scope, target)
        if field == BACKLOG_QUOTA:
            self.rest.delete(f"{base}/backlogQuota",
                             {"backlogQuotaType": part or "destination_storage"})
            return
        self.rest.delete(f"{base}/{resources[field]}")

    def applied(self, topic):
        """Every policy in force on the topic, as `topics policies` shows them: each one's
        value with ?applied=true (the topic's, else its namespace's, else the broker's)."""
        out = {}
        for field, resource in TOPIC_RESOURCE.items():
            out[field] = self.rest.get(f"{topic_path(topic)}/{resource}", {"applied": "true"})
        out[BACKLOG_QUOTA] = self.rest.get(f"{topic_path(topic)}/backlogQuotaMap",
                                           {"applied": "true"}) or {}
        return out

    def settings(self) -> dict:
        """brokers get-all-dynamic-config: the values set dynamically (pulsar-admin's
        /configuration/values); Pulsar's defaults are not in it."""
        return self.rest.get("/admin/v2/brokers/configuration/values") or {}

    def update_setting(self, name: str, value: str):
        self.rest.post(f"/admin/v2/brokers/configuration/{quote(name, safe='')}/"
                       f"{quote(str(value), safe='')}")
        return value


# -- schemas ----------------------------------------------------------------------------------------------
def schema_path(topic) -> str:
    return topic_path(topic).replace("/admin/v2/persistent/", "/admin/v2/schemas/", 1) \
        .replace("/admin/v2/non-persistent/", "/admin/v2/schemas/", 1)


class Schemas(_Noun):
    def get(self, topic, version=None):
        path = f"{schema_path(topic)}/schema" + (f"/{int(version)}" if version is not None else "")
        return self.rest.get(path)

    def delete(self, topic) -> bool:
        try:
            self.get(topic)
        except NotFound:
            return False
        self.rest.delete(f"{schema_path(topic)}/schema")
        return True

    def check_consumer(self, topics, value_schema) -> None:
        """consume/read --value-schema: the remote client library decides, as Pulsar's do."""
        return None
