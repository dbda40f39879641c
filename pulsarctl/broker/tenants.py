"""Tenants and namespaces (pulsar-admin tenants / namespaces); deleting them, which deletes
what they hold, is cascade.py's."""
from __future__ import annotations

from pulsarctl.errors import AlreadyExists, InvalidValue, NamespaceNotFound, TenantNotFound
from pulsarctl.names import DEFAULT_NAMESPACE, PUBLIC_TENANT, check_tenant, parse_namespace  # noqa: F401

DEFAULT_TENANT_INFO = {"adminRoles": [], "allowedClusters": ["standalone"]}


def ensure_defaults(ctx) -> None:
    """Tenant public and namespace public/default exist from the start, as in standalone."""
    if ctx.get("tenant", PUBLIC_TENANT) is None:
        ctx.put(dict(DEFAULT_TENANT_INFO), "tenant", PUBLIC_TENANT)
        ctx.put({"policies": {}}, "ns", PUBLIC_TENANT, DEFAULT_NAMESPACE)


def list_tenants(ctx) -> list[str]:
    return [k[1] for k, _ in ctx.scan("tenant")]


def get_tenant(ctx, name: str) -> dict:
    check_tenant(name)
    info = ctx.get("tenant", name)
    if info is None:
        raise TenantNotFound(f"tenant '{name}' does not exist")
    return info


def create_tenant(ctx, name: str, admin_roles=(), allowed_clusters=()) -> dict:
    check_tenant(name)
    if ctx.get("tenant", name) is not None:
        raise AlreadyExists(f"tenant '{name}' already exists")
    info = {"adminRoles": list(admin_roles), "allowedClusters": list(allowed_clusters) or ["standalone"]}
    ctx.put(info, "tenant", name)
    return info


def list_namespaces(ctx, tenant: str) -> list[str]:
    get_tenant(ctx, tenant)
    return [f"{k[1]}/{k[2]}" for k, _ in ctx.scan("ns", tenant)]


def get_namespace(ctx, name: str) -> dict:
    tenant, ns = parse_namespace(name)
    rec = ctx.get("ns", tenant, ns)
    if rec is None:
        if ctx.get("tenant", tenant) is None:
            raise TenantNotFound(f"tenant '{tenant}' does not exist")
        raise NamespaceNotFound(f"namespace '{name}' does not exist")
    return rec


def put_namespace(ctx, name: str, rec: dict) -> None:
    ctx.put(rec, "ns", *parse_namespace(name))


def create_namespace(ctx, name: str) -> None:
    tenant, ns = parse_namespace(name)
    get_tenant(ctx, tenant)
    if ctx.get("ns", tenant, ns) is not None:
        raise AlreadyExists(f"namespace '{name}' already exists")
    ctx.put({"policies": {}}, "ns", tenant, ns)


def update_tenant(ctx, name: str, admin_roles=None, allowed_clusters=None) -> dict:
    """pulsar-admin tenants update: what is given replaces the tenant's; what is not stays."""
    info = dict(get_tenant(ctx, name))
    if admin_roles is not None:
        info["adminRoles"] = list(admin_roles)
    if allowed_clusters is not None:
        info["allowedClusters"] = list(allowed_clusters) or ["standalone"]
    ctx.put(info, "tenant", name)
    return info


# -- authorization data: Pulsar's Policies.auth_policies, stored with the namespace's policies --
AUTH_POLICIES = "auth_policies"
# AuthAction, in its declaration order (the order permissions lists a role's actions in).
AUTH_ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")


def check_actions(actions) -> list[str]:
    wanted = set()
    for a in actions:
        if a not in AUTH_ACTIONS:
            raise InvalidValue(f"unknown action {a!r}", hint=f"use {', '.join(AUTH_ACTIONS)}")
        wanted.add(a)
    if not wanted:
        raise InvalidValue("no action given", hint="pass --actions produce,consume")
    return [a for a in AUTH_ACTIONS if a in wanted]


def check_role(role: str) -> str:
    if not role or not role.strip():
        raise InvalidValue("the role must not be empty")
    return role


def auth_policies(ctx, ns: str) -> dict:
    """The namespace's auth_policies as Pulsar's AuthPolicies: namespace_auth {role: actions},
    destination_auth {topic: {role: actions}}, subscription_auth_roles."""
    pol = get_namespace(ctx, ns).get("policies", {}).get(AUTH_POLICIES) or {}
    return {"namespace_auth": dict(pol.get("namespace_auth", {})),
            "destination_auth": dict(pol.get("destination_auth", {})),
            "subscription_auth_roles": dict(pol.get("subscription_auth_roles", {}))}


def _put_auth(ctx, ns: str, auth: dict) -> None:
    rec = get_namespace(ctx, ns)
    rec.setdefault("policies", {})[AUTH_POLICIES] = auth
    put_namespace(ctx, ns, rec)


def grant_permission(ctx, ns: str, role: str, actions) -> list[str]:
    """namespaces grant-permission: the role's actions on the namespace become these."""
    role, acts = check_role(role), check_actions(actions)
    auth = auth_policies(ctx, ns)
    auth["namespace_auth"][role] = acts
    _put_auth(ctx, ns, auth)
    return acts


def revoke_permission(ctx, ns: str, role: str) -> bool:
    """namespaces revoke-permission: whether the role had permissions (none is not an error,
    as in Pulsar)."""
    check_role(role)
    auth = auth_policies(ctx, ns)
    had = auth["namespace_auth"].pop(role, None) is not None
    if had:
        _put_auth(ctx, ns, auth)
    return had


def permissions(ctx, ns: str) -> dict:
    """namespaces permissions: {role: [actions]}."""
    return auth_policies(ctx, ns)["namespace_auth"]
