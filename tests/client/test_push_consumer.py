"""PushConsumer end to end: cluster and broadcast models, retries, orderly, restart and resume."""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402
from waiting import until  # noqa: E402

from rocketq.client import ConsumeFrom, ConsumeResult, Message, MessageModel, Producer  # noqa: E402
from rocketq.client.push_consumer import PushConsumer  # noqa: E402


def test_consume_retry_commit_and_resume(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            for i in range(20):
                await p.send(Message("Orders", f"m{i}".encode(), tags="A" if i % 2 else "B", keys=[f"k{i}"]))
            got, failed_once = [], set()

            def listener(msgs):
                m = msgs[0]
                if m.body == b"m3" and m.reconsume_times == 0:
                    failed_once.add(m.body)
                    return ConsumeResult.RECONSUME_LATER
                got.append((m.body, m.reconsume_times, m.topic))
                return ConsumeResult.CONSUME_SUCCESS

            consumer = PushConsumer("GID_ORDERS", c.addr, listener=listener)
            consumer.subscribe("Orders", "A || B")
            await consumer.start()
            await until(lambda: len(got) == 20, 30, "20 messages incl. one retried")
            assert (b"m3", 1, "Orders") in got                     # back from %RETRY%, topic restored
            await consumer.shutdown()                               # commits offsets
            broker = c.brokers[0]
            assert sum(broker.offsets.query("GID_ORDERS", "Orders", q) for q in range(4)) == 20
            for i in range(20, 25):
                await p.send(Message("Orders", f"m{i}".encode(), tags="A"))
            again = []
            consumer2 = PushConsumer("GID_ORDERS", c.addr, listener=lambda msgs: again.append(msgs[0].body))
            consumer2.subscribe("Orders", "*")
            await consumer2.start()
            await until(lambda: len(again) >= 5, 30, "the 5 new messages")
            await asyncio.sleep(0.3)
            assert sorted(again) == sorted(f"m{i}".encode() for i in range(20, 25))
            await consumer2.shutdown()
    asyncio.run(main())


def test_two_consumers_split_the_queues_and_tags_filter(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            await p.send(Message("Split", b"warm", tags="X"))
            seen = {1: [], 2: []}
            a = PushConsumer("GID_SPLIT", c.addr, listener=lambda msgs: seen[1].extend(msgs))
            b = PushConsumer("GID_SPLIT", c.addr, listener=lambda msgs: seen[2].extend(msgs))
            for x in (a, b):
                x.subscribe("Split", "X")
                await x.start()
            await until(lambda: {q.topic for q in a.assigned} and {q.topic for q in b.assigned} and
                        not set(a.assigned) & set(b.assigned) and
                        len([q for q in a.assigned if q.topic == "Split"]) == 2 and
                        len([q for q in b.assigned if q.topic == "Split"]) == 2, 30, "an even split")
            for i in range(40):
                await p.send(Message("Split", f"s{i}".encode(), tags="X" if i % 4 else "Y"))
            await until(lambda: len(seen[1]) + len(seen[2]) == 31, 30, "30 X messages + warm-up")
            assert seen[1] and seen[2] and all(m.tags == "X" for m in seen[1] + seen[2])
            await a.shutdown()
            await b.shutdown()
    asyncio.run(main())


def test_broadcast_gives_every_consumer_every_message(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            await p.send(Message("Bcast", b"first"))
            seen = {1: [], 2: []}
            consumers = []
            for n in (1, 2):
                x = PushConsumer("GID_B", c.addr, listener=lambda msgs, n=n: seen[n].extend(m.body for m in msgs),
                                 model=MessageModel.BROADCASTING, consume_from=ConsumeFrom.FIRST,
                                 offsets_dir=tmp_path / f"offsets-{n}")
                x.subscribe("Bcast")
                await x.start()
                consumers.append(x)
            for i in range(9):
                await p.send(Message("Bcast", f"b{i}".encode()))
            await until(lambda: len(seen[1]) == 10 and len(seen[2]) == 10, 30, "10 each")
            for x in consumers:
                await x.shutdown()
            assert list((tmp_path / "offsets-1").rglob("GID_B.json"))
    asyncio.run(main())


def test_orderly_consumer_keeps_queue_order_through_a_failure(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            for i in range(30):
                await p.send(Message("Seq", f"{i % 3}:{i}".encode()), sharding_key=f"order-{i % 3}")
            got: dict[str, list[int]] = {}
            failed = []

            def listener(msgs):
                key, n = msgs[0].body.decode().split(":")
                if n == "7" and not failed:
                    failed.append(n)
                    return ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
                got.setdefault(key, []).append(int(n))
                return ConsumeResult.CONSUME_SUCCESS

            consumer = PushConsumer("GID_SEQ", c.addr, listener=listener, orderly=True)
            consumer.subscribe("Seq")
            await consumer.start()
            await until(lambda: sum(len(v) for v in got.values()) == 30, 30, "30 in order")
            for key, ns in got.items():
                assert ns == sorted(ns), (key, ns)
            assert failed == ["7"]
            await consumer.shutdown()
    asyncio.run(main())


def test_a_consumer_started_before_its_topic_exists_reads_it_soon_after(tmp_path):
    """The topic has no route when the consumer starts; it looks again after 1 s, 2 s ... instead of
    waiting a whole rebalance interval (20 s), so the first messages arrive within seconds."""
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            got = []
            consumer = PushConsumer("GID_LATE", c.addr, listener=lambda msgs: got.extend(m.body for m in msgs),
                                    consume_from=ConsumeFrom.FIRST)
            consumer.subscribe("Late", "*")
            await consumer.start()
            await asyncio.sleep(0.2)
            for i in range(10):                      # creates the topic (autoCreateTopicEnable)
                await p.send(Message("Late", f"l{i}".encode()))
            await until(lambda: len(got) == 10, 8, "the 10 messages of a topic made after the consumer started")
            assert sorted(got) == sorted(f"l{i}".encode() for i in range(10))
            await consumer.shutdown()
    asyncio.run(main())


def test_an_orderly_lock_renewal_racing_a_rebalance_leaves_the_given_up_queue_free(tmp_path):
    """The renewal locks a snapshot of the held queues; a queue rebalancing removes (and unlocks) while the
    renewal is on the wire must not stay locked for the member it went to (which would wait out the
    broker's 60 s lease). The renewal is held on the wire by a gate around the real call."""
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            await p.send(Message("Race", b"x"))                       # the topic, 4 queues
            consumer = PushConsumer("GID_RACE", c.addr, listener=lambda msgs: None, orderly=True,
                                    consume_from=ConsumeFrom.FIRST)
            consumer.subscribe("Race")
            await consumer.start()
            await until(lambda: len(consumer._queues) == 5 and all(pq.locked for pq, _ in consumer._queues.values()),
                        10, "the topic's 4 queues and the retry queue locked")
            api, on_wire, go = consumer.instance.api, asyncio.Event(), asyncio.Event()
            real_lock = api.lock_batch

            async def gated_lock(*args):
                on_wire.set()
                await go.wait()
                return await real_lock(*args)

            api.lock_batch = gated_lock
            renewal = asyncio.create_task(consumer._lock_all())
            await on_wire.wait()
            # a real rebalance meanwhile (a late membership notice, the 20 s timer on a loaded machine) would
            # rightly give the queue back to this, the group's only member: hold them off, as one rebalance does
            async with consumer._rebalance_lock:
                given_up = next(mq for mq in consumer._queues if mq.topic == "Race")
                await consumer._queue_removed(given_up)               # rebalancing gave it away: unlocked
                go.set()
                await renewal
                api.lock_batch = real_lock
                addr = await consumer.broker_addr(given_up)
                assert await api.lock_batch(addr, "GID_RACE", "the-new-holder", [given_up]) == {given_up}
            await consumer.shutdown()
    asyncio.run(main())
