"""CONSUMER_SEND_MSG_BACK (36): a consumer gives a message back after failing to consume it.

RocketMQ's rules (``AbstractSendMessageProcessor.consumerSendMsgBack``): the original is looked up
by its commitlog offset; ``RETRY_TOPIC`` is set to its topic if absent; ``ORIGIN_MESSAGE_ID`` keeps
the first id.  With ``reconsumeTimes >= maxReconsumeTimes`` (or a negative delay level) it goes to
``%DLQ%<group>`` (one queue) without delay; otherwise to ``%RETRY%<group>`` with delay level
``3 + reconsumeTimes`` unless the consumer asked for one - so the default 16 retries walk levels
3..18 (10 s .. 2 h) and the 17th failure dead-letters.  The new record is a copy with
``reconsumeTimes + 1``.
"""

from __future__ import annotations

import random

from rocketq.acl.plain_acl import SUB
from rocketq.remoting import RemotingCommand, ResponseCode

MIN_VERSION_WITH_MAX_RECONSUME = 121        # MQVersion V3_4_9: the header carries maxReconsumeTimes
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"


async def consumer_send_back(broker, conn, cmd: RemotingCommand) -> RemotingCommand:
    group_name = cmd.get_str("group")
    group = broker.groups.get(group_name, create=True)
    if group is None:
        return RemotingCommand.create_response(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                               f"subscription group not exist, {group_name}")
    offset = cmd.get_int("offset")
    original = broker.store.read_message(offset)
    if original is None:
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
    # the offset may name any message: its copy in the group's retry topic is readable by the group,
    # so the account must be allowed to read where it is now
    denied = broker.authorize_found(conn, cmd, [("topic", original.topic, SUB)])
    if denied is not None:
        return denied
    props = dict(original.properties)
    props.setdefault(PROPERTY_RETRY_TOPIC, original.topic)
    props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, cmd.get_str("originMsgId", "") or original.msg_id)
    max_times = cmd.get_int("maxReconsumeTimes", group.retry_max_times) \
        if cmd.version >= MIN_VERSION_WITH_MAX_RECONSUME else group.retry_max_times
    delay = cmd.get_int("delayLevel", 0)
    if original.reconsume_times >= max_times or delay < 0:
        topic = f"%DLQ%{group_name}"
        broker.stats.sent_to_dlq(group_name, props[PROPERTY_RETRY_TOPIC])
        tc = broker.topics.create_retry_or_dlq(topic, 1)
        props[PROPERTY_DLQ_ORIGIN_TOPIC] = props[PROPERTY_RETRY_TOPIC]
        props[PROPERTY_DLQ_ORIGIN_MESSAGE_ID] = props[PROPERTY_ORIGIN_MESSAGE_ID]
        delay = 0
    else:
        topic = f"%RETRY%{group_name}"
        tc = broker.topics.create_retry_or_dlq(topic, group.retry_queue_nums)
        delay = delay or 3 + original.reconsume_times
    props.pop("DELAY", None)
    msg = original.to_message(topic=topic, properties=props, queue_id=random.randrange(tc.write_queue_nums),
                              reconsume_times=original.reconsume_times + 1, delay_level=delay)
    r = await broker.store.put_message_async(msg)
    if not r.ok:
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, f"{r.status}: {r.error or ''}")
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS)
