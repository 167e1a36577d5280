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
