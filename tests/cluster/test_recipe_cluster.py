"""The README's cluster recipe as real processes: 2 NameServers, groups broker-a and broker-b (SYNC_MASTER
+ SLAVE each, enableSlaveActingMaster) from examples/cluster/*.conf.

One cluster for the module, the tests in order: a topic over both groups through the CLI, rocketq's
clients and the official 5.x gRPC client; then broker-a's master SIGKILLed under load (sends continue
on broker-b, broker-a's slave acts as master for reads), restarted, and every acknowledged message
consumed (tests/cluster/checker.py)."""

from __future__ import annotations

import asyncio
import random
import time

import grpc
import pytest

from checker import Ledger, Place
from recipe import EXAMPLES, RecipeCluster

from rocketq.client import ConsumeFrom, LitePullConsumer, Message, MQClientError, Producer, SendStatus
from rocketq.grpc_endpoint.protocol import pb, spb, spb_grpc

TOPIC = "Orders"
GROUPS = ("broker-a", "broker-b")


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    c = RecipeCluster(tmp_path_factory.mktemp("recipe")).start()
    try:
        yield c
    finally:
        c.close()


def _ledger(recipe, name, seed=None) -> Ledger:
    led = Ledger(name, seed=seed)
    for n in ["namesrv-1", "namesrv-2", *recipe.names]:
        led.log_file(recipe.log(n))
    return led


def _group_of(recipe) -> dict[str, str]:
    """store host (the master's address, also in its slave's copy) -> group name"""
    return {recipe.brokers[g].addr: g for g in GROUPS}


async def _until(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.1)


async def _send(p: Producer, led: Ledger, key: str, topic: str = TOPIC) -> SendStatus | None:
    body = key.encode()
    led.attempt(key, body)
    try:
        r = await p.send(Message(topic, body, keys=[key]))
    except MQClientError as exc:
        led.note(f"send {key} failed: {exc}")
        return None
    if r.status == SendStatus.SEND_OK:
        led.acked(key, Place(topic, r.queue.broker_name, r.queue.queue_id, r.queue_offset))
    return r.status


async def _consume_all(recipe, led: Ledger, group: str, timeout_s: float = 60, topic: str = TOPIC) -> None:
    groups = _group_of(recipe)
    c = LitePullConsumer(group, recipe.namesrv, consume_from=ConsumeFrom.FIRST)
    c.subscribe(topic)
    await c.start()
    try:
        deadline = time.monotonic() + timeout_s
        while led.missing() and time.monotonic() < deadline:
            for m in await c.poll(0.5):
                led.consumed(m.body.decode(), m.body,
                             Place(m.topic, groups.get(str(m.store_host), str(m.store_host)), m.queue_id, m.queue_offset))
        await c.commit()
    finally:
        await c.shutdown()


def test_the_readme_recipe_starts_these_files():
    readme = (EXAMPLES.parents[1] / "README.md").read_text()
    section = readme.split("## Running a cluster", 1)[1].split("\n## ", 1)[0]
    for name in ("broker-a", "broker-a-s", "broker-b", "broker-b-s"):
        assert f"rocketq broker -c examples/cluster/{name}.conf" in section
        assert (EXAMPLES / f"{name}.conf").is_file()
    assert section.count("rocketq namesrv --port") == 2


