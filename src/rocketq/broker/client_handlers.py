"""The remoting requests of client registration and queue locks: HEART_BEAT, UNREGISTER_CLIENT,
GET_CONSUMER_LIST_BY_GROUP, LOCK_BATCH_MQ, UNLOCK_BATCH_MQ, and the NOTIFY_CONSUMER_IDS_CHANGED a change of
a group's members sends to its clients (so they rebalance at once, not at their next 20 s rebalance).

The state lives in the broker's :class:`~rocketq.broker.clients.ClientManager` and
:class:`~rocketq.broker.locks.QueueLocks`; these handlers parse, update and answer.
"""

from __future__ import annotations

import asyncio
import json
import logging

from rocketq.broker.admin import ok
from rocketq.broker.send import SEND_WAITS_FOR_ROUTE_S, unpublished
from rocketq.common import fastjson
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)


def handlers(broker) -> dict:
    async def heartbeat(conn, cmd):
        try:
            data = fastjson.loads(cmd.body or b"{}")        # Java clients may write fastjson's bare int keys
        except ValueError as exc:
            return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, f"heartbeat body is not JSON: {exc}")
        created = False
        for c in data.get("consumerDataSet") or ():
            group = broker.groups.get(str(c.get("groupName")), create=True)
            if group is not None:
                retry = f"%RETRY%{group.group_name}"
                created |= broker.topics.get(retry) is None
                broker.topics.create_retry_or_dlq(retry, group.retry_queue_nums)
        conn.context["client"] = (cmd.language, cmd.version)      # the metrics' connection labels
        notify_changed(broker, broker.clients.heartbeat(conn, data))
        if broker.store.filter_bitmaps is not None:                # enableCalcFilterBitMap: SQL92 filters' bits
            broker.store.filter_bitmaps.register_heartbeat(data)
        if created and (registrar := unpublished(broker)) is not None:
            await registrar.published(SEND_WAITS_FOR_ROUTE_S)     # as Java: the retry topic's route first
        return ok(cmd, {"IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": "true"})

    async def unregister_client(conn, cmd):
        members_left(broker, broker.clients.unregister(cmd.get_str("clientID", ""),
                                                       producer_group=cmd.get_str("producerGroup", ""),
                                                       consumer_group=cmd.get_str("consumerGroup", "")))
        return ok(cmd)

    async def consumer_list(conn, cmd):
        ids = broker.clients.consumer_ids(cmd.get_str("consumerGroup"))
        if not ids:
            return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, "no consumer for this group")
        return ok(cmd, body=json.dumps({"consumerIdList": ids}).encode())

    async def lock_batch(conn, cmd):
        group, client, queues = _lock_request(cmd)
        held = broker.locks.try_lock(group, client, queues)
        return ok(cmd, body=json.dumps({"lockOKMQSet": [{"topic": t, "brokerName": b, "queueId": q}
                                                        for t, b, q in held]}).encode())

    async def unlock_batch(conn, cmd):
        broker.locks.unlock(*_lock_request(cmd))
        return ok(cmd)

    return {RequestCode.HEART_BEAT: heartbeat, RequestCode.UNREGISTER_CLIENT: unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: consumer_list,
            RequestCode.LOCK_BATCH_MQ: lock_batch, RequestCode.UNLOCK_BATCH_MQ: unlock_batch}


def _lock_request(cmd) -> tuple[str, str, list[tuple[str, str, int]]]:
    req = json.loads(cmd.body or b"{}")
    queues = [(q["topic"], q["brokerName"], int(q["queueId"])) for q in req.get("mqSet") or ()]
    return req.get("consumerGroup", ""), req.get("clientId", ""), queues


def members_left(broker, left: list[tuple[str, str]]) -> None:
    """(group, client id) pairs left their groups: release their queue locks there (see
    :mod:`rocketq.broker.locks` on why at once), and tell each group's other clients."""
    for group, client_id in left:
        broker.locks.release(client_id, group)
    notify_changed(broker, sorted({group for group, _ in left}))


def connection_closed(broker, conn) -> None:
    """*conn* closed: its clients leave their groups and lose every queue lock they hold, also a lock a
    stale renewal took after the client unregistered."""
    ids, left = broker.clients.connection_closed(conn)
    for client_id in ids:
        broker.locks.release(client_id)
    members_left(broker, left)


def notify_changed(broker, groups: list[str]) -> None:
    """Oneway NOTIFY_CONSUMER_IDS_CHANGED to every client of each group, so they rebalance now."""
    for group in groups:
        for conn in broker.clients.connections(group):
            note = RemotingCommand.create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                                  {"consumerGroup": group}, oneway=True)
            send_oneway_quietly(conn, note)


def send_oneway_quietly(conn, note: RemotingCommand) -> None:
    """Send *note* oneway in the background; a client that went away is not told (it finds out on its own)."""
    asyncio.ensure_future(_quietly(conn.send_oneway(note), note.code))


async def _quietly(coro, code: int) -> None:
    try:
        await coro
    except Exception as exc:
        log.debug("notification %d not delivered: %s", code, exc)
