"""The active controller judges a master dead only over time it could hear it.  A controller that could
not listen for a while (here its process is paused: this test blocks the event loop the controller runs
in, as a GC or VM pause would; in the etcd-member-killed run its lease's validity lapsed while etcd
elected a new leader) must not elect a slave because the master's heartbeats of that time never
arrived, while a slave's first heartbeat after it does.  A real etcd (one member), the controller in
this process on a loopback port, the brokers played by heartbeats over the wire."""

import asyncio
import json
import time

from rocketq.controller.local_cluster import until
from rocketq.controller.server import ControllerServer
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

MASTER_TIMEOUT_MS = 1500
PAUSE_S = 2.5                        # longer than the master timeout, shorter than the lease (5 s)


async def _beat(client: RemotingClient, bid: int, epoch: int, **extra) -> dict:
    body = {"cluster": "C", "brokerName": "deaf", "brokerId": bid, "addr": f"127.0.0.1:{10000 + bid}",
            "haAddr": f"127.0.0.1:{20000 + bid}", "epoch": epoch, "maxPhyOffset": 0, **extra}
    r = await client.invoke(RemotingCommand.create_request(RequestCode.CONTROLLER_HEARTBEAT, {},
                                                           json.dumps(body).encode()), 3)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return json.loads(r.body)


def test_a_paused_controller_does_not_replace_a_master_it_could_not_hear(etcd1):
    async def scenario():
        srv = await ControllerServer(etcd1.endpoints, port=0, prefix="/deaf/", master_timeout_ms=MASTER_TIMEOUT_MS,
                                     lease_ttl_s=5).start()
        client = RemotingClient("127.0.0.1", srv.port)
        try:
            await until("the controller active", _true_when(srv.active), 10)
            assert (await _beat(client, 1, 0))["masterId"] == 1                 # the first broker: elected
            info = await _beat(client, 1, 1, startOffset=0)                     # and confirmed
            assert (info["masterId"], info["pending"], info["history"]) == (1, False, [[1, 0]]), info
            info = await _beat(client, 2, 1)
            assert info["syncStateSet"] == [1, 2], info

            time.sleep(PAUSE_S)  # noqa: ASYNC251 - on purpose: the controller's process stops (the brokers' heartbeats go unheard)
            info = await _beat(client, 2, 1)         # the slave is heard first after the pause
            assert (info["masterId"], info["epoch"]) == (1, 1), f"master replaced after a pause: {info}"
            info = await _beat(client, 1, 1)
            assert (info["masterId"], info["epoch"], info["syncStateSet"]) == (1, 1, [1, 2]), info

            # a master that really goes silent is still replaced, after a master timeout of listening
            silent_at = time.monotonic()

            async def slave_elected():
                info = await _beat(client, 2, 1)
                return info if info["masterId"] == 2 else None
            info = await until("broker 2 elected", slave_elected, 10)
            waited = time.monotonic() - silent_at
            assert info["epoch"] == 2 and waited >= MASTER_TIMEOUT_MS / 1000, (waited, info)
        finally:
            await client.close()
            await srv.close()
    asyncio.run(scenario())


def _true_when(fn):
    async def predicate():
        return fn()
    return predicate