def test_a_topic_spreads_over_every_group(recipe):
    out = recipe.cli("topic", "create", TOPIC, "--cluster", "DefaultCluster", "--queues", "4")
    assert "broker" in out or TOPIC in out
    route = recipe.cli_json("topic", "route", TOPIC)
    assert {q["broker"]: q["perm"] for q in route["queues"]} == {"broker-a": 6, "broker-b": 6}
    assert {q["broker"]: set(q["addresses"]) for q in route["queues"]} == {g: {"0", "1"} for g in GROUPS}
    rows = recipe.cli_json("cluster")
    assert sorted((r["broker"], r["id"]) for r in rows) == [("broker-a", 0), ("broker-a", 1),
                                                           ("broker-b", 0), ("broker-b", 1)]
    led = _ledger(recipe, "spread")

    async def main():
        async with Producer("PG_SPREAD", recipe.namesrv, send_latency_fault_enable=True) as p:
            async def both_replicated():      # SYNC_MASTER answers SEND_OK once its slave has connected
                return {await _send(p, led, f"probe-{time.monotonic_ns()}") for _ in range(4)} == {SendStatus.SEND_OK}
            await _until(both_replicated, 60, "both slaves connected")
            for i in range(100):
                await _send(p, led, f"spread-{i}")
            for i in range(100):                  # ordered by key: one queue per key, in send order
                key, shard = f"order-{i}", f"shard-{i % 5}"
                led.attempt(key, key.encode(), shard=shard)
                r = await p.send(Message(TOPIC, key.encode()), sharding_key=shard)
                led.acked(key, Place(TOPIC, r.queue.broker_name, r.queue.queue_id, r.queue_offset))
        await _consume_all(recipe, led, "GID_SPREAD")
    asyncio.run(main())
    led.assert_ok(orderly={TOPIC})
    assert {p.broker for k in led.acked_keys for p in [led._sent[k].acked[0]]} == set(GROUPS)
    lag = recipe.cli_json("group", "lag", "GID_SPREAD")
    assert {q["broker"] for q in lag["queues"]} == set(GROUPS) and lag["total_lag"] == 0


def _query_route(access_point: str) -> list:
    with grpc.insecure_channel(access_point) as ch:
        resp = spb_grpc.MessagingServiceStub(ch).QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)),
                                                              timeout=5)
    assert resp.status.code == pb.Code.OK, resp.status
    return list(resp.message_queues)


