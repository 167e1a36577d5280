"""Standalone mode: a NameServer, a broker and (when available) the gRPC endpoint in one process.

What ``rocketq serve`` runs.  The broker registers with the in-process NameServer (and with any
other NameServers ``namesrvAddr`` lists), so remoting clients need only ``127.0.0.1:9876``; the
gRPC endpoint serves RocketMQ 5 clients on ``grpcServerPort`` from the same store; the web console
(:mod:`rocketq.console`, ``consolePort``) and the broker's ``/metrics`` serve browsers and Prometheus.  Every port binds
``bindAddress`` (127.0.0.1 unless configured); with ACL on the NameServer reads the broker's
``plain_acl.yml`` too.  Shutdown runs
in reverse order and the broker's shutdown flushes the store and removes its abort marker.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging

from rocketq.acl import AclValidator
from rocketq.broker.broker import Broker
from rocketq.broker.credentials import acl_file_of
from rocketq.namesrv.server import NameServer
from rocketq.remoting.tls import ServerTls, TlsMode
from rocketq.server.config import ServerConfig

log = logging.getLogger(__name__)


def grpc_endpoint_class():
    """The gRPC endpoint's class, or None (logged) when that part is not installed or not importable."""
    if importlib.util.find_spec("rocketq.grpc_endpoint") is None:
        return None
    try:
        from rocketq.grpc_endpoint import GrpcEndpoint
    except ImportError as exc:
        log.warning("the gRPC endpoint is not available, serving the remoting protocol only: %s", exc)
        return None
    return GrpcEndpoint


class Standalone:
    def __init__(self, config: ServerConfig):
        self.config = config
        self.namesrv: NameServer | None = None
        self.broker: Broker | None = None
        self.grpc = None
        self.console = None

    async def start(self) -> Standalone:
        cfg = self.config
        bind = cfg.broker.host
        kv_path = cfg.store.store_path / "namesrv" / "kvConfig.json"
        tls = ServerTls(cfg.broker.tls) if cfg.broker.tls.mode != TlsMode.DISABLED else None
        # the NameServer shares the broker's ACL file: its writes need an admin account, which the
        # in-process broker signs its registration with (rocketq.broker.credentials)
        acl = AclValidator(acl_file_of(cfg.broker.acl_file, cfg.store.store_path)) if cfg.broker.acl_enable else None
        self.namesrv = await NameServer(bind, cfg.namesrv_port, kv_path=kv_path, tls=tls,
                                        controller=cfg.broker.controller_mode, acl=acl,
                                        limits=cfg.broker.limits).start()
        try:
            local = f"127.0.0.1:{self.namesrv.port}"
            addrs = ";".join(a for a in (local, cfg.broker.namesrv_addr) if a)
            # in-process registration follows the ports' TLS mode: enforcing needs TLS on loopback too
            settings = dataclasses.replace(cfg.broker, namesrv_addr=addrs,
                                           tls_enable=cfg.broker.tls_enable or tls is not None)
            self.broker = await Broker(settings, cfg.store).start()
            if self.namesrv.acl is None and self.broker.acl is not None and self.broker.credentials() is not None:
                # ACL 2.0: the NameServer's writes need Update on the cluster (a super user), checked against
                # the broker's users; the broker registered before, when nothing was checked yet
                self.namesrv.acl = self.broker.acl
            endpoint = grpc_endpoint_class() if cfg.grpc_port >= 0 else None
            if endpoint is not None:
                self.grpc = await endpoint(self.broker, host=bind, port=cfg.grpc_port).start()
            from rocketq.console.server import start_for
            self.console = await start_for(self.broker, local, cfg.console_port)
        except BaseException:
            await self.close()
            raise
        return self

    def addresses(self) -> dict[str, str]:
        out = {"namesrv": f"{self._shown_host()}:{self.namesrv.port}", "broker": self.broker.address}
        if self.console is not None:
            out["console"] = f"http://{self._shown_host()}:{self.console.port}/"
        if self.broker.metrics is not None:
            out["metrics"] = f"http://{self._shown_host()}:{self.broker.metrics.port}/metrics"
        if self.grpc is not None:
            out["grpc"] = f"{self._shown_host()}:{self.grpc.port}"
        return out

    def listeners(self) -> list[tuple[str, str, int]]:
        """(what, bound host, port) of every listening socket of the process."""
        out = [("NameServer", self.namesrv.host, self.namesrv.port), *self.broker.listeners()]
        if self.grpc is not None:
            out.append(("gRPC", self.grpc.host, self.grpc.port))
        if self.console is not None:
            out.append(("console", self.console.host, self.console.port))
        return out

    def _shown_host(self) -> str:
        host = self.config.broker.host
        return self.config.broker.announce_host or ("127.0.0.1" if host in ("0.0.0.0", "") else host)

    async def close(self) -> None:
        if self.console is not None:
            await self.console.close()
            self.console = None
        if self.grpc is not None:
            await self.grpc.close()
            self.grpc = None
        if self.broker is not None:
            await self.broker.close()
            self.broker = None
        if self.namesrv is not None:
            await self.namesrv.close()
            self.namesrv = None
