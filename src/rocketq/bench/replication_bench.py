"""The replication benchmark (issue 7's numbers): real processes - a NameServer, a master and a
slave (``rocketq namesrv`` / ``rocketq broker -c``) - and rocketq's client in this process.

* produce 1 KiB with 64 senders against a master alone, an ASYNC_MASTER with a slave and a
  SYNC_MASTER with a slave (msgs/s, p50/p99), interleaved run by run;
* replication lag under full load: the largest gap, sampled every 50 ms while the ASYNC_MASTER takes
  batches as fast as it can, between the master's CommitLog end and the slave's (bytes);
* failover time: SIGKILL the master, then time until a consumer reading the topic gets the next
  message from the slave, and until a producer's send succeeds on the cluster's other master;
* controller-mode failover: a NameServer with the controller and three brokers of one set
  (SYNC_MASTER while master); SIGKILL the master, then time until a consumer reads the topic and
  until a producer's send to the same topic succeeds on the elected master (master timeout 3 s).
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rocketq.bench.broker_bench import _pcts, _run

_ENV = dict(os.environ)


class Proc:
    def __init__(self, args: list[str], pattern: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=_ENV)
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        m = re.search(pattern, self.proc.stdout.readline() if ready else "")
        if not m:
            self.proc.kill()
            raise RuntimeError(f"{args[0]} did not start")
        self.port = int(m.group(1))

    def stop(self, sig=signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _broker(root: Path, name: str, broker_name: str, namesrv: str, role: str, broker_id: int = 0) -> Proc:
    conf = root / f"{name}.conf"
    conf.write_text(f"brokerName={broker_name}\nbrokerId={broker_id}\nbrokerRole={role}\nstorePathRootDir={root / name}\n"
                    f"namesrvAddr={namesrv}\nlistenPort=0\nhaListenPort=0\nbindAddress=127.0.0.1\n")
    return Proc(["broker", "-c", str(conf)], r"listening on [\d.]+:(\d+)")


async def _produce(namesrv: str, topic: str, n: int, senders: int) -> tuple[float, list[float]]:
    from rocketq.client import Message, Producer
    body = b"r" * 1024
    lat: list[float] = []
    async with Producer("REP_BENCH", namesrv) as p:
        await p.send(Message(topic, body))
        per = n // senders

        async def sender():
            for _ in range(per):
                t = time.perf_counter()
                r = await p.send(Message(topic, body))
                if r.status.value == "SEND_OK":
                    lat.append(time.perf_counter() - t)
        t0 = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(senders)))
        return len(lat) / (time.perf_counter() - t0), lat


async def _lag_under_load(namesrv: str, master_port: int, slave_port: int, seconds: float) -> int:
    from rocketq.client import Message, Producer
    from rocketq.client.api import MQClientAPI
    api = MQClientAPI()
    worst = 0
    stop = asyncio.Event()

    async def sample():
        nonlocal worst
        while not stop.is_set():
            m = int((await api.runtime_info(f"127.0.0.1:{master_port}"))["commitLogMaxOffset"])
            s = int((await api.runtime_info(f"127.0.0.1:{slave_port}"))["commitLogMaxOffset"])
            worst = max(worst, m - s)
            await asyncio.sleep(0.05)
    async with Producer("REP_LAG", namesrv) as p:
        sampler = asyncio.create_task(sample())
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await asyncio.gather(*(p.send_batch([Message("Lag", b"l" * 1024) for _ in range(64)]) for _ in range(8)))
        stop.set()
        await sampler
    await api.close()
    return worst


async def _failover(namesrv: str, master: Proc, send_topic: str = "FailoverOther") -> tuple[float, float]:
    """Seconds from SIGKILL of the master until (a) a consumer started then reads the topic from the
    slave, (b) a producer's send to *send_topic* succeeds (on the other master, or the elected one)."""
    from rocketq.client import ConsumeFrom, LitePullConsumer, Message, MQClientError, Producer
    async with Producer("REP_FO", namesrv, timeout_s=1) as p:
        for i in range(20):
            await p.send(Message("Failover", b"m-%d" % i))
        await asyncio.sleep(1.0)                          # replicated and dispatched on the slave
        t_kill = time.perf_counter()
        master.stop(signal.SIGKILL)
        consumer = LitePullConsumer(f"REP_FO_{time.monotonic_ns()}", namesrv, consume_from=ConsumeFrom.FIRST)
        consumer.subscribe("Failover")
        await consumer.start()
        read_s = send_s = -1.0
        while read_s < 0 and time.perf_counter() - t_kill < 60:
            if await consumer.poll(0.2):
                read_s = time.perf_counter() - t_kill
        await consumer.shutdown()
        while send_s < 0 and time.perf_counter() - t_kill < 120:
            try:
                r = await p.send(Message(send_topic, b"x"))
                if r.status.value == "SEND_OK":
                    send_s = time.perf_counter() - t_kill
            except MQClientError:
                await asyncio.sleep(0.1)
    return read_s, send_s


