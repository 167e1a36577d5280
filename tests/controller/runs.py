"""One failover run for the controller tests: a LocalControlledCluster, the Load, and the run checker."""

from __future__ import annotations

import random
import time

from checker import Ledger, Place

from rocketq.controller.failover_load import Load
from rocketq.controller.local_cluster import LocalControlledCluster, call, until
from rocketq.remoting import RequestCode

TOPIC = "CtlT"


def ledger_load(cluster: LocalControlledCluster, ledger: Ledger, run: str) -> Load:
    name = cluster.broker_name
    return Load(cluster.namesrv, TOPIC, run=run,
                on_attempt=lambda k, b: ledger.attempt(k, b),
                on_ack=lambda k, q, o: ledger.acked(k, Place(TOPIC, name, q, o)),
                on_consume=lambda k, b, q, o: ledger.consumed(k, b, Place(TOPIC, name, q, o)))


async def topic_on(addr: str) -> bool:
    import json
    r = await call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    return TOPIC in json.loads(r.body).get("topicConfigTable", {})


async def all_in_sync(cluster: LocalControlledCluster, n: int) -> bool:
    info = await cluster.replica_info()
    return len(info.get("syncStateSet") or []) == n and not info["pending"]


async def prepared(cluster: LocalControlledCluster, ledger: Ledger) -> None:
    """The topic exists on every broker and every broker is in the SyncStateSet."""
    from rocketq.client import Message, Producer
    async with Producer("prep_pg", cluster.namesrv, retries=2, timeout_s=3) as p:
        ledger.attempt("first", b"first")
        r = await p.send(Message(TOPIC, b"first"))
        ledger.acked("first", Place(TOPIC, cluster.broker_name, r.queue.queue_id, r.queue_offset))
    for bid, addr in cluster.broker_addrs.items():
        # slaves copy the master's topics every 10 s (slave_sync.SYNC_INTERVAL_S)
        await until(f"broker {bid} has {TOPIC}", lambda addr=addr: topic_on(addr), 45)
    await until("every broker in sync", lambda: all_in_sync(cluster, len(cluster.broker_addrs)), 30)


def start(tmp_path, name: str, **kw) -> tuple[LocalControlledCluster, Ledger, random.Random]:
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    ledger = Ledger(name, seed=seed)
    cluster = LocalControlledCluster(tmp_path, **kw)
    for p in [tmp_path / f"{n}.log" for n in ("controller0", "controller1", "b1", "b2", "b3", "ns")]:
        ledger.log_file(p)
    t0 = time.monotonic()
    cluster.start()
    ledger.note(f"cluster started in {time.monotonic() - t0:.1f} s: controllers {cluster.controller_addrs}, "
                f"brokers {cluster.broker_addrs}")
    return cluster, ledger, random.Random(seed)


async def drain(load: Load, ledger: Ledger, timeout_s: float = 30.0) -> None:
    """Stop sending; the consumer carries on until every acknowledged message came (or the timeout)."""
    await load.stop_sending()
    try:
        await until("every acknowledged message consumed", lambda: _none_missing(ledger), timeout_s)
    except TimeoutError as exc:
        ledger.note(str(exc))
    await load.close()
    ledger.note(f"load: {load.acks} acked, {load.failures} failed sends, {load.consumed} consumed")
    ledger.assert_ok()


async def _none_missing(ledger: Ledger) -> bool:
    return not ledger.missing()
