"""sendLatencyFaultEnable: a producer keeps away from a broker group that failed, for a while.

Two broker groups serve one topic.  broker-a's remoting port is closed while the broker keeps
registering with the NameServer, so the route still lists it (as when a broker hangs or a network
path breaks) and every connection to it is refused."""

import asyncio
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402

from rocketq.client import Admin, Message, Producer, SendStatus  # noqa: E402
from rocketq.client.fault import LatencyFaults, unavailable_for_ms  # noqa: E402

SENDS = 40


def test_latency_steps_follow_rocketmq_5():
    assert [unavailable_for_ms(ms) for ms in (10, 99, 600, 2000, 3000, 6000, 20000)] == \
        [0, 0, 2000, 5000, 6000, 10000, 30000]
    now = [100.0]
    faults = LatencyFaults(clock=lambda: now[0])
    faults.update("broker-a", 0, failed=True)
    assert not faults.available("broker-a") and faults.unavailable() == {"broker-a": 10.0}
    now[0] += 10
    assert faults.available("broker-a")
    faults.update("broker-b", 700)
    assert not faults.available("broker-b")
    faults.update("broker-b", 20)                  # a fast answer clears the mark
    assert faults.available("broker-b")


def _failures(caplog) -> int:
    return sum("send to" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)


def test_a_failed_group_is_avoided_not_retried_every_other_send(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="rocketq.client")

    async def main():
        async with cluster(tmp_path, brokers=2) as c, Admin(c.addr) as admin:
            await admin.create_topic("Spread", queues=4)
            async with Producer("PG", c.addr, retries=2, send_latency_fault_enable=True) as p:
                first = {(await p.send(Message("Spread", b"warm%d" % i))).queue.broker_name for i in range(8)}
                assert first == {"broker-a", "broker-b"}, first
                await c.brokers[0].server.close()          # broker-a still registers, its port refuses
                results = [await p.send(Message("Spread", b"m%d" % i)) for i in range(SENDS)]
                assert all(r.status == SendStatus.SEND_OK for r in results)
                assert {r.queue.broker_name for r in results} == {"broker-b"}
                assert "broker-a" in p.faults.unavailable()
        # one failed attempt marks broker-a; without the mark round robin would pick it again and
        # again (each time failing over to broker-b)
        assert _failures(caplog) <= 2, _failures(caplog)
    asyncio.run(main())
