"""A killed master restarted so quickly that the controller still names it master at its start-up query,
but elects a successor before its first heartbeat arrives, comes up as that successor's slave (RocketMQ's
ReplicasManager changes to slave on a newer epoch) - it is not fenced and does not need a second restart.

The window is made certain, not hoped for: the restarted broker reaches the controller through a relay
that passes its start-up query and holds everything it sends after it until the successor is confirmed
(tests/holdproxy.py).  The master is killed while idle with every broker at the same log end,
so its log has nothing a successor lacks.  Real processes on loopback: one etcd member, one controller, a
NameServer and three brokers (SYNC_MASTER)."""

import asyncio

import pytest
from holdproxy import HoldingProxy
from runs import all_in_sync

from rocketq.client import Message, Producer
from rocketq.controller.local_cluster import LocalControlledCluster, until

pytestmark = pytest.mark.timeout(180)

MASTER_TIMEOUT_MS = 5000       # long enough that the restarted broker's query still finds itself master


async def _same_log_end(cluster) -> bool:
    info = await cluster.replica_info()
    ends = {b["maxPhyOffset"] for b in (info.get("brokers") or {}).values()}
    return len(info.get("brokers") or {}) == 3 and len(ends) == 1 and ends != {0}


async def _send(cluster, body: bytes):
    async with Producer("quick_pg", cluster.namesrv, retries=2, timeout_s=3) as p:
        return await p.send(Message("QuickT", body))


def test_a_master_restarted_while_its_successor_is_elected_joins_as_its_slave(tmp_path):
    cluster = LocalControlledCluster(tmp_path, brokers=3, controllers=1, etcd_members=1,
                                     master_timeout_ms=MASTER_TIMEOUT_MS)
    cluster.start()
    proxy = HoldingProxy(cluster.controller_addrs[0]).start()
    try:
        assert asyncio.run(_send(cluster, b"before the kill")).status.value == "SEND_OK"
        asyncio.run(until("every broker in sync at the same log end",
                          lambda: _all(all_in_sync(cluster, 3), _same_log_end(cluster)), 40))
        cluster.broker_controller_addr[1] = proxy.addr
        cluster.kill_broker(1)
        cluster.start_broker(1)                   # its start-up query passes; what follows is held
        assert proxy.passed == 1, "the restarted broker's start-up query did not pass first"

        async def successor():
            info = await cluster.replica_info()
            return info if info.get("masterId") in (2, 3) and not info["pending"] else None
        info = asyncio.run(until("a successor confirmed", successor, 30))
        assert proxy.held >= 1, "nothing of broker 1 was held: the run proves nothing"
        proxy.release()

        asyncio.run(until("broker 1 back in sync as a slave", lambda: all_in_sync(cluster, 3), 30))
        log = (tmp_path / "b1.log").read_text()
        assert "fenced" not in log and "joining as its slave" in log, log[-3000:]
        assert cluster.broker_procs[1].poll() is None
        after = asyncio.run(cluster.replica_info())
        assert (after["masterId"], after["epoch"]) == (info["masterId"], info["epoch"]), after
        assert asyncio.run(_send(cluster, b"after the restart")).status.value == "SEND_OK"
    finally:
        proxy.release()
        codes = cluster.stop()
        proxy.stop()
    assert all(c == 0 for c in codes.values()), codes


async def _all(*awaitables) -> bool:
    return all([await a for a in awaitables])
