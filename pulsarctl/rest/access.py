"""Who may call which admin REST route, as Pulsar's web service decides it.

Authentication (AuthenticationFilter): the role comes from the request's Authorization header
(Bearer token, Basic user:password) or its client certificate; a request that proves nothing is
the anonymous role when anonymousUserRole is set, and 401 otherwise.

Authorization, when authorizationEnabled (PulsarAuthorizationProvider's rules, per route):
- the tenants list and creating, updating or deleting a tenant: super-users only;
- a tenant, its namespaces and their policies: the tenant's admin roles (and super-users);
- a namespace's topic list and a topic's lookup, partitions, stats and last message id: a role
  that may lookup (produce or consume granted), as TopicOperation.LOOKUP / GET_STATS;
- a topic's subscriptions and the subscription routes (create, delete, skip, reset, expire):
  consume, as TopicOperation.SUBSCRIBE / SKIP / RESET_CURSOR / EXPIRE_MESSAGES;
- posting a schema or checking its compatibility: produce; reading it: lookup;
- everything else on a topic (create, delete, partitions, terminate, compaction) and deleting
  a schema: the tenant's admin roles;
- clusters, broker health and /metrics: any authenticated role.
A refused request is 401 with Pulsar's reason and nothing else: no topic names, no data."""
from __future__ import annotations

from aiohttp import web

from pulsarctl.auth import authorization
from pulsarctl.auth.service import common_name
from pulsarctl.errors import NotAuthorized

SUPER = "super"
OPEN = "open"
LOOKUP_GETS = ("/partitions", "/stats", "/partitioned-stats", "/internalStats", "/lastMessageId")


def required(request) -> tuple[str, str]:
    """(action, target) the route needs: action is one of authorization's actions, SUPER or
    OPEN; target a topic, `tenant/ns` or a tenant."""
    m = request.match_info
    if getattr(m, "http_exception", None) is not None:
        return OPEN, ""   # no such route (404/405): the router's answer, whoever asks
    path, method = request.path, request.method
    tenant, ns = m.get("tenant"), m.get("ns")
    if path.startswith("/lookup/"):
        return "lookup", _topic(m)
    if path.startswith("/admin/v2/schemas/"):
        t = f"persistent://{tenant}/{ns}/{m['topic']}"
        if method == "GET":
            return "lookup", t
        return ("produce", t) if method == "POST" else (authorization.ADMIN, tenant)
    if path.startswith("/admin/v2/tenants"):
        if tenant is None or method != "GET":
            return SUPER, ""
        return authorization.ADMIN, tenant
    if path.startswith("/admin/v2/namespaces/"):
        if ns is not None and method == "GET" and path.endswith("/topics"):
            return "lookup", f"persistent://{tenant}/{ns}/-"
        return (authorization.ADMIN, tenant) if tenant else (SUPER, "")
    if "domain" in m and "topic" not in m:   # a namespace's topics (and partitioned topics)
        return "lookup", f"{m['domain']}://{tenant}/{ns}/-"
    if "topic" in m:
        t = _topic(m)
        if "sub" in m or (method == "GET" and path.endswith("/subscriptions")):
            return "consume", t
        if method == "GET" and path.endswith(LOOKUP_GETS):
            return "lookup", t
        return authorization.ADMIN, tenant
    return OPEN, ""


def _topic(m) -> str:
    return f"{m['domain']}://{m['tenant']}/{m['ns']}/{m['topic']}"


def middleware(authentication, settings, run):
    """The aiohttp middleware: authenticate, then authorize the route. run(fn) runs
    fn(broker) in the app's worker thread (where the store is read)."""

    @web.middleware
    async def access(request, handler):
        if not authentication.enabled and settings is None:
            return await handler(request)
        cn = common_name(request.transport.get_extra_info("peercert")
                         if request.transport is not None else None)
        header = request.headers.get("Authorization")
        role = await run(lambda b: authentication.http_role(header, cn, b.clock.now()))
        if settings is not None:
            action, target = required(request)
            if action != OPEN and not await run(lambda b: _allowed(b, role, action, target,
                                                                  settings)):
                raise NotAuthorized(f"Client is not authorized to {request.method} "
                                    f"{request.path}" if role is None else
                                    f"{role} is not authorized to {request.method} "
                                    f"{request.path}")
        return await handler(request)
    return access


def _allowed(broker, role, action, target, settings) -> bool:
    if action == SUPER:
        return authorization.is_super_user(settings, role if role is not None
                                           else settings.anonymous_user_role)
    return broker.allowed(role, target, action, settings)

