"""A broker restart keeps what the gRPC endpoint promised: messages in flight and scheduled ones."""

import time

from grpc_helpers import client_config, message, receive_all, wait_until


def _producer(server, topic):
    from rocketmq import Producer
    p = Producer(client_config(server), (topic,))
    p.startup()
    return p


def _consumer(server, group, topic):
    from rocketmq import FilterExpression, SimpleConsumer
    c = SimpleConsumer(client_config(server), group, {topic: FilterExpression("*")}, await_duration=1)
    c.startup()
    return c


def test_invisible_messages_survive_a_restart(server):
    server.create_topic("Durable")
    p = _producer(server, "Durable")
    try:
        ids = [p.send(message("Durable", b)).message_id for b in (b"acked", b"pending")]
    finally:
        p.shutdown()
    c = _consumer(server, "GDurable", "Durable")
    try:
        got = {m.body: m for m in receive_all(c, 2, invisible_s=3)}
        c.ack(got[b"acked"])
    finally:
        c.shutdown()
    server.stop()
    server.start()
    in_flight = server.call(lambda: {(k.topic, e.attempt) for k, q in server.endpoint.pop_state.queues.items()
                                     for e in q.inflight.values()})
    assert in_flight in ({("Durable", 1)}, set())       # set(): the restart outlasted the invisible time
    c = _consumer(server, "GDurable", "Durable")
    try:
        back = receive_all(c, 1, invisible_s=30)
        assert [(m.body, m.message_id, m.delivery_attempt) for m in back] == [(b"pending", ids[1], 2)]
        c.ack(back[0])
        assert c.receive(16, 30) == []                  # the acked one never comes back
    finally:
        c.shutdown()


def test_scheduled_message_is_delivered_after_a_restart(server):
    server.create_topic("Timed")
    p = _producer(server, "Timed")
    try:
        due_s = int(time.time()) + 3
        mid = p.send(message("Timed", b"tick", deliver_at_s=due_s)).message_id
    finally:
        p.shutdown()
    server.stop()
    server.start()
    c = _consumer(server, "GTimed", "Timed")
    try:
        got = receive_all(c, 1, invisible_s=30)
        assert [(m.body, m.message_id) for m in got] == [(b"tick", mid)]
        assert time.time() >= due_s
        c.ack(got[0])
        assert c.receive(16, 30) == []                  # delivered once
    finally:
        c.shutdown()
    wait_until(lambda: not [p for p in (server.tmp_path / "timer").iterdir() if p.name.isdigit()],
               what="the delivered bucket file to be removed")
