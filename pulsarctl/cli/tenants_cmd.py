"""pulsar-admin tenants and namespaces."""
from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from pulsarctl.cli import render
from pulsarctl.cli.common import done, Force, Output, fmt, state

tenants = typer.Typer(help="Manage tenants (pulsar-admin tenants).", no_args_is_help=True)
namespaces = typer.Typer(help="Manage namespaces (pulsar-admin namespaces).", no_args_is_help=True)

Tenant = Annotated[str, typer.Argument(help="Tenant name.", show_default=False)]
Namespace = Annotated[str, typer.Argument(help="tenant/namespace", show_default=False)]
AdminRoles = Annotated[Optional[List[str]], typer.Option(
    "-r", "--admin-roles", help="Admin roles, comma-separated (repeatable).")]
AllowedClusters = Annotated[Optional[List[str]], typer.Option(
    "-c", "--allowed-clusters", help="Allowed clusters, comma-separated (repeatable).")]


def _split(values: list[str] | None) -> list[str] | None:
    """pulsar-admin's comma-separated lists; the option may also be repeated."""
    if values is None:
        return None
    return [v.strip() for value in values for v in value.split(",") if v.strip()]




@tenants.command("list", help="List tenants.")
def tenants_list(ctx: typer.Context, output: Output = None):
    render.names(state(ctx).admin().tenants.list(), fmt(ctx, output), "tenant")


@tenants.command("get", help="Show a tenant's configuration.")
def tenants_get(ctx: typer.Context, tenant: Tenant, output: Output = None):
    render.data(state(ctx).admin().tenants.get(tenant), fmt(ctx, output))


@tenants.command("create", help="Create a tenant.")
def tenants_create(
    ctx: typer.Context, tenant: Tenant,
    admin_roles: Annotated[Optional[List[str]], typer.Option("-r", "--admin-roles",
                                                             help="Admin role (repeatable).")] = None,
    allowed_clusters: Annotated[Optional[List[str]], typer.Option(
        "-c", "--allowed-clusters", help="Allowed cluster (repeatable).")] = None,
    output: Output = None,
):
    info = state(ctx).admin().tenants.create(tenant, _split(admin_roles) or (),
                                              _split(allowed_clusters) or ())
    done(ctx, output, {"tenant": tenant, **info}, f"created tenant {tenant}")


@tenants.command("update", help="Change a tenant's admin roles or allowed clusters (what is "
                 "not given stays).")
def tenants_update(ctx: typer.Context, tenant: Tenant, admin_roles: AdminRoles = None,
                   allowed_clusters: AllowedClusters = None, output: Output = None):
    info = state(ctx).admin().tenants.update(tenant, _split(admin_roles), _split(allowed_clusters))
    done(ctx, output, {"tenant": tenant, **info}, f"updated tenant {tenant}")


@tenants.command("delete", help="Delete a tenant (refused while it has namespaces, unless --force).")
def tenants_delete(ctx: typer.Context, tenant: Tenant, force: Force = False, output: Output = None):
    state(ctx).admin().tenants.delete(tenant, force)
    done(ctx, output, {"tenant": tenant, "deleted": True}, f"deleted tenant {tenant}")


@namespaces.command("list", help="List the namespaces of a tenant.")
def namespaces_list(ctx: typer.Context, tenant: Tenant, output: Output = None):
    render.names(state(ctx).admin().namespaces.list(tenant), fmt(ctx, output), "namespace")


@namespaces.command("create", help="Create a namespace.")
def namespaces_create(ctx: typer.Context, namespace: Namespace, output: Output = None):
    state(ctx).admin().namespaces.create(namespace)
    done(ctx, output, {"namespace": namespace, "created": True}, f"created namespace {namespace}")


@namespaces.command("delete", help="Delete a namespace (refused while it has topics, unless --force).")
def namespaces_delete(ctx: typer.Context, namespace: Namespace, force: Force = False,
                      output: Output = None):
    state(ctx).admin().namespaces.delete(namespace, force)
    done(ctx, output, {"namespace": namespace, "deleted": True}, f"deleted namespace {namespace}")


@namespaces.command("policies", help="Show a namespace's policies.")
def namespaces_policies(ctx: typer.Context, namespace: Namespace, output: Output = None):
    render.data(state(ctx).admin().namespaces.policies(namespace), fmt(ctx, output))


@namespaces.command("grant-permission", help="Let a role produce, consume... on the namespace's "
                    "topics (the role's actions become these).")
def namespaces_grant_permission(
    ctx: typer.Context, namespace: Namespace,
    role: Annotated[str, typer.Option("--role", help="Client role.", show_default=False)],
    actions: Annotated[List[str], typer.Option(
        "--actions", show_default=False,
        help="produce, consume, functions, sources, sinks, packages; comma-separated.")],
    output: Output = None,
):
    acts = state(ctx).admin().namespaces.grant_permission(namespace, role, _split(actions))
    done(ctx, output, {"namespace": namespace, "role": role, "actions": acts},
         f"granted {','.join(acts)} on {namespace} to {role}")


@namespaces.command("revoke-permission", help="Take every permission of a role on the namespace "
                    "away.")
def namespaces_revoke_permission(
    ctx: typer.Context, namespace: Namespace,
    role: Annotated[str, typer.Option("--role", help="Client role.", show_default=False)],
    output: Output = None,
):
    had = state(ctx).admin().namespaces.revoke_permission(namespace, role)
    done(ctx, output, {"namespace": namespace, "role": role, "revoked": had},
         f"revoked the permissions of {role} on {namespace}" if had
         else f"{role} had no permissions on {namespace}")


@namespaces.command("permissions", help="Show the roles granted permissions on the namespace.")
def namespaces_permissions(ctx: typer.Context, namespace: Namespace, output: Output = None):
    perms = state(ctx).admin().namespaces.permissions(namespace)
    out = fmt(ctx, output)
    render.data(perms, render.JSON if out == render.TEXT else out)
