"""INVOKE_BROKER_TO_RESET_OFFSET (222): move a group's offsets on a topic, with its consumers running.

Header (``ResetOffsetRequestHeader``): ``topic``, ``group``, ``timestamp`` (ms; negative: the end
of each queue), ``isForce``, optionally ``queueId`` and ``offset`` (one queue to an exact offset).
As RocketMQ 5 does it (``useServerSideResetOffset``, on by default):

* the offset of each queue is the first message stored at or after ``timestamp`` (0: the start
  of the queue), or each queue's end for a negative one;
* it becomes the group's committed offset at once and stays pending until a consumer of the group
  reads that queue: its next pull is answered PULL_OFFSET_MOVED with the new offset, pop consumers
  pop from there, and commits of the old position meanwhile are ignored
  (:class:`~rocketq.broker.consumer_offsets.ConsumerOffsetManager`);
* the group's live consumers also get RESET_CONSUMER_CLIENT_OFFSET (220, oneway; header
  ``topic``, ``group``, ``timestamp``, ``isForce``; body ``ResetOffsetBody``
  ``{"offsetTable": {MessageQueue: offset}}`` in fastjson's form), which Java consumers and
  rocketq's act on at once (the old path of RocketMQ's ``Broker2Client.resetOffset``);
* the answer's body is the same ``ResetOffsetBody``.

Refused: a slave (SYSTEM_ERROR, "Can not reset offset in slave broker"), an unknown topic
(TOPIC_NOT_EXIST), an unknown group (SUBSCRIPTION_GROUP_NOT_EXIST), an exact offset outside the
queue (SYSTEM_ERROR naming the range).
"""

from __future__ import annotations

import logging

from rocketq.broker.admin import ok
from rocketq.broker.client_handlers import send_oneway_quietly
from rocketq.broker.pop.pop_state import QueueKey
from rocketq.common import fastjson
from rocketq.common.fastjson import ObjectKey
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)


def handlers(broker) -> dict:
    return {RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: lambda conn, cmd: reset_offset(broker, cmd)}


def _target_offsets(broker, cmd, tc) -> dict[int, int] | str:
    store, topic = broker.store, tc.topic_name
    qid, exact = cmd.get_int("queueId", -1), cmd.get_int("offset", -1)
    if qid >= 0 and exact != -1:
        lo, hi = store.min_offset(topic, qid), store.max_offset(topic, qid)
        if not lo <= exact <= hi:
            return f"Target offset {exact} not in consume queue range [{lo}-{hi}]"
        return {qid: exact}
    ts = cmd.get_int("timestamp", -1)
    queues = [qid] if qid >= 0 else range(tc.read_queue_nums)
    return {q: store.max_offset(topic, q) if ts < 0 else store.search_offset_by_time(topic, q, ts) for q in queues}


async def reset_offset(broker, cmd: RemotingCommand) -> RemotingCommand:
    topic, group = cmd.get_str("topic"), cmd.get_str("group")
    if getattr(getattr(broker, "replication", None), "role", "") == "SLAVE":
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker")
    tc = broker.topics.get(topic)
    if tc is None:
        return RemotingCommand.create_response(cmd, ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} does not exist")
    if broker.groups.get(group) is None:
        return RemotingCommand.create_response(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                               f"Group {group} does not exist")
    targets = _target_offsets(broker, cmd, tc)
    if isinstance(targets, str):
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, targets)
    async with broker.pop.popper.lock:
        for qid, offset in targets.items():
            broker.offsets.assign_reset(group, topic, qid, offset)
            broker.pop.state.reset(QueueKey(group, topic, qid), offset)
    log.info("offsets of group %s on topic %s reset: %s", group, topic, targets)
    name = broker.settings.broker_name
    body = fastjson.dumps({"offsetTable": {ObjectKey.of(brokerName=name, queueId=q, topic=topic): o
                                           for q, o in targets.items()}}).encode()
    note = {"topic": topic, "group": group, "timestamp": cmd.get_int("timestamp", -1),
            "isForce": cmd.get_bool("isForce", True)}
    for conn in broker.clients.connections(group):
        push = RemotingCommand.create_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, note, body, oneway=True)
        send_oneway_quietly(conn, push)   # a consumer that went away reads the reset on its next pull
    return ok(cmd, body=body)

