"""A slave acting master delivers what its dead master held back: delayed, timer and transactional
messages escape to the other group's master (RocketMQ 5's EscapeBridge), on time, once; and the
master, back, delivers none of them again.

Real processes (tests/cluster/recipe.py): 2 NameServers, groups broker-a and broker-b of master +
slave each with enableSlaveActingMaster (examples/cluster/*.conf).  Each test SIGKILLs broker-a's
master with messages pending on it, checks that broker-b stores each one when it is due, that a
consumer gets each exactly once, restarts broker-a's master and checks it delivers nothing again.
"""

from __future__ import annotations

import asyncio
import json
import random
import time

import pytest
from checker import Ledger
from recipe import RecipeCluster

from rocketq.client import (
    ConsumeFrom,
    LitePullConsumer,
    Message,
    MessageQueue,
    Producer,
    SendStatus,
    TransactionProducer,
    TransactionState,
)
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode

A, B = "broker-a", "broker-b"
ON_TIME_S = 4.0             # due -> stored on broker-b: acting detection (1 s), poll, route lookup, send
DELAY_LEVEL, DELAY_MS = 3, 10_000          # RocketMQ's default levels: 3 is 10 s
TIMER_AHEAD_MS = 10_000
QUIET_AFTER_RETURN_S = 8.0                 # a returning master re-delivers within ~1 s, re-checks within ~5 s
TX_SETTINGS = ["transactionCheckInterval=1000", "transactionTimeOut=3000"]


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    c = RecipeCluster(tmp_path_factory.mktemp("acting"))
    for name in c.names:
        c.sets[name] = list(TX_SETTINGS)
    c.sets[A] = ["transactionCheckInterval=600000"]   # broker-a's master never checks: its slave must
    c.start()
    try:
        yield c
    finally:
        c.close()


def _ledger(recipe, name, seed) -> Ledger:
    led = Ledger(name, seed=seed)
    for n in ["namesrv-1", "namesrv-2", *recipe.names]:
        led.log_file(recipe.log(n))
    return led


async def _until(predicate, timeout_s, what, led: Ledger):
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}\n{led.report()}")
        await asyncio.sleep(0.1)


async def _ask(addr: str, code: int) -> dict:
    host, _, port = addr.rpartition(":")
    client = RemotingClient(host, int(port))
    try:
        r = await client.invoke(RemotingCommand.create_request(code, {}), timeout_s=5)
        return json.loads(r.body or b"{}")
    finally:
        await client.close()


async def _active(addr: str) -> bool:
    try:
        return (await _ask(addr, RequestCode.GET_BROKER_RUNTIME_INFO))["table"].get("brokerActive") == "true"
    except Exception:
        return False


class Received:
    """What a consumer group got: key -> [(store host, store timestamp)]."""

    def __init__(self, recipe, group: str, topic: str):
        self.c = LitePullConsumer(group, recipe.namesrv, consume_from=ConsumeFrom.FIRST)
        self.c.subscribe(topic)
        self.got: dict[str, list[tuple[str, int]]] = {}

    async def poll(self) -> None:
        for m in await self.c.poll(0.3):
            self.got.setdefault(m.body.decode(), []).append((str(m.store_host), m.store_timestamp))


def _kill_a(recipe, led: Ledger) -> None:
    led.note("SIGKILL broker-a (master)")
    recipe.kill(A)


