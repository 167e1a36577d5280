"""``rocketq bench failover``: how long a SYNC_MASTER broker set with the etcd-backed controller is
without a writable master when its master is SIGKILLed under load, and whether any acknowledged
message is lost.

Theory of operation
-------------------
One :class:`~rocketq.controller.local_cluster.LocalControlledCluster` (three etcd members, two
``rocketq controller`` processes, a NameServer, three brokers of one set) runs for the whole benchmark,
with :class:`~rocketq.controller.failover_load.Load` sending all along (``senders`` concurrent sends of
unique bodies) and a consumer reading all along.  Each run waits until every broker is in the
SyncStateSet, SIGKILLs the master (with ``kill_controller`` also the active controller at the same
moment), and measures the failover time: from the kill to the first acknowledged send after it (the
sends in flight at the kill fail over to the new master through the client's retries and route
refresh, as an application's would).  The killed broker (and controller) is then restarted - it cuts
its divergent tail and rejoins as a slave - and the next run starts.  At the end sending stops and the
consumer is given ``DRAIN_TIMEOUT_S`` to read everything; lost = acknowledged bodies never consumed.
"""

from __future__ import annotations

import asyncio
import math
import os
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rocketq.controller.failover_load import Load
from rocketq.controller.local_cluster import LocalControlledCluster, until

TOPIC = "FailoverBench"
SETTLE_ACKS = 50              # acks on the current master before each kill
RUN_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 60.0


@dataclass
class FailoverResult:
    runs: int
    kill_controller: bool
    failover_s: list[float] = field(default_factory=list)
    acked: int = 0
    consumed_distinct: int = 0
    lost: int = 0
    failed_sends: int = 0
    machine: dict = field(default_factory=dict)

    def percentile(self, p: float) -> float:
        """Nearest-rank percentile (with 20 runs, p99 is the slowest run)."""
        xs = sorted(self.failover_s)
        return xs[min(len(xs) - 1, max(0, math.ceil(p / 100 * len(xs)) - 1))]

    def summary(self) -> dict:
        xs = self.failover_s
        return {"runs": len(xs), "kill_controller": self.kill_controller,
                "failover_p50_s": round(self.percentile(50), 3), "failover_p99_s": round(self.percentile(99), 3),
                "failover_mean_s": round(statistics.mean(xs), 3), "failover_max_s": round(max(xs), 3),
                "acked": self.acked, "consumed_distinct": self.consumed_distinct, "lost": self.lost,
                "failed_sends_during_failovers": self.failed_sends, "machine": self.machine}


def machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]}


def run_failover_bench(runs: int = 20, *, kill_controller: bool = False, senders: int = 4,
                       root: Path | None = None, progress=lambda i, n, s: None) -> FailoverResult:
    result = FailoverResult(runs, kill_controller, machine=machine())
    with tempfile.TemporaryDirectory(prefix="rocketq-failover-") as tmp:
        cluster = LocalControlledCluster(root or tmp)
        try:
            cluster.start()
            asyncio.run(_runs(cluster, result, runs, senders, progress))
        finally:
            cluster.stop()
    result.machine["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return result


async def _runs(cluster: LocalControlledCluster, result: FailoverResult, runs: int, senders: int, progress) -> None:
    acked: set[str] = set()
    consumed: set[str] = set()
    load = Load(cluster.namesrv, TOPIC, run="fb", senders=senders, on_ack=lambda k, q, o: acked.add(k),
                on_consume=lambda k, b, q, o: consumed.add(k))
    await load.start()
    try:
        for i in range(runs):
            await asyncio.wait_for(_one_run(cluster, result, load, i, runs, progress), 4 * RUN_TIMEOUT_S)
        await load.stop_sending()
        try:
            await until("every acknowledged message consumed", lambda: _value(acked <= consumed), DRAIN_TIMEOUT_S)
        except TimeoutError:
            pass
    finally:
        await asyncio.wait_for(load.close(), RUN_TIMEOUT_S)
    result.acked, result.consumed_distinct = len(acked), len(consumed & acked)
    result.lost = len(acked - consumed)


async def _one_run(cluster: LocalControlledCluster, result: FailoverResult, load: Load, i: int, runs: int,
                   progress) -> None:
    await until("every broker in sync", lambda: _all_in_sync(cluster), RUN_TIMEOUT_S)
    base = load.acks
    await until("acks on the current master", lambda: _value(load.acks >= base + SETTLE_ACKS), RUN_TIMEOUT_S)
    info = await cluster.replica_info()
    master, active = info["masterId"], await cluster.active_controller()
    failed_before = load.failures
    t_kill = time.monotonic()
    cluster.kill_broker(master)
    killed_ctl = None
    if result.kill_controller:
        killed_ctl = next(j for j, a in cluster.controller_addrs.items() if a == active)
        cluster.kill_controller(killed_ctl)
    await until("a send acknowledged after the kill", lambda: _value(load.acks_after(t_kill) > 0),
                RUN_TIMEOUT_S)
    result.failover_s.append(load.first_ack_after(t_kill) - t_kill)
    result.failed_sends += load.failures - failed_before
    progress(i + 1, runs, result.failover_s[-1])
    # restarted before the controller replaced it, the killed broker would resume as master and be
    # fenced at its first heartbeat: wait for the confirmed successor first
    await until("a confirmed new master", lambda: _replaced(cluster, master), RUN_TIMEOUT_S)
    await asyncio.to_thread(cluster.start_broker, master)
    if killed_ctl is not None:
        await asyncio.to_thread(cluster.restart_controller, killed_ctl)


async def _replaced(cluster: LocalControlledCluster, old: int) -> bool:
    info = await cluster.replica_info()
    return bool(info) and not info["pending"] and info["masterId"] not in (None, old)


async def _all_in_sync(cluster: LocalControlledCluster) -> bool:
    info = await cluster.replica_info()
    return bool(info) and not info["pending"] and len(info.get("syncStateSet") or []) == cluster.n_brokers


async def _value(v):
    return v
