"""Tenants and namespaces (pulsar-admin tenants / namespaces); deleting them, which deletes
what they hold, is cascade.py's."""
from __future__ import annotations

from pulsarctl.errors import AlreadyExists, NamespaceNotFound, TenantNotFound
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
