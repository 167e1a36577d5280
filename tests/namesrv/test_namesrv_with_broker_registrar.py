"""Our broker's registration code against two NameServers side by side (the real pairing)."""

from __future__ import annotations

import asyncio

from rocketq.broker.registration import NameServerRegistrar
from rocketq.namesrv import NameServer

HOST = "127.0.0.1"


def topics_json() -> dict:
    return {"topicConfigTable": {"TopicTest": {"topicName": "TopicTest", "readQueueNums": 4, "writeQueueNums": 4,
                                               "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                                               "order": False, "attributes": {}}},
            "dataVersion": {"stateVersion": 0, "timestamp": 1, "counter": 1}}


def test_registrar_registers_with_both_nameservers_and_unregisters(tmp_path):
    async def main():
        servers = [await NameServer(HOST, 0, kv_path=tmp_path / f"kv{i}.json").start() for i in range(2)]
        registrar = NameServerRegistrar([(HOST, s.port) for s in servers], cluster="DefaultCluster",
                                        broker_name="broker-a", broker_id=0, broker_addr="127.0.0.1:10911",
                                        ha_addr="127.0.0.1:10912", topic_table=topics_json)
        try:
            assert await registrar.register_once() == [True, True]
            for server in servers:
                route = server.routes.route("TopicTest")
                assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
            await registrar.close()                                  # sends UNREGISTER_BROKER
            for server in servers:
                assert server.routes.route("TopicTest") is None
        finally:
            for server in servers:
                await server.close()
    asyncio.run(asyncio.wait_for(main(), 30))
