"""Transactional (half) messages: END_TRANSACTION (37) over RocketMQ's half and op topics.

A producer's half message (property ``TRAN_MSG=true``, sysflag PREPARED) is not stored under its
topic: it goes to ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with ``REAL_TOPIC`` / ``REAL_QID`` kept as
properties, invisible to consumers.  END_TRANSACTION names it by commitlog offset:

* COMMIT (8): the message is put again under its real topic and queue, then an op record is
  written to ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (tag ``d``, body = the half message's queue offset);
* ROLLBACK (12): only the op record; UNKNOWN (0): nothing.

The op topic is what the check-back service reads to know which half messages are resolved
(RocketMQ's ``TransactionalMessageServiceImpl``); the service that sends CHECK_TRANSACTION_STATE
for unresolved ones is not built yet.
"""

from __future__ import annotations

from rocketq.acl.plain_acl import PUB
from rocketq.common.message import Message
from rocketq.common.sysflag import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rocketq.remoting import RemotingCommand, ResponseCode

OP_REMOVE_TAG = "d"


def is_half(msg: Message) -> bool:
    return msg.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true" or \
        msg.sys_flag & TRANSACTION_MASK == TRANSACTION_PREPARED_TYPE


def to_half(msg: Message) -> Message:
    """The half message as stored: in the half topic, queue 0, real destination in properties."""
    props = dict(msg.properties)
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.properties = props
    msg.topic, msg.queue_id = TRANS_HALF_TOPIC, 0
    msg.sys_flag = (msg.sys_flag & ~TRANSACTION_MASK) | TRANSACTION_NOT_TYPE
    return msg


async def end_transaction(broker, conn, cmd: RemotingCommand) -> RemotingCommand | None:
    kind = cmd.get_int("commitOrRollback")
    if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
        return None if cmd.is_oneway else RemotingCommand.create_response(cmd, ResponseCode.SUCCESS)
    offset = cmd.get_int("commitLogOffset")
    half = broker.store.read_message(offset)
    if half is None or half.topic != TRANS_HALF_TOPIC:
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR,
                                               f"no half message at commitlog offset {offset}")
    # committing or rolling back a half message is a send to its real topic
    denied = broker.authorize_found(conn, cmd, [("topic", half.properties.get(PROPERTY_REAL_TOPIC, ""), PUB)])
    if denied is not None:
        return None if cmd.is_oneway else denied
    if kind == TRANSACTION_COMMIT_TYPE:
        props = dict(half.properties)
        topic = props.pop(PROPERTY_REAL_TOPIC, None)
        qid = int(props.pop(PROPERTY_REAL_QUEUE_ID, "0"))
        props.pop(PROPERTY_TRANSACTION_PREPARED, None)
        msg = half.to_message(topic=topic, properties=props, queue_id=qid,
                              sys_flag=(half.sys_flag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT_TYPE)
        r = await broker.store.put_message_async(msg)
        if not r.ok:
            return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, f"{r.status}: {r.error or ''}")
    op = Message(topic=TRANS_OP_HALF_TOPIC, body=str(half.queue_offset).encode(), tags=OP_REMOVE_TAG)
    await broker.store.put_message_async(op)
    return None if cmd.is_oneway else RemotingCommand.create_response(cmd, ResponseCode.SUCCESS)
