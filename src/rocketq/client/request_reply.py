"""Request-reply for rocketq's client (RocketMQ's ``DefaultMQProducer.request`` / ``MessageUtil``).

The requester (:meth:`rocketq.client.Producer.request`) sends a message carrying
``CORRELATION_ID`` (a new unique id), ``REPLY_TO_CLIENT`` (its client id) and ``TTL`` (the timeout,
ms), and waits for a PUSH_REPLY_MESSAGE_TO_CLIENT with the same correlation id.  The broker that
receives the reply pushes it on the requester's connection, so before the first request the
requester looks up the clusters (NameServers) and the route of each ``<cluster>_REPLY_TOPIC``:
its heartbeats then reach every broker a reply can arrive at.

The responder answers with :func:`create_reply_message` (the request's ``CLUSTER``, stamped by the
broker, names the reply topic) and an ordinary ``Producer.send``, which sends a message with
``MSG_TYPE=reply`` as SEND_REPLY_MESSAGE_V2.
"""

from __future__ import annotations

import asyncio
import logging

from rocketq.client.model import MQClientError
from rocketq.common.message import Message
from rocketq.common.properties import decode_properties
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger("rocketq.client")

PROPERTY_CORRELATION_ID = "CORRELATION_ID"
PROPERTY_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PROPERTY_TTL = "TTL"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_MESSAGE_TYPE = "MSG_TYPE"
REPLY_MESSAGE_FLAG = "reply"
REPLY_TOPIC_SUFFIX = "_REPLY_TOPIC"
MAX_WAITING_REQUESTS = 10_000            # requests one producer may have waiting for their replies


class RequestTimeout(MQClientError):
    """No reply arrived within the request's timeout (RocketMQ's RequestTimeoutException)."""


def create_reply_message(request, body: bytes) -> Message:
    """The reply to *request* (a received message): to ``<CLUSTER>_REPLY_TOPIC``, with the request's
    correlation id, requester and TTL (``MessageUtil.createReplyMessage``)."""
    props = request.properties
    cluster = props.get(PROPERTY_CLUSTER)
    if not cluster:
        raise MQClientError(-1, f"create reply message fail, requestMessage error, property[{PROPERTY_CLUSTER}] "
                                "is null (was it sent to a broker?)")
    reply = {PROPERTY_MESSAGE_TYPE: REPLY_MESSAGE_FLAG}
    for name in (PROPERTY_CORRELATION_ID, PROPERTY_REPLY_TO_CLIENT, PROPERTY_TTL):
        if props.get(name) is not None:
            reply[name] = props[name]
    return Message(cluster + REPLY_TOPIC_SUFFIX, body, properties=reply)


def is_reply(msg: Message) -> bool:
    return msg.properties.get(PROPERTY_MESSAGE_TYPE) == REPLY_MESSAGE_FLAG


class ReplyWaiter:
    """The requester's side: futures by correlation id, resolved by the brokers' pushes."""

    def __init__(self, instance):
        self._instance = instance
        self._waiting: dict[str, asyncio.Future] = {}
        self._reached: set[str] = set()          # clusters whose reply topic route is known
        instance.handlers[RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT] = self._on_push

    async def reach_reply_brokers(self) -> None:
        """Learn every cluster's reply topic route, so heartbeats reach the brokers that push replies."""
        info = await self._instance.api.cluster_info(self._instance.namesrvs)
        clusters = set((info.get("clusterAddrTable") or {}).keys()) - self._reached
        for cluster in sorted(clusters):
            if await self._instance.route(cluster + REPLY_TOPIC_SUFFIX) is not None:
                self._reached.add(cluster)
        if clusters:
            await self._instance.heartbeat_now()

    def expect(self, correlation_id: str) -> asyncio.Future:
        if len(self._waiting) >= MAX_WAITING_REQUESTS:
            raise MQClientError(-1, f"{MAX_WAITING_REQUESTS} requests are waiting for replies already")
        fut = self._waiting[correlation_id] = asyncio.get_running_loop().create_future()
        return fut

    def forget(self, correlation_id: str) -> None:
        self._waiting.pop(correlation_id, None)

    async def _on_push(self, cmd: RemotingCommand) -> RemotingCommand:
        f = cmd.ext_fields
        props = decode_properties(str(f.get("properties") or ""))
        fut = self._waiting.get(props.get(PROPERTY_CORRELATION_ID, ""))
        if fut is None:
            log.debug("reply for unknown (or timed out) request %s", props.get(PROPERTY_CORRELATION_ID))
        elif not fut.done():
            fut.set_result(Message(str(f.get("topic") or ""), cmd.body or b"", queue_id=int(f.get("queueId") or 0),
                                   properties=props, flag=int(f.get("flag") or 0)))
        return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS)
