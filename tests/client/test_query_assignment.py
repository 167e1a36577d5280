"""QUERY_ASSIGNMENT (400): the broker splits a group's queues over its clients, across every broker
of the topic (the NameServers' route), in PULL mode by default and in POP mode when configured."""

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402

from rocketq.broker.assignment import allocate  # noqa: E402
from rocketq.client import Admin  # noqa: E402
from rocketq.client.api import MQClientAPI  # noqa: E402
from rocketq.remoting import RequestCode  # noqa: E402


async def _heartbeat(api, addr, client_id, group):
    await api.invoke(addr, RequestCode.HEART_BEAT, {}, json.dumps({"clientID": client_id, "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [], "unitMode": False}]}).encode())


async def _assignment(api, addr, topic, group, client_id, strategy="AVG", model="CLUSTERING"):
    r = await api.invoke(addr, RequestCode.QUERY_ASSIGNMENT, {}, json.dumps({
        "topic": topic, "consumerGroup": group, "clientId": client_id, "strategyName": strategy,
        "messageModel": model}).encode())
    data = json.loads(r.body)
    if "messageQueueAssignments" not in data:
        return None
    return sorted((a["messageQueue"]["brokerName"], a["messageQueue"]["queueId"], a["mode"])
                  for a in data["messageQueueAssignments"])


def test_pull_mode_splits_the_queues_of_every_broker_over_the_clients(tmp_path):
    async def main():
        async with cluster(tmp_path, brokers=2) as c, Admin(c.addr) as admin:
            await admin.create_topic("Spread", queues=3)
            api = MQClientAPI()
            try:
                a = c.brokers[0].address
                for cid in ("client-1", "client-2"):
                    await _heartbeat(api, a, cid, "GID_ASSIGN")
                one = await _assignment(api, a, "Spread", "GID_ASSIGN", "client-1")
                two = await _assignment(api, a, "Spread", "GID_ASSIGN", "client-2")
                every = [(b, q, "PULL") for b in ("broker-a", "broker-b") for q in range(3)]
                assert sorted(one + two) == every and len(one) == len(two) == 3
                assert one == every[:3]                                  # AVG: a contiguous half, sorted
                circle = await _assignment(api, a, "Spread", "GID_ASSIGN", "client-1", "AVG_BY_CIRCLE")
                assert circle == every[0::2]
                assert await _assignment(api, a, "Spread", "GID_ASSIGN", "client-1", model="BROADCASTING") == every
                assert await _assignment(api, a, "Spread", "GID_ASSIGN", "client-1", "CONSISTENT_HASH") is None
                assert await _assignment(api, a, "Spread", "GID_NOBODY", "client-1") is None
            finally:
                await api.close()
    asyncio.run(main())


def test_pop_mode_lets_every_client_pop_every_broker(tmp_path):
    async def main():
        async with cluster(tmp_path, brokers=2, default_message_request_mode="POP") as c, Admin(c.addr) as admin:
            await admin.create_topic("Popped", queues=2)
            api = MQClientAPI()
            try:
                a = c.brokers[1].address
                for cid in ("client-1", "client-2", "client-3"):
                    await _heartbeat(api, a, cid, "GID_POPMODE")
                assert await _assignment(api, a, "Popped", "GID_POPMODE", "client-2") == [
                    ("broker-a", -1, "POP"), ("broker-b", -1, "POP")]
                # a retry topic is always pulled
                await admin.create_topic("%RETRY%GID_POPMODE", queues=1)
                assert await _assignment(api, a, "%RETRY%GID_POPMODE", "GID_POPMODE", "client-1") == [
                    ("broker-a", 0, "PULL")]
            finally:
                await api.close()
    asyncio.run(main())


def test_allocate_matches_rocketmqs_strategies():
    queues = list(range(10))
    clients = ["a", "b", "c"]
    assert [allocate("AVG", queues, clients, x) for x in clients] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert [allocate("AVG_BY_CIRCLE", queues, clients, x) for x in clients] == [
        [0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert [allocate("AVG", [1, 2], ["a", "b", "c"], x) for x in "abc"] == [[1], [2], []]
    assert allocate("AVG", queues, clients, "stranger") == []
