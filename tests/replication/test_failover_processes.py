"""Real processes: a NameServer, a SYNC_MASTER and its SLAVE.  The master is SIGKILLed while a
producer sends; every acknowledged message is then read from the slave; the master restarts, its
store verifies, and the slave's store verifies too."""

import asyncio
import random
import signal
import subprocess
import sys
import time

from rocketq.client import ConsumeFrom, LitePullConsumer, Message, MQClientError, Producer

from processes import ENV, spawn


def _broker(tmp_path, name, namesrv, port, extra):
    conf = tmp_path / f"{name}.conf"
    conf.write_text(f"brokerName=broker-a\nstorePathRootDir={tmp_path / name}\nnamesrvAddr={namesrv}\n"
                    f"listenPort={port}\nbindAddress=127.0.0.1\nmapedFileSizeCommitLog=4194304\n"
                    f"maxHashSlotNum=1009\nmaxIndexNum=20000\n{extra}")
    return spawn(["broker", "-c", str(conf)], r"listening on [\d.]+:(\d+)", name, tmp_path / f"{name}.log")


def test_sigkill_master_slave_has_every_acknowledged_message(tmp_path):
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    namesrv_proc, m = spawn(["namesrv", "--host", "127.0.0.1", "--port", "0", "--kv-config", str(tmp_path / "kv")],
                            r"listening on [\d.]+:(\d+)", "namesrv", tmp_path / "namesrv.log")
    namesrv = f"127.0.0.1:{m.group(1)}"
    master, m = _broker(tmp_path, "master", namesrv, 0, "brokerRole=SYNC_MASTER\nhaListenPort=0\n")
    master_port = int(m.group(1))
    slave, _ = _broker(tmp_path, "slave", namesrv, 0, "brokerRole=SLAVE\nbrokerId=1\nhaListenPort=0\n")
    procs = [namesrv_proc, master, slave]
    try:
        async def produce_until_killed() -> list[bytes]:
            acked: list[bytes] = []
            async with Producer("PG", namesrv, retries=0, timeout_s=3) as p:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:           # until the slave is connected (SYNC_MASTER says so)
                    r = await p.send(Message("Durable", b"probe"))
                    if r.status.value == "SEND_OK":
                        acked.append(b"probe")
                        break
                    await asyncio.sleep(0.2)
                kill_after = rng.randrange(200, 600)
                for i in range(2000):
                    if i == kill_after:
                        master.send_signal(signal.SIGKILL)
                    try:
                        r = await p.send(Message("Durable", f"d{i}".encode()))
                    except MQClientError:
                        continue
                    if r.status.value == "SEND_OK":
                        acked.append(f"d{i}".encode())
                    if i > kill_after + 20:
                        break
            return acked

        acked = asyncio.run(produce_until_killed())
        master.wait(10)
        assert len(acked) > 100

        async def read_from_slave() -> list[bytes]:
            c = LitePullConsumer("GID_DURABLE", namesrv, consume_from=ConsumeFrom.FIRST)
            c.subscribe("Durable")
            await c.start()
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while not set(acked) <= set(got) and time.monotonic() < deadline:
                got += [m.body for m in await c.poll(0.5)]
            await c.shutdown()
            return got
        got = asyncio.run(read_from_slave())
        missing = set(acked) - set(got)
        assert not missing, f"{len(missing)} acknowledged messages are not on the slave, e.g. {sorted(missing)[:5]}"

        master, _ = _broker(tmp_path, "master", namesrv, master_port, "brokerRole=SYNC_MASTER\nhaListenPort=0\n")
        procs.append(master)
        for p in (master, slave):
            p.send_signal(signal.SIGTERM)
            assert p.wait(30) == 0
        for name in ("master", "slave"):
            res = subprocess.run([sys.executable, "-m", "rocketq.cli.main", "store", "verify", str(tmp_path / name)],
                                 capture_output=True, text=True, env=ENV, timeout=120)
            assert res.returncode == 0, (name, res.stdout[-2000:], res.stderr[-2000:])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
