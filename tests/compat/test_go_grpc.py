"""Apache RocketMQ's Go gRPC client (rocketmq-clients/golang/v5 v5.1.2) against the gRPC endpoint of
``rocketq serve``. That client always dials TLS (v5.1.2 has no plaintext option; it skips certificate
checks by default) and rocketq's gRPC port speaks TLS only with ``tlsMode`` permissive or enforcing (RocketMQ's
proxy, permissive by default, takes both on one port), so these run against a server of their own with
``tlsMode=permissive``: TLS on gRPC, plaintext still accepted on the remoting ports. Checked: Producer (normal, FIFO), SimpleConsumer (receive, ack, change invisible duration); the Java 5.x gRPC client with
TLS on (its default) sending and receiving through the same port; and
messages crossing protocols: sent over gRPC by Go and read over remoting by Java, rocketq's Python client
and ``rocketq consume``; sent over remoting by Java and received over gRPC by Go and by the Java gRPC client."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import go_runner
import reader
from checks import assert_received_as_stored, body
from serve_proc import ServeProcess
from test_go_remoting import _cli_body, _cli_consume, _python_read

# the first test of a session may build the clients (a cold Maven / Go cache downloads them): more than
# pytest's 300 s default; each scenario has its own, tighter timeout
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def go_grpc():
    return go_runner.build("grpc")


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))        # tests/pki.py
    from pki import new_pki
    workdir = tmp_path_factory.mktemp("compat-tls")
    new_pki(workdir / "pki")
    server = ServeProcess(workdir, grpc=True, extra=(
        "tlsMode=permissive", f"tls.server.certPath={workdir / 'pki' / 'server.pem'}",
        f"tls.server.keyPath={workdir / 'pki' / 'server.key'}")).start()
    yield server
    server.stop()


def _run(binary, scenario, server, tmp_path, **args):
    return go_runner.run(binary, scenario, endpoint=server.grpc, **args)


def test_go_grpc_producer_and_simple_consumer(go_grpc, tls_server, tmp_path):
    ns = tls_server.namesrv
    sent = _run(go_grpc, "produce", tls_server, tmp_path, topic="gg_Normal", fifoTopic="gg_Fifo", n=3)["sent"]
    for topic, kind in (("gg_Normal", "normal"), ("gg_Fifo", "fifo")):
        stored = {m.uniq_key: m for m in reader.read_topic(ns, topic)}
        mine = [s for s in sent if s["kind"] == kind]
        assert set(stored) == {s["uniqId"] for s in mine}
        for s in mine:
            m = stored[s["uniqId"]]
            assert m.body == body(s) and m.tags == "TagA" and m.keys == [s["keys"]]
            assert m.properties["u.client"] == "go-grpc"
        if kind == "fifo":
            assert len({m.queue_id for m in stored.values()}) == 1
    got = _run(go_grpc, "simple", tls_server, tmp_path, topic="gg_Normal", group="gg_simple_cg", expect=3,
               extendKey="gog-normal-0", timeoutMs=30_000)["received"]
    normal = {s["uniqId"]: s for s in sent if s["kind"] == "normal"}
    assert {r["msgId"] for r in got} == set(normal)
    assert all(body(r) == body(normal[r["msgId"]]) for r in got)
    extended = [r for r in got if r["keys"] == "gog-normal-0"]
    assert [r["deliveryAttempt"] for r in extended] == [1, 2]
    assert extended[1]["receivedAt"] - extended[0]["receivedAt"] >= 900


def test_grpc_to_remoting_and_back(go_grpc, tls_server, java_runner, tmp_path):
    ns, topic = tls_server.namesrv, "cross_GrpcToRemoting"
    sent = _run(go_grpc, "produce", tls_server, tmp_path, topic=topic, fifoTopic=topic + "_Fifo", n=2)["sent"]
    mine = {s["uniqId"]: body(s) for s in sent if s["kind"] == "normal"}
    stored = reader.read_topic(ns, topic)
    java = java_runner("remoting", "rmq5", "rocketq.compat.Runner")
    got = java.run("push_concurrently", namesrv=ns, topic=topic, group="java_from_grpc_cg", expect=len(mine),
                   timeoutMs=20_000, settleMs=300)["received"]
    assert_received_as_stored(got, stored)
    assert {r["msgId"]: body(r) for r in got} == mine
    assert {m.uniq_key: m.body for m in _python_read(ns, topic, len(mine), "py_from_grpc_cg")} == mine
    assert {r["msg_id"]: _cli_body(r) for r in _cli_consume(ns, topic, len(mine))} == mine

    back = "cross_RemotingToGrpc"
    sent = java.run("send_all_modes", namesrv=ns, topic=back, group="java_to_grpc_pg", n=1)["sent"]
    by_id = {s["uniqId"]: body(s) for s in sent}
    got = _run(go_grpc, "simple", tls_server, tmp_path, topic=back, group="gg_from_java_cg", expect=len(sent),
               timeoutMs=30_000)["received"]
    assert {r["msgId"]: body(r) for r in got} == by_id


def test_java_remoting_to_java_grpc(compat_server, java_runner):
    ns, topic = compat_server.namesrv, "cross_JavaRemotingToGrpc"
    java = java_runner("remoting", "rmq5", "rocketq.compat.Runner")
    sent = java.run("send_all_modes", namesrv=ns, topic=topic, group="java_to_jgrpc_pg", n=1)["sent"]
    by_id = {s["uniqId"]: s for s in sent}
    grpc_java = java_runner("grpc", None, "rocketq.compat.grpc.GrpcRunner")
    got = grpc_java.run("simple", endpoint=compat_server.grpc, topic=topic, group="jg_from_java_cg", expect=len(sent),
                        timeoutMs=30_000)["received"]
    assert {r["msgId"]: body(r) for r in got} == {i: body(s) for i, s in by_id.items()}
    for r in got:                                   # tags, keys and user properties cross the protocols too
        s = by_id[r["msgId"]]
        assert r["tags"] == s["tags"] and r["keys"] == s["keys"] and r["userProps"]["u.seq"] == s["userProps"]["u.seq"]


def test_java_grpc_client_over_tls(tls_server, java_runner):
    """rocketmq-client-java with enableSsl(true), its default: a TLS handshake with the endpoint (native
    transport, rustls; the client trusts any certificate), then sends and a simple consumer's receive."""
    ns, topic = tls_server.namesrv, "jgt_Normal"
    grpc_java = java_runner("grpc", None, "rocketq.compat.grpc.GrpcRunner")
    sent = grpc_java.run("produce", endpoint=tls_server.grpc, ssl="true", topic=topic, fifoTopic="jgt_Fifo",
                         delayTopic="jgt_Delay", n=2, delayMs=200, timeout_s=90)["sent"]
    normal = {s["uniqId"]: body(s) for s in sent if s["kind"] in ("normal", "async")}
    assert {m.uniq_key: m.body for m in reader.read_topic(ns, topic)} == normal
    got = grpc_java.run("simple", endpoint=tls_server.grpc, ssl="true", topic=topic, group="jgt_simple_cg",
                        expect=len(normal), timeoutMs=30_000, timeout_s=60)["received"]
    assert {r["msgId"]: body(r) for r in got} == normal
