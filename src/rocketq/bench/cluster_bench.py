"""The cluster benchmark (issue 20's numbers): one topic over 1, 2 and 3 broker groups.

Real processes: a NameServer and N masters (``rocketq namesrv`` / ``rocketq broker``, ASYNC_MASTER,
ASYNC_FLUSH, small store files); the topic is created on every group (``updateTopic -c``:
``QUEUES_PER_GROUP`` queues each), and rocketq's producer in this process sends ``count`` 1 KiB
messages with ``SENDERS`` sends in flight, round robin over every group's queues.  Group counts
are interleaved run by run so a change in the machine's load spreads over all of them.

Reported per group count (min / median / max over the runs): messages per second, and CPU time per
message - of the broker processes together (from ``/proc/<pid>/stat``) and of the producing client
(``time.process_time``).  On a machine with few cores the groups share them, so throughput need not
grow with the groups; broker CPU per message is what tells how the groups would scale on machines
of their own.  The machine's load average is recorded before and after.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rocketq.bench.broker_bench import _run
from rocketq.bench.replication_bench import Proc

QUEUES_PER_GROUP = 8
SENDERS = 64
BODY_BYTES = 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _start(root: Path, groups: int) -> tuple[Proc, list[Proc]]:
    ns = Proc(["namesrv", "--host", "127.0.0.1", "--port", "0", "--kv-config", str(root / "kv.json")],
              r"listening on [\d.]+:(\d+)")
    addr = f"127.0.0.1:{ns.port}"
    brokers = []
    try:
        for g in range(groups):
            brokers.append(Proc(["broker", "--store-profile", "small", "--store-path", str(root / f"g{g}"),
                                 "--port", "0", "--namesrv", addr, "--broker-name", f"broker-{chr(97 + g)}",
                                 "--no-console", "--no-metrics", "--set", "haListenPort=0"],
                                r"listening on [\d.]+:(\d+)"))
    except BaseException:
        for p in (*brokers, ns):
            p.stop()
        raise
    return ns, brokers


async def _produce(namesrv: str, groups: int, count: int) -> tuple[float, float, int]:
    """(seconds, client CPU seconds, messages acknowledged)."""
    from rocketq.client import Admin, Message, Producer
    async with Admin(namesrv) as admin:
        deadline = time.monotonic() + 30
        while len(await admin.brokers()) < groups:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(await admin.brokers())} of {groups} groups registered")
            await asyncio.sleep(0.1)
        await admin.create_topic("ClusterBench", queues=QUEUES_PER_GROUP)
    body = b"c" * BODY_BYTES
    acked = 0
    async with Producer("CLUSTER_BENCH", namesrv) as p:
        for _ in range(groups * 2):                   # warm: a connection to every group
            await p.send(Message("ClusterBench", body))
        per = count // SENDERS

        async def sender():
            nonlocal acked
            for _ in range(per):
                if (await p.send(Message("ClusterBench", body))).status.value == "SEND_OK":
                    acked += 1
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(SENDERS)))
        return time.perf_counter() - t0, time.process_time() - cpu0, acked


def run_cluster_bench(*, runs: int = 3, count: int = 20_000, group_counts: tuple[int, ...] = (1, 2, 3),
                      directory: Path | None = None, progress: Callable[[str], None] = lambda s: None) -> dict:
    results: dict[int, list[dict]] = {g: [] for g in group_counts}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        for run in range(runs):
            for groups in group_counts:
                progress(f"run {run + 1}/{runs}: {groups} group(s)")
                root = Path(tmp) / f"{run}-{groups}"
                root.mkdir()
                ns, brokers = _start(root, groups)
                try:
                    cpu0 = sum(cpu_seconds(b.proc.pid) for b in brokers)
                    seconds, client_cpu, acked = _run(_produce(f"127.0.0.1:{ns.port}", groups, count))
                    broker_cpu = sum(cpu_seconds(b.proc.pid) for b in brokers) - cpu0
                finally:
                    for p in (*brokers, ns):
                        p.stop()
                results[groups].append({"msgs_per_s": acked / seconds, "acked": acked,
                                        "broker_cpu_us_per_msg": broker_cpu / acked * 1e6,
                                        "client_cpu_us_per_msg": client_cpu / acked * 1e6})

    def mmm(xs):
        return [min(xs), statistics.median(xs), max(xs)]
    return {"groups": {g: {k: mmm([r[k] for r in rs]) for k in ("msgs_per_s", "broker_cpu_us_per_msg",
                                                                  "client_cpu_us_per_msg")}
                       for g, rs in results.items()},
            "runs": runs, "count": count, "senders": SENDERS, "body_bytes": BODY_BYTES,
            "queues_per_group": QUEUES_PER_GROUP, "cpus": os.cpu_count(),
            "load_before": list(load_before), "load_after": list(os.getloadavg())}
