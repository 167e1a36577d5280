"""Tag-filtered receives over a backlog of other tags (issue 21): a receive reads on past what the
filter drops until it has messages or its long-polling time is over."""

import time

from grpc_helpers import client_config, message, receive_all, wait_until

from rocketq.common.message import Message

BACKLOG_PER_QUEUE = 10_000          # 40,000 messages of another tag over 4 queues
STORE_BATCH = 1_000


def _backlog(server, topic: str, queues: int) -> None:
    """Other tags, straight into the broker's store on its loop (only the consuming is under test)."""
    def put():
        store = server.broker.store
        for q in range(queues):
            for start in range(0, BACKLOG_PER_QUEUE, STORE_BATCH):
                batch = [Message(topic, b"x", queue_id=q, tags="Other") for _ in range(STORE_BATCH)]
                assert store.put_messages(batch).ok
    server.call(put, timeout_s=120)


def test_filtered_consumer_gets_the_few_wanted_messages_behind_a_big_backlog(server):
    from rocketmq import FilterExpression, Producer, SimpleConsumer
    server.create_topic("Mixed")
    _backlog(server, "Mixed", 4)
    p = Producer(client_config(server), ("Mixed",))
    p.startup()
    try:
        wanted = {p.send(message("Mixed", f"w{i}".encode(), tag="Wanted")).message_id for i in range(5)}
    finally:
        p.shutdown()
    # the store files the backlog into its consume queues behind the sends: wait for all of it
    total = 4 * BACKLOG_PER_QUEUE + len(wanted)
    wait_until(lambda: sum(server.call(lambda: [server.broker.store.max_offset("Mixed", q) for q in range(4)]))
               == total, timeout_s=60, what="the backlog in the consume queues")
    c = SimpleConsumer(client_config(server), "GWanted", {"Mixed": FilterExpression("Wanted")}, await_duration=5)
    c.startup()
    try:
        calls, got = 0, []
        started = time.monotonic()
        while len(got) < 5 and calls < 2:
            calls += 1
            got += c.receive(32, 30)
        took = time.monotonic() - started
        assert {m.message_id for m in got} == wanted, f"{len(got)} of 5 in {calls} receive calls ({took:.1f} s)"
        assert all(m.tag == "Wanted" for m in got)
        for m in got:
            c.ack(m)
        assert c.receive(32, 30) == []
    finally:
        c.shutdown()

    def offsets():
        return [server.broker.offsets.query("GWanted", "Mixed", q) for q in range(4)]
    committed = server.call(offsets)
    ends = server.call(lambda: [server.broker.store.max_offset("Mixed", q) for q in range(4)])
    assert committed == ends                 # the group's offset moved past everything filtered out


def test_filtered_receive_stops_at_the_batch_and_takes_the_rest_next_time(server):
    """A read that matched more than the batch leaves the surplus for the next receive: the pop
    offset moves to just past what was handed out, not past everything the read looked at."""
    from rocketmq import FilterExpression, Producer, SimpleConsumer
    server.create_topic("Dense", queues=1)
    p = Producer(client_config(server), ("Dense",))
    p.startup()
    try:
        ids = [p.send(message("Dense", f"{i}".encode(), tag="A" if i % 2 else "B")).message_id for i in range(40)]
    finally:
        p.shutdown()
    c = SimpleConsumer(client_config(server), "GDense", {"Dense": FilterExpression("A")}, await_duration=1)
    c.startup()
    try:
        first = c.receive(3, 30)
        assert [m.body for m in first] == [b"1", b"3", b"5"]
        rest = receive_all(c, 17, invisible_s=30, batch=32)
        assert [m.message_id for m in first + rest] == ids[1::2]
        for m in first + rest:
            c.ack(m)
    finally:
        c.shutdown()
