"""Admin requests, stats and fast failure of a real broker, over the wire."""

import asyncio
import json
import time

from rocketq.common import fastjson
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

from broker_helpers import send_v2, with_broker


def request(code, header=None, body=b""):
    return RemotingCommand.create_request(code, header or {}, body)


def test_delete_topic_forgets_config_queues_and_offsets(tmp_path):
    async def scenario(broker, client):
        for i in range(3):
            assert (await client.invoke(send_v2("Gone", b"m%d" % i, queue_id=0), timeout_s=5)).code == 0
        await asyncio.to_thread(broker.store.wait_dispatched)
        await client.invoke(request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                    {"consumerGroup": "G", "topic": "Gone", "queueId": 0, "commitOffset": 2}), 5)
        assert (tmp_path / "consumequeue" / "Gone").is_dir()
        r = await client.invoke(request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Gone"}), timeout_s=5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert broker.topics.get("Gone") is None and broker.offsets.query("G", "Gone", 0) == -1
        assert not (tmp_path / "consumequeue" / "Gone").exists()
        maxo = await client.invoke(request(RequestCode.GET_MAX_OFFSET, {"topic": "Gone", "queueId": 0}), 5)
        assert maxo.ext_fields["offset"] == "0"
        # sending again re-creates it (auto-create) and numbering starts over
        again = await client.invoke(send_v2("Gone", b"new", queue_id=0), timeout_s=5)
        assert again.code == ResponseCode.SUCCESS and again.ext_fields["queueOffset"] == "0"
        system = await client.invoke(request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TBW102"}), 5)
        assert system.code == ResponseCode.INVALID_PARAMETER and "system topic" in system.remark
        assert broker.topics.get("TBW102") is not None
    asyncio.run(with_broker(tmp_path, scenario))


def test_subscription_groups_create_list_delete(tmp_path):
    async def scenario(broker, client):
        cfg = {"groupName": "GID_ORDERS", "consumeMessageOrderly": True, "retryMaxTimes": 3}
        r = await client.invoke(request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                                        json.dumps(cfg).encode()), timeout_s=5)
        assert r.code == ResponseCode.SUCCESS
        listed = await client.invoke(request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG), timeout_s=5)
        table = json.loads(listed.body)["subscriptionGroupTable"]
        assert table["GID_ORDERS"]["retryMaxTimes"] == 3 and table["GID_ORDERS"]["consumeMessageOrderly"] is True
        bad = await client.invoke(request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, b"{not json"), 5)
        assert bad.code == ResponseCode.INVALID_PARAMETER and "SubscriptionGroupConfig" in bad.remark
        gone = await client.invoke(request(RequestCode.DELETE_SUBSCRIPTIONGROUP,
                                           {"groupName": "GID_ORDERS", "cleanOffset": True}), timeout_s=5)
        assert gone.code == ResponseCode.SUCCESS and broker.groups.get("GID_ORDERS") is None
    asyncio.run(with_broker(tmp_path, scenario))


def test_topic_and_consume_stats_in_fastjson_form(tmp_path):
    async def scenario(broker, client):
        for i in range(5):
            await client.invoke(send_v2("Stats", b"x%d" % i, queue_id=i % 2), timeout_s=5)
        await asyncio.to_thread(broker.store.wait_dispatched)
        r = await client.invoke(request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Stats"}), timeout_s=5)
        assert r.code == ResponseCode.SUCCESS
        assert r.body.startswith(b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"Stats"}:')
        table = fastjson.loads(r.body)["offsetTable"]
        by_queue = {k["queueId"]: v for k, v in table.items()}
        assert by_queue[0]["maxOffset"] == 3 and by_queue[1]["maxOffset"] == 2 and by_queue[2]["maxOffset"] == 0
        assert by_queue[0]["lastUpdateTimestamp"] > 0
        missing = await client.invoke(request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "NoSuch"}), 5)
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST
        await client.invoke(request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                    {"consumerGroup": "G", "topic": "Stats", "queueId": 0, "commitOffset": 1}), 5)
        cs = await client.invoke(request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G", "topic": "Stats"}), 5)
        lag = {k["queueId"]: v["brokerOffset"] - v["consumerOffset"]
               for k, v in fastjson.loads(cs.body)["offsetTable"].items()}
        assert lag[0] == 2 and lag[1] == 2
        none = await client.invoke(request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "Nobody"}), 5)
        assert none.code == ResponseCode.CONSUMER_NOT_ONLINE
    asyncio.run(with_broker(tmp_path, scenario))


