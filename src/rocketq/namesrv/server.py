"""``NameServer``: the route registry process - RouteInfoManager and processors behind a RemotingServer.

Theory of operation
-------------------
Brokers register over a long-lived connection every 30 s; clients ask for routes.  All state lives
in one :class:`RouteInfoManager` and one :class:`KVConfigManager`, touched only from the event
loop, so no locks are needed.  Three things remove a broker:

* UNREGISTER_BROKER, sent by a broker on clean shutdown;
* its connection closing: each connection gets an id when it is made, a registration remembers the
  id it came over, and the connection's ``on_close`` callback drops the brokers registered over it;
* silence: every ``scan_interval_s`` the scan drops brokers not heard from for ``expire_ms`` (or
  the broker's own ``heartbeatTimeoutMillis``).

With ``controller=True`` the NameServer also runs the controller of brokers in controller mode
(:mod:`rocketq.namesrv.controller`), its snapshot ``controller.json`` next to the KV config.

Access control: with an ACL (``acl``, a :class:`~rocketq.acl.AclValidator` of a ``plain_acl.yml``)
every request but the reads in :data:`OPEN_READS` needs an admin account's signed request -
registering, unregistering and refreshing brokers, wiping write permission, deleting topics,
writing KV config, the controller's heartbeat - else it is answered NO_PERMISSION and logged with
the peer.  Route, cluster, topic-list and KV reads stay open, as in RocketMQ, whose NameServer checks
nothing at all (RocketMQ 5.3 marks these writes CLUSTER/UPDATE in its request headers, but only
brokers and proxies enforce those marks).  A code not listed as a read is a write: a NameServer
request added later is closed until someone decides otherwise.

The clock is injectable (``clock`` returns milliseconds) so tests can expire brokers without
waiting two minutes.  The NameServer holds no data that cannot be rebuilt: after a restart the
brokers' next registrations restore every route within one registration period.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from pathlib import Path
from collections.abc import Callable

from rocketq.namesrv.controller import DEFAULT_MASTER_TIMEOUT_MS, SNAPSHOT_NAME, Controller
from rocketq.namesrv.kv_config import KVConfigManager
from rocketq.namesrv.processor import NamesrvContext, dispatch
from rocketq.namesrv.route_info import DEFAULT_BROKER_EXPIRE_MS, RouteInfoManager
from rocketq.remoting import RemotingCommand, RemotingConnection, RemotingServer, RequestCode
from rocketq.remoting.limits import ConnectionLimits
from rocketq.remoting.tls import ServerTls

log = logging.getLogger(__name__)

DEFAULT_PORT = 9876
ACL_WATCH_INTERVAL_S = 1.0              # plain_acl.yml is re-read this soon after it changes
# what anyone may ask with ACL on (RocketMQ 5.3 marks these GET)
OPEN_READS = frozenset({RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.GET_BROKER_CLUSTER_INFO,
                        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RequestCode.GET_TOPICS_BY_CLUSTER,
                        RequestCode.GET_KV_CONFIG, RequestCode.GET_KVLIST_BY_NAMESPACE,
                        RequestCode.CONTROLLER_GET_REPLICA_INFO, RequestCode.CONTROLLER_GET_METADATA_INFO})
DEFAULT_SCAN_INTERVAL_S = 10.0          # NamesrvController: scanNotActiveBroker every 10 s
CONN_ID_KEY = "namesrv.conn_id"


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class NameServer:
    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, kv_path: Path | str | None,
                 scan_interval_s: float = DEFAULT_SCAN_INTERVAL_S, expire_ms: int = DEFAULT_BROKER_EXPIRE_MS,
                 clock: Callable[[], int] = wall_clock_ms, tls: ServerTls | None = None,
                 controller: bool = False, controller_master_timeout_ms: int = DEFAULT_MASTER_TIMEOUT_MS,
                 controller_elect_unclean: bool = False, acl=None,
                 limits: ConnectionLimits = ConnectionLimits()) -> None:
        if scan_interval_s <= 0 or expire_ms <= 0:
            raise ValueError("scan_interval_s and expire_ms must be positive")
        self.routes = RouteInfoManager()
        self.kv = KVConfigManager(kv_path)
        self.controller = None
        if controller:
            snapshot = Path(kv_path).parent / SNAPSHOT_NAME if kv_path is not None else None
            self.controller = Controller(snapshot, master_timeout_ms=controller_master_timeout_ms,
                                         elect_unclean=controller_elect_unclean)
        self._ctx = NamesrvContext(self.routes, self.kv, clock, self.controller)
        self._clock = clock
        self._scan_interval_s = scan_interval_s
        self._expire_ms = expire_ms
        self._conn_ids = itertools.count(1)
        self._server = RemotingServer(self._handle, host, port, on_connect=self._on_connect, tls=tls, limits=limits,
                                      what="NameServer")
        self._scan_task: asyncio.Task | None = None
        self.acl = acl                          # AclValidator or None
        self._acl_task: asyncio.Task | None = None

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def host(self) -> str:
        return self._server.host

    async def start(self) -> NameServer:
        self.kv.load()
        if self.controller is not None:
            self.controller.load(self._clock())
        await self._server.start()
        self._scan_task = asyncio.create_task(self._scan_loop(), name="namesrv-scan-inactive")
        if self.acl is not None:
            self._acl_task = asyncio.create_task(self._watch_acl_loop(), name="namesrv-acl-reload")
        log.info("NameServer listening on %s:%d (broker expiry %d ms, scan every %.1f s)",
                 self.host, self.port, self._expire_ms, self._scan_interval_s)
        return self

    async def close(self) -> None:
        for task in (self._scan_task, self._acl_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._scan_task = self._acl_task = None
        port = self.port                   # the bound port; the server forgets it once closed
        await self._server.close()
        log.info("NameServer on port %d closed", port)

    async def __aenter__(self) -> NameServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def scan_now(self) -> list[str]:
        """One inactive-broker scan at the current clock; returns the removed addresses."""
        return self.routes.scan_inactive(self._clock(), self._expire_ms)

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self._scan_interval_s)
            try:
                self.scan_now()
            except Exception:            # a bug here must not stop future scans
                log.exception("inactive broker scan failed")

    async def _watch_acl_loop(self) -> None:
        while True:
            await asyncio.sleep(ACL_WATCH_INTERVAL_S)
            self.acl.reload_if_changed()

    async def _handle(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        if self.acl is not None and cmd.code not in OPEN_READS:
            peer = conn.peername[0] if isinstance(conn.peername, tuple) and conn.peername else ""
            denied = self.acl.check_admin(str(peer), cmd)
            if denied is not None:
                log.warning("NameServer refused request code %d from %s: %s", cmd.code, conn.peer, denied.remark)
                return denied
        return dispatch(self._ctx, conn.context.get(CONN_ID_KEY), cmd)

    def _on_connect(self, conn: RemotingConnection) -> None:
        conn.context[CONN_ID_KEY] = next(self._conn_ids)
        conn.on_close(self._on_close)

    def _on_close(self, conn: RemotingConnection) -> None:
        removed = self.routes.on_connection_closed(conn.context.get(CONN_ID_KEY))
        if removed:
            log.info("connection %s closed; removed brokers %s", conn.peer, ", ".join(removed))
