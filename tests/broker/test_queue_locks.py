"""Orderly consumers' queue locks (LOCK/UNLOCK_BATCH_MQ) when their holder leaves the group.

A lock lapses 60 s after its last renewal; a client that unregisters, whose connection closes, or whose
heartbeats stop for the channel expiry gives its locks up at once, so the group's other members can
take its queues (see rocketq.broker.locks on the Java client's renewal race that makes this matter).
"""

import asyncio
import json

from broker_helpers import with_broker

from rocketq.broker import broker as broker_module
from rocketq.broker import clients as clients_module
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

GROUP, TOPIC = "GID_ORDERLY", "Orders"
QUEUES = [{"topic": TOPIC, "brokerName": "broker-a", "queueId": q} for q in (0, 1)]


def heartbeat(client_id):
    return RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, json.dumps({
        "clientID": client_id, "producerDataSet": [],
        "consumerDataSet": [{"groupName": GROUP, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                             "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
                             "subscriptionDataSet": [{"topic": TOPIC, "subString": "*", "tagsSet": [],
                                                      "codeSet": [], "subVersion": 1}]}]}).encode())


def lock(client_id, code=RequestCode.LOCK_BATCH_MQ):
    body = {"consumerGroup": GROUP, "clientId": client_id, "onlyThisBroker": False, "mqSet": QUEUES}
    return RemotingCommand.create_request(code, {}, json.dumps(body).encode())


def unregister(client_id):
    return RemotingCommand.create_request(RequestCode.UNREGISTER_CLIENT,
                                          {"clientID": client_id, "consumerGroup": GROUP})


async def locked(client, client_id) -> int:
    r = await client.invoke(lock(client_id), timeout_s=5)
    assert r.code == ResponseCode.SUCCESS
    return len(json.loads(r.body)["lockOKMQSet"])


async def member(port, client_id) -> RemotingClient:
    conn = RemotingClient("127.0.0.1", port)
    assert (await conn.invoke(heartbeat(client_id), timeout_s=5)).code == ResponseCode.SUCCESS
    return conn


async def member_holding_the_queues(port, client_id) -> RemotingClient:
    conn = await member(port, client_id)
    assert await locked(conn, client_id) == 2
    return conn


async def eventually_locked(client, client_id, timeout_s=5.0) -> int:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while (n := await locked(client, client_id)) == 0 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)
    return n


def test_an_unregistered_client_gives_its_locks_up(tmp_path):
    async def scenario(broker, client):
        a = await member_holding_the_queues(broker.server.port, "A")
        try:
            assert await locked(client, "B") == 0                        # A holds both
            assert (await a.invoke(unregister("A"), timeout_s=5)).code == ResponseCode.SUCCESS
            assert await locked(client, "B") == 2                        # at once, not 60 s later
        finally:
            await a.close()
    asyncio.run(with_broker(tmp_path, scenario))


def test_a_closed_connection_gives_its_locks_up_also_a_renewal_after_unregistering(tmp_path):
    async def scenario(broker, client):
        a = await member_holding_the_queues(broker.server.port, "A")
        try:
            assert (await a.invoke(unregister("A"), timeout_s=5)).code == ResponseCode.SUCCESS
            assert await locked(a, "A") == 2          # the Java client's periodic renewal, in flight at shutdown
            assert await locked(client, "B") == 0
        finally:
            await a.close()
        assert await eventually_locked(client, "B") == 2
    asyncio.run(with_broker(tmp_path, scenario))


def test_a_member_that_stops_heartbeating_expires_and_gives_its_locks_up(tmp_path, monkeypatch):
    monkeypatch.setattr(clients_module, "CHANNEL_EXPIRED_S", 0.3)
    monkeypatch.setattr(broker_module, "CLIENT_SCAN_INTERVAL_S", 0.05)

    async def scenario(broker, client):
        a = await member_holding_the_queues(broker.server.port, "A")
        try:
            assert broker.clients.consumer_ids(GROUP) == ["A"]
            assert await eventually_locked(client, "B") == 2             # A's connection is still open
            assert broker.clients.consumer_ids(GROUP) == []
        finally:
            await a.close()
    asyncio.run(with_broker(tmp_path, scenario))


def test_a_member_that_stays_keeps_its_locks(tmp_path):
    async def scenario(broker, client):
        a = await member_holding_the_queues(broker.server.port, "A")
        other = await member(broker.server.port, "C")
        try:
            assert await locked(other, "C") == 0                        # A holds both
            await other.close()                                         # another member leaving changes nothing
            for _ in range(250):
                if broker.clients.consumer_ids(GROUP) == ["A"]:
                    break
                await asyncio.sleep(0.02)
            assert broker.clients.consumer_ids(GROUP) == ["A"]
            assert await locked(client, "B") == 0
            assert await locked(a, "A") == 2
        finally:
            await a.close()
    asyncio.run(with_broker(tmp_path, scenario))
