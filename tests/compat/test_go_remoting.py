"""Apache RocketMQ's Go remoting client (rocketmq-client-go/v2 v2.1.2) against ``rocketq serve``, and messages
crossing clients over the remoting protocol: sent by Go, Java, rocketq's Python client or ``rocketq send``,
received by each of the others and by ``rocketq consume``, byte for byte."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections import defaultdict

import pytest

import go_runner
import reader
from checks import assert_received_as_stored, assert_stored_as_sent, body
from rocketq.client import ConsumeFrom, Message
from rocketq.client.sync import LitePullConsumer, Producer

# the first test of a session may build the clients (a cold Maven / Go cache downloads them): more than
# pytest's 300 s default; each scenario has its own, tighter timeout
pytestmark = pytest.mark.timeout(900)

CLI_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def go_remoting():
    return go_runner.build("remoting")


def test_go_send_sync_async_and_push_with_retry(go_remoting, compat_server):
    ns, topic, group = compat_server.namesrv, "go_Orders", "go_orders_cg"
    sent = go_runner.run(go_remoting, "send", namesrv=ns, topic=topic, group="go_pg", n=3, **{"async": "true"})["sent"]
    assert [s["status"] for s in sent] == ["SEND_OK"] * 6
    stored = reader.read_topic(ns, topic)
    assert_stored_as_sent(sent, stored, topic=topic)
    # The Go client asks for its retry topic's route once at start, before its first heartbeat (which is what
    # makes a broker - RocketMQ's too - create %RETRY%group), then only every 30 s: a brand-new group's first
    # retry can wait that long. A group that has run before has the topic; make this one such a group.
    reader.create_topic(compat_server.broker, f"%RETRY%{group}", 1)
    got = go_runner.run(go_remoting, "consume", namesrv=ns, topic=topic, group=group, expect=len(sent),
                        failOnce="go-key-1", timeoutMs=30_000, settleMs=800)["received"]
    first = [r for r in got if r["reconsumeTimes"] == 0]
    assert_received_as_stored(first, stored)
    retried = [r for r in got if r["reconsumeTimes"] > 0]
    assert [(r["keys"], r["reconsumeTimes"]) for r in retried] == [("go-key-1", 1)], retried
    original = next(s for s in sent if s["keys"] == "go-key-1")
    assert body(retried[0]) == body(original) and retried[0]["topic"] == topic
    assert retried[0]["properties"]["RETRY_TOPIC"] == topic and retried[0]["msgId"] == original["uniqId"]
    assert {q: c for q, (_, c) in reader.offsets(ns, topic, group).items()} == \
        {q: m for q, (m, _) in reader.offsets(ns, topic).items()}


def test_go_transaction_commit_rollback_check(go_remoting, compat_server):
    ns, topic = compat_server.namesrv, "go_Tx"
    data = go_runner.run(go_remoting, "transaction", namesrv=ns, topic=topic, group="go_tx_pg", checkTimeoutMs=20_000)
    assert set(data["checks"]) == {"unknown"} or "unknown" in data["checks"]
    unknown = next(s for s in data["sent"] if s["keys"] == "unknown")
    assert body(data["checks"]["unknown"]) == body(unknown)
    stored = reader.read_topic(ns, topic)
    assert sorted(" ".join(m.keys) for m in stored) == ["commit", "unknown"]      # the rollback never arrives
    for m in stored:
        assert m.body == body(next(s for s in data["sent"] if s["keys"] == " ".join(m.keys)))


def _cli_consume(ns: str, topic: str, count: int) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "rocketq.cli.main", "consume", topic, "--namesrv", ns, "--from",
                           "first", "--count", str(count), "--idle", "10", "--json"],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _cli_body(row: dict) -> bytes:
    return base64.b64decode(row["body"]) if row["body_encoding"] == "base64" else row["body"].encode()


def _python_read(ns: str, topic: str, count: int, group: str) -> list:
    with LitePullConsumer(group, ns, consume_from=ConsumeFrom.FIRST) as c:
        c.subscribe(topic)
        c.start()
        got = []
        for _ in range(50):
            got += c.poll(timeout_s=0.5)
            if len(got) >= count:
                break
        return got


def test_go_to_java_python_and_cli(go_remoting, compat_server, java_runner):
    ns, topic = compat_server.namesrv, "cross_FromGo"
    sent = go_runner.run(go_remoting, "send", namesrv=ns, topic=topic, group="go_cross_pg", n=4)["sent"]
    stored = reader.read_topic(ns, topic)
    assert_stored_as_sent(sent, stored, topic=topic)
    by_id = {s["uniqId"]: body(s) for s in sent}
    java = java_runner("remoting", "rmq5", "rocketq.compat.Runner")
    got = java.run("push_concurrently", namesrv=ns, topic=topic, group="java_from_go_cg", expect=4, timeoutMs=20_000,
                   settleMs=500)["received"]
    assert_received_as_stored(got, stored)
    assert {r["msgId"]: body(r) for r in got} == by_id
    py = _python_read(ns, topic, 4, "py_from_go_cg")
    assert {m.uniq_key: m.body for m in py} == by_id
    rows = _cli_consume(ns, topic, 4)
    assert {r["msg_id"]: _cli_body(r) for r in rows} == by_id


def test_java_and_python_to_go(go_remoting, compat_server, java_runner):
    ns, topic = compat_server.namesrv, "cross_ToGo"
    java = java_runner("remoting", "rmq5", "rocketq.compat.Runner")
    sent = java.run("send_all_modes", namesrv=ns, topic=topic, group="java_to_go_pg", n=1)["sent"]
    with Producer("py_to_go_pg", ns) as p:
        py_msgs = [Message(topic, bytes(range(256)) + f"py-{i}".encode(), tags="TagP", keys=[f"py-key-{i}"])
                   for i in range(2)]
        py_results = [p.send(m) for m in py_msgs]
    cli_body = bytes(range(256))
    cli = subprocess.run([sys.executable, "-m", "rocketq.cli.main", "send", topic, "--namesrv", ns, "--file", "-",
                          "--tag", "TagC", "--key", "cli-key", "--property", "u.from=cli", "--json"],
                         input=cli_body, capture_output=True, timeout=CLI_TIMEOUT_S,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert cli.returncode == 0, cli.stderr
    cli_id = json.loads(cli.stdout.decode().strip().splitlines()[-1])["msg_id"]
    stored = reader.read_topic(ns, topic)
    assert len(stored) == len(sent) + 3
    got = go_runner.run(go_remoting, "consume", namesrv=ns, topic=topic, group="go_from_all_cg", expect=len(stored),
                        timeoutMs=30_000, settleMs=500)["received"]
    java_got = java.run("push_concurrently", namesrv=ns, topic=topic, group="java_from_all_cg", expect=len(stored),
                        timeoutMs=20_000, settleMs=300)["received"]
    assert_received_as_stored(java_got, stored)
    cli_seen = next(r for r in java_got if r["msgId"] == cli_id)
    assert body(cli_seen) == cli_body and cli_seen["properties"]["u.from"] == "cli" and cli_seen["tags"] == "TagC"
    assert_received_as_stored(got, stored)
    by_id = {r["msgId"]: body(r) for r in got}
    for s in sent:
        assert by_id[s["uniqId"]] == body(s)
    for m, r in zip(py_msgs, py_results):
        assert by_id[r.msg_id] == m.body
    tags = defaultdict(set)
    for r in got:
        tags[r["tags"]].add(r["keys"])
    assert tags["TagP"] == {"py-key-0", "py-key-1"}
    assert by_id[cli_id] == cli_body
