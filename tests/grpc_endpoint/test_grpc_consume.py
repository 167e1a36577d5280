"""The official Python 5.x consumers against rocketq: receive, ack, invisible time, retries, DLQ, FIFO."""

import threading

from grpc_helpers import client_config, message, receive_all, wait_until


def _send(server, topic, bodies, **kw):
    from rocketmq import Producer
    p = Producer(client_config(server), (topic,))
    p.startup()
    try:
        return [p.send(message(topic, b, **kw)).message_id for b in bodies]
    finally:
        p.shutdown()


def _consumer(server, group, topic, await_s=1):
    from rocketmq import FilterExpression, SimpleConsumer
    c = SimpleConsumer(client_config(server), group, {topic: FilterExpression("*")}, await_duration=await_s)
    c.startup()
    return c


def test_receive_ack_and_change_invisible_duration(server):
    server.create_topic("Work")
    ids = _send(server, "Work", [b"a", b"b", b"c"])
    c = _consumer(server, "GWork", "Work")
    try:
        got = {m.body: m for m in receive_all(c, 3, invisible_s=30)}
        assert {m.message_id for m in got.values()} == set(ids)
        assert all(m.delivery_attempt == 1 for m in got.values())
        c.ack(got[b"a"])
        c.change_invisible_duration(got[b"b"], 1)     # give it back soon
        c.ack(got[b"c"])
        again = receive_all(c, 1, invisible_s=30)
        assert [m.body for m in again] == [b"b"] and again[0].delivery_attempt == 2
        c.ack(again[0])
        assert c.receive(16, 30) == []
    finally:
        c.shutdown()
    committed = server.call(lambda: [server.broker.offsets.query("GWork", "Work", q) for q in range(4)])
    assert sum(committed) == 3                        # every queue's offset moved past what was acked


def test_unacked_message_comes_back_then_goes_to_the_dlq(server):
    server.create_topic("Flaky")
    server.set_group("GFlaky", retry_max_times=1)       # two delivery attempts, then the DLQ
    [mid] = _send(server, "Flaky", [b"poison"], keys="p-1")
    c = _consumer(server, "GFlaky", "Flaky")
    try:
        first = receive_all(c, 1, invisible_s=1)
        assert first[0].message_id == mid and first[0].delivery_attempt == 1
        second = receive_all(c, 1, invisible_s=1)       # not acked: back after its invisible time
        assert second[0].message_id == mid and second[0].delivery_attempt == 2
        assert second[0].body == b"poison" and second[0].keys == {"p-1"} and second[0].topic == "Flaky"
    finally:
        c.shutdown()
    dlq = wait_until(lambda: server.call(lambda: server.broker.store.query_by_key("%DLQ%GFlaky", mid)),
                     what="the message in the DLQ")
    assert dlq[0].properties["DLQ_ORIGIN_TOPIC"] == "Flaky" and dlq[0].body == b"poison"


def test_fifo_group_hands_out_the_next_message_only_after_the_previous_is_done(server):
    server.create_topic("Ordered")
    server.set_group("GOrdered", consume_message_orderly=True)
    _send(server, "Ordered", [b"1", b"2", b"3"], group="orders-7")
    c = _consumer(server, "GOrdered", "Ordered")
    try:
        one = receive_all(c, 1, invisible_s=30, batch=1)
        assert [m.body for m in one] == [b"1"]
        assert c.receive(1, 30) == []                   # blocked until 1 is acked
        c.ack(one[0])
        two = receive_all(c, 1, invisible_s=1, batch=1)
        assert [m.body for m in two] == [b"2"]
        two_again = receive_all(c, 1, invisible_s=30, batch=1)    # not acked in time: 2 again, not 3
        assert [m.body for m in two_again] == [b"2"] and two_again[0].delivery_attempt == 2
        c.ack(two_again[0])
        three = receive_all(c, 1, invisible_s=30, batch=1)
        assert [m.body for m in three] == [b"3"]
        c.ack(three[0])
    finally:
        c.shutdown()


def test_push_consumer_retries_a_failing_listener_until_it_succeeds(server):
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer
    server.create_topic("Pushed")
    seen: list[tuple[bytes, int]] = []
    done = threading.Event()

    class FailOnce(MessageListener):
        def consume(self, msg):
            seen.append((msg.body, msg.delivery_attempt))
            if msg.delivery_attempt < 2:
                return ConsumeResult.FAILURE
            done.set()
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(client_config(server), "GPushed", FailOnce(), {"Pushed": FilterExpression("*")})
    consumer.startup()
    try:
        _send(server, "Pushed", [b"job"])
        assert done.wait(30), f"listener saw {seen}"
    finally:
        consumer.shutdown()
    assert seen[:2] == [(b"job", 1), (b"job", 2)]


def test_push_consumer_slow_listener_keeps_its_message_invisible(tmp_path):
    import dataclasses

    from grpc_helpers import FAST, ServerThread
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer
    server = ServerThread(tmp_path, endpoint_settings=dataclasses.replace(FAST, default_invisible_ms=1500)).start()
    try:
        server.create_topic("Slow")
        seen: list[int] = []
        done = threading.Event()

        class Slow(MessageListener):
            def consume(self, msg):
                seen.append(msg.delivery_attempt)
                done.wait(4)                          # far longer than the 1.5 s invisible time
                return ConsumeResult.SUCCESS

        consumer = PushConsumer(client_config(server), "GSlow", Slow(), {"Slow": FilterExpression("*")})
        consumer.startup()
        try:
            _send(server, "Slow", [b"long-job"])
            wait_until(lambda: seen, what="the delivery")
            # the 1.5 s invisible time is renewed more than once while the listener works
            wait_until(lambda: server.call(lambda: server.endpoint.popper.renewals) >= 2, what="renewals")
            done.set()
            wait_until(lambda: server.call(lambda: not any(q.inflight for q in
                                                           server.endpoint.pop_state.queues.values())), what="the ack")
        finally:
            consumer.shutdown()
        assert seen == [1]                            # never handed out a second time while being consumed
    finally:
        server.shutdown()


def test_second_ack_of_a_handle_is_ok_until_the_handle_expires(server):
    """As RocketMQ: the broker takes a repeated ack as done (it writes another ack record) and the
    proxy refuses only an expired receipt handle (INVALID_RECEIPT_HANDLE)."""
    import pytest
    from rocketmq.v5.exception import BadRequestException
    server.create_topic("Twice")
    _send(server, "Twice", [b"one", b"two"])
    c = _consumer(server, "GTwice", "Twice")
    try:
        got = {m.body: m for m in receive_all(c, 2, invisible_s=30)}
        c.ack(got[b"one"])
        c.ack(got[b"one"])                               # the same handle again: fine
        assert c.receive(16, 30) == []                   # and nothing came back
        c.change_invisible_duration(got[b"two"], 1)      # the client's handle is replaced by one due in 1 s
        late = receive_all(c, 1, invisible_s=30)         # redelivered after that second
        assert [m.body for m in late] == [b"two"]
        with pytest.raises(BadRequestException, match="expired"):
            c.ack(got[b"two"])                           # the replaced handle has expired by now
        c.ack(late[0])
    finally:
        c.shutdown()
