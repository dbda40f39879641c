"""Authorization data as Pulsar's (tenant adminRoles, namespace grants stored as the namespace's
auth_policies) and pulsarctl/auth/authorization.allowed's rules."""
from __future__ import annotations

import pytest

from pulsarctl.auth import authorization as authz
from pulsarctl.broker import Broker
from pulsarctl.errors import InvalidValue, NamespaceNotFound, NotAuthorized

SUPER = authz.Settings.of(super_user_roles=["root"])


@pytest.fixture
def b(tmp_path):
    broker = Broker(str(tmp_path / "store"))
    broker.tenants.create("acme", admin_roles=["acme-admin"])
    broker.namespaces.create("acme/orders")
    yield broker
    broker.close()


def may(b, role, topic, action, settings=SUPER):
    return b.allowed(role, topic, action, settings)


def test_grants_are_stored_with_the_namespace_policies(b):
    assert b.namespaces.permissions("acme/orders") == {}
    assert b.namespaces.grant_permission("acme/orders", "app", ["consume", "produce"]) == \
        ["produce", "consume"]
    assert b.namespaces.permissions("acme/orders") == {"app": ["produce", "consume"]}
    pol = b.namespaces.policies("acme/orders")["auth_policies"]
    assert pol["namespace_auth"] == {"app": ["produce", "consume"]}
    assert b.namespaces.revoke_permission("acme/orders", "app") is True
    assert b.namespaces.revoke_permission("acme/orders", "app") is False
    assert b.namespaces.permissions("acme/orders") == {}
    with pytest.raises(InvalidValue):
        b.namespaces.grant_permission("acme/orders", "app", ["write"])
    with pytest.raises(NamespaceNotFound):
        b.namespaces.grant_permission("acme/none", "app", ["produce"])


def test_tenant_update_replaces_what_is_given(b):
    assert b.tenants.update("acme", admin_roles=["x", "y"]) == {
        "adminRoles": ["x", "y"], "allowedClusters": ["standalone"]}
    assert b.tenants.update("acme", allowed_clusters=["standalone", "c2"])["adminRoles"] == ["x", "y"]


def test_produce_and_consume_need_the_granted_action(b):
    t = "persistent://acme/orders/created"
    assert not may(b, "app", t, "produce")
    b.namespaces.grant_permission("acme/orders", "app", ["produce"])
    assert may(b, "app", t, "produce") and may(b, "app", "acme/orders/x-partition-3", "produce")
    assert may(b, "app", t, "lookup")
    assert not may(b, "app", t, "consume")
    assert not may(b, "other", t, "produce")
    assert not may(b, "app", "persistent://public/default/t", "produce")
    assert not may(b, "app", "acme/missing/t", "produce")
    with pytest.raises(NotAuthorized):
        b._read(authz.check, "app", t, "consume", SUPER)


def test_super_users_tenant_admins_and_the_anonymous_role(b):
    t = "acme/orders/created"
    assert may(b, "root", t, "consume") and may(b, "root", "acme", authz.ADMIN)
    assert may(b, "acme-admin", t, "produce") and may(b, "acme-admin", "acme/orders", authz.ADMIN)
    assert not may(b, "acme-admin", "public/default/t", "produce")
    assert not may(b, "app", "acme", authz.ADMIN)
    assert not may(b, None, t, "consume")  # no credentials, no anonymous role: refused
    b.namespaces.grant_permission("acme/orders", "guest", ["consume"])
    anon = authz.Settings.of(anonymous_user_role="guest")
    assert may(b, None, t, "consume", anon) and not may(b, None, t, "produce", anon)
