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

log = logging.getLogger(__name__)

DEFAULT_METRICS_PORT = 5557            # RocketMQ's metricsPromExporterPort
MAX_REQUEST_BYTES = 4096
SHUTDOWN_TIMEOUT_S = 2.0


class MetricsExporter:
    def __init__(self, broker, host: str, port: int):
        self._broker = broker
        self.host, self._port = host, port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker))
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        for addr in self._runner.addresses if self._runner else ():
            return addr[1]
        return self._port

    async def start(self) -> "MetricsExporter":
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/", self._index)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self.host, self._port, reuse_address=True).start()
        except OSError as exc:
            await self._runner.cleanup()
            raise OSError(exc.errno, f"metrics port {self.host}:{self._port} (metricsPromExporterPort): "
                                     f"{exc.strerror}") from None
        log.info("Prometheus metrics on http://%s:%d/metrics", self.host, self.port)
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

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
