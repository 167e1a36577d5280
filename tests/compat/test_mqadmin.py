"""mqadmin (rocketmq-tools 5.3.3 and 4.9.8, ``MQAdminStartup``) against ``rocketq serve``: each command prints
what it prints against Apache RocketMQ's broker - the same tables and lines, filled with rocketq's real
values, no ``null`` and no exception - and the change it makes is checked over the wire.

The commands run in the client line's JVM (java_runner.py); their output is what an operator would see.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

import reader
from checks import body
from rocketq.client.sync import PushConsumer
from rocketq.client import ConsumeResult
from rocketq.common import fastjson

# the first test of a session may build the clients (a cold Maven / Go cache downloads them): more than
# pytest's 300 s default; each scenario has its own, tighter timeout
pytestmark = pytest.mark.timeout(900)

CLUSTER = "DefaultCluster"


@pytest.fixture(scope="module")
def sent_topic(remoting, compat_server):
    """A topic with 4 queues and a few messages, read to the end by group <line>_admin_cg."""
    runner, line = remoting
    ns, topic = compat_server.namesrv, f"{line}_AdminT"
    out = runner.mqadmin("updateTopic", "-n", ns, "-c", CLUSTER, "-t", topic, "-r", "4", "-w", "4")
    assert re.search(rf"create topic to 127\.0\.0\.1:\d+ success\.", out), out
    assert f"TopicConfig [topicName={topic}, readQueueNums=4, writeQueueNums=4, perm=RW-" in out, out
    sent = runner.run("send_all_modes", namesrv=ns, topic=topic, group=f"{line}_admin_pg", n=1)["sent"]
    runner.run("push_concurrently", namesrv=ns, topic=topic, group=f"{line}_admin_cg", expect=len(sent),
               timeoutMs=20_000, settleMs=300)
    return topic, sent


def _no_error(out: str, *, nulls_ok: bool = False) -> str:
    """No exception printed, and no "null" where a value belongs (a key the broker should answer and did not)."""
    assert "Exception" not in out and (nulls_ok or "null" not in out), out
    return out


def test_cluster_and_broker_status(remoting, compat_server, sent_topic):
    runner, line = remoting
    ns, broker = compat_server.namesrv, compat_server.broker
    out = _no_error(runner.mqadmin("clusterList", "-n", ns))
    assert out.splitlines()[0].startswith("#Cluster Name") and "#Broker Name" in out
    row = next(line for line in out.splitlines() if line.startswith(CLUSTER))
    words = row.split()
    assert words[:4] == [CLUSTER, "broker-a", "0", broker], row
    if line == "rmq5":                       # 5.x adds #ACTIVATED: a master serving
        assert row.rstrip().endswith("true"), f"ACTIVATED: {row}"
    out = _no_error(runner.mqadmin("brokerStatus", "-n", ns, "-b", broker))
    table = dict(re.findall(r"^(\w+)\s*: (.*)$", out, re.M))
    for key in ("putTps", "getTransferedTps", "commitLogMaxOffset", "msgPutTotalTodayNow", "runtime",
                "brokerVersionDesc", "earliestMessageTimeStamp"):
        assert key in table, f"brokerStatus shows no {key}: {out}"
    assert int(table["msgPutTotalTodayNow"]) >= len(sent_topic[1])


def test_topic_list_route_status(remoting, compat_server, sent_topic):
    runner, line = remoting
    ns, (topic, sent) = compat_server.namesrv, sent_topic
    assert topic in _no_error(runner.mqadmin("topicList", "-n", ns)).split()
    out = _no_error(runner.mqadmin("topicList", "-n", ns, "-c"))
    row = next(r for r in out.splitlines() if f" {topic} " in f" {r} ")
    assert row.split() == [CLUSTER, topic, f"{line}_admin_cg"], row          # who consumes it
    route = fastjson.loads(_no_error(runner.mqadmin("topicRoute", "-n", ns, "-t", topic)).encode())
    assert route["queueDatas"][0]["readQueueNums"] == 4 and route["queueDatas"][0]["perm"] == 6
    assert list(route["brokerDatas"][0]["brokerAddrs"].values()) == [compat_server.broker]
    out = _no_error(runner.mqadmin("topicStatus", "-n", ns, "-t", topic))
    rows = [r.split() for r in out.splitlines() if r.startswith("broker-a")]
    expect = reader.offsets(ns, topic)
    assert {int(r[1]): (int(r[2]), int(r[3])) for r in rows} == {q: (0, m) for q, (m, _) in expect.items()}


def test_update_and_delete_topic_and_group(remoting, compat_server, sent_topic):
    runner, line = remoting
    ns, topic, group = compat_server.namesrv, f"{line}_Doomed", f"{line}_doomed_cg"
    out = _no_error(runner.mqadmin("updateTopic", "-n", ns, "-c", CLUSTER, "-t", topic, "-r", "2", "-w", "2"))
    assert "success." in out
    assert sorted(reader.offsets(ns, topic)) == [0, 1]
    out = _no_error(runner.mqadmin("deleteTopic", "-n", ns, "-c", CLUSTER, "-t", topic))
    assert f"delete topic [{topic}] from cluster [{CLUSTER}] success." in out
    assert f"delete topic [{topic}] from NameServer success." in out
    with pytest.raises(Exception, match="route"):
        reader.offsets(ns, topic)
    out = _no_error(runner.mqadmin("updateSubGroup", "-n", ns, "-c", CLUSTER, "-g", group, "-r", "3"),
                    nulls_ok=True)         # SubscriptionGroupConfig.toString prints its unset policies as null
    assert "create subscription group to" in out and f"groupName={group}" in out and "retryMaxTimes=3" in out
    cfg = _no_error(runner.mqadmin("getConsumerConfig", "-n", ns, "-g", group), nulls_ok=True)
    assert re.search(r"retryMaxTimes\s+=\s+3", cfg), cfg
    out = _no_error(runner.mqadmin("deleteSubGroup", "-n", ns, "-c", CLUSTER, "-g", group))
    assert f"delete subscription group [{group}] from broker" in out and "success" in out


def test_consumer_progress_connection_and_reset(remoting, compat_server, sent_topic):
    runner, line = remoting
    ns, (topic, sent) = compat_server.namesrv, sent_topic
    group = f"{line}_admin_cg"
    out = _no_error(runner.mqadmin("consumerProgress", "-n", ns, "-g", group))
    rows = [r.split() for r in out.splitlines() if r.startswith(topic)]
    assert len(rows) == 4 and all(r[3] == r[4] and r[5] == "0" for r in rows), out     # broker = consumer offset
    assert re.search(r"^(Consume )?Diff Total: 0$", out, re.M), out        # 4.9.8 writes "Diff Total"

    online_group = f"{line}_online_cg"
    consumer = PushConsumer(online_group, ns, listener=lambda msgs: ConsumeResult.CONSUME_SUCCESS)
    consumer.subscribe(topic, "TagA || TagB")
    consumer.start()
    try:
        deadline = time.monotonic() + 20
        while True:
            out = runner.mqadmin("consumerConnection", "-n", ns, "-g", online_group)
            if "Exception" not in out or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        _no_error(out)
        assert "#ClientId" in out and "Below is subscription:" in out, out
        assert re.search(rf"{re.escape(topic)}\s+TagA \|\| TagB", out), out
        assert "CONSUME_PASSIVELY" in out and "CLUSTERING" in out, out
    finally:
        consumer.shutdown()

    # no consumer online: the broker resets the offsets itself (RocketMQ 5's server-side reset) and answers them
    out = _no_error(runner.mqadmin("resetOffsetByTime", "-n", ns, "-g", group, "-t", topic, "-s", "0"))
    assert "#brokerName" in out and re.search(r"#(reset|rollback)?offset", out, re.I), out
    assert all(c == 0 for _, c in reader.offsets(ns, topic, group).values()), "offsets not reset to time 0"


def test_query_messages(remoting, compat_server, sent_topic, tmp_path):
    runner, line = remoting
    ns, (topic, sent) = compat_server.namesrv, sent_topic
    s = next(x for x in sent if x["mode"] == "sync")
    stored = next(m for m in reader.read_topic(ns, topic) if m.uniq_key == s["uniqId"])
    commands = [("queryMsgByUniqueKey", "-n", ns, "-t", topic, "-i", s["uniqId"]),
                ("queryMsgByOffset", "-n", ns, "-t", topic, "-b", "broker-a", "-i", str(s["queueId"]),
                 "-o", str(s["queueOffset"]))]
    if line == "rmq5":      # 5.x: -t required, -i a unique or an offset id
        commands += [("queryMsgById", "-n", ns, "-t", topic, "-i", s["uniqId"]),
                     ("queryMsgById", "-n", ns, "-t", topic, "-i", s["offsetMsgId"])]
    else:                   # 4.9.8: no -t, -i an offset id
        commands += [("queryMsgById", "-n", ns, "-i", s["offsetMsgId"])]
    for command in commands:
        out = runner.mqadmin(*command)
        _no_error(out)
        fields = dict(re.findall(r"^([A-Za-z ]+):\s+(.*)$", out, re.M))
        assert fields["Topic"] == topic and fields["Tags"] == f"[{s['tags']}]" and fields["Keys"] == f"[{s['keys']}]"
        assert (int(fields["Queue ID"]), int(fields["Queue Offset"])) == (stored.queue_id, stored.queue_offset)
        assert int(fields["CommitLog Offset"]) == stored.physical_offset
        assert Path(fields["Message Body Path"]).read_bytes() == body(s), "the body mqadmin saved differs"
    out = _no_error(runner.mqadmin("queryMsgByKey", "-n", ns, "-t", topic, "-k", s["keys"]))
    assert [r.split() for r in out.splitlines()[1:] if r.strip()] == \
        [[s["uniqId"], str(stored.queue_id), str(stored.queue_offset)]], out


def test_broker_config(remoting, compat_server, sent_topic):
    runner, _ = remoting
    ns, broker = compat_server.namesrv, compat_server.broker
    cfg = dict(re.findall(r"^(\S+)\s+=  (.*)$", _no_error(runner.mqadmin("getBrokerConfig", "-n", ns, "-b", broker)),
                          re.M))
    assert cfg["brokerName"] == "broker-a" and cfg["listenPort"] == broker.rsplit(":", 1)[1]
    assert cfg["messageDelayLevel"] == " ".join(["1s"] * 18) and cfg["flushDiskType"] == "ASYNC_FLUSH"
    out = runner.mqadmin("updateBrokerConfig", "-n", ns, "-b", broker, "-k", "fileReservedTime", "-v", "48")
    assert "update broker config success" in out, out
    cfg = dict(re.findall(r"^(\S+)\s+=  (.*)$", runner.mqadmin("getBrokerConfig", "-n", ns, "-b", broker), re.M))
    assert cfg["fileReservedTime"] == "48"
    out = runner.mqadmin("updateBrokerConfig", "-n", ns, "-b", broker, "-k", "noSuchKey", "-v", "1")
    assert "CODE: 29" in out and "noSuchKey is not a broker or store setting" in out, out