def test_every_brokers_grpc_route_lists_every_group(recipe):
    a, b = recipe.brokers["broker-a"], recipe.brokers["broker-b"]
    want = {"broker-a": a.grpc, "broker-b": b.grpc}
    deadline = time.monotonic() + 30
    while True:
        queues = _query_route(a.grpc)
        seen = {q.broker.name: f"{q.broker.endpoints.addresses[0].host}:{q.broker.endpoints.addresses[0].port}"
                for q in queues}
        if seen == want or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert seen == want
    assert all(q.permission == pb.Permission.READ_WRITE for q in queues) and len(queues) == 8
    assert {q.broker.name for q in _query_route(b.grpc)} == set(GROUPS)
    # a queue of broker-b asked of broker-a: refused so that the client goes to broker-b
    with grpc.insecure_channel(a.grpc) as ch:
        q_b = next(q for q in queues if q.broker.name == "broker-b")
        replies = list(spb_grpc.MessagingServiceStub(ch).ReceiveMessage(spb.ReceiveMessageRequest(
            group=pb.Resource(name="GID_GRPC"), message_queue=q_b, batch_size=1,
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*")), timeout=5))
    assert replies[0].status.code == pb.Code.ILLEGAL_ACCESS_POINT, replies[0].status


def test_the_official_grpc_client_reaches_every_group(recipe):
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
    from rocketmq import Message as V5Message, Producer as V5Producer
    topic = "GrpcOrders"
    recipe.cli("topic", "create", topic, "--cluster", "DefaultCluster", "--queues", "2")
    config = ClientConfiguration(recipe.brokers["broker-a"].grpc, Credentials(), request_timeout=10)
    p = V5Producer(config, (topic,))
    p.startup()
    sent: dict[str, str] = {}
    try:
        for i in range(16):
            m = V5Message()
            m.topic, m.body = topic, f"v5-{i}".encode()
            sent[f"v5-{i}"] = p.send(m).message_queue.message_queue0().broker.name
    finally:
        p.shutdown()
    assert set(sent.values()) == set(GROUPS)
    # a SimpleConsumer given broker-a's endpoint receives broker-b's messages from broker-b's endpoint
    c = SimpleConsumer(config, "GID_GRPC_ALL", {topic: FilterExpression("*")}, await_duration=2)
    c.startup()
    got: set[str] = set()
    try:
        deadline = time.monotonic() + 60
        while got != set(sent) and time.monotonic() < deadline:
            for m in c.receive(16, 15):
                got.add(m.body.decode())
                c.ack(m)
    finally:
        c.shutdown()
    assert got == set(sent), f"missing {sorted(set(sent) - got)}"


def test_the_java_remoting_client_reaches_every_group(recipe, tmp_path):
    from rocketq.bench.java_clients import JavaRunner, missing_java
    why = missing_java()
    if why:
        pytest.skip(why)
    runner = JavaRunner("remoting", "rmq5", "rocketq.compat.Runner", tmp_path / "jvm")
    try:
        sent = runner.run("send_all_modes", namesrv=recipe.namesrv, topic=TOPIC, group="PG_JAVA", n=8,
                          timeout_s=120)["sent"]
    finally:
        runner.close()
    sync = [s for s in sent if s["mode"] == "sync"]
    assert all(s["status"] == "SEND_OK" for s in sync) and {s["brokerName"] for s in sync} == set(GROUPS)


def test_one_group_killed_under_load_loses_nothing(recipe):
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    led = _ledger(recipe, "sigkill", seed)
    failures: list[str] = []
    topic = "Payments"                          # its own topic: only this run's messages are judged
    recipe.cli("topic", "create", topic, "--cluster", "DefaultCluster", "--queues", "4")

    async def main():
        async with Producer("PG_KILL", recipe.namesrv, retries=2, timeout_s=3, send_latency_fault_enable=True) as p:
            kill_at = rng.randrange(100, 250)
            for i in range(kill_at + 300):
                if i == kill_at:
                    led.note("SIGKILL broker-a (master)")
                    await asyncio.to_thread(recipe.kill, "broker-a")
                    killed = time.monotonic()
                status = await _send(p, led, f"k-{i}", topic)
                if status != SendStatus.SEND_OK and i >= kill_at:
                    failures.append(f"k-{i}: {status}")
            after = time.monotonic() - killed
            led.note(f"{300} sends after the kill in {after:.1f}s, {len(failures)} failed")
            # broker-a's slave acts as master: routed under id 0, read-only
            route = await p.instance.route(topic, refresh=True)
            a_route = next(b for b in route.broker_datas if b.broker_name == "broker-a")
            qd = next(q for q in route.queue_datas if q.broker_name == "broker-a")
            led.note(f"route of broker-a while its master is down: {a_route.addrs}, perm {qd.perm}")
            assert a_route.addrs == {0: recipe.brokers["broker-a-s"].addr} and qd.perm == 4, led.report()
        # acknowledged messages of broker-a are read from its acting slave before the master returns
        a_keys = {k for k in led.acked_keys if led._sent[k].acked[0].broker == "broker-a"}
        await _consume_all(recipe, led, "GID_KILL", timeout_s=30, topic=topic)
        led.note(f"consumed while broker-a is down: {len(a_keys & led.consumed_keys)} of {len(a_keys)} of its acks")
        assert not led.missing(), led.report()
        # group lag reads broker-a's queues from its acting slave, where the consumer committed
        lag = await asyncio.to_thread(recipe.cli_json, "group", "lag", "GID_KILL")
        assert {q["broker"] for q in lag["queues"]} == set(GROUPS) and lag["total_lag"] == 0, lag
        await asyncio.to_thread(recipe.start_broker, "broker-a")
        led.note("broker-a restarted")
        master = recipe.brokers["broker-a"].addr
        async with Producer("PG_KILL2", recipe.namesrv) as p:
            async def master_routed():
                route = await p.instance.route(topic, refresh=True)
                return next(b for b in route.broker_datas if b.broker_name == "broker-a").addrs.get(0) == master
            await _until(master_routed, 30, "broker-a's master routed again")
        # the restarted master has every message acknowledged before the kill: a new group reads them all there
        after = Ledger("after restart")
        for key in led.acked_keys:
            after.attempt(key, key.encode())
            after.acked(key, led._sent[key].acked[0])
        await _consume_all(recipe, after, "GID_AFTER", timeout_s=60, topic=topic)
        missing = after.missing()
        assert not missing, led.report() + f"\nnot on the restarted cluster: {sorted(missing)[:10]}"
    asyncio.run(main())
    assert not failures, led.report() + f"\nsends failed after the kill: {failures[:10]}"
    led.assert_ok()
    # offsets GID_KILL committed to broker-a's acting slave came back to the master (syncMetadataReverse)
    lag = recipe.cli_json("group", "lag", "GID_KILL")
    a_rows = [q for q in lag["queues"] if q["broker"] == "broker-a"]
    assert a_rows and all(q["lag"] == 0 for q in a_rows), lag
