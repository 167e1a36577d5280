"""The backlog drain of ``rocketq bench compare`` alone, with the CPU both processes spend on it.

``python -m rocketq.bench.backlog_bench --size 1024 --backlog 1000000`` starts ``rocketq serve``
(:class:`~rocketq.bench.compare.rocketq_remoting.Rocketq`, the compare suite's system), fills a topic
with the suite's batched produce, waits until the broker is idle (dispatch done), then drains the
backlog with the suite's LitePullConsumer (``Rocketq.consume``: 256 a pull, committed at the end).
It prints msgs/s and the CPU seconds per million messages of the consumer (this process) and of the
broker (``/proc/<pid>/stat``), each counted from just before the consumer starts to just after it
shut down, with the load average beside them.

``--profile DIR`` samples both processes while they drain (py-spy ``--native --threads``, raw folded
stacks; native sampling stops the process for each sample, so rates measured with it are low), into
``DIR/broker-<size>.txt`` and ``DIR/client-<size>.txt``.  ``--pull-batch`` sets the reader's
pullBatchSize.  The module only uses what the tree before issue 15's pull work had, so
the same file measures the "before" tree: ``PYTHONPATH=/work/wt/base/src python .../backlog_bench.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IDLE_CPU_S = 0.05              # broker CPU over one idle probe below which dispatch is taken as done
IDLE_PROBE_S = 0.5
IDLE_WAIT_MAX_S = 120.0
PY_SPY = Path(sys.executable).with_name("py-spy")
PROFILE_RATE_HZ = 200


def proc_cpu(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of *pid* (its threads included) from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def proc_cpu_s(pid: int) -> float:
    return sum(proc_cpu(pid))


def wait_idle(pid: int) -> float:
    """Seconds waited until *pid* used under IDLE_CPU_S over one probe (the dispatcher caught up)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < IDLE_WAIT_MAX_S:
        before = proc_cpu_s(pid)
        time.sleep(IDLE_PROBE_S)
        if proc_cpu_s(pid) - before < IDLE_CPU_S:
            break
    return time.monotonic() - t0


def _run(coro):
    try:
        import uvloop
        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


class Sampler:
    """py-spy on one process until stopped (SIGINT makes it write its file)."""

    def __init__(self, pid: int, out: Path, native: bool):
        # --native samples stop the process (py-spy cannot unwind native frames of a running one)
        args = [str(PY_SPY), "record", "-p", str(pid), "-r", str(PROFILE_RATE_HZ), "--threads",
                "--format", "raw", "-o", str(out)] + (["--native"] if native else ["--nonblocking"])
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def drain_once(size: int, backlog: int, profile: Path | None = None, pull_batch: int | None = None) -> dict:
    from rocketq.bench.compare.rocketq_remoting import Rocketq
    root = Path(tempfile.mkdtemp(prefix=f"backlog-{size}-"))
    system = Rocketq(root)
    if pull_batch:
        system.pull_batch_size = pull_batch
    system.start()
    try:
        _run(system.fill(backlog, b"m" * size))
        idle_after_s = wait_idle(system.pid)
        samplers = [Sampler(system.pid, profile / f"broker-{size}.txt", native=True),
                    Sampler(os.getpid(), profile / f"client-{size}.txt", native=True)] if profile else []
        load0 = os.getloadavg()[0]
        broker0, client0, wall0 = proc_cpu(system.pid), proc_cpu(os.getpid()), time.perf_counter()
        got, secs = _run(system.consume(backlog))
        wall = time.perf_counter() - wall0
        broker1, client1 = proc_cpu(system.pid), proc_cpu(os.getpid())
        load1 = os.getloadavg()[0]
        for s in samplers:
            s.stop()
    finally:
        system.stop()
        shutil.rmtree(root, ignore_errors=True)
    per_m = 1e6 / max(got, 1)

    def per_million(before, after) -> dict:
        user, system_ = (after[0] - before[0]) * per_m, (after[1] - before[1]) * per_m
        return {"cpu_s_per_M": round(user + system_, 2), "user": round(user, 2), "sys": round(system_, 2)}
    return {"size": size, "backlog": backlog, "pull_batch": getattr(system, "pull_batch_size", 256), "got": got, "msgs_per_s": round(got / secs if secs else 0.0),
            "drain_s": round(secs, 3), "wall_s": round(wall, 3), "broker": per_million(broker0, broker1),
            "client": per_million(client0, client1), "load_before": round(load0, 2), "load_after": round(load1, 2),
            "idle_wait_s": round(idle_after_s, 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, action="append", help="body bytes (repeatable; default 128 and 1024)")
    ap.add_argument("--backlog", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--profile", type=Path, default=None, help="directory for py-spy's raw stacks")
    ap.add_argument("--json", type=Path, default=None, help="append one JSON line per drain here")
    ap.add_argument("--pull-batch", type=int, default=None, help="the consumer's pullBatchSize (default: the suite's)")
    args = ap.parse_args(argv)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    for _ in range(args.runs):
        for size in args.size or [128, 1024]:
            row = drain_once(size, args.backlog, args.profile, args.pull_batch)
            print(json.dumps(row), flush=True)
            if args.json:
                with args.json.open("a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
