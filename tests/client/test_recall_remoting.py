"""RECALL_MESSAGE (370) over remoting (issue 19 item 4): a delayed message sent with rocketq's
producer is taken back with the recall handle its send answered, and is never delivered."""

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402

from rocketq.client import Message, PopConsumer, Producer  # noqa: E402
from rocketq.client.model import MQClientError  # noqa: E402
from rocketq.remoting import ResponseCode  # noqa: E402


def test_a_recalled_message_is_not_delivered(tmp_path):
    async def main():
        async with cluster(tmp_path, timer_bucket_ms=1000) as c, Producer("PG_RECALL", c.addr) as p, \
                PopConsumer("GID_RECALL", c.addr) as consumer:
            due = int(time.time() * 1000) + 2_000
            kept = await p.send(Message("Later", b"kept", properties={"TIMER_DELIVER_MS": str(due)}))
            gone = await p.send(Message("Later", b"recalled", properties={"TIMER_DELIVER_MS": str(due)}))
            assert gone.recall_handle and kept.recall_handle
            assert await p.recall("Later", gone.recall_handle) == gone.msg_id
            got: list = []
            deadline = time.monotonic() + 20
            while not got:
                got = await consumer.receive("Later", 32, invisible_s=30, wait_s=1)
                assert time.monotonic() < deadline, "the kept message was not delivered"
            await asyncio.sleep(1.0)
            got += await consumer.receive("Later", 32, invisible_s=30, wait_s=1)
            assert [m.body for m in got] == [b"kept"]
            for handle, says in [(kept.recall_handle, "timestamp invalid"),     # due already
                                 ("not-a-handle", "recall failed")]:
                try:
                    await p.instance.api.recall(c.brokers[0].address, "Later", handle)
                    raise AssertionError("recall accepted")
                except MQClientError as exc:
                    assert exc.code == ResponseCode.ILLEGAL_OPERATION and says in exc.remark, exc
            try:
                await p.instance.api.recall(c.brokers[0].address, "Elsewhere", gone.recall_handle)
                raise AssertionError("recall accepted")
            except MQClientError as exc:
                assert exc.code == ResponseCode.TOPIC_NOT_EXIST
    asyncio.run(main())
