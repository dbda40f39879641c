"""/admin/v2/brokers: what pulsar-admin asks of the broker itself. `clusters list` asks for
the runtime configuration to find the cluster the broker belongs to."""
from __future__ import annotations

from aiohttp import web

from pulsarctl.rest.base import SETTINGS, ok, worker


def _java(v) -> str:
    # Pulsar answers every value as the string Java's toString gives it.
    return str(v).lower() if isinstance(v, bool) else str(v)


def _port(url: str) -> str:
    return url.rsplit(":", 1)[1] if url and ":" in url.split("//", 1)[-1] else ""


async def runtime_configuration(request):
    """GET /admin/v2/brokers/configuration/runtime: {name: value as text} (Pulsar's
    getRuntimeConfiguration): the store's dynamic settings and the serve's own."""
    s = request.app[SETTINGS]
    conf = {k: _java(v) for k, v in (await worker(request).run(
        lambda b: b.policies.settings())).items()}
    conf.update(clusterName=s["cluster"], brokerServicePort=_port(s["service_url"]),
                webServicePort=_port(s["web_url"]))
    return ok(conf)


def routes() -> list:
    return [web.get("/admin/v2/brokers/configuration/runtime", runtime_configuration)]
