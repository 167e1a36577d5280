"""A send that creates its topic is answered only once the NameServer has the topic's route (RocketMQ's
createTopicInSendMessageMethod registers before it answers), so a consumer started right after the
first send finds the route instead of waiting for the next 30 s route poll.

A real NameServer behind a relay (tests/relay.py) that holds every request after the broker's start-up
registration until the test releases it: the registration a new topic kicks off is held, and the
send that created the topic must still be waiting for it."""

from __future__ import annotations

import asyncio

from broker_helpers import send_v2, store_config
from relay import FrameRelay

from rocketq.broker.broker import Broker, BrokerSettings
from rocketq.namesrv import NameServer
from rocketq.remoting import RemotingClient, ResponseCode

HOST = "127.0.0.1"


class HeldAfterFirst(FrameRelay):
    """Forwards the first request frame, holds the later ones until :meth:`release`."""

    def __init__(self, target: str):
        super().__init__(target, name="held-after-first relay")
        self.held = 0
        self._released = asyncio.Event()

    def release(self) -> None:
        self._loop.call_soon_threadsafe(self._released.set)

    async def before_request(self) -> None:
        if self.forwarded >= 1 and not self._released.is_set():
            self.held += 1
            await self._released.wait()


async def until(predicate, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.01)


def test_a_send_that_creates_its_topic_is_answered_once_the_route_is_registered(tmp_path):
    async def scenario():
        ns = await NameServer(HOST, 0, kv_path=tmp_path / "kv.json").start()
        relay = HeldAfterFirst(f"{HOST}:{ns.port}").start()
        broker = await Broker(BrokerSettings(port=0, namesrv_addr=relay.addr), store_config(tmp_path / "store")).start()
        client = RemotingClient(HOST, broker.server.port)
        try:
            assert ns.routes.route("Fresh") is None
            first = asyncio.ensure_future(client.invoke(send_v2("Fresh", b"one"), timeout_s=10))
            await until(lambda: relay.held >= 1)           # the registration carrying "Fresh" is held
            await asyncio.sleep(0)
            assert not first.done(), "the send was answered before the NameServer had the route"
            relay.release()
            r = await first
            assert r.code == ResponseCode.SUCCESS, r.remark
            route = ns.routes.route("Fresh")
            assert route is not None and route["queueDatas"][0]["brokerName"] == broker.settings.broker_name
            # nothing changed since: a send to the topic now is answered without waiting for a registration
            assert not broker.registrar.behind
            again = await client.invoke(send_v2("Fresh", b"two"), timeout_s=10)
            assert again.code == ResponseCode.SUCCESS and again.ext_fields["queueOffset"] == "1"
        finally:
            await client.close()
            await broker.close()
            relay.release()
            relay.stop()
            await ns.close()
    asyncio.run(asyncio.wait_for(scenario(), 60))
