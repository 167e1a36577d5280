"""A send that creates its topic is answered only once the NameServer has the topic's route (RocketMQ's
createTopicInSendMessageMethod registers before it answers), so a consumer started right after the
first send finds the route instead of waiting for the next 30 s route poll; a new group's first heartbeat
waits the same way for its retry topic.

A real NameServer behind a relay (tests/holdproxy.py) that holds every request after the broker's start-up
registration until the test releases it: the registration a new topic kicks off is held, and the
send that created the topic must still be waiting for it."""

from __future__ import annotations

import asyncio
import contextlib
import json

from broker_helpers import send_v2, store_config
from holdproxy import HoldingProxy

from rocketq.broker.broker import Broker, BrokerSettings
from rocketq.namesrv import NameServer
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

HOST = "127.0.0.1"


async def until(predicate, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def answered_after_its_route(tmp_path, request, topic: str):
    """Invoke *request* on a broker whose NameServer is behind a relay holding every request after the
    broker's start-up registration; the answer must wait for the registration that carries *topic*.
    Yields the broker and its client for more requests."""
    ns = await NameServer(HOST, 0, kv_path=tmp_path / "kv.json").start()
    relay = HoldingProxy(f"{HOST}:{ns.port}").start()
    broker = await Broker(BrokerSettings(port=0, namesrv_addr=relay.addr), store_config(tmp_path / "store")).start()
    client = RemotingClient(HOST, broker.server.port)
    try:
        assert ns.routes.route(topic) is None
        first = asyncio.ensure_future(client.invoke(request, timeout_s=10))
        await until(lambda: relay.held >= 1)           # the registration carrying the topic is held
        await asyncio.sleep(0)
        assert not first.done(), "answered before the NameServer had the route"
        relay.release()
        r = await first
        assert r.code == ResponseCode.SUCCESS, r.remark
        route = ns.routes.route(topic)
        assert route is not None and route["queueDatas"][0]["brokerName"] == broker.settings.broker_name
        assert not broker.registrar.behind
        yield broker, client
    finally:
        relay.release()
        await client.close()
        await broker.close()
        relay.stop()
        await ns.close()


def test_a_send_that_creates_its_topic_is_answered_once_the_route_is_registered(tmp_path):
    async def scenario():
        async with answered_after_its_route(tmp_path, send_v2("Fresh", b"one"), "Fresh") as (_broker, client):
            # nothing changed since: a send to the topic now is answered without waiting for a registration
            again = await client.invoke(send_v2("Fresh", b"two"), timeout_s=10)
            assert again.code == ResponseCode.SUCCESS and again.ext_fields["queueOffset"] == "1"
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_new_groups_first_heartbeat_is_answered_once_its_retry_topic_is_registered(tmp_path):
    heartbeat = {"clientID": "c1", "producerDataSet": [], "consumerDataSet": [{
        "groupName": "GID_NEW", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [], "unitMode": False}]}

    async def scenario():
        request = RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, json.dumps(heartbeat).encode())
        async with answered_after_its_route(tmp_path, request, "%RETRY%GID_NEW"):
            pass
    asyncio.run(asyncio.wait_for(scenario(), 60))
