"""Admin: topics, groups, consumer lag, cluster info and message queries (``mqadmin``'s API).

Topic and group changes go to every master broker of the cluster (or the ones named); routes,
clusters and topic lists come from the NameServers; lag is each queue's broker offset minus the
group's committed offset (GET_CONSUME_STATS on every broker that hosts the topic).

A message id is either the broker's offset id (store address + commitlog offset) or the client's
unique id (UNIQ_KEY); :meth:`Admin.view_by_id` tries the first only for ids shaped like one (see
:mod:`rocketq.common.msgid`) and then looks the id up as a UNIQ_KEY in the index - of the topic
given, or of every user topic (at most ``MAX_TOPICS_SEARCHED``, one request per topic and master).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from rocketq.client.instance import ClientInstance
from rocketq.client.model import Credentials, MessageQueue, MQClientError, TopicRoute
from rocketq.common import trace as trace_codec
from rocketq.common.msgid import decode_offset_msg_id, may_be_offset_msg_id
from rocketq.common.trace import TRACE_TOPIC, TraceStep
from rocketq.common.system_names import USER, topic_kind
from rocketq.remoting import ResponseCode
from rocketq.store.record import StoredMessage


MAX_TRACE_MESSAGES = 256           # trace messages read for one message id (each holds a few records)
MAX_TOPICS_SEARCHED = 256          # a unique id without its topic: how many topics are searched at most
UNIQ_KEY_MATCHES = 32              # QUERY_MESSAGE maxNum for a unique id (retries share the key)


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

    @property
    def auth(self):
        """ACL 2.0 users and ACLs (:class:`rocketq.client.auth_admin.AuthAdmin`)."""
        from rocketq.client.auth_admin import AuthAdmin
        return AuthAdmin(self)

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

    async def _readers(self, cluster: str | None) -> list[str]:
        """The broker to read from in each group: its master, or while it has none its slave with the
        smallest id (the one that acts as master with ``enableSlaveActingMaster``, and a full copy
        of the master's data in any case).  For reads only: a slave takes no writes."""
        addrs = [b.addrs[0] if 0 in b.addrs else b.addrs[min(b.addrs)] for b in await self.brokers(cluster) if b.addrs]
        if not addrs:
            raise MQClientError(-1, "no broker is registered with the NameServers")
        return addrs

    # -- topics ------------------------------------------------------------------------------

    async def topics(self) -> list[str]:
        return await self.api.topic_list(self.instance.namesrvs)

    async def topic_kinds(self) -> dict[str, str]:
        """Every topic the NameServers list -> its kind (``user``, ``retry``, ``system``, the names
        the clusters and brokers register, ...; :func:`rocketq.common.system_names.topic_kind`)."""
        brokers = await self.brokers()
        clusters, names = {b.cluster for b in brokers}, {b.broker_name for b in brokers}
        return {t: topic_kind(t, clusters, names) for t in await self.topics()}

    async def route(self, topic: str) -> TopicRoute:
        route = await self.instance.route(topic, refresh=True)
        if route is None:
            raise MQClientError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} has no route (does it exist?)")
        return route

    async def create_topic(self, topic: str, *, queues: int = 8, cluster: str | None = None,
                           broker_addr: str | None = None, order: bool = False,
                           attributes: str | None = None) -> list[str]:
        """Create (or update) *topic* on one broker or every master of the cluster; returns the addresses.
        *attributes* changes the topic's attributes (``+message.type=FIFO,-key``); the others stay."""
        addrs = [broker_addr] if broker_addr else await self._masters(cluster)
        for addr in addrs:
            await self.api.create_topic(addr, topic, read_queues=queues, write_queues=queues, order=order,
                                        attributes=attributes)
        self.instance.forget_route(topic)
        return addrs

    async def topic_configs(self, topic: str, *, cluster: str | None = None) -> dict[str, dict]:
        """Each group's TopicConfig of *topic* (GET_TOPIC_CONFIG; a masterless group's from its acting
        slave), by broker address; groups without it are left out."""
        out = {}
        for addr in await self._readers(cluster):
            try:
                out[addr] = await self.api.topic_config(addr, topic)
            except MQClientError as exc:
                if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
        if not out:
            raise MQClientError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} is on no broker")
        return out

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """Delete *topic* on the masters and the NameServers; TOPIC_NOT_EXIST when neither the
        NameServers nor any master knows it (RocketMQ's broker answers success either way)."""
        masters = await self._masters(cluster)
        if await self.instance.route(topic, refresh=True) is None and not await self._on_any(masters, topic):
            raise MQClientError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist")
        for addr in masters:
            await self.api.delete_topic_in_broker(addr, topic)
        for namesrv in self.instance.namesrvs:
            with contextlib.suppress(MQClientError):
                await self.api.delete_topic_in_namesrv(namesrv, topic)
        self.instance.forget_route(topic)

    async def reset_offset(self, group: str, topic: str, timestamp_ms: int) -> dict[MessageQueue, int]:
        """Move *group*'s offsets on *topic* on every master of the topic to the first message stored at
        or after *timestamp_ms* (0: the start, negative: the end); running consumers follow at once."""
        route = await self.route(topic)
        out: dict[MessageQueue, int] = {}
        for b in route.broker_datas:
            if b.master:
                out.update(await self.api.reset_offset(b.master, topic, group, timestamp_ms))
        return out

    async def broker_configs(self, broker_addr: str | None = None, cluster: str | None = None) -> dict[str, dict]:
        """Each master's settings (or *broker_addr*'s), by address."""
        addrs = [broker_addr] if broker_addr else await self._masters(cluster)
        return {addr: await self.api.broker_config(addr) for addr in addrs}

    async def update_broker_config(self, settings: dict[str, str], *, broker_addr: str | None = None,
                                   cluster: str | None = None) -> dict[str, str]:
        """Change settings on every master (or *broker_addr*); each broker's answer (what applied now,
        what needs a restart), by address."""
        addrs = [broker_addr] if broker_addr else await self._masters(cluster)
        return {addr: await self.api.update_broker_config(addr, settings) for addr in addrs}

    async def _on_any(self, addrs: list[str], topic: str) -> bool:
        for addr in addrs:
            if topic in ((await self.api.all_topic_config(addr)).get("topicConfigTable") or {}):
                return True
        return False

    # -- groups ------------------------------------------------------------------------------

    async def groups(self, cluster: str | None = None) -> list[str]:
        names: set[str] = set()
        for addr in await self._readers(cluster):
            names |= set(await self.api.all_groups(addr))
        return sorted(names)

    async def consumer_lag(self, group: str, topic: str | None = None) -> list[QueueLag]:
        """Lag per queue of *group* (all topics it has offsets for, or just *topic*)."""
        out = []
        for addr in await self._readers(None):
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
        """One message by its offset id or by the client's unique id (UNIQ_KEY), in *topic* or, without
        it, in every user topic.  Raises MQClientError naming what was tried."""
        given, msg_id = msg_id, msg_id.strip().upper()          # ids are printed in upper case
        if len(msg_id) not in (32, 56) or not all(c in "0123456789ABCDEF" for c in msg_id):
            raise MQClientError(-1, f"{given!r} is not a message id (32 or 56 hexadecimal digits)")
        tried = []
        if may_be_offset_msg_id(msg_id):
            host, offset = decode_offset_msg_id(msg_id)
            try:
                return await self.api.view_message(str(host), offset)
            except MQClientError as exc:
                tried.append(f"as an offset id at {host}: {exc.remark or exc}")
        topics = [topic] if topic else await self._user_topics()
        found = await self.find_by_unique_key(msg_id, topics)
        if found is not None:
            return found
        where = f"topic {topic}" if topic else f"any of the {len(topics)} user topics"
        tried.append(f"as a client id (UNIQ_KEY) in {where}")
        raise MQClientError(ResponseCode.QUERY_NOT_FOUND, f"no message with id {msg_id}: looked it up "
                            + "; ".join(tried))

    async def _user_topics(self) -> list[str]:
        topics = [t for t, kind in (await self.topic_kinds()).items() if kind == USER]
        if len(topics) > MAX_TOPICS_SEARCHED:
            raise MQClientError(-1, f"{len(topics)} topics are too many to search for a client message id "
                                    f"(at most {MAX_TOPICS_SEARCHED}); give the message's topic")
        return topics

    async def find_by_unique_key(self, uniq_key: str, topics: list[str]) -> StoredMessage | None:
        """The message whose UNIQ_KEY is *uniq_key* in one of *topics* (each master's index is asked
        directly, so no route is looked up per topic); the first stored copy when there are several."""
        masters = await self._readers(None)
        for topic in topics:
            hits = []
            for addr in masters:
                hits += [m for m in await self.api.query_message(addr, topic, uniq_key, UNIQ_KEY_MATCHES, unique=True)
                         if m.uniq_key == uniq_key]
            if hits:
                return min(hits, key=lambda m: m.store_timestamp)
        return None

    # -- traces ------------------------------------------------------------------------------

    async def trace(self, msg_id: str, trace_topic: str = TRACE_TOPIC) -> list[TraceStep]:
        """The path of message *msg_id* (the client's id, as producers print it) from the records
        traced clients sent to *trace_topic* (found by key: a trace message's KEYS hold the id)."""
        if not msg_id or len(msg_id) > 128:
            raise MQClientError(-1, f"{msg_id[:40]!r} is not a message id")
        if await self.instance.route(trace_topic, refresh=True) is None:
            raise MQClientError(ResponseCode.TOPIC_NOT_EXIST, f"the trace topic {trace_topic} does not exist: no "
                                "client sent a trace yet (brokers make it with traceTopicEnable=true)")
        records = []
        for m in await self.query_by_key(trace_topic, msg_id, MAX_TRACE_MESSAGES):
            records += trace_codec.decode(m.body)
        return trace_codec.path_of(msg_id, records)
