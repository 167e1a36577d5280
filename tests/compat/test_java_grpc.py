"""Apache RocketMQ's Java gRPC client (rocketmq-client-java 5.0.8) against the gRPC endpoint of ``rocketq serve``:
Producer normal / FIFO / delay / async / transaction with a checker, SimpleConsumer receive / ack /
changeInvisibleDuration, PushConsumer with a failing listener and in FIFO order; what arrived is read back
with rocketq's remoting client and compared byte for byte."""

from __future__ import annotations

import json
import time

import pytest

import reader
from checks import body
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketq.client.sync import run as run_async

# the first test of a session may build the clients (a cold Maven / Go cache downloads them): more than
# pytest's 300 s default; each scenario has its own, tighter timeout
pytestmark = pytest.mark.timeout(900)

GRPC_MAIN = "rocketq.compat.grpc.GrpcRunner"


@pytest.fixture(scope="module")
def grpc_java(java_runner):
    return java_runner("grpc", None, GRPC_MAIN)


@pytest.fixture(scope="module")
def produced(grpc_java, compat_server):
    ep = compat_server.grpc
    sent = grpc_java.run("produce", endpoint=ep, topic="jg_Normal", fifoTopic="jg_Fifo", delayTopic="jg_Delay", n=3,
                         delayMs=1500, timeout_s=90)["sent"]
    return sent


def _by_kind(sent, kind):
    return [s for s in sent if s["kind"] == kind]


def _assert_stored(sent, stored):
    index = {m.uniq_key: m for m in stored}
    assert len(stored) == len(sent), (len(stored), len(sent))
    for s in sent:
        m = index[s["uniqId"]]                                  # the gRPC message id is the UNIQ_KEY
        assert m.body == body(s) and m.tags == s["tags"] and " ".join(m.keys) == s["keys"]
        assert m.properties.get("u.client") == "java-grpc"
    return index


def test_producer_normal_fifo_delay_async(produced, compat_server):
    ns = compat_server.namesrv
    _assert_stored(_by_kind(produced, "normal") + _by_kind(produced, "async"), reader.read_topic(ns, "jg_Normal"))
    fifo = _assert_stored(_by_kind(produced, "fifo"), reader.read_topic(ns, "jg_Fifo"))
    assert len({m.queue_id for m in fifo.values()}) == 1, "one message group, one queue"
    assert [m.queue_offset for m in sorted(fifo.values(), key=lambda m: m.queue_offset)] == [0, 1, 2]
    assert {m.properties.get("__SHARDINGKEY") for m in fifo.values()} == {"g1"}
    deadline = time.monotonic() + 20
    while len(stored := reader.read_topic(ns, "jg_Delay")) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    delayed = _assert_stored(_by_kind(produced, "delay"), stored)
    for s in _by_kind(produced, "delay"):
        assert delayed[s["uniqId"]].store_timestamp >= s["deliveryTimestamp"] - 50, "delivered before its time"


def test_simple_consumer_receive_ack_change_invisible_duration(grpc_java, compat_server, produced):
    got = grpc_java.run("simple", endpoint=compat_server.grpc, topic="jg_Normal", group="jg_simple_cg", expect=6,
                        extendKey="grpc-key-0", timeoutMs=30_000, timeout_s=60)["received"]
    sent = {s["uniqId"]: s for s in produced if s["topic"] == "jg_Normal"}
    assert {r["msgId"] for r in got} == set(sent)
    for r in got:
        assert body(r) == body(sent[r["msgId"]]) and r["tags"] == sent[r["msgId"]]["tags"]
    extended = [r for r in got if r["keys"] == "grpc-key-0"]
    assert [r["deliveryAttempt"] for r in extended] == [1, 2]
    assert extended[1]["receivedAt"] - extended[0]["receivedAt"] >= 900, "came back before its new invisible time"


def test_push_consumer_with_failing_listener(grpc_java, compat_server, produced):
    got = grpc_java.run("push", endpoint=compat_server.grpc, topic="jg_Normal", group="jg_push_cg", expect=6,
                        failKey="grpc-key-1", timeoutMs=40_000, timeout_s=60)["received"]
    sent = {s["uniqId"]: s for s in produced if s["topic"] == "jg_Normal"}
    for r in got:
        assert body(r) == body(sent[r["msgId"]])
    failing = [r["deliveryAttempt"] for r in got if r["keys"] == "grpc-key-1"]
    assert failing[:2] == [1, 2], failing
    assert {r["msgId"] for r in got} == set(sent)


def _orderly_group(compat_server, group: str) -> None:
    async def go():
        client = RemotingClient("127.0.0.1", compat_server.broker_port)
        try:
            r = await client.invoke(RemotingCommand.create_request(
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                json.dumps({"groupName": group, "consumeMessageOrderly": True}).encode()), timeout_s=10)
            assert r.code == ResponseCode.SUCCESS, r.remark
        finally:
            await client.close()
    run_async(go())


def test_push_consumer_fifo_order(grpc_java, compat_server, produced):
    group = "jg_fifo_cg"
    _orderly_group(compat_server, group)
    got = grpc_java.run("push", endpoint=compat_server.grpc, topic="jg_Fifo", group=group, expect=3,
                        timeoutMs=30_000, timeout_s=60)["received"]
    fifo = _by_kind(produced, "fifo")
    assert [r["msgId"] for r in got] == [s["uniqId"] for s in fifo], "FIFO group delivered out of send order"
    assert all(r["messageGroup"] == "g1" and body(r) == body(s) for r, s in zip(got, fifo))


def test_transaction_with_checker(grpc_java, compat_server):
    data = grpc_java.run("transaction", endpoint=compat_server.grpc, topic="jg_Tx", checkTimeoutMs=30_000,
                         timeout_s=60)
    unknown = next(s for s in data["sent"] if s["keys"] == "unknown")
    assert body(data["checks"]["unknown"]) == body(unknown)
    stored = reader.read_topic(compat_server.namesrv, "jg_Tx")
    assert sorted(" ".join(m.keys) for m in stored) == ["commit", "unknown"]
    for m in stored:
        assert m.body == body(next(s for s in data["sent"] if s["keys"] == " ".join(m.keys)))
