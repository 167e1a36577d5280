"""A real NameServer on 127.0.0.1 port 0, driven by RemotingClient and by a hand-built JSON frame.

Tests wait on conditions with a deadline, never on bare sleeps.
"""

from __future__ import annotations

import asyncio
import json
import struct
import zlib

from rocketq.namesrv import NameServer
from rocketq.namesrv.processor import RequestCode as NC
from rocketq.namesrv.register_body import (
    DataVersion, RegisterBrokerBody, TopicConfigWrapper, TopicQueueConfig, encode_compressed_body,
)
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

HOST = "127.0.0.1"
WAIT_S = 5.0
BROKER_ADDR = "127.0.0.1:10911"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def wait_until(predicate, what: str, timeout_s: float = WAIT_S) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.005)
    assert predicate(), what


def register_body(*topics: str, counter: int = 1) -> bytes:
    table = {t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG",
                 "topicSysFlag": 0, "order": False} for t in topics}
    return json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": table, "dataVersion": {
        "stateVersion": 0, "timestamp": 1, "counter": counter}}, "filterServerList": []}).encode()


def register_request(body: bytes, *, crc: int | None = None, broker_id: int = 0, addr: str = BROKER_ADDR,
                     compressed: bool = False) -> RemotingCommand:
    header = {"brokerName": "broker-a", "brokerAddr": addr, "clusterName": "DefaultCluster",
              "haServerAddr": "127.0.0.1:10912", "brokerId": broker_id, "compressed": compressed,
              "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc}
    return RemotingCommand.create_request(RequestCode.REGISTER_BROKER, header, body)


def route_request(topic: str) -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def started(tmp_path, **kwargs) -> tuple[NameServer, RemotingClient]:
    server = await NameServer(HOST, 0, kv_path=tmp_path / "kvConfig.json", **kwargs).start()
    return server, RemotingClient(HOST, server.port)


def test_register_then_route_and_unknown_topic(tmp_path):
    async def main():
        server, client = await started(tmp_path)
        try:
            reply = await client.invoke(register_request(register_body("TopicTest")), timeout_s=WAIT_S)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            route = await client.invoke(route_request("TopicTest"), timeout_s=WAIT_S)
            assert route.code == ResponseCode.SUCCESS
            data = json.loads(route.body)
            assert data["brokerDatas"] == [{"cluster": "DefaultCluster", "brokerName": "broker-a",
                                            "brokerAddrs": {"0": BROKER_ADDR}, "enableActingMaster": False}]
            assert data["queueDatas"][0]["writeQueueNums"] == 4
            missing = await client.invoke(route_request("NoSuchTopic"), timeout_s=WAIT_S)
            assert missing.code == ResponseCode.TOPIC_NOT_EXIST and "NoSuchTopic" in missing.remark
        finally:
            await client.close()
            await server.close()
    run(main())


def test_wrong_crc_is_rejected(tmp_path):
    async def main():
        server, client = await started(tmp_path)
        try:
            body = register_body("TopicTest")
            reply = await client.invoke(register_request(body, crc=(zlib.crc32(body) + 1) & 0x7FFFFFFF), WAIT_S)
            assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
            assert (await client.invoke(route_request("TopicTest"), WAIT_S)).code == ResponseCode.TOPIC_NOT_EXIST
            unchecked = await client.invoke(register_request(body, crc=0), WAIT_S)      # 0 = do not check
            assert unchecked.code == ResponseCode.SUCCESS
        finally:
            await client.close()
            await server.close()
    run(main())


def test_compressed_body_and_bad_body(tmp_path):
    async def main():
        server, client = await started(tmp_path)
        try:
            body = encode_compressed_body(RegisterBrokerBody(TopicConfigWrapper(
                {"Zipped": TopicQueueConfig("Zipped", 2, 2, 6)}, DataVersion(0, 1, 1))))
            assert (await client.invoke(register_request(body, compressed=True), WAIT_S)).code == ResponseCode.SUCCESS
            assert (await client.invoke(route_request("Zipped"), WAIT_S)).code == ResponseCode.SUCCESS
            bad = await client.invoke(register_request(b"{not json", addr="127.0.0.1:1"), WAIT_S)
            assert bad.code == ResponseCode.SYSTEM_ERROR and "RegisterBrokerBody" in bad.remark
        finally:
            await client.close()
            await server.close()
    run(main())


def test_slave_registration_answers_master_addr(tmp_path):
    async def main():
        server, client = await started(tmp_path)
        try:
            await client.invoke(register_request(register_body("T")), WAIT_S)
            reply = await client.invoke(register_request(b"", broker_id=1, addr="127.0.0.1:20911"), WAIT_S)
            assert reply.ext_fields["masterAddr"] == BROKER_ADDR
            assert reply.ext_fields["haServerAddr"] == "127.0.0.1:10912"
        finally:
            await client.close()
            await server.close()
    run(main())


async def raw_json_request(port: int, header: dict) -> tuple[int, dict, bytes]:
    """Send a frame the way a JSON-only client does; returns (serialize type byte, header, body)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        head = json.dumps(header).encode()
        writer.write(struct.pack(">ii", 4 + len(head), len(head)) + head)
        await writer.drain()
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        frame = await reader.readexactly(length)
        (field,) = struct.unpack(">i", frame[:4])
        header_len = field & 0xFFFFFF
        return field >> 24, json.loads(frame[4:4 + header_len]), frame[4 + header_len:]
    finally:
        writer.close()


def test_json_only_client_with_numeric_ext_fields(tmp_path):
    async def main():
        server, client = await started(tmp_path)
        try:
            await client.invoke(register_request(register_body("TopicTest")), WAIT_S)
            kind, header, body = await raw_json_request(server.port, {
                "code": 105, "language": "JAVA", "opaque": 1, "flag": 0, "version": 121,
                "extFields": {"topic": "TopicTest"}})
            assert kind == 0                                        # JSON header for a JSON client
            assert (header["code"], header["opaque"], header["flag"] & 1) == (0, 1, 1)
            assert json.loads(body)["brokerDatas"][0]["brokerAddrs"] == {"0": BROKER_ADDR}
            kind, header, _ = await raw_json_request(server.port, {   # numbers where Java sends strings
                "code": int(NC.WIPE_WRITE_PERM_OF_BROKER), "language": "JAVA", "opaque": 2, "flag": 0,
                "version": 121, "extFields": {"brokerName": "broker-a", "unused": 7, "flagged": False}})
            assert kind == 0 and header["code"] == 0 and header["extFields"]["wipeTopicCount"] == "1"
        finally:
            await client.close()
            await server.close()
    run(main())


def test_unknown_code_is_not_supported(tmp_path):
    async def main():
        server, client = await started(tmp_path)
        try:
            reply = await client.invoke(RemotingCommand.create_request(99999), WAIT_S)
            assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        finally:
            await client.close()
            await server.close()
    run(main())


def kv(code: int, **fields) -> RemotingCommand:
    return RemotingCommand.create_request(code, fields)


def test_kv_put_get_delete_and_persistence(tmp_path):
    async def main():
        server, client = await started(tmp_path)
        try:
            assert (await client.invoke(kv(NC.PUT_KV_CONFIG, namespace="ns", key="k", value="v1"), WAIT_S)).code == 0
            got = await client.invoke(kv(NC.GET_KV_CONFIG, namespace="ns", key="k"), WAIT_S)
            assert (got.code, got.ext_fields["value"]) == (0, "v1")
            listed = await client.invoke(kv(NC.GET_KVLIST_BY_NAMESPACE, namespace="ns"), WAIT_S)
            assert json.loads(listed.body) == {"table": {"k": "v1"}}
        finally:
            await client.close()
            await server.close()
        server, client = await started(tmp_path)                # a restart reads the file back
        try:
            got = await client.invoke(kv(NC.GET_KV_CONFIG, namespace="ns", key="k"), WAIT_S)
            assert got.ext_fields["value"] == "v1"
            assert (await client.invoke(kv(NC.DELETE_KV_CONFIG, namespace="ns", key="k"), WAIT_S)).code == 0
            gone = await client.invoke(kv(NC.GET_KV_CONFIG, namespace="ns", key="k"), WAIT_S)
            assert gone.code == ResponseCode.QUERY_NOT_FOUND
            empty = await client.invoke(kv(NC.GET_KVLIST_BY_NAMESPACE, namespace="ns"), WAIT_S)
            assert empty.code == ResponseCode.QUERY_NOT_FOUND
        finally:
            await client.close()
            await server.close()
        assert json.loads((tmp_path / "kvConfig.json").read_text()) == {"configTable": {}}
    run(main())


def test_closing_broker_connection_removes_its_routes(tmp_path):
    async def main():
        server, client = await started(tmp_path)
        broker = RemotingClient(HOST, server.port)
        try:
            assert (await broker.invoke(register_request(register_body("TopicTest")), WAIT_S)).code == 0
            assert (await client.invoke(route_request("TopicTest"), WAIT_S)).code == 0
            await broker.close()
            await wait_until(lambda: server.routes.route("TopicTest") is None, "route removed on close")
            assert (await client.invoke(route_request("TopicTest"), WAIT_S)).code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await broker.close()
            await client.close()
            await server.close()
    run(main())


def test_silent_broker_expires_by_periodic_scan(tmp_path):
    now = [1_000_000]

    async def main():
        server, client = await started(tmp_path, clock=lambda: now[0], scan_interval_s=0.01, expire_ms=120_000)
        try:
            await client.invoke(register_request(register_body("TopicTest")), WAIT_S)
            now[0] += 120_001
            await wait_until(lambda: server.routes.route("TopicTest") is None, "route expired")
        finally:
            await client.close()
            await server.close()
    run(main())


def test_admin_requests_over_the_wire(tmp_path):
    async def main():
        server, client = await started(tmp_path)
        try:
            await client.invoke(register_request(register_body("A", "B")), WAIT_S)
            topics = await client.invoke(kv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), WAIT_S)
            assert json.loads(topics.body) == {"topicList": ["A", "B"], "brokerAddr": None}
            by_cluster = await client.invoke(kv(NC.GET_TOPICS_BY_CLUSTER, cluster="DefaultCluster"), WAIT_S)
            assert json.loads(by_cluster.body)["topicList"] == ["A", "B"]
            info = json.loads((await client.invoke(kv(RequestCode.GET_BROKER_CLUSTER_INFO), WAIT_S)).body)
            assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
            assert (await client.invoke(kv(NC.DELETE_TOPIC_IN_NAMESRV, topic="A"), WAIT_S)).code == 0
            assert (await client.invoke(route_request("A"), WAIT_S)).code == ResponseCode.TOPIC_NOT_EXIST
            unreg = kv(RequestCode.UNREGISTER_BROKER, brokerName="broker-a", brokerAddr=BROKER_ADDR,
                       clusterName="DefaultCluster", brokerId=0)
            assert (await client.invoke(unreg, WAIT_S)).code == 0
            assert (await client.invoke(route_request("B"), WAIT_S)).code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await client.close()
            await server.close()
    run(main())


def test_two_nameservers_both_get_registrations(tmp_path):
    async def main():
        servers = [await NameServer(HOST, 0, kv_path=tmp_path / f"kv{i}.json").start() for i in range(2)]
        brokers = [RemotingClient(HOST, s.port) for s in servers]
        body = register_body("TopicTest")
        try:
            replies = await asyncio.gather(*(b.invoke(register_request(body), WAIT_S) for b in brokers))
            assert [r.code for r in replies] == [0, 0]
            for server in servers:
                assert server.routes.route("TopicTest")["brokerDatas"][0]["brokerAddrs"] == {"0": BROKER_ADDR}
        finally:
            for b in brokers:
                await b.close()
            for s in servers:
                await s.close()
    run(main())
