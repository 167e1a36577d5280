"""What is on the broker, read with rocketq's own Python client over the wire: whole topics, committed
offsets, queue bounds. The suites compare it byte for byte with what a reference client sent."""

from __future__ import annotations

import asyncio

from rocketq.client.api import MQClientAPI
from rocketq.client.model import MessageQueue, PullStatus
from rocketq.store.record import StoredMessage

PULL_BATCH = 32
READER_GROUP = "compat_reader"          # a pull with no subscription needs a group name; nothing is committed
CALL_TIMEOUT_S = 10


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def _route_queues(api: MQClientAPI, namesrv: str, topic: str) -> list[tuple[str, MessageQueue]]:
    route = await api.get_route([namesrv], topic)
    return [(route.master_of(mq.broker_name), mq) for mq in route.read_queues()]


def read_topic(namesrv: str, topic: str, *, credentials=None) -> list[StoredMessage]:
    """Every message of every queue of *topic*, in queue then offset order."""
    async def go():
        api = MQClientAPI(credentials=credentials, timeout_s=CALL_TIMEOUT_S)
        try:
            out = []
            for addr, mq in await _route_queues(api, namesrv, topic):
                offset = 0
                while True:
                    r = await api.pull(addr, mq, READER_GROUP, offset, max_nums=PULL_BATCH)
                    if r.status != PullStatus.FOUND:
                        if r.status == PullStatus.OFFSET_ILLEGAL and offset < r.min_offset:
                            offset = r.min_offset
                            continue
                        break
                    out.extend(r.messages)
                    offset = r.next_begin_offset
            return out
        finally:
            await api.close()
    return _run(go())


def offsets(namesrv: str, topic: str, group: str | None = None) -> dict[int, tuple[int, int]]:
    """queueId -> (max offset, the group's committed offset or -1)."""
    async def go():
        api = MQClientAPI(timeout_s=CALL_TIMEOUT_S)
        try:
            out = {}
            for addr, mq in await _route_queues(api, namesrv, topic):
                committed = await api.query_offset(addr, group, mq) if group else -1
                out[mq.queue_id] = (await api.max_offset(addr, mq), committed)
            return out
        finally:
            await api.close()
    return _run(go())


def commit_offset(namesrv: str, topic: str, group: str, queue_id: int, offset: int) -> None:
    """UPDATE_CONSUMER_OFFSET: *group*'s committed offset of one queue of *topic*."""
    async def go():
        api = MQClientAPI(timeout_s=CALL_TIMEOUT_S)
        try:
            for addr, mq in await _route_queues(api, namesrv, topic):
                if mq.queue_id == queue_id:
                    await api.update_offset(addr, group, mq, offset)
        finally:
            await api.close()
    _run(go())


def create_topic(broker: str, topic: str, queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker (host:port); the broker registers it before answering."""
    from rocketq.remoting import RequestCode, ResponseCode

    async def go():
        api = MQClientAPI(timeout_s=CALL_TIMEOUT_S)
        try:
            await api.invoke(broker, RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6,
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False},
                expect=(ResponseCode.SUCCESS,))
        finally:
            await api.close()
    _run(go())
