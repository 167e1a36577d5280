"""RECALL_MESSAGE (370) over remoting: take back a delayed message before it is due (RocketMQ 5.3).

Header (``RecallMessageRequestHeader``): ``producerGroup`` (optional), ``topic``, ``recallHandle``
(the handle a send of a timer message answered; RocketMQ's ``RecallMessageHandle`` v1).  The
timer drops the message (:meth:`rocketq.broker.timer.Timer.recall`), the same as gRPC
RecallMessage does; the answer's header carries the message's ``msgId`` (its UNIQ_KEY).  Refusals
are ``RecallMessageProcessor``'s: TOPIC_NOT_EXIST; ILLEGAL_OPERATION for a handle that does not
decode, names another topic or broker, or whose time has come or lies beyond ``timerMaxDelaySec``
("recall failed, timestamp invalid"); SERVICE_NOT_AVAILABLE on a broker that takes no writes (a
slave); rocketq adds SYSTEM_BUSY when too many recalls are pending.  As in RocketMQ, a handle that
names no scheduled message is answered SUCCESS and drops nothing.
"""

from __future__ import annotations

import time

from rocketq.broker.timer import RecallRefused
from rocketq.broker.timer_messages import RecallHandle
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

_REFUSED = {"due": (ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid"),
            "full": (ResponseCode.SYSTEM_BUSY, "recall failed, too many recalls pending"),
            "stopped": (ResponseCode.SERVICE_NOT_AVAILABLE, "recall failed, broker service not available")}


def handlers(broker, host_of) -> dict:
    return {RequestCode.RECALL_MESSAGE: lambda conn, cmd: recall_message(broker, cmd, host_of(conn))}


async def recall_message(broker, cmd: RemotingCommand, born_host) -> RemotingCommand:
    def refuse(code: int, remark: str) -> RemotingCommand:
        return RemotingCommand.create_response(cmd, code, remark)

    topic = cmd.get_str("topic")
    if broker.topics.get(topic) is None:
        return refuse(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{topic}] not exist")
    if broker.replication.write_refusal() is not None:
        return refuse(ResponseCode.SERVICE_NOT_AVAILABLE, "recall failed, broker service not available")
    try:
        handle = RecallHandle.parse(cmd.get_str("recallHandle", ""))
    except ValueError as exc:
        return refuse(ResponseCode.ILLEGAL_OPERATION, f"recall failed, {exc}")
    if handle.topic != topic:
        return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
    if handle.broker_name != broker.settings.broker_name:
        return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, broker service not available")
    left_ms = handle.due_ms - int(time.time() * 1000)
    if left_ms <= 0 or left_ms >= broker.timer_policy.max_delay_ms:
        return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
    try:
        r = await broker.timer.recall(handle, born_host=born_host)
    except RecallRefused as exc:
        code, remark = _REFUSED[exc.why]
        return refuse(code, f"{remark}: {exc}")
    if r.physical_offset < 0:
        return refuse(ResponseCode.SYSTEM_ERROR, f"recall failed, execute error: {r.status} {r.error or ''}")
    broker.replication.notify()
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, None, {"msgId": handle.uniq_key})
