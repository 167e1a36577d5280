"""Routes over every broker group: QueryRoute and QueryAssignment name each group's own gRPC endpoint.

Theory of operation
-------------------
Every rocketq broker can serve gRPC itself (there is no separate proxy), so a 5.x client must be
told, per queue, which broker's endpoint serves it.  Each endpoint advertises its address in the
NameServers' KV config (namespace ``GRPC_ENDPOINTS_NAMESPACE``, key = the broker's remoting address,
value = ``host:port`` of its gRPC endpoint; see
:meth:`rocketq.broker.registration.NameServerRegistrar.advertise`), which is RocketMQ's own KV
config, so a Java NameServer keeps it too.  A route is then the NameServer's TopicRouteData with
each group's master (brokerId 0: the acting master too, when the NameServer routes one) mapped to
its gRPC endpoint, and the queue permissions taken from that group's QueueData (a group whose
write permission is wiped, or whose slave acts as master, is listed read-only).

This broker's own group is taken from its own topic table when it is the master (fresh even
before its registration reached the NameServers, and the topic may be auto-created here); a group
without an advertised endpoint (a broker with gRPC off) is left out, since a 5.x client could not
reach it.  When no NameServer answers, the route is this broker's queues alone (as before several
groups were routed).

A request for a queue of another group (ReceiveMessage, PullMessage, offsets: they name the queue's
broker) is refused with ILLEGAL_ACCESS_POINT rather than forwarded.  RocketMQ's cluster-mode proxy
forwards because every route names the proxy itself; here every route names the owning broker, so
only a client with a stale route can come to the wrong one, and the refusal makes it retry
elsewhere (sends move to the next queue at once) while its periodic route refresh (30 s in the Java
client) corrects the route.  Forwarding would put a second hop, and a second failure mode, in every
such request.

NameServer answers are cached ``ROUTE_CACHE_S`` per topic and ``ENDPOINTS_CACHE_S`` for the KV
namespace so a burst of QueryRoute calls costs the NameServers at most one request per interval.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from rocketq.broker.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from rocketq.grpc_endpoint.protocol import Code, V2Error, pb

log = logging.getLogger(__name__)

GRPC_ENDPOINTS_NAMESPACE = "ROCKETQ_GRPC_ENDPOINTS"
ROUTE_CACHE_S = 1.0
ENDPOINTS_CACHE_S = 5.0
ROUTE_CACHE_MAX_TOPICS = 10_000          # a bounded cache: cleared whole when full


@dataclass(frozen=True)
class GroupQueues:
    broker_name: str
    endpoints: pb.Endpoints
    read_queue_nums: int
    write_queue_nums: int
    perm: int


def queue_permissions(read: int, write: int, perm: int) -> list[int]:
    """Per queue id, the v2 permission (the proxy's ``genMessageQueueFromQueueData``): ids below
    min(R, W) are READ_WRITE, the surplus READ or WRITE only."""
    readable = read if perm & PERM_READ else 0
    writable = write if perm & PERM_WRITE else 0
    out = []
    for qid in range(max(readable, writable)):
        if qid < min(readable, writable):
            out.append(pb.Permission.READ_WRITE)
        else:
            out.append(pb.Permission.READ if qid < readable else pb.Permission.WRITE)
    return out


def check_owner(broker, message_queue) -> None:
    """Refuse a request naming a queue of another broker group (see the module's docstring)."""
    name = message_queue.broker.name
    if name and name != broker.settings.broker_name:
        raise V2Error(Code.ILLEGAL_ACCESS_POINT, f"queue {message_queue.topic.name}#{message_queue.id} belongs to "
                                                 f"broker group {name}, not to {broker.settings.broker_name}: "
                                                 "query the route again and use that group's endpoint")


class ClusterRoutes:
    def __init__(self, broker, local: pb.Endpoints, parse_endpoint):
        self.broker = broker
        self.local = local
        self._parse = parse_endpoint                 # "host:port" -> pb.Endpoints
        self._routes: dict[str, tuple[float, dict | None]] = {}
        self._endpoints: tuple[float, dict[str, str]] = (0.0, {})

    async def groups(self, topic: str, local_tc: TopicConfig | None) -> list[GroupQueues]:
        """Every group serving *topic* with a reachable gRPC endpoint; this broker's first."""
        b = self.broker
        own = b.settings.broker_name
        out = []
        if local_tc is not None and b.settings.broker_id == 0:
            out.append(GroupQueues(own, self.local, local_tc.read_queue_nums, local_tc.write_queue_nums, local_tc.perm))
        registrar = getattr(b, "registrar", None)
        if registrar is None:
            return out
        route = await self._route(registrar, topic)
        if not route:
            return out
        endpoints = await self._endpoint_table(registrar)
        masters = {bd.get("brokerName"): (bd.get("brokerAddrs") or {}).get("0") for bd in route.get("brokerDatas") or ()}
        for qd in route.get("queueDatas") or ():
            name = qd.get("brokerName")
            if name == own and out and out[0].broker_name == own:
                continue
            addr = masters.get(name)
            grpc_addr = endpoints.get(addr) if addr else None
            if grpc_addr is None:
                log.debug("broker group %s of topic %s has no advertised gRPC endpoint; left out", name, topic)
                continue
            try:
                ep = self._parse(grpc_addr)
                out.append(GroupQueues(name, ep, int(qd["readQueueNums"]), int(qd["writeQueueNums"]), int(qd["perm"])))
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("route of %s: group %s has an unusable entry (%s); left out", topic, name, exc)
        return out

    async def _route(self, registrar, topic: str) -> dict | None:
        now = time.monotonic()
        cached = self._routes.get(topic)
        if cached is not None and now - cached[0] < ROUTE_CACHE_S:
            return cached[1]
        route = await registrar.route(topic)
        if len(self._routes) >= ROUTE_CACHE_MAX_TOPICS:
            self._routes.clear()
        self._routes[topic] = (now, route)
        return route

    async def _endpoint_table(self, registrar) -> dict[str, str]:
        now = time.monotonic()
        at, table = self._endpoints
        if now - at < ENDPOINTS_CACHE_S and table:
            return table
        fresh = await registrar.kv_list(GRPC_ENDPOINTS_NAMESPACE)
        if fresh is not None:
            self._endpoints = (now, fresh)
            return fresh
        return table
