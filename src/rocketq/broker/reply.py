"""Request-reply (RocketMQ 4.6+): SEND_REPLY_MESSAGE (324) / _V2 (325) and PUSH_REPLY_MESSAGE_TO_CLIENT (326).

A requester sends an ordinary message with ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` (its client id)
and ``TTL``; the broker stamps ``CLUSTER`` (its cluster name) on every message it stores from a
single send, so the responder can build the reply (``MessageUtil.createReplyMessage``): topic
``<cluster>_REPLY_TOPIC`` (a system topic every broker creates, 1 queue), ``MSG_TYPE=reply`` and the
three properties copied.  The responder's producer sends it with SEND_REPLY_MESSAGE(_V2) (the
send headers), and the broker (``ReplyMessageProcessor``):

1. pushes it to the requester: PUSH_REPLY_MESSAGE_TO_CLIENT on the connection of the client named by
   ``REPLY_TO_CLIENT`` (it must have heartbeated to this broker), header ``ReplyMessageRequestHeader``
   (the send header's fields plus ``bornHost``, ``storeHost``, ``storeTimestamp``; the properties
   gain ``PUSH_REPLY_TIME``), body the reply's body; the requester answers SUCCESS;
2. stores it in the reply topic (``storeReplyMessageEnable``, on as in RocketMQ);
3. answers SUCCESS, or SYSTEM_ERROR naming why the push failed (no ``REPLY_TO_CLIENT``, no
   connection of that client here, its answer or its silence for ``PUSH_REPLY_TIMEOUT_S``).
"""

from __future__ import annotations

import logging
import random
import time

from rocketq.broker.send import message_from_header, send_header, topic_for_send
from rocketq.broker.topic_config import REPLY_TOPIC_SUFFIX
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PUSH_REPLY_TIMEOUT_S = 3.0               # RocketMQ's callClient waits as long
STORE_REPLY_MESSAGE = True               # storeReplyMessageEnable


def reply_topic(cluster: str) -> str:
    return cluster + REPLY_TOPIC_SUFFIX


def handlers(broker, host_of) -> dict:
    async def handle(conn, cmd):
        return await send_reply(broker, cmd, host_of(conn), getattr(conn, "peer", ""))
    return {RequestCode.SEND_REPLY_MESSAGE: handle, RequestCode.SEND_REPLY_MESSAGE_V2: handle}


async def send_reply(broker, cmd: RemotingCommand, born_host, born_peer: str) -> RemotingCommand:
    send_header(cmd)
    tc = topic_for_send(broker, cmd)
    if isinstance(tc, RemotingCommand):
        return tc
    qid = cmd.get_int("queueId", -1)
    qid = random.randrange(tc.write_queue_nums) if qid < 0 else qid % tc.write_queue_nums
    msg = message_from_header(cmd, cmd.body or b"", born_host, queue_id=qid)
    pushed = await _push(broker, cmd, msg, born_peer)
    header = {"msgId": "0", "queueId": qid, "queueOffset": 0}
    if STORE_REPLY_MESSAGE:
        r = await broker.store.put_message_async(msg)
        if r.physical_offset >= 0:
            broker.replication.notify()
            header.update(msgId=r.msg_id, queueOffset=r.queue_offset)
        else:
            log.warning("reply message not stored in %s: %s %s", msg.topic, r.status, r.error or "")
    if pushed is not None:
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, pushed, header)
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, None, header)


async def _push(broker, cmd: RemotingCommand, msg, born_peer: str) -> str | None:
    """PUSH_REPLY_MESSAGE_TO_CLIENT to the requester; None when it took it, else why not."""
    client_id = msg.properties.get(PROPERTY_REPLY_TO_CLIENT)
    if not client_id:
        return f"reply message properties[{PROPERTY_REPLY_TO_CLIENT}] is null"
    conn = broker.clients.connection_of(client_id)
    if conn is None:
        return f"push reply message fail, channel of <{client_id}> not found."
    props = dict(msg.properties, **{PROPERTY_PUSH_REPLY_TIME: str(int(time.time() * 1000))})
    header = {k: v for k, v in cmd.ext_fields.items() if k in (
        "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp",
        "flag", "reconsumeTimes", "unitMode")}
    header.update(properties="".join(f"{k}\x01{v}\x02" for k, v in props.items()), bornHost=born_peer,
                  storeHost=broker.address, storeTimestamp=int(time.time() * 1000))
    push = RemotingCommand.create_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header, msg.body)
    try:
        r = await conn.send_request(push, timeout_s=PUSH_REPLY_TIMEOUT_S)
    except Exception as exc:              # gone, or silent: the responder hears why
        return f"push reply message to {client_id} fail: {type(exc).__name__} {exc}"
    if r.code != ResponseCode.SUCCESS:
        return f"push reply message to {client_id} fail: {r.code} {r.remark or ''}"
    return None
