"""Admin: topics, groups, consumer lag, cluster info and message queries (``mqadmin``'s API).

Topic and group changes go to every master broker of the cluster (or the ones named); routes,
clusters and topic lists come from the NameServers; lag is each queue's broker offset minus the
group's committed offset (GET_CONSUME_STATS on every broker that hosts the topic).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from rocketq.client.instance import ClientInstance
from rocketq.client.model import Credentials, MessageQueue, MQClientError, TopicRoute
from rocketq.common.msgid import decode_offset_msg_id
from rocketq.remoting import ResponseCode
from rocketq.store.record import StoredMessage


@dataclass
class QueueLag:
    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)


@dataclass
class BrokerInfo:
    cluster: str
    broker_name: str
    addrs: dict[int, str]


class Admin:
    def __init__(self, namesrv: str | list[str] = "127.0.0.1:9876", *, credentials: Credentials | None = None,
                 ssl_context=None, timeout_s: float = 3.0):
        self.instance = ClientInstance(namesrv, credentials=credentials, ssl_context=ssl_context, timeout_s=timeout_s)
        self.api = self.instance.api

    async def close(self) -> None:
        await self.instance.close()

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- cluster -----------------------------------------------------------------------------

    async def brokers(self, cluster: str | None = None) -> list[BrokerInfo]:
        info = await self.api.cluster_info(self.instance.namesrvs)
        names = None
        if cluster is not None:
            names = set((info.get("clusterAddrTable") or {}).get(cluster) or ())
            if not names:
                raise MQClientError(-1, f"cluster {cluster!r} has no brokers (known: "
                                        f"{', '.join(sorted(info.get('clusterAddrTable') or {})) or 'none'})")
        out = []
        for name, b in sorted((info.get("brokerAddrTable") or {}).items()):
            if names is None or name in names:
                out.append(BrokerInfo(b.get("cluster", ""), name, {int(k): v for k, v in b["brokerAddrs"].items()}))
        return out

    async def broker_runtime(self, addr: str) -> dict[str, str]:
        return await self.api.runtime_info(addr)

    async def _masters(self, cluster: str | None) -> list[str]:
        masters = [b.addrs[0] for b in await self.brokers(cluster) if 0 in b.addrs]
        if not masters:
            raise MQClientError(-1, "no master broker is registered with the NameServers")
        return masters

    # -- topics ------------------------------------------------------------------------------

    async def topics(self) -> list[str]:
        return await self.api.topic_list(self.instance.namesrvs)

    async def route(self, topic: str) -> TopicRoute:
        route = await self.instance.route(topic, refresh=True)
        if route is None:
            raise MQClientError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} has no route (does it exist?)")
        return route

    async def create_topic(self, topic: str, *, queues: int = 8, cluster: str | None = None,
                           broker_addr: str | None = None, order: bool = False) -> list[str]:
        """Create (or update) *topic* on one broker or every master of the cluster; returns the addresses."""
        addrs = [broker_addr] if broker_addr else await self._masters(cluster)
        for addr in addrs:
            await self.api.create_topic(addr, topic, read_queues=queues, write_queues=queues, order=order)
        self.instance.forget_route(topic)
        return addrs

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        for addr in await self._masters(cluster):
            await self.api.delete_topic_in_broker(addr, topic)
        for namesrv in self.instance.namesrvs:
            with contextlib.suppress(MQClientError):
                await self.api.delete_topic_in_namesrv(namesrv, topic)
        self.instance.forget_route(topic)

    # -- groups ------------------------------------------------------------------------------

    async def groups(self, cluster: str | None = None) -> list[str]:
        names: set[str] = set()
        for addr in await self._masters(cluster):
            names |= set(await self.api.all_groups(addr))
        return sorted(names)

    async def consumer_lag(self, group: str, topic: str | None = None) -> list[QueueLag]:
        """Lag per queue of *group* (all topics it has offsets for, or just *topic*)."""
        addrs = [b for b in await self._masters(None)]
        out = []
        for addr in addrs:
            for mq, v in (await self.api.consume_stats(addr, group, topic or "")).items():
                out.append(QueueLag(mq, int(v.get("brokerOffset", 0)), int(v.get("consumerOffset", 0)),
                                    int(v.get("lastTimestamp", 0))))
        return sorted(out, key=lambda q: q.queue)

    # -- messages ----------------------------------------------------------------------------

    async def query_by_key(self, topic: str, key: str, max_num: int = 64, begin_ms: int = 0,
                           end_ms: int | None = None) -> list[StoredMessage]:
        route = await self.route(topic)
        found: dict[str, StoredMessage] = {}
        for b in route.broker_datas:
            if b.master:
                for m in await self.api.query_message(b.master, topic, key, max_num, begin_ms, end_ms):
                    found[m.msg_id] = m
        return sorted(found.values(), key=lambda m: m.store_timestamp)

    async def view_by_id(self, msg_id: str, topic: str | None = None) -> StoredMessage:
        """By offset message id (broker address + commitlog offset), or by the client's unique key
        (UNIQ_KEY; then *topic* is needed, as in RocketMQ)."""
        if topic:
            for m in await self.query_by_key(topic, msg_id, 32):
                if m.uniq_key == msg_id:
                    return m
        try:
            host, offset = decode_offset_msg_id(msg_id)
        except ValueError as exc:
            raise MQClientError(-1, f"message id {msg_id!r}: {exc}") from None
        try:
            return await self.api.view_message(str(host), offset)
        except MQClientError as exc:
            hint = "" if topic else " (for a client message id, give the topic too)"
            raise MQClientError(exc.code, f"no message with id {msg_id}{hint}: {exc.remark}", exc.address) from None
