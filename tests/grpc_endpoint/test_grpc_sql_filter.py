"""SQL92 filters for gRPC consumers (FilterType.SQL), through the official Python 5.x client: a
simple consumer receives only what its selector picks (also behind a backlog it drops, and from
the pop retry topic after an invisible time), a malformed selector is refused naming its
position, and PullMessage filters the same way."""

import grpc
import pytest
from grpc_helpers import FAST, ServerThread, client_config, message, wait_until

from rocketq.grpc_endpoint.protocol import Code, pb, spb, spb_grpc

MD = (("x-mq-client-id", "sql-test"),)


@pytest.fixture
def sql_server(tmp_path):
    s = ServerThread(tmp_path, endpoint_settings=FAST, enable_property_filter=True).start()
    try:
        yield s
    finally:
        s.shutdown()


def _send(server, topic, items):
    from rocketmq import Producer
    p = Producer(client_config(server), (topic,))
    p.startup()
    try:
        return [p.send(message(topic, body, tag=tag, props=props)).message_id for body, tag, props in items]
    finally:
        p.shutdown()


def test_simple_consumer_with_a_selector(sql_server):
    from rocketmq import FilterExpression, SimpleConsumer
    sql_server.create_topic("Orders")
    ids = _send(sql_server, "Orders", [(f"o{i}".encode(), "T" if i % 2 else "U", {"amount": str(i * 10)})
                                       for i in range(40)])
    wanted = {ids[i] for i in range(40) if i % 2 and i * 10 > 200}            # TAGS = 'T' AND amount > 200
    c = SimpleConsumer(client_config(sql_server), "GSql",
                       {"Orders": FilterExpression("TAGS = 'T' AND amount > 200", pb.FilterType.SQL)}, await_duration=2)
    c.startup()
    try:
        got = {}

        def more():
            for m in c.receive(32, 2):                                        # 2 s invisible: comes back
                got.setdefault(m.message_id, []).append(m)
            return set(got) >= wanted
        wait_until(more, 30, "the selected orders")
        assert set(got) == wanted
        assert all(m.tag == "T" and int(m.properties["amount"]) > 200 for ms in got.values() for m in ms)
        # not acked: redelivered from the pop retry topic after the invisible time, still only these
        again: dict[str, int] = {}

        def redelivered():
            for m in c.receive(32, 30):
                again[m.message_id] = m.delivery_attempt
                c.ack(m)
            return set(again) >= wanted
        wait_until(redelivered, 30, "the redeliveries")
        assert set(again) == wanted and all(a >= 2 for a in again.values())
    finally:
        c.shutdown()


def test_a_malformed_selector_is_refused_with_its_position(sql_server):
    sql_server.create_topic("Strict")
    with grpc.insecure_channel(sql_server.access_point) as ch:
        stub = spb_grpc.MessagingServiceStub(ch)
        req = spb.ReceiveMessageRequest(group=pb.Resource(name="GSqlBad"),
                                        message_queue=pb.MessageQueue(topic=pb.Resource(name="Strict"), id=0),
                                        filter_expression=pb.FilterExpression(type=pb.FilterType.SQL,
                                                                              expression="amount > 'x'"),
                                        batch_size=1, auto_renew=True)
        [resp] = list(stub.ReceiveMessage(req, metadata=MD, timeout=10))
        assert resp.status.code == Code.ILLEGAL_FILTER_EXPRESSION and "position 10" in resp.status.message
        pull = spb.PullMessageRequest(group=pb.Resource(name="GSqlBad"),
                                      message_queue=pb.MessageQueue(topic=pb.Resource(name="Strict"), id=0),
                                      offset=0, batch_size=1,
                                      filter_expression=pb.FilterExpression(type=pb.FilterType.SQL, expression="a IN 1"))
        [resp] = list(stub.PullMessage(pull, metadata=MD, timeout=10))
        assert resp.status.code == Code.ILLEGAL_FILTER_EXPRESSION and "position 6" in resp.status.message


def test_pull_message_with_a_selector(sql_server):
    sql_server.create_topic("Pulled", queues=1)
    _send(sql_server, "Pulled", [(f"p{i}".encode(), None, {"n": str(i)}) for i in range(30)])
    with grpc.insecure_channel(sql_server.access_point) as ch:
        stub = spb_grpc.MessagingServiceStub(ch)
        pull = spb.PullMessageRequest(group=pb.Resource(name="GSqlPull"),
                                      message_queue=pb.MessageQueue(topic=pb.Resource(name="Pulled"), id=0),
                                      offset=0, batch_size=32,
                                      filter_expression=pb.FilterExpression(type=pb.FilterType.SQL,
                                                                            expression="n BETWEEN 10 AND 12"))
        out = list(stub.PullMessage(pull, metadata=MD, timeout=10))
        assert out[0].status.code == Code.OK
        assert [r.message.body for r in out if r.WhichOneof("content") == "message"] == [b"p10", b"p11", b"p12"]
        assert out[-1].next_offset == 30


def test_simple_consumer_through_the_bit_map_prefilter(tmp_path):
    """With enableCalcFilterBitMap the subscription the client's settings carry is registered (as
    RocketMQ's proxy heartbeats it), messages sent after it get bit maps, and receive (pop) skips
    the units whose bits say no - delivering exactly the selected messages."""
    from rocketmq import FilterExpression, SimpleConsumer
    server = ServerThread(tmp_path, endpoint_settings=FAST, enable_property_filter=True,
                          store_settings={"enable_consume_queue_ext": True, "enable_calc_filter_bitmap": True}).start()
    expr = "TAGS = 'T' AND amount > 200"
    try:
        server.create_topic("Bits")
        c = SimpleConsumer(client_config(server), "GBits", {"Bits": FilterExpression(expr, pb.FilterType.SQL)},
                           await_duration=2)
        c.startup()
        try:
            bitmaps = server.broker.store.filter_bitmaps
            wait_until(lambda: server.call(lambda: "GBits" in bitmaps._by_topic.get("Bits", {})), 30,
                       "the registration from the client's settings")
            ids = _send(server, "Bits", [(f"o{i}".encode(), "T" if i % 2 else "U", {"amount": str(i * 10)})
                                         for i in range(60)])
            assert server.call(lambda: bitmaps.prefilter("GBits", "Bits", expr)) is not None
            wanted = {ids[i] for i in range(60) if i % 2 and i * 10 > 200}
            got = {}

            def more():
                for m in c.receive(32, 30):
                    got[m.message_id] = m
                    c.ack(m)
                return set(got) >= wanted
            wait_until(more, 30, "the selected messages")
            assert set(got) == wanted
            assert bitmaps.units_skipped > 0                      # the pops did skip units unread
        finally:
            c.shutdown()
    finally:
        server.shutdown()
