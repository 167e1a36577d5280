"""LitePullConsumer, TransactionProducer, Admin, delay levels, the sync wrapper, and a broker restart."""

import asyncio
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402
from waiting import until  # noqa: E402

from rocketq.client import (  # noqa: E402
    Admin,
    ConsumeFrom,
    LitePullConsumer,
    Message,
    MessageQueue,
    MQClientError,
    Producer,
    TransactionProducer,
    TransactionState,
)


async def poll_until(consumer, n, timeout_s=30.0):
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        out += await consumer.poll(0.5)
    return out


def test_lite_pull_subscribe_seek_commit_and_assign(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            for i in range(12):
                await p.send(Message("Lite", f"l{i}".encode()), queue=MessageQueue("Lite", "broker-a", i % 2)
                             if i else None)
            consumer = LitePullConsumer("GID_LITE", c.addr, consume_from=ConsumeFrom.FIRST)
            consumer.subscribe("Lite")
            await consumer.start()
            got = await poll_until(consumer, 12)
            assert sorted(m.body for m in got) == sorted(f"l{i}".encode() for i in range(12))
            q0 = MessageQueue("Lite", "broker-a", 0)
            await consumer.seek(q0, 0)
            again = await poll_until(consumer, 1)
            assert again and all(m.queue_id == 0 for m in again)
            await consumer.commit()
            await consumer.shutdown()
            manual = LitePullConsumer("GID_MANUAL", c.addr, consume_from=ConsumeFrom.FIRST)
            await manual.assign([MessageQueue("Lite", "broker-a", 1)])
            await manual.start()
            only_q1 = await poll_until(manual, 1)
            assert only_q1 and {m.queue_id for m in only_q1} == {1}
            await manual.shutdown()
    asyncio.run(main())


def test_transactions_commit_rollback_and_check_back(tmp_path):
    async def main():
        async with cluster(tmp_path, transaction_timeout_s=0.2, transaction_check_interval_s=0.2) as c:
            checked = []

            def execute(msg, arg):
                return arg

            def check(msg):       # the local transaction's outcome, as a real checker would look it up
                checked.append(msg.uniq_key)
                return TransactionState.ROLLBACK if msg.body == b"roll-me-back" else TransactionState.COMMIT

            async with TransactionProducer("TPG", c.addr, execute=execute, check=check) as tp:
                r1, s1 = await tp.send_in_transaction(Message("Tx", b"commit-me"), TransactionState.COMMIT)
                await tp.send_in_transaction(Message("Tx", b"roll-me-back"), TransactionState.ROLLBACK)
                r3, _ = await tp.send_in_transaction(Message("Tx", b"ask-me-later"), TransactionState.UNKNOWN)
                consumer = LitePullConsumer("GID_TX", c.addr, consume_from=ConsumeFrom.FIRST)
                consumer.subscribe("Tx")
                await consumer.start()
                got = await poll_until(consumer, 2)
                assert sorted(m.body for m in got) == [b"ask-me-later", b"commit-me"]
                assert r3.msg_id in checked
                await consumer.shutdown()
    asyncio.run(main())


def test_admin_topics_lag_queries_and_delay_level(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p, Admin(c.addr) as admin:
            assert await admin.create_topic("Adm", queues=2) == [c.brokers[0].address]
            await until(lambda: True)
            route = await admin.route("Adm")
            assert len(route.write_queues()) == 2
            sent = [await p.send(Message("Adm", f"a{i}".encode(), keys=[f"key-{i}"])) for i in range(6)]
            await asyncio.to_thread(c.brokers[0].store.wait_dispatched)
            found = await admin.query_by_key("Adm", "key-3")
            assert [m.body for m in found] == [b"a3"]
            by_offset_id = await admin.view_by_id(sent[2].offset_msg_id)
            by_uniq = await admin.view_by_id(sent[2].msg_id, topic="Adm")
            assert by_offset_id.body == by_uniq.body == b"a2"
            consumer = LitePullConsumer("GID_ADM", c.addr, consume_from=ConsumeFrom.FIRST, auto_commit=False)
            consumer.subscribe("Adm")
            await consumer.start()
            await poll_until(consumer, 6)
            await consumer.commit()
            lag = await admin.consumer_lag("GID_ADM", "Adm")
            assert sum(q.lag for q in lag) == 0 and sum(q.broker_offset for q in lag) == 6
            await consumer.shutdown()
            assert "Adm" in await admin.topics()
            assert [b.broker_name for b in await admin.brokers()] == ["broker-a"]
            t0 = time.time()
            await p.send(Message("Later", b"delayed", delay_level=1))
            late = LitePullConsumer("GID_LATE", c.addr, consume_from=ConsumeFrom.FIRST)
            late.subscribe("Later")
            await late.start()
            got = await poll_until(late, 1)
            assert [m.body for m in got] == [b"delayed"] and time.time() - t0 >= 0.9
            await late.shutdown()
            await admin.delete_topic("Adm")
            with pytest.raises(MQClientError):
                await admin.route("Adm")
    asyncio.run(main())


def test_sync_wrapper(tmp_path):
    from rocketq.client import sync

    async def start():
        return await cluster(tmp_path).__aenter__()
    c_cm = cluster(tmp_path)
    c = sync.run(c_cm.__aenter__())
    try:
        with sync.Producer("PG", c.addr) as p:
            r = p.send(Message("SyncT", b"hi"))
            assert r.queue_offset == 0
        with sync.LitePullConsumer("GID_SYNC", c.addr, consume_from=ConsumeFrom.FIRST) as consumer:
            consumer.subscribe("SyncT")
            consumer.start()
            got = []
            deadline = time.monotonic() + 30
            while not got and time.monotonic() < deadline:
                got = consumer.poll(0.5)
            assert [m.body for m in got] == [b"hi"]
    finally:
        sync.run(c_cm.__aexit__(None, None, None))


def test_broker_restart_while_producing_and_consuming(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr, timeout_s=2) as p:
            await p.send(Message("Restart", b"first"))
            consumer = LitePullConsumer("GID_R", c.addr, consume_from=ConsumeFrom.FIRST)
            consumer.subscribe("Restart")
            await consumer.start()
            got = await poll_until(consumer, 1)
            acked = [b"first"]
            port = await c.stop_broker(0)
            with pytest.raises(MQClientError):
                await p.send(Message("Restart", b"while-down"))
            await c.start_broker(0, port=port)
            for i in range(5):
                r = None
                for _ in range(50):
                    try:
                        r = await p.send(Message("Restart", f"after-{i}".encode()))
                        break
                    except MQClientError:
                        await asyncio.sleep(0.1)
                assert r is not None
                acked.append(f"after-{i}".encode())
            got += await poll_until(consumer, 5, 40)
            bodies = [m.body for m in got]
            assert set(bodies) >= set(acked)                  # nothing acknowledged is lost
            await consumer.shutdown()
    asyncio.run(main())