async def _restart_a_and_watch(recipe, led: Ledger, rx: Received, keys: set[str], *, tx_checks=None,
                               producer=None, topic=None) -> None:
    """Restart broker-a's master; once it delivers again (brokerActive), nothing of *keys* comes twice
    (and with *tx_checks*, broker-a asks *producer* nothing: it knows the producer as soon as it can)."""
    if tx_checks is not None:
        recipe.sets[A] = list(TX_SETTINGS)     # back, it checks transactions as fast as the others
    await asyncio.to_thread(recipe.start_broker, A)
    led.note("broker-a restarted")
    master = recipe.brokers[A].addr

    async def delivering():
        await rx.poll()
        if producer is not None:               # a check-back from broker-a would reach this producer
            await producer.instance.route(topic, refresh=True)
            await producer.instance.heartbeat_now()
        return await _active(master)
    await _until(delivering, 60, "broker-a's master to take back its slave's progress and deliver", led)
    checks_before = len(tx_checks) if tx_checks is not None else 0
    end = time.monotonic() + QUIET_AFTER_RETURN_S
    while time.monotonic() < end:                  # a window: what must not happen, within it
        await rx.poll()
    twice = {k: v for k, v in rx.got.items() if k in keys and len(v) > 1}
    assert not twice, led.report() + f"\ndelivered more than once: {twice}"
    if tx_checks is not None:
        again = [c for c in tx_checks[checks_before:] if c[1] == master]
        assert not again, led.report() + f"\nthe returning master checked again: {again}"


def _on_time(rx: Received, due: dict[str, int], b_master: str) -> list[str]:
    wrong = []
    for key, at in due.items():
        got = rx.got.get(key, [])
        if len(got) != 1:
            wrong.append(f"{key}: received {len(got)} times {got}")
            continue
        host, stored = got[0]
        if host != b_master or not at <= stored <= at + ON_TIME_S * 1000:
            wrong.append(f"{key}: stored on {host} at due{stored - at:+d} ms (want {b_master}, 0..{ON_TIME_S}s)")
    return wrong


def _run_pending(recipe, topic: str, make, seed: int) -> None:
    """Messages due later sent to broker-a's master, which is killed; each must reach a consumer from
    broker-b when due, once; then broker-a comes back and must deliver none of them again."""
    rng = random.Random(seed)
    led = _ledger(recipe, topic, seed)
    recipe.cli("topic", "create", topic, "--cluster", "DefaultCluster", "--queues", "2")

    async def main():
        b_master = recipe.brokers[B].addr
        due: dict[str, int] = {}
        async with Producer(f"PG_{topic}", recipe.namesrv) as p:
            for i in range(rng.randrange(3, 7)):
                key = f"{topic}-{i}"
                msg, due_ms = make(key)
                led.attempt(key, key.encode())
                r = await p.send(msg, queue=MessageQueue(topic, A, i % 2))
                assert r.status == SendStatus.SEND_OK, r
                due[key] = due_ms
        led.note(f"{len(due)} messages pending on broker-a, due {min(due.values())}..{max(due.values())}")
        await asyncio.to_thread(_kill_a, recipe, led)
        rx = Received(recipe, f"GID_{topic}", topic)
        await rx.c.start()
        try:
            async def all_in():
                await rx.poll()
                return set(due) <= set(rx.got) and time.time() * 1000 > max(due.values()) + ON_TIME_S * 1000
            await _until(all_in, DELAY_MS / 1000 + 40, "every pending message from broker-b", led)
            wrong = _on_time(rx, due, b_master)
            assert not wrong, led.report() + "\n" + "\n".join(wrong)
            await _restart_a_and_watch(recipe, led, rx, set(due))
        finally:
            await rx.c.shutdown()
    asyncio.run(main())


def test_delayed_messages_escape_when_due_and_are_not_redelivered(recipe):
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")

    def make(key):
        msg = Message("ActingDelay", key.encode(), keys=[key], delay_level=DELAY_LEVEL)
        return msg, int(time.time() * 1000) + DELAY_MS
    _run_pending(recipe, "ActingDelay", make, seed)


def test_timer_messages_escape_when_due_and_are_not_redelivered(recipe):
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)

    def make(key):
        at = int(time.time() * 1000) + TIMER_AHEAD_MS + rng.randrange(0, 3000)
        return Message("ActingTimer", key.encode(), keys=[key], properties={"TIMER_DELIVER_MS": str(at)}), at
    _run_pending(recipe, "ActingTimer", make, seed)


