"""A topic created moments before its master dies (so the slaves' 10 s topic-config copy has not run
since) must not vanish with the master: the message acknowledged on it is in the new master's log, so
the new master routes the topic and serves that message.  Real processes on loopback: one etcd member,
one controller, a NameServer, a master and a slave (SYNC_MASTER)."""

import asyncio
import random

import pytest
from runs import all_in_sync

from rocketq.client import ConsumeFrom, LitePullConsumer, Message, Producer
from rocketq.controller.local_cluster import LocalControlledCluster, call, until
from rocketq.remoting import RequestCode

pytestmark = pytest.mark.timeout(120)


async def _has_topic(addr: str, topic: str) -> bool:
    import json
    r = await call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    return topic in json.loads(r.body).get("topicConfigTable", {})


async def _fresh_topic_acked(cluster, rng) -> tuple[str, int]:
    """Send to a new topic; (topic, queue id) once acknowledged and still unknown to the slave's config
    (a second try if the slave's periodic copy came in between)."""
    async with Producer("fresh_pg", cluster.namesrv, retries=2, timeout_s=3) as p:
        for _ in range(2):
            topic = f"Fresh{rng.randrange(1 << 30)}"
            r = await p.send(Message(topic, b"acked before the kill"))
            if not await _has_topic(cluster.broker_addrs[2], topic):
                return topic, r.queue.queue_id
    raise AssertionError("the slave copied the topic config both times: the run proves nothing")


def test_a_topic_created_just_before_the_masters_death_is_served_by_the_new_master(tmp_path):
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    cluster = LocalControlledCluster(tmp_path, brokers=2, controllers=1, etcd_members=1)
    cluster.start()

    async def scenario():
        await until("both brokers in sync", lambda: all_in_sync(cluster, 2), 30)
        topic, queue_id = await _fresh_topic_acked(cluster, random.Random(seed))
        cluster.kill_broker(1)

        async def new_master():
            info = await cluster.replica_info()
            return info if info and info["masterId"] == 2 and not info["pending"] else None
        await until("broker 2 confirmed master", new_master, 20)
        assert await _has_topic(cluster.broker_addrs[2], topic)
        assert await until(f"{topic} routed to the new master", lambda: _routed(cluster, topic), 20) \
            == cluster.broker_addrs[2]
        consumer = LitePullConsumer("fresh_cg", cluster.namesrv, consume_from=ConsumeFrom.FIRST)
        consumer.subscribe(topic)
        await consumer.start()
        try:
            got = []

            async def read():
                got.extend(await consumer.poll(0.3))
                return got
            await until(f"the message of {topic} read", read, 20)
            assert [(m.body, m.queue_id, m.queue_offset) for m in got] == [(b"acked before the kill", queue_id, 0)]
        finally:
            await consumer.shutdown()
    try:
        asyncio.run(scenario())
    finally:
        codes = cluster.stop()
    assert all(c == 0 for c in codes.values()), codes


async def _routed(cluster, topic):
    return await cluster.master_routed(topic)
