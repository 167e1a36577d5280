"""Pop consumption over remoting (issue 19 item 4): POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME through rocketq's PopConsumer, on the pop state gRPC consumers share:
redelivery after the invisible time from the pop retry topic, acks of stale copies refused, the
state across a broker restart, and the header fields a Java client builds its extraInfo from."""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402

from rocketq.client import Message, PopConsumer, Producer  # noqa: E402
from rocketq.client.model import MessageQueue  # noqa: E402
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode  # noqa: E402


async def _send(p: Producer, topic: str, n: int, **kw) -> None:
    for i in range(n):
        await p.send(Message(topic, f"m{i}".encode(), **kw), queue=MessageQueue(topic, "broker-a", i % 2))


def test_pop_ack_and_redelivery_after_the_invisible_time(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p, PopConsumer("GID_POP", c.addr) as pc:
            await _send(p, "Popped", 10)
            got = await pc.receive("Popped", 32, invisible_s=2)
            assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(10))
            assert await pc.receive("Popped", 32, invisible_s=2) == []          # all in flight
            keep = {m.body for m in got[:6]}
            for m in got[:3]:
                assert await pc.ack(m)
                assert await pc.ack(m)                          # again: done before, still fine
            await pc.ack_all(got[3:6])                          # one BATCH_ACK_MESSAGE
            again: list = []

            async def redelivered():
                again.extend(await pc.receive("Popped", 32, invisible_s=30, wait_s=1))
                return len(again) >= 4
            deadline = asyncio.get_running_loop().time() + 20
            while not await redelivered():
                assert asyncio.get_running_loop().time() < deadline, f"{len(again)} of 4 came back"
            assert {m.body for m in again} == {m.body for m in got} - keep
            assert all(m.reconsume_times == 1 and m.message.topic == "%RETRY%GID_POP_Popped" for m in again)
            for m in again:
                assert await pc.ack(m)                          # names the pop retry topic (mark 1)
            assert await pc.receive("Popped", 32, invisible_s=1, wait_s=2.5) == []
            offsets = [c.brokers[0].offsets.query("GID_POP", "Popped", q) for q in range(2)]
            assert offsets == [5, 5]                            # the group's offset follows what is done
    asyncio.run(main())


def test_change_invisible_time_and_stale_copies(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p, PopConsumer("GID_CHG", c.addr) as pc:
            await _send(p, "Changed", 1)
            [m] = await pc.receive("Changed", 1, invisible_s=60)
            old = m.extra_info
            await pc.change_invisible_duration(m, 0.5)          # hand it back soon
            assert m.extra_info != old
            stale = await pc.api.ack(m.addr, "GID_CHG", m.ack_topic, m.queue_id, m.queue_offset, old)
            assert not stale                                    # the old copy acks nothing
            back: list = []
            deadline = asyncio.get_running_loop().time() + 15
            while not back:
                back = await pc.receive("Changed", 1, invisible_s=60, wait_s=1)
                assert asyncio.get_running_loop().time() < deadline, "the changed message did not come back"
            assert back[0].body == b"m0" and back[0].reconsume_times == 1
            assert not await pc.api.ack(m.addr, "GID_CHG", m.ack_topic, m.queue_id, m.queue_offset, m.extra_info)
            assert await pc.ack(back[0])
    asyncio.run(main())


def test_the_answer_is_what_a_java_client_builds_its_extra_info_from(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p, PopConsumer("GID_HDR", c.addr) as pc:
            await _send(p, "Hdr", 4)
            r, records = await pc.api.pop(c.brokers[0].address, "GID_HDR", "Hdr", max_nums=32, invisible_ms=5_000)
            f = r.ext_fields
            assert r.code == ResponseCode.SUCCESS and len(records) == 4
            assert int(f["invisibleTime"]) == 5000 and int(f["reviveQid"]) == 0 and int(f["restNum"]) == 0
            assert int(f["popTime"]) > 0
            starts = dict(part.rsplit(" ", 1) for part in f["startOffsetInfo"].split(";"))
            assert starts == {"0 0": "0", "0 1": "0"}
            offsets = {k: v for k, v in (part.rsplit(" ", 1) for part in f["msgOffsetInfo"].split(";"))}
            assert offsets == {"0 0": "0,1", "0 1": "0,1"}
            # nothing left: POLLING_TIMEOUT with the header fields Java's client requires
            r, records = await pc.api.pop(c.brokers[0].address, "GID_HDR", "Hdr", max_nums=32, invisible_ms=5_000,
                                          poll_ms=200)
            assert r.code == ResponseCode.POLLING_TIMEOUT and not records
            assert {"popTime", "invisibleTime", "reviveQid", "restNum"} <= set(r.ext_fields)
            for bad, says in [({"maxMsgNums": 33}, "outside 1..32"), ({"queueId": 9}, "queueId[9] is illegal"),
                              ({"invisibleTime": 0}, "invisibleTime 0 ms"), ({"exp": "a >"}, "position 4")]:
                header = {"consumerGroup": "GID_HDR", "topic": "Hdr", "queueId": -1, "maxMsgNums": 1,
                          "invisibleTime": 1000, "pollTime": 0, "bornTime": 0, "initMode": 0, **bad}
                if "exp" in bad:
                    header["expType"] = "SQL92"
                resp = await pc.api.client(c.brokers[0].address).invoke(
                    RemotingCommand.create_request(RequestCode.POP_MESSAGE, header), timeout_s=5)
                assert resp.code != ResponseCode.SUCCESS and says in (resp.remark or ""), resp.remark
    asyncio.run(main())


def test_in_flight_state_survives_a_broker_restart(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            await _send(p, "Durable", 2)
            async with PopConsumer("GID_DUR", c.addr) as pc:
                got = await pc.receive("Durable", 32, invisible_s=60)
                assert len(got) == 2
            port = await c.stop_broker(0)
            await c.start_broker(0, port)
            async with PopConsumer("GID_DUR", c.addr) as pc:
                assert await pc.receive("Durable", 32, invisible_s=60) == []     # still in flight
                for m in got:                                                    # the old copies ack after the restart
                    assert await pc.api.ack(c.brokers[0].address, "GID_DUR", m.ack_topic, m.queue_id, m.queue_offset,
                                            m.extra_info)
    asyncio.run(main())
