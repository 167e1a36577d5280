from grpc_helpers import client_config, message, receive_all


def test_send_and_receive(server):
    from rocketmq import FilterExpression, Producer, SimpleConsumer
    server.create_topic("T1")
    producer = Producer(client_config(server), ("T1",))
    producer.startup()
    try:
        r = producer.send(message("T1", b"hello", keys="k1", props={"a": "b"}))
        assert r.message_id
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(client_config(server), "G1", {"T1": FilterExpression("*")}, await_duration=2)
    consumer.startup()
    try:
        msgs = receive_all(consumer, 1)
        assert msgs[0].body == b"hello" and msgs[0].properties["a"] == "b"
        consumer.ack(msgs[0])
    finally:
        consumer.shutdown()
