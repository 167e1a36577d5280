"""A real NameServer and broker(s) on loopback ports for the client tests."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from rocketq.broker.broker import Broker, BrokerSettings
from rocketq.namesrv.server import NameServer
from rocketq.store import StoreConfig


def small_store(path: Path, **kw) -> StoreConfig:
    kw.setdefault("message_delay_level", "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s")
    return StoreConfig(store_path=path, commitlog_file_size=4 << 20, consume_queue_entries=10_000,
                       index_slots=1009, index_max_entries=20_000, **kw)


class Cluster:
    def __init__(self, root: Path, brokers: int = 1, **settings):
        self.root, self.count, self.settings = root, brokers, settings
        self.namesrv: NameServer | None = None
        self.brokers: list[Broker] = []

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.port}"

    async def start(self) -> Cluster:
        self.namesrv = await NameServer("127.0.0.1", 0, kv_path=self.root / "kv.json").start()
        for i in range(self.count):
            await self.start_broker(i)
        return self

    async def start_broker(self, i: int, port: int = 0) -> Broker:
        settings = BrokerSettings(broker_name=f"broker-{chr(97 + i)}", port=port, namesrv_addr=self.addr,
                                  **{"ha_listen_port": 0, **self.settings})     # any free HA port
        broker = await Broker(settings, small_store(self.root / f"store-{i}")).start()
        if i < len(self.brokers):
            self.brokers[i] = broker
        else:
            self.brokers.append(broker)
        for _ in range(500):                  # registered with the NameServer (first registration is async)
            if settings.broker_name in self.namesrv.routes.broker_addr_table:
                break
            await asyncio.sleep(0.01)
        return broker

    async def stop_broker(self, i: int) -> int:
        port = self.brokers[i].server.port
        await self.brokers[i].close()
        return port

    async def close(self) -> None:
        for b in self.brokers:
            with contextlib.suppress(Exception):
                await b.close()
        if self.namesrv is not None:
            await self.namesrv.close()


@contextlib.asynccontextmanager
async def cluster(root: Path, brokers: int = 1, **settings):
    c = await Cluster(root, brokers, **settings).start()
    try:
        yield c
    finally:
        await c.close()