def test_half_messages_are_checked_back_through_the_other_group(recipe):
    """Half messages left UNKNOWN on broker-a's master: its acting slave escapes them to broker-b, whose
    check-back the producer answers; COMMIT is consumed once, ROLLBACK never; broker-a, back, checks
    none of them again."""
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    topic = "ActingTx"
    led = _ledger(recipe, topic, seed)
    recipe.cli("topic", "create", topic, "--cluster", "DefaultCluster", "--queues", "2")
    checks: list[tuple[str, str]] = []          # (key, store host of the check: the broker that asked)

    def check(msg):
        key = msg.body.decode()
        checks.append((key, str(msg.store_host)))
        return TransactionState.COMMIT if key.startswith("commit") else TransactionState.ROLLBACK

    async def main():
        a_master, b_master = recipe.brokers[A].addr, recipe.brokers[B].addr
        on_a: set[str] = set()
        async with TransactionProducer("PG_TX", recipe.namesrv, execute=lambda m, a: TransactionState.UNKNOWN,
                                       check=check) as tp:
            i = 0
            while sum(k.startswith("commit") for k in on_a) < 2 or sum(k.startswith("rollback") for k in on_a) < 2:
                assert i < 64, f"64 half messages and too few on broker-a: {on_a}"
                key = f"{'commit' if i % 2 else 'rollback'}-{i}"
                r, _state = await tp.send_in_transaction(Message(topic, key.encode(), keys=[key]))
                if r.queue.broker_name == A:
                    on_a.add(key)
                    led.attempt(key, key.encode())
                i += 1
            await tp.instance.heartbeat_now()            # broker-b knows the producer: it will check back
            led.note(f"half messages on broker-a: {sorted(on_a)}")
            await asyncio.to_thread(_kill_a, recipe, led)
            rx = Received(recipe, "GID_TX", topic)
            await rx.c.start()
            try:
                commits = {k for k in on_a if k.startswith("commit")}

                async def resolved():
                    await rx.poll()
                    asked = {k for k, host in checks if host == b_master}
                    return on_a <= asked and commits <= set(rx.got)
                await _until(resolved, 60, "broker-b to check back broker-a's half messages", led)
                assert not [c for c in checks if c[1] == a_master], led.report() + f"\nchecks: {checks}"
                got_rollback = {k for k in rx.got if k.startswith("rollback")}
                assert not got_rollback, led.report() + f"\nrolled back yet delivered: {got_rollback}"
                once = {k: v for k, v in rx.got.items() if k in commits and (len(v) != 1 or v[0][0] != b_master)}
                assert not once, led.report() + f"\ncommitted but not delivered once by broker-b: {once}"
                await _restart_a_and_watch(recipe, led, rx, on_a, tx_checks=checks, producer=tp, topic=topic)
                assert not {k for k in rx.got if k.startswith("rollback") and k in on_a}, led.report()
            finally:
                await rx.c.shutdown()
    asyncio.run(main())


def test_cluster_marks_the_acting_slave(recipe):
    """`rocketq cluster` names the acting slave; `topic config` and `group list` read a masterless group
    from it."""
    led = _ledger(recipe, "cli", 0)
    recipe.cli("topic", "create", "ActingCli", "--cluster", "DefaultCluster", "--queues", "2")

    async def slave_has_it():         # a slave copies its master's topics every 10 s (SlaveSynchronize)
        table = await _ask(recipe.brokers[f"{A}-s"].addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        return "ActingCli" in (table.get("topicConfigTable") or {})
    asyncio.run(_until(slave_has_it, 30, "broker-a-s to copy the topic", led))
    recipe.kill(A)

    async def marked():
        rows = await asyncio.to_thread(recipe.cli_json, "cluster")
        return any(r["broker"] == A and r["role"] == "acting master" for r in rows)
    asyncio.run(_until(marked, 30, "the cluster command to mark broker-a-s acting master", led))
    configs = recipe.cli_json("topic", "config", "ActingCli")["brokers"]
    assert recipe.brokers[f"{A}-s"].addr in configs and recipe.brokers[B].addr in configs, configs
    recipe.start_broker(A)

    async def master_again():
        rows = await asyncio.to_thread(recipe.cli_json, "cluster")
        return {(r["broker"], r["role"]) for r in rows} >= {(A, "master"), (A, "slave")}
    asyncio.run(_until(master_again, 30, "broker-a's master back, its slave a slave again", led))

