"""What every producer and consumer has: NameServer addresses, a route cache refreshed every 30 s
(RocketMQ's ``MQClientInstance``), heartbeats to the brokers it uses, and a handler for the
requests brokers send to clients (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from rocketq.client.api import MQClientAPI
from rocketq.client.ids import client_id
from rocketq.client.model import Credentials, MQClientError, TopicRoute
from rocketq.remoting import RemotingCommand, ResponseCode

log = logging.getLogger("rocketq.client")

ROUTE_REFRESH_S = 30.0
HEARTBEAT_INTERVAL_S = 30.0
DEFAULT_TOPIC = "TBW102"

RequestHandler = Callable[[RemotingCommand], Awaitable[RemotingCommand | None]]


def parse_namesrv(namesrv: str | list[str]) -> list[str]:
    addrs = namesrv if isinstance(namesrv, list) else [a for a in namesrv.replace(",", ";").split(";")]
    addrs = [a.strip() for a in addrs if a.strip()]
    if not addrs:
        raise ValueError("no NameServer address given (namesrv='host:port;host:port')")
    return addrs


class ClientInstance:
    def __init__(self, namesrv: str | list[str], *, credentials: Credentials | None = None, ssl_context=None,
                 timeout_s: float = 3.0):
        self.namesrvs = parse_namesrv(namesrv)
        self.client_id = client_id()
        self.api = MQClientAPI(credentials=credentials, ssl_context=ssl_context, handler=self._on_request,
                               timeout_s=timeout_s)
        self.handlers: dict[int, RequestHandler] = {}
        self._routes: dict[str, tuple[TopicRoute, float]] = {}
        self._tasks: list[asyncio.Task] = []
        self.heartbeat_data: Callable[[], dict] | None = None

    # -- routes ------------------------------------------------------------------------------

    async def route(self, topic: str, *, refresh: bool = False) -> TopicRoute | None:
        """The topic's route (cached up to 30 s), or None when the NameServers do not know it."""
        cached = self._routes.get(topic)
        if cached is not None and not refresh and time.monotonic() - cached[1] < ROUTE_REFRESH_S:
            return cached[0]
        try:
            route = await self.api.get_route(self.namesrvs, topic)
        except MQClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                self._routes.pop(topic, None)
                return None
            if cached is not None:           # NameServers unreachable: keep using what we had
                log.warning("route refresh for %s failed, using the cached one: %s", topic, exc)
                return cached[0]
            raise
        self._routes[topic] = (route, time.monotonic())
        return route

    def cached_route(self, topic: str) -> TopicRoute | None:
        """The topic's cached route while it is fresh (what :meth:`route` would answer without asking), else None."""
        cached = self._routes.get(topic)
        if cached is not None and time.monotonic() - cached[1] < ROUTE_REFRESH_S:
            return cached[0]
        return None

    async def read_addr(self, mq) -> str:
        """Where to read *mq* (and keep its offsets): the master, or a slave while the master is away."""
        route = await self.route(mq.topic)
        addr = route.read_addr_of(mq.broker_name) if route else None
        if not addr:
            raise MQClientError(-1, f"no broker address for {mq}")
        return addr

    async def pull_addr(self, mq, broker_id: int) -> str:
        """Where to pull *mq* from: the broker id the last pull answer suggested (RocketMQ's
        pullFromWhichNodeTable), else the master, else whichever broker of the set is there."""
        route = await self.route(mq.topic)
        for b in (route.broker_datas if route else ()):
            if b.broker_name == mq.broker_name and b.addrs.get(broker_id):
                return b.addrs[broker_id]
        return await self.read_addr(mq)

    def forget_route(self, topic: str) -> None:
        self._routes.pop(topic, None)

    def broker_addrs(self) -> set[str]:
        return {b.master for r, _ in self._routes.values() for b in r.broker_datas if b.master}

    # -- heartbeats --------------------------------------------------------------------------

    def start_heartbeats(self) -> None:
        self._tasks.append(asyncio.create_task(self._heartbeat_loop()))

    async def heartbeat_now(self) -> None:
        if self.heartbeat_data is None:
            return
        data = dict(self.heartbeat_data(), clientID=self.client_id)
        for addr in sorted(self.broker_addrs()):
            try:
                await self.api.heartbeat(addr, data)
            except MQClientError as exc:
                log.info("heartbeat to %s failed: %s", addr, exc)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            for topic in list(self._routes):
                try:
                    await self.route(topic, refresh=True)
                except MQClientError as exc:
                    log.info("route refresh for %s failed: %s", topic, exc)
            await self.heartbeat_now()

    # -- requests from brokers ---------------------------------------------------------------

    async def _on_request(self, conn, cmd: RemotingCommand) -> RemotingCommand | None:
        handler = self.handlers.get(cmd.code)
        if handler is None:
            return RemotingCommand.create_response(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                   f"rocketq client does not handle request code {cmd.code}")
        return await handler(cmd)

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.api.close()
