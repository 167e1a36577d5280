"""Which controller process is active: the leader key under a lease, watched by the standbys (real etcd,
one member; two Leadership instances in this process)."""

import asyncio
import time

from rocketq.controller.etcd import EtcdClient, compare, put_op
from rocketq.controller.leadership import Leadership

TTL_S = 2


async def _until(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def _member(endpoints, prefix, addr, events):
    async def elected(rev):
        events.append((addr, "elected", rev))

    async def lost():
        events.append((addr, "lost"))
    return Leadership(EtcdClient(endpoints), prefix, addr, ttl_s=TTL_S, on_elected=elected, on_lost=lost)


def test_a_standby_takes_over_when_the_active_ones_lease_ends(etcd1):
    async def scenario():
        events = []
        a = _member(etcd1.endpoints, "/lead1/", "a:1", events)
        b = _member(etcd1.endpoints, "/lead1/", "b:1", events)
        ta = asyncio.create_task(a.run())
        await _until(a.is_active)
        tb = asyncio.create_task(b.run())
        await _until(lambda: b.leader_address == "a:1")
        assert not b.is_active() and sorted(await b.peers()) == ["a:1", "b:1"]
        # a dies: its keep-alives stop and etcd expires its lease; b's watch on the leader key wakes it
        ta.cancel()
        await asyncio.gather(ta, return_exceptions=True)
        t = time.monotonic()
        await _until(b.is_active, 3 * TTL_S)
        assert time.monotonic() - t <= TTL_S + 1.5, "the standby waited longer than the lease"
        assert [e[:2] for e in events] == [("a:1", "elected"), ("b:1", "elected")]
        assert events[1][2] > events[0][2]              # a newer leader entry: the token of b's writes
        await b.resign()                                # at shutdown the key goes at once
        tb.cancel()
        await asyncio.gather(tb, return_exceptions=True)
        assert await b.etcd.get("/lead1/leader") is None
        await a.etcd.close()
        await b.etcd.close()
    asyncio.run(scenario())


def test_a_campaign_retried_after_a_lost_answer_finds_its_own_entry(etcd1):
    """etcd applied the campaign but its answer was lost (the client retries on another member): the
    retry fails its compare, and the process must see that the entry is its own, not wait for it."""
    async def scenario():
        events = []
        a = _member(etcd1.endpoints, "/lead2/", "a:2", events)
        lease, _ = await a.etcd.lease_grant(TTL_S)
        await a.etcd.txn([compare("/lead2/leader", "CREATE", 0)], [put_op("/lead2/leader", '{"addr": "a:2"}', lease)])
        original = a.etcd.lease_grant

        async def same_lease(ttl):
            return lease, ttl
        a.etcd.lease_grant = same_lease                   # the run starts with the lease of that first campaign
        task = asyncio.create_task(a.run())
        await _until(a.is_active, 5)
        a.etcd.lease_grant = original
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await a.resign()
        await a.etcd.close()
    asyncio.run(scenario())
