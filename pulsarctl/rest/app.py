"""The admin REST API's routes: Pulsar's /admin/v2 (clusters, tenants, namespaces, topics;
subscriptions, schemas, messages, backlog quotas and the broker's runtime configuration in
the modules beside this one), /lookup/v2 and /metrics, each a thin handler over the Broker's
admin nouns.

The Broker's calls are synchronous LMDB transactions: they run in one worker thread (the
Broker is opened there, on first use, and closed there when the app stops), never on the
event loop. Every error is an answer shaped as Pulsar's ({"reason": ...}, errors.py): a
malformed body, an unknown path or a wrong method never ends the server."""
from __future__ import annotations

import logging

from aiohttp import web

from pulsarctl.broker import policies
from pulsarctl.errors import InvalidValue, PulsarctlError
from pulsarctl.auth.service import Authentication
from pulsarctl.rest import access, brokers, messages, metrics, namespaces, schemas, subscriptions
from pulsarctl.rest.base import (
    SETTINGS, WORKER, Worker, body, done, flag, message_id_json, namespace_of, ok, topic_of,
    worker,
)
from pulsarctl.rest.errors import from_error, reason

log = logging.getLogger("pulsarctl.rest")


# -- middleware: every error as Pulsar's {"reason": ...} ----------------------------------------
@web.middleware
async def pulsar_errors(request, handler):
    try:
        return await handler(request)
    except PulsarctlError as exc:
        return from_error(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        text = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status, exc.reason)
        return reason(exc.status, text)
    except ConnectionError:
        # the client went away mid-request (a body cut short): one line, not a bug's stack
        log.warning("%s %s from %s: the connection ended before the request did",
                    request.method, request.path, request.remote)
        return reason(400, "the connection ended before the request did")
    except Exception as exc:  # a bug: answered, logged, the server goes on
        log.exception("internal error on %s %s", request.method, request.path)
        return reason(500, f"internal error: {type(exc).__name__}: {exc}")


# -- lookup ----------------------------------------------------------------------------------------
async def lookup(request):
    settings = request.app[SETTINGS]
    ns = namespace_of(request)
    await worker(request).run(lambda b: b.namespaces.policies(ns))  # the namespace must exist
    return ok({"brokerUrl": settings["service_url"], "brokerUrlTls": settings["service_url_tls"],
               "httpUrl": settings["web_url"], "httpUrlTls": settings["web_url_tls"],
               "nativeUrl": settings["service_url"]})


# -- clusters --------------------------------------------------------------------------------------
async def clusters(request):
    return ok([request.app[SETTINGS]["cluster"]])


async def cluster(request):
    s = request.app[SETTINGS]
    if request.match_info["cluster"] != s["cluster"]:
        return reason(404, "Cluster does not exist")
    # Pulsar's ClusterData: what is not configured (a TLS URL) is left out, not "", and the
    # broker-client TLS settings have their defaults.
    doc = {"serviceUrl": s["web_url"], "serviceUrlTls": s["web_url_tls"],
           "brokerServiceUrl": s["service_url"], "brokerServiceUrlTls": s["service_url_tls"]}
    return ok({**{k: v for k, v in doc.items() if v}, **CLUSTER_DEFAULTS})


CLUSTER_DEFAULTS = {"brokerClientTlsEnabled": False, "tlsAllowInsecureConnection": False,
                    "brokerClientTlsEnabledWithKeyStore": False,
                    "brokerClientTlsTrustStoreType": "JKS", "brokerClientTlsKeyStoreType": "JKS",
                    "brokerClientSslFactoryPlugin":
                        "org.apache.pulsar.common.util.DefaultPulsarSslFactory"}


async def health(request):
    return web.Response(text="ok")


# -- tenants ---------------------------------------------------------------------------------------
async def tenants_list(request):
    return ok(await worker(request).run(lambda b: b.tenants.list()))


async def tenant_get(request):
    name = request.match_info["tenant"]
    return ok(await worker(request).run(lambda b: b.tenants.get(name)))


def _tenant_info(request, doc) -> tuple[list, list]:
    doc = doc or {}
    if not isinstance(doc, dict):
        raise InvalidValue("a TenantInfo is a JSON object (adminRoles, allowedClusters)")
    roles = doc.get("adminRoles") or []
    clusters_ = doc.get("allowedClusters") or []
    if not isinstance(roles, list) or not isinstance(clusters_, list):
        raise InvalidValue("adminRoles and allowedClusters are JSON arrays of names")
    return roles, clusters_


