"""Controller mode with real processes: a NameServer running the controller and three brokers of one
set (SYNC_FLUSH, SYNC_MASTER).  The master is SIGKILLed while producers send; the most up-to-date
slave is elected, every acknowledged message is read back from it at the queue offset its
acknowledgement named, and producers carry on there.  The old master, given extra records at its log
end that no slave ever saw (besides whatever was in flight at the kill), restarts, cuts that
divergent tail, rejoins as a slave and catches up; its CommitLog ends up byte for byte the new
master's, and `rocketq store verify` passes on all three stores."""

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time

from rocketq.client import ConsumeFrom, LitePullConsumer, Message, MQClientError, Producer
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode

from processes import ENV, spawn
TOPIC = "Ctl"


def _broker(tmp_path, bid, namesrv):
    conf = tmp_path / f"b{bid}.conf"
    conf.write_text(f"brokerName=broker-a\nbrokerId={bid}\nenableControllerMode=true\nstorePathRootDir="
                    f"{tmp_path / f'b{bid}'}\nnamesrvAddr={namesrv}\nlistenPort=0\nhaListenPort=0\n"
                    f"bindAddress=127.0.0.1\nflushDiskType=SYNC_FLUSH\nmapedFileSizeCommitLog=4194304\n"
                    f"maxHashSlotNum=1009\nmaxIndexNum=20000\n")
    proc, m = spawn(["broker", "-c", str(conf)], r"listening on ([\d.]+:\d+)", f"broker {bid}",
                     tmp_path / f"b{bid}.log")
    return proc, m.group(1)


async def _replica_info(namesrv: str) -> dict:
    host, _, port = namesrv.rpartition(":")
    client = RemotingClient(host, int(port))
    try:
        r = await client.invoke(RemotingCommand.create_request(RequestCode.CONTROLLER_GET_METADATA_INFO, {}), 5)
        sets = json.loads(r.body)["brokerSets"]
        return sets[0] if sets else {}
    finally:
        await client.close()


async def _master_routed(namesrv: str, topic: str) -> bool:
    """The NameServer routes *topic* to a master (brokerId 0): the elected broker has registered as one."""
    from rocketq.common import fastjson
    host, _, port = namesrv.rpartition(":")
    client = RemotingClient(host, int(port))
    try:
        r = await client.invoke(RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5)
        datas = fastjson.loads(r.body).get("brokerDatas", []) if r.code == 0 and r.body else []
        return any("0" in {str(k) for k in (b.get("brokerAddrs") or {})} for b in datas)
    finally:
        await client.close()


