"""Two controllers can never both change a broker set: every write is a compare-and-swap on etcd that
holds only while the writer's leader entry exists and the set is as the writer last saw it.  Real etcd
(one member), two EtcdController cores in this process, and a lease revoked to play the active
controller's death while it still believes it is active."""

import asyncio
import json

import pytest

from rocketq.controller.etcd import EtcdClient, compare, put_op
from rocketq.controller.state import EtcdController, NotLeader, after_check, set_key
from rocketq.namesrv.controller import BrokerSet

PREFIX = "/t/"
TIMEOUT_MS = 1000


async def _campaign(client: EtcdClient) -> tuple[int, int]:
    """(lease, leader create_revision) - the leader entry, as Leadership makes it."""
    lease, _ = await client.lease_grant(5)
    ok, answer = await client.txn([compare(f"{PREFIX}leader", "CREATE", 0)],
                                  [put_op(f"{PREFIX}leader", json.dumps({"addr": "x"}), lease)])
    assert ok
    return lease, int(answer["header"]["revision"])


def _beat(core: EtcdController, s: BrokerSet, bid: int, epoch: int, now_ms: int, **extra) -> None:
    old_master, old_epoch = s.master_id, s.epoch
    core.heartbeat({"cluster": "C", "brokerName": "b", "brokerId": bid, "addr": f"h:{bid}", "haAddr": f"h:{bid}",
                    "epoch": epoch, "maxPhyOffset": 100, **extra}, now_ms)
    after_check(s, old_master, old_epoch, now_ms, TIMEOUT_MS)


async def _stored(client) -> dict:
    kv = await client.get(set_key(PREFIX, "C", "b"))
    return json.loads(kv.value)


def test_a_controller_that_lost_its_lease_cannot_elect(etcd1):
    async def scenario():
        a_client, b_client = EtcdClient(etcd1.endpoints), EtcdClient(etcd1.endpoints)
        try:
            a_lease, a_rev = await _campaign(a_client)
            a = EtcdController(a_client, PREFIX, master_timeout_ms=TIMEOUT_MS)
            await a.load_all(0, a_rev)
            s = a.sets[("C", "b")] = BrokerSet("C", "b", sync_state_set=set())
            _beat(a, s, 1, 0, 1_000)                  # the first broker: master of epoch 1
            await a.persist(s, 0.0, 1_000)
            _beat(a, s, 1, 1, 1_100, startOffset=0)   # it confirms
            await a.persist(s, 0.0, 1_100)
            _beat(a, s, 2, 1, 1_500)                  # a slave, in sync while broker 1 is alive
            await a.persist(s, 0.0, 1_500)
            stored = await _stored(a_client)
            assert (stored["masterId"], stored["history"], stored["syncStateSet"]) == (1, [[1, 0]], [1, 2]), stored

            await a_client.lease_revoke(a_lease)       # A "dies" (its lease expires) but runs on
            b_lease, b_rev = await _campaign(b_client)
            b = EtcdController(b_client, PREFIX, master_timeout_ms=TIMEOUT_MS)
            await b.load_all(2_000, b_rev)
            assert b.sets[("C", "b")].master_id == 1 and b.sets[("C", "b")].epoch == 1

            # A believes broker 1 is silent and elects broker 2: its write must fail
            _beat(a, s, 2, 1, 4_800)
            a.check(s, 5_000)
            assert s.master_id == 2 and s.epoch == 2     # in A's memory only
            with pytest.raises(NotLeader):
                await a.persist(s, 1.0, 5_000)
            stored = await _stored(a_client)
            assert (stored["masterId"], stored["epoch"]) == (1, 1), stored
            assert a.sets[("C", "b")].epoch == 1          # A reloaded what etcd holds

            # B, the leader now, writes; a write from a stale copy of the set (old mod revision) fails too
            sb = b.sets[("C", "b")]
            sb.sync_state_set_epoch += 1
            await b.persist(sb, 1.0, 2_100)
            b.revs[("C", "b")] -= 1                      # as if B had missed its own last write
            sb.sync_state_set_epoch += 1
            with pytest.raises(NotLeader):
                await b.persist(sb, 2.0, 2_200)
        finally:
            await a_client.close()
            await b_client.close()
    asyncio.run(scenario())