def _unknown_clusters(request, clusters_):
    unknown = [c for c in clusters_ if c != request.app[SETTINGS]["cluster"]]
    if unknown:
        return reason(412, f"Clusters do not exist: {', '.join(map(str, unknown))}")
    return None


async def tenant_create(request):
    name = request.match_info["tenant"]
    roles, clusters_ = _tenant_info(request, await body(request))
    refused = _unknown_clusters(request, clusters_)
    if refused:
        return refused
    await worker(request).run(lambda b: b.tenants.create(name, roles, clusters_))
    return done()


async def tenant_update(request):
    """POST a TenantInfo: it replaces the tenant's (pulsar-admin tenants update sends the
    tenant's own roles or clusters for what it is not told to change)."""
    name = request.match_info["tenant"]
    roles, clusters_ = _tenant_info(request, await body(request))
    refused = _unknown_clusters(request, clusters_)
    if refused:
        return refused
    await worker(request).run(lambda b: b.tenants.update(name, roles, clusters_))
    return done()


async def tenant_delete(request):
    name = request.match_info["tenant"]
    force = flag(request, "force")
    await worker(request).run(lambda b: b.tenants.delete(name, force))
    return done()


# -- namespaces ------------------------------------------------------------------------------------
async def namespaces_list(request):
    tenant = request.match_info["tenant"]
    return ok(await worker(request).run(lambda b: b.namespaces.list(tenant)))


async def namespace_create(request):
    ns = namespace_of(request)
    await body(request)  # a Policies document may come; it must at least be JSON
    await worker(request).run(lambda b: b.namespaces.create(ns))
    return done()


async def namespace_delete(request):
    ns = namespace_of(request)
    force = flag(request, "force")
    await worker(request).run(lambda b: b.namespaces.delete(ns, force))
    return done()


async def namespace_policies(request):
    ns = namespace_of(request)
    own = await worker(request).run(lambda b: b.namespaces.policies(ns))
    return ok(namespaces.pulsar_policies(own, request.app[SETTINGS]["cluster"]))


async def namespace_topics(request):
    ns = namespace_of(request)
    mode = request.query.get("mode", "PERSISTENT").upper()
    names = await worker(request).run(lambda b: b.topics.list(ns))
    if mode == "PERSISTENT":
        names = [n for n in names if n.startswith("persistent://")]
    elif mode == "NON_PERSISTENT":
        names = [n for n in names if n.startswith("non-persistent://")]
    return ok(names)


async def namespace_permissions(request):
    ns = namespace_of(request)
    return ok(await worker(request).run(lambda b: b.namespaces.permissions(ns)))


async def namespace_grant(request):
    """POST .../permissions/{role} with the actions as a JSON list (pulsar-admin's
    Set<AuthAction>): the role's actions on the namespace become these."""
    ns, role = namespace_of(request), request.match_info["role"]
    actions = await body(request, default=[])
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise InvalidValue('the actions are a JSON list such as ["produce", "consume"]')
    await worker(request).run(lambda b: b.namespaces.grant_permission(ns, role, actions))
    return done()


async def namespace_revoke(request):
    ns, role = namespace_of(request), request.match_info["role"]
    await worker(request).run(lambda b: b.namespaces.revoke_permission(ns, role))
    return done()


