"""tenants update and namespaces grant-permission / revoke-permission / permissions, as
pulsar-admin's."""
from __future__ import annotations

from cli_helpers import assert_error, ok, pjson


def test_tenants_update_takes_comma_separated_lists(cli):
    ok(cli("tenants", "create", "acme"))
    ok(cli("tenants", "update", "acme", "--admin-roles", "ops,dev", "--allowed-clusters",
           "standalone"))
    assert pjson(cli("tenants", "get", "acme", "-o", "json")) == {
        "adminRoles": ["ops", "dev"], "allowedClusters": ["standalone"]}
    assert_error(cli("tenants", "update", "nope", "-r", "x"), 3)


def test_grant_list_and_revoke(cli):
    ok(cli("namespaces", "create", "public/orders"))
    r = ok(cli("namespaces", "grant-permission", "public/orders", "--role", "app",
               "--actions", "consume,produce"))
    assert r.stderr == "granted produce,consume on public/orders to app\n"
    assert pjson(cli("namespaces", "permissions", "public/orders")) == {
        "app": ["produce", "consume"]}
    ok(cli("namespaces", "revoke-permission", "public/orders", "--role", "app"))
    assert pjson(cli("namespaces", "permissions", "public/orders")) == {}


def test_bad_grants_are_refused_before_anything_is_written(cli):
    line = assert_error(cli("namespaces", "grant-permission", "public/default", "--role", "app",
                            "--actions", "produce,write"), 2, stdout_empty=True)
    assert "unknown action 'write'" in line
    assert pjson(cli("namespaces", "permissions", "public/default")) == {}
    assert_error(cli("namespaces", "grant-permission", "public/none", "--role", "a",
                     "--actions", "produce"), 3)
    assert_error(cli("namespaces", "grant-permission", "public/default", "--role", " ",
                     "--actions", "produce"), 2)
