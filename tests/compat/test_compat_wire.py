"""Wire-level checks for the protocol deviations the ali-ons run exposed (docs/compatibility.md).

Each request here is shaped exactly as ali-ons 3.12.0 sends it (JSON header, extFields values as
raw JSON numbers and booleans, version 121, language JAVA), sent by rocketq's own client to a real
broker on a loopback port.  These run without Node.js.
"""

from __future__ import annotations

import asyncio
import time

from compat_helpers import invoke, servers
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

DEADLINE_S = 20


def _send_v2(topic: str, queue_id: int, props: str, body: bytes = b"payload") -> RemotingCommand:
    cmd = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {
        "a": "PID_COMPAT", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0, "g": int(time.time() * 1000),
        "h": 0, "i": props, "j": 0, "k": False}, body)
    cmd.version = 121
    return cmd


async def _wait_max_offset(env, topic: str, queue_id: int, want: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        r = await invoke(env.client, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
        if int(r.ext_fields["offset"]) >= want:
            return
        assert time.monotonic() < deadline, f"{topic}:{queue_id} never reached offset {want}"
        await asyncio.sleep(0.05)


def test_send_answers_the_requested_queue_for_a_delayed_message(tmp_path):
    """Java's SendMessageProcessor answers ``queueId`` = the queue the producer chose, even when
    the store parks the message in SCHEDULE_TOPIC_XXXX (queue = level - 1) until it is due.
    rocketq used to answer the schedule queue, so ali-ons reported a queue the message never
    reached."""
    async def scenario():
        async with servers(tmp_path) as env:
            r = await env.client.invoke(_send_v2("DelayWire", 3, "TAGS\x01T\x02KEYS\x01d-1\x02DELAY\x012\x02"),
                                        timeout_s=10)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert r.ext_fields["queueId"] == "3"                      # not 1, the level-2 schedule queue
            await _wait_max_offset(env, "DelayWire", 3, 1)              # and it does arrive in queue 3
            plain = await env.client.invoke(_send_v2("DelayWire", 2, "TAGS\x01T\x02"), timeout_s=10)
            assert plain.ext_fields["queueId"] == "2" and plain.ext_fields["queueOffset"] == "0"
    asyncio.run(scenario())


def test_send_answers_the_requested_queue_for_a_half_message(tmp_path):
    """The same rule for a transactional half message, which the broker keeps in queue 0 of the half topic."""
    async def scenario():
        async with servers(tmp_path) as env:
            r = await env.client.invoke(_send_v2("TxWire", 2, "TRAN_MSG\x01true\x02PGROUP\x01PID_COMPAT\x02"),
                                        timeout_s=10)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert r.ext_fields["queueId"] == "2"
    asyncio.run(scenario())


def test_batch_whose_properties_lack_the_final_separator_is_stored(tmp_path):
    """rocketmq-client 4.9.8 writes each batch record's properties without the ``\\x02`` after the last
    pair (its messageProperties2String drops it); Java's broker takes that, rocketq answered
    MESSAGE_ILLEGAL "properties are not k\\x01v\\x02 pairs" to every 4.x batch."""
    from rocketq.broker.send import encode_batch
    from rocketq.client.api import split_records

    async def scenario():
        async with servers(tmp_path) as env:
            body = encode_batch([(0, b"one", "KEYS\x01k1\x02UNIQ_KEY\x01U1\x02TAGS\x01T"),
                                 (0, b"two", "KEYS\x01k2\x02UNIQ_KEY\x01U2\x02TAGS\x01T\x02")])
            cmd = RemotingCommand.create_request(RequestCode.SEND_BATCH_MESSAGE, {
                "a": "PID_COMPAT", "b": "Batch4x", "c": "TBW102", "d": 4, "e": 1, "f": 0,
                "g": int(time.time() * 1000), "h": 0, "i": "WAIT\x01true", "j": 0, "k": False, "m": True}, body)
            r = await env.client.invoke(cmd, timeout_s=10)
            assert r.code == ResponseCode.SUCCESS, r.remark
            await _wait_max_offset(env, "Batch4x", 1, 2)
            pulled = await invoke(env.client, RequestCode.PULL_MESSAGE, {
                "consumerGroup": "G", "topic": "Batch4x", "queueId": 1, "queueOffset": 0, "maxMsgNums": 8,
                "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0})
            msgs = split_records(pulled.body)
            assert [(m.body, m.keys, m.tags, m.uniq_key) for m in msgs] == [
                (b"one", ["k1"], "T", "U1"), (b"two", ["k2"], "T", "U2")]
    asyncio.run(scenario())


def test_lite_pull_message_is_a_pull(tmp_path):
    """DefaultLitePullConsumer (rocketmq-client 4.9.x and 5.x) pulls with LITE_PULL_MESSAGE (361), which Java's
    broker serves with its pull processor; rocketq answered REQUEST_CODE_NOT_SUPPORTED, so the consumer
    never read anything."""
    from rocketq.client.api import split_records

    async def scenario():
        async with servers(tmp_path) as env:
            r = await env.client.invoke(_send_v2("LitePulled", 0, "TAGS\x01T\x02KEYS\x01lp\x02"), timeout_s=10)
            assert r.code == ResponseCode.SUCCESS, r.remark
            await _wait_max_offset(env, "LitePulled", 0, 1)
            pulled = await invoke(env.client, RequestCode.LITE_PULL_MESSAGE, {
                "consumerGroup": "G", "topic": "LitePulled", "queueId": 0, "queueOffset": 0, "maxMsgNums": 8,
                "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0})
            assert pulled.code == ResponseCode.SUCCESS, (pulled.code, pulled.remark)
            assert [(m.body, m.keys) for m in split_records(pulled.body)] == [(b"payload", ["lp"])]
    asyncio.run(scenario())


def test_send_answers_the_unique_key_as_transaction_id(tmp_path):
    """Java's SendMessageProcessor answers ``transactionId`` = the message's UNIQ_KEY on every send;
    TransactionMQProducer returns it as TransactionSendResult.getTransactionId() (null from rocketq before)."""
    async def scenario():
        async with servers(tmp_path) as env:
            for props in ("UNIQ_KEY\x01ABC123\x02TRAN_MSG\x01true\x02PGROUP\x01PID_COMPAT\x02", "UNIQ_KEY\x01ABC123\x02"):
                r = await env.client.invoke(_send_v2("TxIdWire", 1, props), timeout_s=10)
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert r.ext_fields["transactionId"] == "ABC123"
    asyncio.run(scenario())


def test_trace_topic_enable_creates_the_trace_topic(tmp_path):
    """``traceTopicEnable=true`` (RocketMQ's key, ignored by rocketq before) creates RMQ_SYS_TRACE_TOPIC with one
    queue at start: rocketmq-client 5.x's trace dispatcher does not create it through TBW102, so without it
    a 5.x client's message traces go nowhere."""
    from rocketq.server.config import build

    cfg = build([("traceTopicEnable", "true", "test"), ("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC", "test")])
    assert cfg.broker.trace_topic_enable and cfg.broker.trace_topic_name == "RMQ_SYS_TRACE_TOPIC"

    async def scenario():
        async with servers(tmp_path, trace_topic_enable=True) as env:
            route = await invoke(env.ns_client, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "RMQ_SYS_TRACE_TOPIC"})
            assert route.code == ResponseCode.SUCCESS, route.remark
            assert b'"writeQueueNums":1' in route.body.replace(b" ", b"")
    asyncio.run(scenario())


def test_admin_requests_mqadmin_sends(tmp_path):
    """The requests mqadmin needs beyond the basic admin set, answered as Java answers them (rocketq answered
    REQUEST_CODE_NOT_SUPPORTED to each): GET_TOPIC_CONFIG, QUERY_TOPIC_CONSUME_BY_WHO, GET/UPDATE_BROKER_CONFIG,
    INVOKE_BROKER_TO_RESET_OFFSET of a group the broker does not know, CHECK_CLIENT_CONFIG."""
    import json

    async def scenario():
        async with servers(tmp_path) as env:
            r = await env.client.invoke(_send_v2("AdminWire", 0, "TAGS\x01T\x02"), timeout_s=10)
            assert r.code == ResponseCode.SUCCESS
            env.broker.offsets.commit("G1", "AdminWire", 0, 1)
            r = await invoke(env.client, RequestCode.GET_TOPIC_CONFIG, {"topic": "AdminWire"})
            assert r.code == ResponseCode.SUCCESS and json.loads(r.body)["writeQueueNums"] == 4
            r = await invoke(env.client, RequestCode.GET_TOPIC_CONFIG, {"topic": "Nope"})
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            r = await invoke(env.client, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "AdminWire"})
            assert json.loads(r.body) == {"groupList": ["G1"]}
            r = await invoke(env.client, RequestCode.GET_BROKER_CONFIG, {})
            props = dict(line.split("=", 1) for line in r.body.decode().splitlines())
            assert props["brokerName"] == "broker-a" and props["listenPort"] == str(env.broker.server.port)
            update = RemotingCommand.create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, b"fileReservedTime=12\n")
            assert (await env.client.invoke(update, timeout_s=10)).code == ResponseCode.SUCCESS
            assert env.broker.store.config.file_reserved_time_hours == 12
            unknown = RemotingCommand.create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, b"noSuchKey=1\n")
            r = await env.client.invoke(unknown, timeout_s=10)
            assert r.code == ResponseCode.INVALID_PARAMETER and "noSuchKey" in r.remark
            r = await invoke(env.client, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                             {"topic": "AdminWire", "group": "G1", "timestamp": 0, "isForce": True})
            assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and "G1" in r.remark
            for kind, code in (("TAG", ResponseCode.SUCCESS), ("SQL92", ResponseCode.SYSTEM_ERROR)):
                check = RemotingCommand.create_request(RequestCode.CHECK_CLIENT_CONFIG, {}, json.dumps({
                    "clientId": "c", "group": "G1", "subscriptionData": {
                        "topic": "AdminWire", "subString": "a > 1", "expressionType": kind}}).encode())
                assert (await env.client.invoke(check, timeout_s=10)).code == code
    asyncio.run(scenario())


def test_pull_refusals(tmp_path):
    """Java's PullMessageProcessor refuses an unknown topic, a queue the topic does not have and an SQL92
    expression before reading; rocketq read (or long-polled) them as if they were there."""
    async def scenario():
        async with servers(tmp_path) as env:
            assert (await env.client.invoke(_send_v2("Pulled", 0, "TAGS\x01T\x02"), timeout_s=10)).code == 0
            base = {"consumerGroup": "G", "queueOffset": 0, "maxMsgNums": 8, "sysFlag": 0, "commitOffset": 0,
                    "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0}
            r = await invoke(env.client, RequestCode.PULL_MESSAGE, {**base, "topic": "NotThere", "queueId": 0})
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            r = await invoke(env.client, RequestCode.PULL_MESSAGE, {**base, "topic": "Pulled", "queueId": 4})
            assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[4] is illegal" in r.remark
            r = await invoke(env.client, RequestCode.PULL_MESSAGE, {**base, "topic": "Pulled", "queueId": 0,
                                                                      "expressionType": "SQL92"})
            assert r.code == ResponseCode.SYSTEM_ERROR and "SQL92" in r.remark
            r = await invoke(env.client, RequestCode.PULL_MESSAGE, {**base, "topic": "Pulled", "queueId": 0})
            assert r.code == ResponseCode.SUCCESS
    asyncio.run(scenario())
