"""A master cut off from the controllers (a blackhole route to them inside the network namespace the
test made for it; clients, the NameServer and its slaves still reach it) stops taking sends once its
lease lapsed and leaves the routes; the controller elects an in-sync slave; producers and the consumer
carry on there; when the network heals the old master learns it was replaced, stays fenced and still
refuses sends.  The run checker finds every acknowledged message consumed."""

import asyncio
import itertools
import time
from datetime import datetime

import pytest
from checker import Place
from netns import NetNs, netns_missing
from runs import TOPIC, drain, ledger_load, prepared, start

from rocketq.client import Message, MQClientError
from rocketq.client.api import MQClientAPI
from rocketq.client.model import MessageQueue
from rocketq.common import fastjson
from rocketq.controller.local_cluster import LocalControlledCluster, call, until
from rocketq.remoting import RequestCode

pytestmark = pytest.mark.timeout(180)

FENCE_TARGET_S = 5.0            # lease (80 % of the 1.5 s master timeout) + a heartbeat + a send timeout
WITHDRAW_TARGET_S = 1.7         # the lease (<= 1.2 s after the cut) + slack; a failing heartbeat ends ~2 s after
ROUTE_SETTLE_S = 5.0            # a confirmed master's registration reaching the NameServer


_direct = itertools.count()


async def _refuses(ledger, addr: str, name: str) -> str | None:
    """The error a direct send to *addr* gets (None when it is accepted)."""
    api = MQClientAPI(timeout_s=2)
    key = f"direct-{next(_direct)}"
    ledger.attempt(key, key.encode())
    try:
        r = await api.send(addr, MessageQueue(TOPIC, name, 0), Message(TOPIC, key.encode()), "direct_pg")
        ledger.acked(key, Place(TOPIC, name, r.queue.queue_id, r.queue_offset))
        return None
    except (TimeoutError, MQClientError, OSError) as exc:
        return str(exc) or type(exc).__name__
    finally:
        await api.close()


def test_master_partitioned_from_the_controllers_is_fenced(tmp_path):
    why = netns_missing()
    if why:
        pytest.skip(why)
    with NetNs() as net:
        cluster_kw = dict(controller_host=net.controller_ip, namesrv_host=net.outer)
        original = LocalControlledCluster.__init__

        def netns_cluster(self, root, **kw):
            original(self, root, **kw, **cluster_kw)
            self.netns[1] = (net.name, net.inner)
        LocalControlledCluster.__init__ = netns_cluster
        try:
            cluster, ledger, rng = start(tmp_path, "partition")
        finally:
            LocalControlledCluster.__init__ = original
        try:
            asyncio.run(_scenario(cluster, ledger, rng, net))
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{ledger.report({})}") from exc
        finally:
            codes = cluster.stop()
        assert all(c == 0 for c in codes.values()), (codes, ledger.report())


async def _scenario(cluster, ledger, rng, net):
    old = cluster.broker_addrs[1]
    assert old.startswith(net.inner), cluster.broker_addrs
    await prepared(cluster, ledger)
    assert await _refuses(ledger, old, cluster.broker_name) is None, "the master takes sends before the partition"
    load = await ledger_load(cluster, ledger, "p").start()
    cut_after = load.acks + rng.randrange(100, 250)
    await until(f"{cut_after} acks", lambda: _value(load.acks >= cut_after), 30)
    t_cut, cut_wall = time.monotonic(), time.time()
    net.partition()
    ledger.note(f"partitioned broker 1 ({old}) from the controllers after {load.acks} acks")
    why = await until("broker 1 refusing sends", lambda: _refuses(ledger, old, cluster.broker_name), 15)
    fenced_s = time.monotonic() - t_cut
    ledger.note(f"broker 1 refuses sends {fenced_s:.2f} s after the partition: {why}")
    await until("broker 1 out of the routes", lambda: _not_routed(cluster, old), FENCE_TARGET_S)
    unrouted_s = time.monotonic() - t_cut
    left_s = await until("broker 1 leaving the routes", lambda: _withdrawn_after(cluster, cut_wall), FENCE_TARGET_S)
    info = await until("a new confirmed master", lambda: _new_master(cluster), 20)
    ledger.note(f"master now {info['masterId']} of epoch {info['epoch']}; broker 1 withdrew {left_s:.2f} s and "
                f"was out of the routes {unrouted_s:.2f} s after the partition")
    await until("100 acks after the partition", lambda: _value(load.acks_after(t_cut) >= 100), 40)
    # the controller confirms the master before its registration reaches the NameServer: a moment later
    await until("the new master routed", lambda: _routed_to(cluster, info["masterAddr"]), ROUTE_SETTLE_S)
    assert await _state_version(info["masterAddr"]) == info["epoch"], "registrations carry the master epoch"
    net.heal()
    ledger.note("network healed")
    await until("broker 1 heard it was replaced", lambda: _fenced_in_log(cluster), 20)
    assert await _refuses(ledger, old, cluster.broker_name), "the replaced master takes sends after the partition healed"
    await drain(load, ledger)
    print("\n".join(ledger.report({}).splitlines()[:12]))
    assert fenced_s < FENCE_TARGET_S, ledger.report()
    assert left_s < WITHDRAW_TARGET_S, f"broker 1 withdrew {left_s:.2f} s after the partition"


async def _new_master(cluster):
    info = await cluster.replica_info()
    return info if info and not info["pending"] and info["masterId"] in (2, 3) else None


async def _not_routed(cluster, addr):
    return await cluster.master_routed(TOPIC) != addr


async def _routed_to(cluster, addr):
    return await cluster.master_routed(TOPIC) == addr


async def _state_version(addr):
    r = await call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    return fastjson.loads(r.body)["dataVersion"]["stateVersion"]


async def _withdrawn_after(cluster, since: float) -> float | None:
    """Seconds from *since* (wall clock) to broker 1's log line saying it left the routes."""
    for line in (cluster.root / "b1.log").read_text(errors="replace").splitlines():
        if "leaving the routes" in line:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            return max(stamp - since, 1e-3)
    return None


async def _fenced_in_log(cluster):
    return "fenced: broker" in (cluster.root / "b1.log").read_text(errors="replace")


async def _value(v):
    return v
