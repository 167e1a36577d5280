"""What real clients do wrong in the field, against ``rocketq serve``: each gets Apache RocketMQ's answer and
nothing is lost.

* a producer group used by two processes at once (a Java and a Go producer): both send, every message is
  stored once;
* a producer whose route has more queues than the topic (a shrunk topic): SYSTEM_ERROR "request queueId[n]
  is illegal", nothing stored, the next send goes through; a pull of such a queue likewise;
* a consumer subscribing with an SQL92 expression: refused at start (CHECK_CLIENT_CONFIG), and a pull with
  one is refused, as RocketMQ refuses them with its default ``enablePropertyFilter=false``;
* a request code rocketq does not serve: REQUEST_CODE_NOT_SUPPORTED, and the connection keeps serving;
* a consumer that disconnects in the middle of a held long poll: the message that arrives next is stored
  and read by the next consumer.
"""

from __future__ import annotations

import threading

import pytest

import go_runner
import reader
from checks import assert_received_as_stored, assert_stored_as_sent, body
from rocketq.client.sync import run as run_async
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

# the first test of a session may build the clients (a cold Maven / Go cache downloads them): more than
# pytest's 300 s default; each scenario has its own, tighter timeout
pytestmark = pytest.mark.timeout(900)

LINE = "rmq5"
REQUEST_TIMEOUT_S = 10


def _java(java_runner):
    return java_runner("remoting", LINE, "rocketq.compat.Runner")


def _invoke(port: int, *commands: RemotingCommand) -> list[RemotingCommand]:
    """Send *commands* one after the other on one connection."""
    async def go():
        client = RemotingClient("127.0.0.1", port)
        try:
            return [await client.invoke(c, timeout_s=REQUEST_TIMEOUT_S) for c in commands]
        finally:
            await client.close()
    return run_async(go())


def test_one_producer_group_in_two_processes(compat_server, java_runner):
    ns, topic, group = compat_server.namesrv, "bad_SharedGroup", "bad_shared_pg"
    binary = go_runner.build("remoting")
    go_result = {}
    go_thread = threading.Thread(target=lambda: go_result.update(go_runner.run(
        binary, "send", namesrv=ns, topic=topic, group=group, n=6)))
    go_thread.start()
    java_sent = _java(java_runner).run("send_all_modes", namesrv=ns, topic=topic, group=group, n=2)["sent"]
    go_thread.join(60)
    assert go_result, "the Go producer did not finish"
    assert_stored_as_sent(java_sent + go_result["sent"], reader.read_topic(ns, topic), topic=topic)


def test_a_queue_the_topic_does_not_have(compat_server, java_runner):
    ns, topic = compat_server.namesrv, "bad_Shrunk"
    java = _java(java_runner)
    java.mqadmin("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2")
    refused = java.run("send_to_queue", namesrv=ns, topic=topic, group="bad_shrunk_pg", queueId=5)
    assert "result" not in refused and refused["responseCode"] == ResponseCode.SYSTEM_ERROR, refused
    assert "request queueId[5] is illegal" in refused["message"], refused
    ok = java.run("send_to_queue", namesrv=ns, topic=topic, group="bad_shrunk_pg", queueId=1)["result"]
    assert ok["status"] == "SEND_OK" and ok["queueId"] == 1
    assert [m.uniq_key for m in reader.read_topic(ns, topic)] == [ok["uniqId"]]     # only the good one
    [pulled] = _invoke(compat_server.broker_port, RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "bad_cg", "topic": topic, "queueId": 5, "queueOffset": 0, "maxMsgNums": 4, "sysFlag": 0,
        "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0}))
    assert pulled.code == ResponseCode.SYSTEM_ERROR and "queueId[5] is illegal" in pulled.remark


def test_sql92_subscription_is_refused(compat_server, java_runner):
    ns, topic = compat_server.namesrv, "bad_Sql"
    java = _java(java_runner)
    java.run("send_all_modes", namesrv=ns, topic=topic, group="bad_sql_pg", n=1)
    result = java.run("subscribe_sql", namesrv=ns, topic=topic, group="bad_sql_cg", sql="a > 5")
    assert result["started"] is False and "filter message by SQL92" in result["message"] + result["cause"], result
    [pulled] = _invoke(compat_server.broker_port, RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "bad_sql_cg", "topic": topic, "queueId": 0, "queueOffset": 0, "maxMsgNums": 4,
        "sysFlag": 2, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "a > 5", "subVersion": 0,
        "expressionType": "SQL92"}))
    assert pulled.code == ResponseCode.SYSTEM_ERROR
    assert pulled.remark == "The broker does not support consumer to filter message by SQL92"
    # the messages are all there for a consumer with a tag subscription
    got = java.run("push_concurrently", namesrv=ns, topic=topic, group="bad_sql_tag_cg", expect=4, timeoutMs=20_000,
                   settleMs=300)["received"]
    assert_received_as_stored(got, reader.read_topic(ns, topic))


def test_unsupported_request_code_keeps_the_connection(compat_server, java_runner):
    unknown = RemotingCommand.create_request(9999, {})
    bounds = RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET, {"topic": "TBW102", "queueId": 0})
    refused, after = _invoke(compat_server.broker_port, unknown, bounds)
    assert refused.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert refused.remark.strip() == "request type 9999 not supported"    # Java's text (it has a leading space)
    assert after.code == ResponseCode.SUCCESS                              # same connection, still served
    out = _java(java_runner).mqadmin("brokerConsumeStats", "-n", compat_server.namesrv, "-b", compat_server.broker)
    assert "CODE: 3" in out and "request type 317 not supported" in out, out     # what mqadmin shows for it


def test_consumer_vanishing_mid_long_poll(compat_server, java_runner):
    ns, topic = compat_server.namesrv, "bad_Vanish"
    java = _java(java_runner)
    java.mqadmin("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", topic, "-r", "1", "-w", "1")

    async def poll_then_vanish():
        client = RemotingClient("127.0.0.1", compat_server.broker_port)
        held = client.invoke(RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "bad_vanish_cg", "topic": topic, "queueId": 0, "queueOffset": 0, "maxMsgNums": 4,
            "sysFlag": 2, "commitOffset": 0, "suspendTimeoutMillis": 20_000, "subscription": "*", "subVersion": 0}),
            timeout_s=30)
        import asyncio
        task = asyncio.ensure_future(held)
        await asyncio.sleep(0.5)                           # the broker holds it: nothing to read yet
        assert not task.done()
        await client.close()                               # the consumer is gone mid-pull
        try:
            await task
        except Exception:
            pass
    run_async(poll_then_vanish())
    sent = java.run("send_all_modes", namesrv=ns, topic=topic, group="bad_vanish_pg", n=1)["sent"]
    stored = reader.read_topic(ns, topic)
    assert_stored_as_sent(sent, stored, topic=topic)
    got = java.run("push_concurrently", namesrv=ns, topic=topic, group="bad_vanish_cg", expect=len(sent),
                   timeoutMs=20_000, settleMs=300)["received"]
    assert_received_as_stored(got, stored)
    assert {r["msgId"]: body(r) for r in got} == {s["uniqId"]: body(s) for s in sent}