async def _until(what, predicate, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def _topic_on(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    client = RemotingClient(host, int(port))
    try:
        r = await client.invoke(RemotingCommand.create_request(RequestCode.GET_ALL_TOPIC_CONFIG, {}), 5)
        return TOPIC in json.loads(r.body).get("topicConfigTable", {})
    finally:
        await client.close()


def _stable(info, epoch=None):
    """Confirmed master, and every live broker follows its epoch."""
    if not info or info.get("pending") or info.get("masterId") is None:
        return False
    return epoch is None or info["epoch"] == epoch


def _add_divergent_tail(store_path, address, count):
    """Records at the dead master's log end that no slave has: what it wrote after its last replicated byte."""
    from rocketq.common.message import Message as StoreMessage
    from rocketq.store import MessageStore
    from rocketq.store.store_files import StorePaths
    from rocketq.store.tools import load_geometry
    store = MessageStore(load_geometry(StorePaths(store_path)))
    store.set_store_host(address)
    store.start()
    try:
        for i in range(count):
            assert store.put_message(StoreMessage(topic=TOPIC, body=b"never-acked-%d" % i, queue_id=0)).ok
        return store.max_physical_offset()
    finally:
        store.shutdown()


def test_controller_elects_the_best_slave_and_the_old_master_rejoins(tmp_path):
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    ns_proc, m = spawn(["namesrv", "--host", "127.0.0.1", "--port", "0", "--kv-config", str(tmp_path / "ns" / "kv"),
                         "--enable-controller", "--controller-master-timeout-ms", "1500"],
                        r"listening on [\d.]+:(\d+)", "namesrv", tmp_path / "ns.log")
    namesrv = f"127.0.0.1:{m.group(1)}"
    procs = {0: ns_proc}
    addrs = {}
    try:
        async def scenario():
            procs[1], addrs[1] = _broker(tmp_path, 1, namesrv)
            await _until("broker 1 master", lambda: _ok(_replica_info(namesrv), lambda i: i.get("masterId") == 1
                                                           and not i["pending"]))
            # elected is not yet registered: the producer below needs TBW102's route with a master in it
            await _until("broker 1 routed as master", lambda: _master_routed(namesrv, "TBW102"))
            async with Producer("PG0", namesrv, retries=0, timeout_s=3) as p:      # creates the topic
                await p.send(Message(TOPIC, b"first"))
            for bid in (2, 3):
                procs[bid], addrs[bid] = _broker(tmp_path, bid, namesrv)
            for bid in (2, 3):
                await _until(f"broker {bid} has the topic", lambda: _topic_on(addrs[bid]))

            acked: list[tuple[str, int, int, bytes]] = []     # (uniq id, queue id, queue offset, body)
            state = {"killed": False, "after": 0, "stop": False, "n": 0}
            kill_after = rng.randrange(150, 400)

            async def sender(p: Producer):
                while not state["stop"]:
                    state["n"] += 1
                    body = f"m{state['n']}".encode()
                    try:
                        r = await p.send(Message(TOPIC, body))
                    except MQClientError:
                        await asyncio.sleep(0.05)
                        continue
                    if r.status.value != "SEND_OK":
                        await asyncio.sleep(0.05)
                        continue
                    acked.append((r.msg_id, r.queue.queue_id, r.queue_offset, body))
                    if state["killed"]:
                        state["after"] += 1
                    elif len(acked) >= kill_after:
                        state["killed"] = True
                        procs[1].send_signal(signal.SIGKILL)

            async with Producer("PG", namesrv, retries=2, timeout_s=3) as p:
                tasks = [asyncio.create_task(sender(p)) for _ in range(4)]
                await _until("sends acknowledged by the new master", lambda: _value(state["after"] >= 200), 40)
                state["stop"] = True
                await asyncio.gather(*tasks)
            procs[1].wait(10)
            info = await _replica_info(namesrv)
            assert _stable(info, 2) and info["masterId"] in (2, 3), info
            new_master = info["masterId"]
            start = info["history"][-1][1]
            print(f"acked {len(acked)}, {state['after']} after the kill; new master {new_master} from {start}")

            # every acknowledged message is on the new master, at the queue offset it was acknowledged with
            c = LitePullConsumer("GID_CTL", namesrv, consume_from=ConsumeFrom.FIRST)
            c.subscribe(TOPIC)
            await c.start()
            got: dict[tuple[int, int], tuple[str, bytes]] = {}
            want = {(q, o): (u, b) for u, q, o, b in acked}
            deadline = time.monotonic() + 30
            while not want.keys() <= got.keys() and time.monotonic() < deadline:
                for msg in await c.poll(0.5):
                    assert (msg.queue_id, msg.queue_offset) not in got
                    got[(msg.queue_id, msg.queue_offset)] = (msg.uniq_key, msg.body)
            await c.shutdown()
            missing = [k for k in want if got.get(k) != want[k]]
            assert not missing, f"{len(missing)} acknowledged messages are not where they were acknowledged: " \
                                f"{[(k, want[k], got.get(k)) for k in missing[:5]]}"

            # the old master: extra records nobody else has, then a restart: it cuts them and rejoins
            old_end = _add_divergent_tail(tmp_path / "b1", addrs[1], 5)
            assert old_end > start
            procs[1], addrs[1] = _broker(tmp_path, 1, namesrv)
            master_end = info["brokers"][str(new_master)]["maxPhyOffset"]

            async def caught_up():
                i = await _replica_info(namesrv)
                b1, bm = i["brokers"]["1"], i["brokers"][str(i["masterId"])]
                return b1["alive"] and b1["epoch"] == i["epoch"] and b1["maxPhyOffset"] == bm["maxPhyOffset"] \
                    and bm["maxPhyOffset"] >= master_end
            await _until("the old master caught up as a slave", caught_up, 30)
            async with Producer("PG2", namesrv, retries=2, timeout_s=3) as p:     # still SYNC_MASTER, with 2 slaves
                assert (await p.send(Message(TOPIC, b"last"))).status.value == "SEND_OK"
            return new_master

        new_master = asyncio.run(scenario())
        for bid in (1, 2, 3):
            procs[bid].send_signal(signal.SIGTERM)
        for bid in (1, 2, 3):
            assert procs[bid].wait(30) == 0, (bid, (tmp_path / f"b{bid}.log").read_text()[-3000:])
        old_log = " ".join((tmp_path / "b1.log").read_text().split())
        assert "divergent tail cut" in old_log, old_log[-3000:]
        for bid in (1, 2, 3):
            res = subprocess.run([sys.executable, "-m", "rocketq.cli.main", "store", "verify", str(tmp_path / f"b{bid}")],
                                 capture_output=True, text=True, env=ENV, timeout=120)
            assert res.returncode == 0, (bid, res.stdout[-2000:], res.stderr[-2000:])
        logs = {bid: b"".join(p.read_bytes() for p in sorted((tmp_path / f"b{bid}" / "commitlog").iterdir()))
                for bid in (1, 2, 3)}
        assert logs[1].rstrip(b"\0") == logs[new_master].rstrip(b"\0")
        epochs = [json.loads((tmp_path / f"b{bid}" / "config" / "epoch.json").read_text())["epochs"] for bid in (1, 2, 3)]
        assert epochs[0] == epochs[1] == epochs[2] and len(epochs[0]) == 2, epochs
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        if os.environ.get("ROCKETQ_TEST_KEEP_LOGS"):          # where to copy the processes' logs
            import shutil
            for f in tmp_path.glob("*.log"):
                shutil.copy(f, os.environ["ROCKETQ_TEST_KEEP_LOGS"])


async def _ok(coro, check):
    return check(await coro)


async def _value(v):
    return v
