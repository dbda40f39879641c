"""pulsar-admin tenants and namespaces."""
from __future__ import annotations

from pulsarctl.broker import cascade, policies, tenants
from pulsarctl.broker.admin.base import Noun
from pulsarctl.wake import wakes


class Tenants(Noun):
    __slots__ = ()

    def list(self):
        return self._broker._read(tenants.list_tenants)

    def get(self, name):
        return self._broker._read(tenants.get_tenant, name)

    def create(self, name, admin_roles=(), allowed_clusters=()):
        return self._broker._write(tenants.create_tenant, name, admin_roles, allowed_clusters)

    def update(self, name, admin_roles=None, allowed_clusters=None):
        """Replace what is given (None keeps the tenant's)."""
        return self._broker._write(tenants.update_tenant, name, admin_roles, allowed_clusters)

    @wakes   # the consumers of its topics (serve's waiting ones) look now, and are closed
    def delete(self, name, force=False):
        return self._broker._write(cascade.delete_tenant, name, force)


class Namespaces(Noun):
    __slots__ = ()

    def list(self, tenant):
        return self._broker._read(tenants.list_namespaces, tenant)

    def create(self, name):
        return self._broker._write(tenants.create_namespace, name)

    @wakes   # the consumers of its topics (serve's waiting ones) look now, and are closed
    def delete(self, name, force=False):
        return self._broker._write(cascade.delete_namespace, name, force)

    def policies(self, name):
        """Every policy field, null where the namespace does not set it (the broker default
        applies), as pulsar-admin namespaces policies shows Pulsar's Policies object."""
        def run(ctx):
            own = policies.ns_policies(ctx, name)
            return {**{f: None for f in policies.NAMES.values()}, **own}
        return self._broker._read(run)

    def grant_permission(self, name, role, actions):
        """The role may do these actions (produce, consume, ...) on the namespace's topics."""
        return self._broker._write(tenants.grant_permission, name, role, actions)

    def revoke_permission(self, name, role):
        return self._broker._write(tenants.revoke_permission, name, role)

    def permissions(self, name):
        """{role: [actions]}, as pulsar-admin namespaces permissions prints it."""
        return self._broker._read(tenants.permissions, name)
