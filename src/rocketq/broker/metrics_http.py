"""``/metrics``: the broker's Prometheus endpoint (RocketMQ's ``metricsExporterType=PROM``).

An aiohttp server on the broker's event loop, bound to ``metricsPromExporterHost`` (default: the
broker's ``bindAddress``, loopback unless configured) and ``metricsPromExporterPort`` (RocketMQ's
default 5557; a free port when the broker's own port is 0, as the HA port does).  Each scrape runs
:class:`rocketq.broker.metrics.BrokerCollector` once and answers the text exposition format written
by the official ``prometheus_client``.  With ACL on, a scrape needs HTTP Basic credentials of an
admin account of ``plain_acl.yml`` (Prometheus: ``basic_auth`` in the scrape config), or an address
in ``globalWhiteRemoteAddresses``; this holds on loopback too, so that turning ACL on never leaves
a port open.  Requests carry no body: anything over ``MAX_REQUEST_BYTES`` is refused.
"""

from __future__ import annotations

import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from rocketq.acl.http_auth import HttpAuthError, admin_from_basic
from rocketq.broker.metrics import BrokerCollector
from rocketq.common.http_site import HttpSite

log = logging.getLogger(__name__)

DEFAULT_METRICS_PORT = 5557            # RocketMQ's metricsPromExporterPort
MAX_REQUEST_BYTES = 4096


class MetricsExporter:
    def __init__(self, broker, host: str, port: int):
        self._broker = broker
        self._site = HttpSite(host, port, setting="metricsPromExporterPort", what="metrics")
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker))

    @property
    def host(self) -> str:
        return self._site.host

    @property
    def port(self) -> int:
        return self._site.port

    async def start(self) -> "MetricsExporter":
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/", self._index)
        await self._site.start(app)
        log.info("Prometheus metrics on http://%s:%d/metrics", self.host, self.port)
        return self

    async def close(self) -> None:
        await self._site.close()

    def _refusal(self, request: web.Request) -> web.Response | None:
        acl = self._broker.acl
        if acl is None:
            return None
        try:
            admin_from_basic(acl, request.headers.get("Authorization"), request.remote or "")
        except HttpAuthError as exc:
            return web.Response(status=401, text=f"{exc}\n",
                                headers={"WWW-Authenticate": 'Basic realm="rocketq metrics"'})
        return None

    async def _metrics(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(text="rocketq broker metrics: /metrics\n")
