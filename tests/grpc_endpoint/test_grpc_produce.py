"""The official Python 5.x client producing to rocketq's gRPC endpoint: routes, every message type."""

import time

import grpc
from grpc_helpers import client_config, message, receive_all, wait_until

from rocketq.common.sysflag import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocketq.grpc_endpoint.protocol import pb, spb, spb_grpc
from rocketq.broker.timer import TIMER_TOPIC


def _producer(server, topics, checker=None):
    from rocketmq import Producer
    p = Producer(client_config(server), topics, checker) if checker else Producer(client_config(server), topics)
    p.startup()
    return p


def _consumer(server, group, topic, await_s=2):
    from rocketmq import FilterExpression, SimpleConsumer
    c = SimpleConsumer(client_config(server), group, {topic: FilterExpression("*")}, await_duration=await_s)
    c.startup()
    return c


def _stored(server, topic, msg_id):
    found = server.call(lambda: server.broker.store.query_by_key(topic, msg_id))
    return found[0] if found else None


def test_query_route_names_the_endpoint_in_every_queue(server):
    server.create_topic("Routed", 4)
    with grpc.insecure_channel(server.access_point) as ch:
        resp = spb_grpc.MessagingServiceStub(ch).QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name="Routed")), timeout=5)
    assert resp.status.code == pb.Code.OK
    assert [q.id for q in resp.message_queues] == [0, 1, 2, 3]
    for q in resp.message_queues:
        assert q.permission == pb.Permission.READ_WRITE and q.broker.id == 0
        assert q.broker.endpoints.scheme == pb.AddressScheme.IPv4
        assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [("127.0.0.1", server.endpoint.port)]
        assert set(q.accept_message_types) == {pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY,
                                               pb.MessageType.TRANSACTION}


def test_normal_send_sync_and_async_keep_the_client_message_id(server):
    server.create_topic("Normal")
    p = _producer(server, ("Normal",))
    try:
        r = p.send(message("Normal", b"one", keys="order-1", props={"color": "red"}))
        r2 = p.send_async(message("Normal", b"two")).result(10)
    finally:
        p.shutdown()
    stored = wait_until(lambda: _stored(server, "Normal", r.message_id), what="the message in the index")
    assert stored.uniq_key == r.message_id and stored.body == b"one" and stored.tags == "TagA"
    assert stored.keys == ["order-1"] and stored.properties["color"] == "red"
    assert wait_until(lambda: _stored(server, "Normal", r2.message_id)).body == b"two"
    c = _consumer(server, "GNormal", "Normal")
    try:
        got = receive_all(c, 2)
        by_id = {m.message_id: m for m in got}
        assert set(by_id) == {r.message_id, r2.message_id}
        first = by_id[r.message_id]
        assert first.delivery_attempt == 1 and first.keys == {"order-1"} and first.properties == {"color": "red"}
        assert not first.corrupted                     # the MD5 digest checked out
        for m in got:
            c.ack(m)
    finally:
        c.shutdown()


def test_fifo_group_keeps_one_queue_and_its_order(server):
    server.create_topic("Fifo", 4)
    p = _producer(server, ("Fifo",))
    try:
        sent = {g: [p.send(message("Fifo", f"{g}-{i}".encode(), group=g)).message_id for i in range(5)]
                for g in ("alpha", "beta", "gamma")}
    finally:
        p.shutdown()
    for g, ids in sent.items():
        stored = [wait_until(lambda i=i: _stored(server, "Fifo", i)) for i in ids]
        assert len({m.queue_id for m in stored}) == 1, f"group {g} spread over queues"
        offsets = [m.queue_offset for m in stored]
        assert offsets == sorted(offsets)
        assert stored[0].properties["__SHARDINGKEY"] == g


def test_delay_message_arrives_at_its_time_not_before(server):
    server.create_topic("Later")
    p = _producer(server, ("Later",))
    try:
        due_s = int(time.time()) + 2
        r = p.send(message("Later", b"later", deliver_at_s=due_s))
    finally:
        p.shutdown()
    assert wait_until(lambda: _stored(server, TIMER_TOPIC, r.message_id), what="the parked message")
    assert server.call(lambda: sum(server.broker.store.max_offset("Later", q) for q in range(4))) == 0
    c = _consumer(server, "GLater", "Later")
    try:
        got = receive_all(c, 1, timeout_s=20)
        stored = _stored(server, "Later", r.message_id)
        assert stored.store_timestamp >= due_s * 1000
        assert got[0].message_id == r.message_id and got[0].delivery_timestamp == due_s * 1000
        assert got[0].message_type == pb.MessageType.DELAY
        c.ack(got[0])
    finally:
        c.shutdown()


class _Checker:
    def __init__(self, resolution):
        self.resolution, self.asked = resolution, []

    def check(self, msg):
        self.asked.append(msg.message_id)
        return self.resolution


def _tx_checker(resolution):
    from rocketmq import TransactionChecker

    class Checker(_Checker, TransactionChecker):
        pass
    return Checker(resolution)


def test_transaction_commit_and_rollback(server):
    from rocketmq import TransactionResolution
    server.create_topic("Tx")
    p = _producer(server, ("Tx",), _tx_checker(TransactionResolution.ROLLBACK))
    try:
        tx = p.begin_transaction()
        r = p.send(message("Tx", b"kept"), tx)
        assert r.transaction_id
        assert server.call(lambda: sum(server.broker.store.max_offset("Tx", q) for q in range(4))) == 0
        tx.commit()
        tx2 = p.begin_transaction()
        p.send(message("Tx", b"dropped"), tx2)
        ops_before = server.call(lambda: server.broker.store.max_offset(TRANS_OP_HALF_TOPIC, 0))
        tx2.rollback()
        wait_until(lambda: server.call(lambda: server.broker.store.max_offset(TRANS_OP_HALF_TOPIC, 0)) > ops_before,
                   what="the rollback's op record")
    finally:
        p.shutdown()
    c = _consumer(server, "GTx", "Tx")
    try:
        got = receive_all(c, 1)
        assert [m.body for m in got] == [b"kept"] and got[0].message_id == r.message_id
        c.ack(got[0])
        assert c.receive(16, 10) == []                 # the rolled-back one never shows up
    finally:
        c.shutdown()


def test_transaction_check_back_over_telemetry_commits(server):
    from rocketmq import TransactionResolution
    server.create_topic("TxCheck")
    checker = _tx_checker(TransactionResolution.COMMIT)
    p = _producer(server, ("TxCheck",), checker)
    try:
        r = p.send(message("TxCheck", b"orphan"), p.begin_transaction())   # never committed by the client
        wait_until(lambda: checker.asked, what="the server's check-back")
        assert checker.asked[0] == r.message_id
        c = _consumer(server, "GTxCheck", "TxCheck")
        try:
            got = receive_all(c, 1)
            assert got[0].body == b"orphan" and got[0].message_id == r.message_id
            c.ack(got[0])
        finally:
            c.shutdown()
    finally:
        p.shutdown()
    assert server.call(lambda: server.broker.store.max_offset(TRANS_HALF_TOPIC, 0)) >= 1