def test_runtime_info_counts_puts_and_gets(tmp_path):
    async def scenario(broker, client):
        for i in range(4):
            await client.invoke(send_v2("Run", b"y", queue_id=0), timeout_s=5)
        await asyncio.to_thread(broker.store.wait_dispatched)
        await client.invoke(request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "G", "topic": "Run", "queueId": 0, "queueOffset": 0, "maxMsgNums": 32, "sysFlag": 0,
            "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0}), timeout_s=5)
        r = await client.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout_s=5)
        table = json.loads(r.body)["table"]
        assert table["msgPutTotalTodayNow"] == "4" and table["msgGetTotalTodayNow"] == "4"
        assert int(table["commitLogMaxOffset"]) > 0 and len(table["putTps"].split()) == 3
        assert all(isinstance(v, str) for v in table.values())
    asyncio.run(with_broker(tmp_path, scenario))


def test_send_that_waited_too_long_in_the_loop_is_refused_busy(tmp_path):
    async def scenario(broker, client):
        loop = asyncio.get_running_loop()
        sends = [asyncio.ensure_future(client.invoke(send_v2("Busy", b"z"), timeout_s=10)) for _ in range(20)]
        # hold the event loop once the frames are in: every send then waits > 200 ms before its handler
        loop.call_later(0.05, time.sleep, 0.4)
        answers = await asyncio.gather(*sends)
        codes = [a.code for a in answers]
        assert set(codes) <= {ResponseCode.SUCCESS, ResponseCode.SYSTEM_BUSY}
        busy = [a for a in answers if a.code == ResponseCode.SYSTEM_BUSY]
        for a in busy:
            assert a.remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy")
        assert broker.flow_control.refused == len(busy)
        # once the loop has caught up, sends go through again
        assert (await client.invoke(send_v2("Busy", b"after"), timeout_s=5)).code == ResponseCode.SUCCESS
    asyncio.run(with_broker(tmp_path, scenario))


def test_flow_control_refuses_when_dispatch_lags_or_sends_pile_up(tmp_path):
    async def scenario(broker, client):
        fc = broker.flow_control
        fc.max_inflight_sends = 0
        r = await client.invoke(send_v2("Pile", b"a"), timeout_s=5)
        assert r.code == ResponseCode.SYSTEM_BUSY and r.remark.startswith("[TOO_MANY_REQUESTS]")
        fc.max_inflight_sends = 10_000
        broker.store.dispatch_backlog = lambda: (100, 100)       # as if the dispatcher were that far behind
        r = await client.invoke(send_v2("Pile", b"b"), timeout_s=5)
        assert r.code == ResponseCode.SYSTEM_BUSY and r.remark.startswith("[PC_SYNCHRONIZED]")
        fc.enabled = False
        assert (await client.invoke(send_v2("Pile", b"c"), timeout_s=5)).code == ResponseCode.SUCCESS
    asyncio.run(with_broker(tmp_path, scenario))


def test_message_ids_name_the_port_the_broker_really_bound(tmp_path):
    from rocketq.common.msgid import decode_offset_msg_id

    async def scenario(broker, client):
        r = await client.invoke(send_v2("Ids", b"x"), timeout_s=5)
        host, offset = decode_offset_msg_id(r.ext_fields["msgId"])
        assert broker.server.port != 10911 and str(host).endswith(f":{broker.server.port}")
        assert offset == 0
    asyncio.run(with_broker(tmp_path, scenario))
