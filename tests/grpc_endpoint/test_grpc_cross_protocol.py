"""One store, two protocols: sent over remoting and received over gRPC, and the reverse."""

from broker_helpers import pull, send_v2, split_records
from grpc_helpers import client_config, message, receive_all, wait_until

from rocketq.remoting import RemotingClient, ResponseCode


def _remoting(server, build):
    async def go():
        client = RemotingClient("127.0.0.1", server.broker.server.port)
        try:
            return await client.invoke(build(), timeout_s=10)
        finally:
            await client.close()
    return server.run(go())


def test_sent_over_remoting_received_over_grpc(server):
    from rocketmq import FilterExpression, SimpleConsumer
    server.create_topic("Bridge")
    props = "TAGS\x01TagR\x02KEYS\x01rk-1\x02UNIQ_KEY\x01AC1100010001000000000000000000AB\x02size\x01XL\x02"
    r = _remoting(server, lambda: send_v2("Bridge", b"from-remoting", queue_id=2, props=props))
    assert r.code == ResponseCode.SUCCESS, r.remark
    c = SimpleConsumer(client_config(server), "GBridge", {"Bridge": FilterExpression("TagR")}, await_duration=2)
    c.startup()
    try:
        got = receive_all(c, 1)
        m = got[0]
        assert m.body == b"from-remoting" and m.tag == "TagR" and m.keys == {"rk-1"}
        assert m.message_id == "AC1100010001000000000000000000AB" and m.properties == {"size": "XL"}
        assert m.delivery_attempt == 1 and not m.corrupted
        c.ack(m)
    finally:
        c.shutdown()
    assert server.call(lambda: server.broker.offsets.query("GBridge", "Bridge", 2)) == 1


def test_sent_over_grpc_pulled_over_remoting(server):
    from rocketmq import Producer
    server.create_topic("Back", 1)
    p = Producer(client_config(server), ("Back",))
    p.startup()
    try:
        mid = p.send(message("Back", b"from-grpc", tag="TagG", keys="gk-1", props={"who": "grpc"})).message_id
    finally:
        p.shutdown()
    wait_until(lambda: server.call(lambda: server.broker.store.max_offset("Back", 0)) == 1, what="dispatch")
    resp = _remoting(server, lambda: pull("Back", 0, 0))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    [rec] = split_records(resp.body)
    assert rec.body == b"from-grpc" and rec.tags == "TagG" and rec.keys == ["gk-1"]
    assert rec.uniq_key == mid and rec.properties["who"] == "grpc"