# A namespace policy over REST: (path, policies field, how a body becomes the stored value).
def _ttl(v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidValue(f"messageTTL is a whole number of seconds, not {v!r}")
    return v


def _dedup(v):
    if not isinstance(v, bool):
        raise InvalidValue(f"deduplication is true or false, not {v!r}")
    return v


def _retention(v):
    if not isinstance(v, dict):
        raise InvalidValue("retention is a JSON object with retentionTimeInMinutes and "
                           "retentionSizeInMB")
    return {"retentionTimeInMinutes": v.get("retentionTimeInMinutes"),
            "retentionSizeInMB": v.get("retentionSizeInMB")}


NS_POLICIES = {
    "messageTTL": ("message_ttl_in_seconds", _ttl),
    "deduplication": ("deduplicationEnabled", _dedup),
    "retention": ("retention_policies", _retention),
}


def _ns_policy(kind):
    field, parse = NS_POLICIES[kind]

    async def get(request):
        ns = namespace_of(request)
        value = await worker(request).run(lambda b: b.policies.get("namespace", ns, field))
        # Not set: Pulsar answers 200 with an empty body (pulsar-admin prints null).
        return web.Response(status=200) if value is None else ok(value)

    async def set_(request):
        ns = namespace_of(request)
        doc = await body(request)
        if doc is None:
            raise InvalidValue(f"POST {kind} needs a JSON body")
        value = parse(doc)
        await worker(request).run(lambda b: b.policies.set("namespace", ns, field, value))
        return done()

    async def remove(request):
        ns = namespace_of(request)
        await worker(request).run(lambda b: b.policies.remove("namespace", ns, field))
        return done()
    return get, set_, remove


async def ns_schema_strategy_get(request):
    """The namespace's own schema compatibility strategy: UNDEFINED when it sets none (the
    broker's then applies), as Pulsar answers policies.schema_compatibility_strategy."""
    ns = namespace_of(request)
    own = await worker(request).run(
        lambda b: b.policies.get("namespace", ns, policies.SCHEMA_STRATEGY))
    return ok(own or "UNDEFINED")


async def ns_schema_strategy_set(request):
    """PUT a strategy (a JSON string, Pulsar's SchemaCompatibilityStrategy); UNDEFINED goes
    back to the broker's."""
    ns = namespace_of(request)
    doc = await body(request)
    if not isinstance(doc, str):
        raise InvalidValue("schemaCompatibilityStrategy takes a JSON string, e.g. \"FULL\"")
    if doc.upper() == "UNDEFINED":
        await worker(request).run(
            lambda b: b.policies.remove("namespace", ns, policies.SCHEMA_STRATEGY))
    else:
        await worker(request).run(
            lambda b: b.policies.set("namespace", ns, policies.SCHEMA_STRATEGY, doc))
    return done()


# -- topics ----------------------------------------------------------------------------------------
def _in_domain(request, names):
    prefix = request.match_info["domain"] + "://"
    return [n for n in names if n.startswith(prefix)]


async def topics_list(request):
    ns = namespace_of(request)
    return ok(_in_domain(request, await worker(request).run(lambda b: b.topics.list(ns))))


async def topics_partitioned(request):
    ns = namespace_of(request)
    names = await worker(request).run(lambda b: b.topics.list_partitioned(ns))
    return ok(_in_domain(request, names))


async def topic_create(request):
    t = topic_of(request)
    await worker(request).run(lambda b: b.topics.create(t))
    return done()


async def topic_delete(request):
    """As Pulsar: a partitioned topic is deleted with delete-partitioned-topic (409 here);
    without force the topic goes with its subscriptions unless consumers are connected."""
    t = topic_of(request)
    force = flag(request, "force")

    def run(b):
        if b.topics.partitioned_metadata(t)["partitions"]:
            return reason(409, f"{t} is a partitioned topic, instead of calling delete topic, "
                               "please call delete-partitioned-topic.")
        if force:
            b.topics.delete(t, True)
        else:
            b.topics.delete_unless_busy(t)
        return done()
    return await worker(request).run(run)


async def _partition_count(request) -> int:
    n = await body(request)
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidValue(f"the number of partitions is a whole number, not {n!r}")
    if n <= 0:
        return reason(406, "Number of partitions should be more than 0")
    return n


async def partitions_create(request):
    t = topic_of(request)
    n = await _partition_count(request)
    if isinstance(n, web.Response):
        return n
    await worker(request).run(lambda b: b.topics.create_partitioned(t, n))
    return done()


async def partitions_update(request):
    t = topic_of(request)
    n = await _partition_count(request)
    if isinstance(n, web.Response):
        return n

    def run(b):
        # As PersistentTopicsBase.internalUpdatePartitionedTopicAsync: the same number is
        # accepted (nothing to do), fewer is 422.
        cur = b.topics.partitioned_metadata(t)["partitions"]
        if cur <= 0:
            return reason(409, f"Topic {t} is not the partitioned topic.")
        if n < cur:
            return reason(422, f"Desired partitions {n} can't be less than the current "
                               f"partitions {cur}.")
        if n > cur:
            b.topics.update_partitioned(t, n)
        return done()
    return await worker(request).run(run)


async def partitions_get(request):
    t = topic_of(request)
    meta = await worker(request).run(lambda b: b.topics.partitioned_metadata(t))
    return ok({"partitions": meta["partitions"], "deleted": False})


async def partitions_delete(request):
    t = topic_of(request)
    force = flag(request, "force")
    delete = (lambda b: b.topics.delete(t, True)) if force else \
        (lambda b: b.topics.delete_unless_busy(t))
    return await _on_partitioned(request, t, delete)


async def _on_partitioned(request, t, change):
    """change(broker) when t is a partitioned topic (one job of the worker), else Pulsar's
    404."""
    def run(b):
        if not b.topics.partitioned_metadata(t)["partitions"]:
            return False
        change(b)
        return True
    if not await worker(request).run(run):
        return reason(404, "Partitioned topic does not exist")
    return done()


def _owner(request) -> str:
    """The broker that owns every topic here, as Pulsar names it: host:port of its web service."""
    return request.app[SETTINGS]["web_url"].split("//", 1)[-1]


async def topic_stats(request):
    t = topic_of(request)
    doc = await worker(request).run(lambda b: b.topics.stats(t, pulsar=True))
    doc["ownerBroker"] = _owner(request)
    return ok(doc)


async def topic_partitioned_stats(request):
    t = topic_of(request)
    per = flag(request, "perPartition", True)
    doc = await worker(request).run(lambda b: b.topics.partitioned_stats(t, per, pulsar=True))
    for part in doc.get("partitions", {}).values():
        part["ownerBroker"] = _owner(request)
    return ok(doc)


async def topic_internal_stats(request):
    t = topic_of(request)
    return ok(await worker(request).run(lambda b: b.topics.internal_stats(t, pulsar=True)))


async def topic_partitioned_internal_stats(request):
    """Each partition's internal stats, under the partitioned topic's metadata; Pulsar's 404
    for a topic that is not partitioned."""
    t = topic_of(request)

    def run(b):
        if not b.topics.partitioned_metadata(t)["partitions"]:
            return reason(404, f"Partitioned Topic {t} not found")
        doc = b.topics.internal_stats(t, pulsar=True)
        doc["metadata"]["deleted"] = False
        return ok(doc)
    return await worker(request).run(run)


async def topic_subscriptions(request):
    t = topic_of(request)
    return ok(await worker(request).run(lambda b: b.topics.subscriptions(t)))


async def topic_last_message_id(request):
    t = topic_of(request)
    return ok(message_id_json(await worker(request).run(lambda b: b.topics.last_message_id(t))))


async def topic_terminate(request):
    t = topic_of(request)

    def run(b):
        if b.topics.partitioned_metadata(t)["partitions"]:
            return None
        return b.topics.terminate(t)
    mid = await worker(request).run(run)
    if mid is None:
        return reason(405, "Termination of a partitioned topic is not allowed")
    return ok(message_id_json(mid))


async def topic_terminate_partitions(request):
    t = topic_of(request)

    def run(b):
        if not b.topics.partitioned_metadata(t)["partitions"]:
            return None
        return b.topics.terminate(t)
    ids = await worker(request).run(run)
    if ids is None:
        return reason(404, "Partitioned topic does not exist")
    return ok({k: message_id_json(v) for k, v in ids.items()})


async def topic_compact(request):
    t = topic_of(request)
    await worker(request).run(lambda b: b.topics.compact(t))
    return done()


async def topic_compaction_status(request):
    t = topic_of(request)
    s = await worker(request).run(lambda b: b.topics.compaction_status(t))
    return ok({"status": s.get("status", "NOT_RUN"), "lastError": s.get("lastError") or ""})


# -- metrics -------------------------------------------------------------------------------------
async def metrics_text(request):
    cluster_ = request.app[SETTINGS]["cluster"]
    text = await worker(request).run(lambda b: metrics.render(b, cluster_))
    return web.Response(text=text, content_type="text/plain",
                        headers={"X-Prometheus-Format": "0.0.4"})


# -- the app ---------------------------------------------------------------------------------------
DOMAIN = "{domain:persistent|non-persistent}"
TOPIC = f"/admin/v2/{DOMAIN}/{{tenant}}/{{ns}}/{{topic}}"
SUB = TOPIC + "/subscription/{sub}"
NS = "/admin/v2/namespaces/{tenant}/{ns}"
SCHEMA = "/admin/v2/schemas/{tenant}/{ns}/{topic}"


def routes() -> list:
    r = [
        web.get(f"/lookup/v2/topic/{DOMAIN}/{{tenant}}/{{ns}}/{{topic}}", lookup),
        web.get("/admin/v2/clusters", clusters),
        web.get("/admin/v2/clusters/{cluster}", cluster),
        web.get("/admin/v2/brokers/health", health),
        web.get("/admin/v2/tenants", tenants_list),
        web.get("/admin/v2/tenants/{tenant}", tenant_get),
        web.put("/admin/v2/tenants/{tenant}", tenant_create),
        web.post("/admin/v2/tenants/{tenant}", tenant_update),
        web.delete("/admin/v2/tenants/{tenant}", tenant_delete),
        web.get("/admin/v2/namespaces/{tenant}", namespaces_list),
        web.get(NS, namespace_policies),
        web.put(NS, namespace_create),
        web.delete(NS, namespace_delete),
        web.get(NS + "/topics", namespace_topics),
        web.get(NS + "/permissions", namespace_permissions),
        web.post(NS + "/permissions/{role}", namespace_grant),
        web.delete(NS + "/permissions/{role}", namespace_revoke),
    ]
    r += [web.get(NS + "/schemaCompatibilityStrategy", ns_schema_strategy_get),
          web.put(NS + "/schemaCompatibilityStrategy", ns_schema_strategy_set)]
    for kind in NS_POLICIES:
        get, set_, remove = _ns_policy(kind)
        r += [web.get(f"{NS}/{kind}", get), web.post(f"{NS}/{kind}", set_),
              web.delete(f"{NS}/{kind}", remove)]
    r += brokers.routes() + messages.routes(TOPIC) + namespaces.routes(NS)
    r += [
        web.get(f"/admin/v2/{DOMAIN}/{{tenant}}/{{ns}}", topics_list),
        web.get(f"/admin/v2/{DOMAIN}/{{tenant}}/{{ns}}/partitioned", topics_partitioned),
        web.put(TOPIC + "/partitions", partitions_create),
        web.post(TOPIC + "/partitions", partitions_update),
        web.get(TOPIC + "/partitions", partitions_get),
        web.delete(TOPIC + "/partitions", partitions_delete),
        web.get(TOPIC + "/stats", topic_stats),
        web.get(TOPIC + "/partitioned-stats", topic_partitioned_stats),
        web.get(TOPIC + "/internalStats", topic_internal_stats),
        web.get(TOPIC + "/partitioned-internalStats", topic_partitioned_internal_stats),
        web.get(TOPIC + "/subscriptions", topic_subscriptions),
        web.get(TOPIC + "/lastMessageId", topic_last_message_id),
        web.post(TOPIC + "/terminate", topic_terminate),
        web.post(TOPIC + "/terminate/partitions", topic_terminate_partitions),
        web.put(TOPIC + "/compaction", topic_compact),
        web.get(TOPIC + "/compaction", topic_compaction_status),
        web.put(TOPIC, topic_create),
        web.delete(TOPIC, topic_delete),
        web.get("/metrics", metrics_text),
        web.get("/metrics/", metrics_text),
    ]
    return r + subscriptions.routes(TOPIC, SUB) + schemas.routes(SCHEMA)


def make_app(broker_factory, *, service_url: str, web_url: str, cluster: str = "standalone",
             service_url_tls: str = "", authentication=None,
             authorization=None, owns_broker: bool = True, worker=None) -> web.Application:
    """The admin REST API over the Broker broker_factory() returns (called once, in the
    worker thread, on the first request). authentication (auth/service.py) and authorization
    (auth/authorization.Settings; None: off) decide who may call what (access.py).
    owns_broker: the app closes the Broker when it stops (serve's is shared: serve closes it,
    after its own connections). worker: an executor to run on instead of a thread of the app's
    own (serve's: one worker for the binary protocol and REST)."""
    w = Worker(broker_factory, owns_broker, worker)
    guard = access.middleware(authentication or Authentication(), authorization, w.run)
    app = web.Application(middlewares=[pulsar_errors, guard], client_max_size=16 * 1024 * 1024)
    app[SETTINGS] = {"service_url": service_url, "web_url": web_url, "cluster": cluster,
                     "service_url_tls": service_url_tls, "web_url_tls": ""}
    app[WORKER] = w
    app.add_routes(routes())

    async def close_worker(app):
        await app[WORKER].close()
    app.on_cleanup.append(close_worker)
    return app
