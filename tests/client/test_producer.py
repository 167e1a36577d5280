"""Producer and TransactionProducer against a real NameServer and broker."""

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402

from rocketq.client import Message, MQClientError, Producer, SendStatus  # noqa: E402


def test_first_send_to_a_new_topic_then_batches_and_sharding(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            r = await p.send(Message("Fresh", b"hello", tags="A", keys=["k1"]))
            assert r.status == SendStatus.SEND_OK and len(r.msg_id) == 32 and len(r.offset_msg_id) == 32
            broker = c.brokers[0]
            assert broker.topics.get("Fresh") is not None
            batch = await p.send_batch([Message("Fresh", b"b%d" % i) for i in range(10)])
            assert batch.status == SendStatus.SEND_OK and len(batch.msg_id.split(",")) == 10
            queues = set()
            for i in range(6):
                res = await p.send(Message("Fresh", b"o%d" % i), sharding_key="order-42")
                queues.add((res.queue.queue_id, res.queue_offset))
            assert len({q for q, _ in queues}) == 1
            await p.send_oneway(Message("Fresh", b"fire-and-forget"))
            with pytest.raises(MQClientError, match="body is empty"):
                await p.send(Message("Fresh", b""))
            with pytest.raises(MQClientError, match="topic"):
                await p.send(Message("bad topic", b"x"))
    asyncio.run(main())


def test_a_busy_broker_is_retried_after_a_pause(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr, timeout_s=3) as p:
            await p.send(Message("Busy", b"warm"))
            fc = c.brokers[0].flow_control
            fc.max_inflight_sends = 0                      # every send is refused SYSTEM_BUSY ...
            asyncio.get_running_loop().call_later(0.3, setattr, fc, "max_inflight_sends", 10_000)   # ... for 0.3 s
            r = await p.send(Message("Busy", b"after the pause"))
            assert r.status == SendStatus.SEND_OK and fc.refused >= 1
            fc.max_inflight_sends = 0                      # busy for longer than the send timeout: an error
            p.timeout_s = 0.2
            with pytest.raises(MQClientError) as e:
                await p.send(Message("Busy", b"never"))
            assert e.value.code == 2 and "busy" in e.value.remark
    asyncio.run(main())


def test_sends_with_a_fresh_cached_route_take_no_route_coroutine_and_follow_a_forgotten_one(tmp_path):
    """The hot send path reads a fresh cached route in place (no coroutine per send for the queues and
    the broker's address); once the route is forgotten (a failed send does that) it asks again."""
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            await p.send(Message("Cached", b"warm"))          # made by this send, through the default route

            async def route_cached():
                while p.instance.cached_route("Cached") is None:
                    await p.instance.route("Cached")
                    await asyncio.sleep(0.02)
            await asyncio.wait_for(route_cached(), 30)
            asked = []
            real_route = p.instance.route
            p.instance.route = lambda topic, **kw: asked.append(topic) or real_route(topic, **kw)
            results = [await p.send(Message("Cached", b"m%d" % i)) for i in range(20)]
            assert asked == [] and all(r.status == SendStatus.SEND_OK for r in results)
            assert len({r.queue.queue_id for r in results}) > 1          # still round robin over the queues
            p.instance.forget_route("Cached")
            assert (await p.send(Message("Cached", b"after"))).status == SendStatus.SEND_OK
            assert "Cached" in asked
    asyncio.run(main())