def _controlled_broker(root: Path, broker_id: int, namesrv: str) -> Proc:
    conf = root / f"c{broker_id}.conf"
    conf.write_text(f"brokerName=broker-c\nbrokerId={broker_id}\nenableControllerMode=true\n"
                    f"controllerMasterRole=SYNC_MASTER\nstorePathRootDir={root / f'c{broker_id}'}\n"
                    f"namesrvAddr={namesrv}\nlistenPort=0\nhaListenPort=0\nbindAddress=127.0.0.1\n")
    return Proc(["broker", "-c", str(conf)], r"listening on [\d.]+:(\d+)")


def _controller_failover(root: Path) -> tuple[float, float]:
    ns = Proc(["namesrv", "--host", "127.0.0.1", "--port", "0", "--kv-config", str(root / "kv"),
               "--enable-controller"], r"listening on [\d.]+:(\d+)")
    addr = f"127.0.0.1:{ns.port}"
    first = _controlled_broker(root, 1, addr)            # the first broker heard from becomes master
    time.sleep(2.0)
    others = [_controlled_broker(root, i, addr) for i in (2, 3)]
    time.sleep(3.0)                                       # both follow the master
    try:
        return _run(_failover(addr, first, send_topic="Failover"))
    finally:
        for p in (*others, first, ns):
            p.stop()


def run_replication_bench(*, runs: int = 3, count: int = 20_000, directory: Path | None = None,
                          progress: Callable[[str], None] = lambda s: None) -> dict:
    modes = {"no replication": [], "ASYNC_MASTER + slave": [], "SYNC_MASTER + slave": []}
    lags, reads, sends, c_reads, c_sends = [], [], [], [], []
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        for run in range(runs):
            for mode in modes:
                progress(f"run {run + 1}/{runs}: {mode}")
                root = Path(tmp) / f"{run}-{mode.split()[0]}"
                root.mkdir()
                ns = Proc(["namesrv", "--host", "127.0.0.1", "--port", "0", "--kv-config", str(root / "kv")],
                          r"listening on [\d.]+:(\d+)")
                addr = f"127.0.0.1:{ns.port}"
                role = "SYNC_MASTER" if mode.startswith("SYNC") else "ASYNC_MASTER"
                master = _broker(root, "m", "broker-a", addr, role)
                procs = [master, ns]
                if mode != "no replication":
                    procs.insert(0, _broker(root, "s", "broker-a", addr, "SLAVE", 1))
                    time.sleep(2.0)                      # the slave registers and connects to the HA port
                try:
                    rate, lat = _run(_produce(addr, "Rep", count, 64))
                    p50, p99 = _pcts(lat) if lat else (0.0, 0.0)
                    modes[mode].append((rate, p50, p99))
                    if mode.startswith("ASYNC"):
                        progress(f"run {run + 1}/{runs}: replication lag under load")
                        lags.append(_run(_lag_under_load(addr, master.port, procs[0].port, 5.0)))
                        progress(f"run {run + 1}/{runs}: failover")
                        other = _broker(root, "o", "broker-b", addr, "ASYNC_MASTER")
                        procs.insert(0, other)
                        time.sleep(1.0)
                        read_s, send_s = _run(_failover(addr, master))
                        reads.append(read_s)
                        sends.append(send_s)
                finally:
                    for p in procs:
                        p.stop()
            progress(f"run {run + 1}/{runs}: controller-mode failover")
            root = Path(tmp) / f"{run}-controller"
            root.mkdir()
            read_s, send_s = _controller_failover(root)
            c_reads.append(read_s)
            c_sends.append(send_s)

    def mmm(xs):
        return [min(xs), statistics.median(xs), max(xs)] if xs else None
    return {"produce_1KiB_64_senders": {m: {"msgs_per_s": mmm([r[0] for r in v]), "p50_ms": mmm([r[1] for r in v]),
                                            "p99_ms": mmm([r[2] for r in v])} for m, v in modes.items()},
            "max_replication_lag_bytes": mmm(lags), "failover_read_from_slave_s": mmm(reads),
            "failover_send_to_other_master_s": mmm(sends), "controller_failover_read_s": mmm(c_reads),
            "controller_failover_send_to_elected_master_s": mmm(c_sends), "runs": runs, "count": count}
