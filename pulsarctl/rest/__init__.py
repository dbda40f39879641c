"""Pulsar's admin REST API (/admin/v2, /lookup/v2, /metrics) over the store, as an aiohttp
application: make_app(broker_factory, service_url=..., web_url=...). `pulsarctl serve` mounts
it on its web port; `pulsar-admin`, the clients' HTTP lookup and Prometheus talk to it.

app.py holds the routes, errors.py how a pulsarctl error becomes Pulsar's {"reason": ...} with
its HTTP status, metrics.py the Prometheus text of /metrics."""
from __future__ import annotations

from pulsarctl.rest.app import make_app

__all__ = ["make_app"]
