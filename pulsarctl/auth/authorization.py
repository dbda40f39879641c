"""Pulsar's authorization rules (AuthorizationService over PulsarAuthorizationProvider), as a pure
function of the store's authorization data and the broker's settings.

- a super-user role (superUserRoles) may do everything;
- a tenant's admin role (the tenant's adminRoles) may administer the tenant and do every topic
  operation in it, as allowTopicOperationAsync falls back to isTenantAdmin;
- produce and consume need the action granted to the role on the topic's namespace
  (`namespaces grant-permission`) or on the topic itself (auth_policies.destination_auth);
  lookup needs either;
- a client that authenticated with nothing has the anonymous role (anonymousUserRole) when one
  is configured, and no role otherwise (refused).

The server calls it when authorizationEnabled is set; the command line never does: it opens the
store as its owner. Wildcard role matching (authorizationAllowWildcardsMatching) is not done.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pulsarctl.broker import tenants
from pulsarctl.errors import NamespaceNotFound, NotAuthorized, TenantNotFound
from pulsarctl.names import parse_topic

TOPIC_ACTIONS = ("produce", "consume", "lookup", "functions", "sources", "sinks", "packages")
ADMIN = "admin"  # administering the tenant (its namespaces, their policies, their topics)


@dataclass(frozen=True)
class Settings:
    """broker.conf's authorization keys."""
    super_user_roles: frozenset = field(default_factory=frozenset)
    anonymous_user_role: str | None = None

    @classmethod
    def of(cls, super_user_roles=(), anonymous_user_role=None) -> "Settings":
        return cls(frozenset(r for r in super_user_roles if r), anonymous_user_role or None)


def is_super_user(settings: Settings, role: str | None) -> bool:
    return role is not None and role in settings.super_user_roles


def is_tenant_admin(ctx, role: str | None, tenant: str) -> bool:
    if role is None:
        return False
    try:
        info = tenants.get_tenant(ctx, tenant)
    except TenantNotFound:
        return False
    return role in info.get("adminRoles", ())


def allowed(ctx, role: str | None, topic: str, action: str,
            settings: Settings = Settings(), missing: bool = False) -> bool:
    """Whether role may do action (produce, consume, lookup, functions, ..., or admin) on topic
    (a topic name; for admin, a namespace `tenant/ns` or a tenant name also does). ctx is a
    broker read context (Broker.allowed runs it). missing is the
    answer for a topic whose namespace does not exist (the server lets the operation fail with
    TopicNotFound, as Pulsar's lookup answers: it can create nothing there)."""
    if action != ADMIN and action not in TOPIC_ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    role = role if role is not None else settings.anonymous_user_role
    if role is None:
        return False
    if is_super_user(settings, role):
        return True
    if action == ADMIN:
        return is_tenant_admin(ctx, role, topic.split("://", 1)[-1].split("/", 1)[0])
    t = parse_topic(topic)
    base = str(t.partitioned_topic_name) if t.is_partition else str(t)
    if is_tenant_admin(ctx, role, t.tenant):
        return True
    try:
        auth = tenants.auth_policies(ctx, t.namespace)
    except (NamespaceNotFound, TenantNotFound):
        return missing
    granted = set(auth["namespace_auth"].get(role, ()))
    granted |= set(auth["destination_auth"].get(base, {}).get(role, ()))
    if action == "lookup":
        return bool(granted & {"produce", "consume"})
    return action in granted


def check(ctx, role: str | None, topic: str, action: str, settings: Settings = Settings()) -> None:
    """NotAuthorized unless allowed (the server answers it with Pulsar's AuthorizationError)."""
    if not allowed(ctx, role, topic, action, settings):
        raise NotAuthorized(f"Client is not authorized to {action} {topic}" if role is None
                            else f"{role} is not authorized to {action} {topic}")
