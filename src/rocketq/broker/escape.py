"""Escape: a slave acting master hands a message to another broker group's master (RocketMQ 5's
``EscapeBridge.putMessageToRemoteBroker``).

Theory of operation
-------------------
A slave acting master (:mod:`rocketq.broker.acting_master`) must not write its own CommitLog: it is
a byte copy of its master's, and a local record would make the two diverge.  What RocketMQ lets
such a slave deliver - delayed and timer messages whose time has come, transactional half
messages - it therefore sends, as a producer would, to the master of another group that serves
the message's topic.

The target comes from the topic's route at the NameServers (cached ``ROUTE_TTL_S``): queues of a
group other than this broker's, writable (a masterless group is routed read-only, so another
acting slave is never chosen), whose group has an address under id 0.  Queues are taken in turn,
as RocketMQ's ``selectOneMessageQueue(lastBrokerName)`` does.  The send is an ordinary
SEND_MESSAGE_V2 under the message's producer group (``PGROUP``), else ``InnerProducerGroup_<broker
name>_<id>``; it counts as done when the remote master stored it (SEND_OK, or FLUSH_DISK_TIMEOUT /
FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE, which RocketMQ's ``PutMessageResult.isOk`` also takes
for a remote put).  Anything else - no route, no other group with the topic, a refusal, a timeout
- returns False and the caller keeps the message and tries again later: RocketMQ drops a delayed
message after ``scheduleAsyncDeliverMaxResendNum2Blocked * 2`` failures and a half message after
three, rocketq never does.
"""

from __future__ import annotations

import logging
import time

from rocketq.common.message import Message
from rocketq.common.sysflag import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
)
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

ROUTE_TTL_S = 3.0                  # a route is asked for again this soon (a group may come or go)
SEND_TIMEOUT_S = 3.0               # RocketMQ's EscapeBridge.SEND_TIMEOUT
RETRY_PAUSE_S = 1.0                # after a failed escape, the topic's next one is tried this much later
PERM_WRITE = 2
MASTER_ID = 0
PROPERTY_PRODUCER_GROUP = "PGROUP"
STORED_CODES = frozenset({ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                          ResponseCode.SLAVE_NOT_AVAILABLE})


def writable_targets(route: dict, own_group: str) -> list[tuple[str, str, int]]:
    """(group, master address, queue id) of every writable queue of *route* outside *own_group*."""
    masters = {}
    for bd in route.get("brokerDatas") or ():
        addr = (bd.get("brokerAddrs") or {}).get(str(MASTER_ID)) or (bd.get("brokerAddrs") or {}).get(MASTER_ID)
        if addr:
            masters[str(bd.get("brokerName"))] = str(addr)
    out = []
    for qd in sorted(route.get("queueDatas") or (), key=lambda q: str(q.get("brokerName"))):
        name = str(qd.get("brokerName"))
        if name == own_group or name not in masters or not int(qd.get("perm", 0)) & PERM_WRITE:
            continue
        out.extend((name, masters[name], qid) for qid in range(int(qd.get("writeQueueNums", 0))))
    return out


def half_for_escape(half, props: dict[str, str]) -> Message:
    """A stored half message as the transactional message another group stores as its own half
    (RocketMQ's ``buildTransactionalMessageFromHalfMessage``): real topic, prepared."""
    props = dict(props)
    topic = props.get(PROPERTY_REAL_TOPIC, "")
    props[PROPERTY_TRANSACTION_PREPARED] = "true"
    props.pop(PROPERTY_REAL_QUEUE_ID, None)
    return half.to_message(topic=topic, properties=props,
                           sys_flag=(half.sys_flag & ~TRANSACTION_MASK) | TRANSACTION_PREPARED_TYPE)


class EscapeBridge:
    def __init__(self, broker, *, clock=time.monotonic):
        self._broker = broker
        self._clock = clock
        self._routes: dict[str, tuple[float, list[tuple[str, str, int]]]] = {}
        self._turn: dict[str, int] = {}
        self._clients: dict[str, RemotingClient] = {}
        self._paused_until: dict[str, float] = {}     # topic -> monotonic time: no escape before
        self.escaped = 0
        st = broker.settings
        self.inner_group = f"InnerProducerGroup_{st.broker_name}_{st.broker_id}"

    async def _targets(self, topic: str) -> list[tuple[str, str, int]]:
        now = self._clock()
        cached = self._routes.get(topic)
        if cached is not None and now - cached[0] < ROUTE_TTL_S:
            return cached[1]
        registrar = self._broker.registrar
        route = await registrar.route(topic) if registrar is not None else None
        if route is None:                         # NameServers away: keep the last known targets a while
            return cached[1] if cached is not None else []
        targets = writable_targets(route, self._broker.settings.broker_name)
        self._routes[topic] = (now, targets)
        return targets

    async def put(self, msg: Message) -> bool:
        """Store *msg* on another group's master; True once that master stored it (see module doc)."""
        if self._clock() < self._paused_until.get(msg.topic, 0.0):
            return False
        if not await self._put(msg):
            self._paused_until[msg.topic] = self._clock() + RETRY_PAUSE_S
            return False
        self._paused_until.pop(msg.topic, None)
        return True

    async def _put(self, msg: Message) -> bool:
        targets = await self._targets(msg.topic)
        if not targets:
            log.info("no other group's master serves topic %s: message kept here, tried again later", msg.topic)
            return False
        turn = self._turn.get(msg.topic, -1) + 1
        self._turn[msg.topic] = turn
        group, addr, qid = targets[turn % len(targets)]
        header = {"a": msg.properties.get(PROPERTY_PRODUCER_GROUP) or self.inner_group, "b": msg.topic,
                  "c": "TBW102", "d": 4, "e": qid, "f": msg.sys_flag, "g": msg.born_timestamp or int(time.time() * 1000),
                  "h": msg.flag, "i": msg.properties_string(), "j": msg.reconsume_times, "k": False}
        try:
            r = await self._client(addr).invoke(self._broker.sign_outgoing(RemotingCommand.create_request(
                RequestCode.SEND_MESSAGE_V2, header, msg.body)), timeout_s=SEND_TIMEOUT_S)
        except Exception as exc:
            log.warning("escaping a message of topic %s to %s (%s) failed: %s", msg.topic, group, addr, exc)
            self._routes.pop(msg.topic, None)
            return False
        if r.code not in STORED_CODES:
            log.warning("escaping a message of topic %s to %s (%s): answered %s %s", msg.topic, group, addr,
                        r.code, r.remark)
            self._routes.pop(msg.topic, None)
            return False
        self.escaped += 1
        return True

    def _client(self, addr: str) -> RemotingClient:
        client = self._clients.get(addr)
        if client is None:
            host, _, port = addr.rpartition(":")
            client = self._clients[addr] = RemotingClient(host, int(port), ssl_context=self._broker.client_ssl_context())
        return client

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.close()
