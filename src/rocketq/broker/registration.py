"""Registering with the NameServers (RocketMQ ``BrokerOuterAPI.registerBrokerAll``).

Every ``REGISTER_PERIOD_S`` (30 s, and at once after a topic changes) the broker sends
REGISTER_BROKER to every NameServer in parallel: header ``brokerAddr, brokerName, brokerId,
clusterName, haServerAddr, compressed=false, bodyCrc32`` and a ``RegisterBrokerBody`` JSON body
``{"topicConfigSerializeWrapper": {"topicConfigTable": ..., "dataVersion": ...}, "filterServerList": []}``.
``bodyCrc32`` is ``crc32(body) & 0x7FFFFFFF`` so the NameServer can reject a damaged body.  Requests
are signed with the broker's credentials (:mod:`rocketq.broker.credentials`) when it has some: a
NameServer with ACL on takes them from an admin account only.  On
shutdown it sends UNREGISTER_BROKER.  A NameServer that does not answer is retried next period;
the others are unaffected.  :meth:`NameServerRegistrar.readable_queues` asks them for a topic's
route (QUERY_ASSIGNMENT balances a group over every broker of the topic); :meth:`~NameServerRegistrar.route`
gives the whole route (the gRPC endpoint lists every group's queues from it).  Entries given to
:meth:`~NameServerRegistrar.advertise` (the gRPC endpoint's address) are PUT_KV_CONFIG to every NameServer
after each registration, so a NameServer that restarted learns them again within a period.
:meth:`~NameServerRegistrar.published` waits for the registration that carries the latest topic change: a
send or heartbeat that created a topic and the admin's topic create and delete are answered after it, as
RocketMQ registers before answering them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import zlib

from rocketq.common import fastjson
from rocketq.common.aio import wait_event
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

REGISTER_PERIOD_S = 30.0
REGISTER_TIMEOUT_S = 6.0


PERM_READ = 4


def parse_namesrv_addrs(text: str | None) -> list[tuple[str, int]]:
    """``"127.0.0.1:9876;10.0.0.2:9876"`` -> [(host, port), ...] (RocketMQ separates with ';')."""
    out = []
    for part in (text or "").replace(",", ";").split(";"):
        part = part.strip()
        if part:
            host, _, port = part.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"namesrvAddr entry {part!r} is not host:port")
            out.append((host, int(port)))
    return out


class NameServerRegistrar:
    def __init__(self, addrs: list[tuple[str, int]], *, cluster: str, broker_name: str, broker_id: int,
                 broker_addr: str, ha_addr: str, topic_table, ssl_context=None, sign=None,
                 acting_master: bool = False):
        self._clients = [RemotingClient(h, p, ssl_context=ssl_context) for h, p in addrs]
        self._sign = sign or (lambda cmd: cmd)   # the broker's credentials (a NameServer with ACL on needs them)
        self._header = {"brokerAddr": broker_addr, "brokerName": broker_name, "brokerId": broker_id,
                        "clusterName": cluster, "haServerAddr": ha_addr, "compressed": False}
        if acting_master:                        # RocketMQ 5's header field (enableSlaveActingMaster)
            self._header["enableActingMaster"] = True
        self._topic_table = topic_table          # callable -> topics.json-shaped dict
        self.master_addr: str | None = None
        self.master_ha_addr: str | None = None
        self._task: asyncio.Task | None = None
        self._kick = asyncio.Event()
        self._changes = 0                        # topic changes so far
        self._published = 0                      # the changes the last finished registration carried
        self._publish_waiters: list[tuple[int, asyncio.Future]] = []
        self._kv: dict[tuple[str, str], str] = {}       # advertised KV config entries

    def body(self) -> bytes:
        return json.dumps({"topicConfigSerializeWrapper": self._topic_table(), "filterServerList": []}).encode()

    async def register_once(self) -> list[bool]:
        body = self.body()
        header = dict(self._header, bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF)
        return await asyncio.gather(*(self._send(c, RequestCode.REGISTER_BROKER, header, body)
                                      for c in self._clients))

    async def readable_queues(self, topic: str) -> list[tuple[str, int]] | None:
        """(broker name, readable queue count) of each broker set serving *topic*, from the first
        NameServer that answers (QUERY_ASSIGNMENT balances over the whole cluster); None if none does."""
        data = await self.route(topic)
        if data is None:
            return None
        try:
            return [(str(q["brokerName"]), int(q["readQueueNums"])) for q in data.get("queueDatas") or ()
                    if int(q.get("perm", 6)) & PERM_READ]
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("a NameServer answered a route of %s that does not parse: %s", topic, exc)
            return None

    async def route(self, topic: str) -> dict | None:
        """The TopicRouteData of *topic* (``{}`` when the NameServers do not know it) from the first
        NameServer that answers; None if none does."""
        r = await self._ask_any(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, (ResponseCode.TOPIC_NOT_EXIST,))
        if r is None or r.code == ResponseCode.TOPIC_NOT_EXIST:
            return None if r is None else {}
        try:
            return fastjson.loads(r.body or b"{}")
        except ValueError as exc:
            log.warning("a NameServer answered a route of %s that does not parse: %s", topic, exc)
            return None

    async def cluster_info(self) -> dict | None:
        """GET_BROKER_CLUSTER_INFO of the first NameServer that answers; None if none does."""
        r = await self._ask_any(RequestCode.GET_BROKER_CLUSTER_INFO, {}, ())
        try:
            return None if r is None else fastjson.loads(r.body or b"{}")
        except ValueError as exc:
            log.warning("a NameServer answered GET_BROKER_CLUSTER_INFO with a body that does not parse: %s", exc)
            return None

    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        """A KV config namespace of the first NameServer that answers ({} when it has none)."""
        r = await self._ask_any(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace},
                                (ResponseCode.QUERY_NOT_FOUND,))
        if r is None or r.code == ResponseCode.QUERY_NOT_FOUND:
            return None if r is None else {}
        try:
            return {str(k): str(v) for k, v in (fastjson.loads(r.body or b"{}").get("table") or {}).items()}
        except (ValueError, AttributeError) as exc:
            log.warning("a NameServer answered KV namespace %s with a body that does not parse: %s", namespace, exc)
            return None

    async def _ask_any(self, code: int, header: dict, also: tuple[int, ...]) -> RemotingCommand | None:
        for client in self._clients:
            try:
                r = await client.invoke(self._sign(RemotingCommand.create_request(code, header)),
                                        timeout_s=REGISTER_TIMEOUT_S)
            except Exception as exc:
                log.debug("NameServer %s:%d unreachable for %s: %s", client.host, client.port, code, exc)
                continue
            if r.code == ResponseCode.SUCCESS or r.code in also:
                return r
        return None

    def advertise(self, namespace: str, key: str, value: str) -> None:
        """Keep ``namespace/key = value`` in every NameServer's KV config (PUT_KV_CONFIG after each registration)."""
        self._kv[(namespace, key)] = value
        self._kick.set()

    async def _put_kv(self) -> None:
        for (namespace, key), value in list(self._kv.items()):
            await asyncio.gather(*(self._put_kv_to(c, namespace, key, value) for c in self._clients))

    async def _put_kv_to(self, client: RemotingClient, namespace: str, key: str, value: str) -> None:
        """PUT only when the NameServer lacks the entry (a read first: a put every period would be a
        file write and a log line on each NameServer)."""
        header = {"namespace": namespace, "key": key}
        try:
            r = await client.invoke(self._sign(RemotingCommand.create_request(RequestCode.GET_KV_CONFIG, header)),
                                    timeout_s=REGISTER_TIMEOUT_S)
            if r.code == ResponseCode.SUCCESS and r.ext_fields.get("value") == value:
                return
        except Exception:
            pass                                  # _send says why, once
        await self._send(client, RequestCode.PUT_KV_CONFIG, dict(header, value=value))

    async def _send(self, client: RemotingClient, code: int, header: dict, body: bytes = b"") -> bool:
        try:
            r = await client.invoke(self._sign(RemotingCommand.create_request(code, header, body)),
                                    timeout_s=REGISTER_TIMEOUT_S)
        except Exception as exc:
            log.warning("NameServer %s:%d unreachable for %s: %s", client.host, client.port,
                        getattr(code, "name", code), exc)
            return False
        if r.code == ResponseCode.NO_PERMISSION:
            log.error("NameServer %s:%d refused %s: %s (it has ACL on: this broker signs with "
                      "innerClientAuthenticationCredentials, else the first admin account of its own plain_acl.yml; "
                      "that account must be an admin in the NameServer's file)", client.host, client.port,
                      getattr(code, "name", code), r.remark)
        elif r.code != ResponseCode.SUCCESS:
            log.warning("NameServer %s:%d refused %s: %s", client.host, client.port, code, r.remark)
        elif code == RequestCode.REGISTER_BROKER:     # a slave learns its master from the answer
            self.master_addr = r.ext_fields.get("masterAddr") or None
            self.master_ha_addr = r.ext_fields.get("haServerAddr") or None
        return r.code == ResponseCode.SUCCESS

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    def set_broker_id(self, broker_id: int) -> None:
        """Register under another id from now on (controller mode: 0 once master)."""
        self._header["brokerId"] = broker_id

    async def withdraw(self) -> None:
        """Stop registering and unregister now (a fenced master must leave the routes)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        header = {k: self._header[k] for k in ("brokerAddr", "brokerName", "brokerId", "clusterName")}
        await asyncio.gather(*(self._send(c, RequestCode.UNREGISTER_BROKER, header) for c in self._clients))

    def topics_changed(self) -> None:
        self._changes += 1
        self._kick.set()

    @property
    def behind(self) -> bool:
        """A topic changed that no finished registration carried yet."""
        return self._published < self._changes

    async def published(self, timeout_s: float = REGISTER_TIMEOUT_S) -> bool:
        """Wait until a registration carrying every topic change made before this call has been sent
        (answered or not: a NameServer that is down does not hold the caller longer than *timeout_s*);
        False on timeout.  RocketMQ registers a topic a send or an admin created before answering
        them, so a consumer started right after finds its route."""
        target = self._changes
        if self._task is None or self._task.done():      # not registering (withdrawn): nothing to wait for
            return False
        if self._published >= target:
            return True
        waiter = asyncio.get_running_loop().create_future()
        self._publish_waiters.append((target, waiter))
        done, _ = await asyncio.wait([waiter], timeout=timeout_s)   # the handler may run before it is a task
        return bool(done)

    async def _loop(self) -> None:
        """Every 30 s, and at once after a topic change (the first registration is the broker's start)."""
        while True:
            await wait_event(self._kick, REGISTER_PERIOD_S)
            self._kick.clear()             # before sending: a change during the send triggers another one
            carried = self._changes
            await self.register_once()
            self._published = max(self._published, carried)
            waiting, self._publish_waiters = self._publish_waiters, []
            for target, waiter in waiting:
                if target > carried:
                    self._publish_waiters.append((target, waiter))
                elif not waiter.done():
                    waiter.set_result(None)
            await self._put_kv()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        header = {k: self._header[k] for k in ("brokerAddr", "brokerName", "brokerId", "clusterName")}
        await asyncio.gather(*(self._send(c, RequestCode.UNREGISTER_BROKER, header) for c in self._clients))
        for c in self._clients:
            await c.close()
