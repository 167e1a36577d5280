"""One rocketq row of ``rocketq bench compare`` alone: batched produce, or 64 producers under SYNC_FLUSH.

``python -m rocketq.bench.batch_cpu [--size 128] [--runs 2] [--sync [--async-flush] | --one] [--no-preamble] [--threads]``

What ``bench compare`` does for rocketq's batched-produce ("fast") row and nothing else: ``rocketq
serve`` in a temporary directory, started and driven by compare's own
:class:`~rocketq.bench.compare.rocketq_remoting.Rocketq` (256 x 128 B or 64 x 1 KiB per
SEND_BATCH_MESSAGE, 8 in flight, 200,000 messages), after the one-at-a-time warm-up and timed sends
that come before the row in compare (``--no-preamble`` skips them), with the broker's CPU seconds
read around the row and scaled to a million messages, as compare's sampler reads them.

``--sync`` runs the sync-durability row instead (SYNC_FLUSH, 64 producers, one message per send,
20,000 messages): msgs/s, p99, how many sends shared one fsync, the mean fsync time and the share
of the row spent in fsyncs (the broker's group-commit metrics, read before and after), and the CPU a
message of the broker and of the client (this process: compare's client runs in it).  ``--sync
--async-flush`` runs the same producers against an ASYNC_FLUSH broker: the difference is what waiting
for the group commit costs.

``--one`` runs the one-message-per-round-trip row instead (compare's "one": ``Plan.one_n`` sends, each
awaited before the next, after compare's warm-up): msgs/s as compare counts it, p50 / p99, and the
broker's CPU per send in microseconds (``cpu_us_per_send``: the socket syscalls, the loop and the
handler together - what a request costs the broker over a real connection).

The tool runs against another checkout too (``PYTHONPATH=<tree>/src python <this file>``): it uses
only compare's classes and the broker's metrics.  ``--threads`` adds the CPU each of the broker's
threads spent in the row (``/proc/<pid>/task``, the threads named by ``py-spy dump``): the event
loop, the dispatcher, the flush services, the allocator.  ``--hold S`` waits S seconds between the
preamble and the row (to attach a profiler: the server's pid is printed first, "row in S s" then).
Every run prints one JSON line, the load average beside its figures.  ``--set KEY=VALUE``
(repeatable) passes a store or broker setting to ``rocketq serve`` (e.g. ``--set
transientStorePoolEnable=true``), for A/B runs of one setting.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from rocketq.bench.compare.rocketq_remoting import Rocketq
from rocketq.bench.compare.runner import WARMUP_SENDS, Plan, _pct, _run, _Sampler

PY_SPY = Path(sys.executable).with_name("py-spy")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
METRICS_TIMEOUT_S = 5.0
SYNCS = re.compile(r"^rocketq_group_commit_syncs_total\{[^}]*\} ([\d.e+-]+)$", re.MULTILINE)
SYNC_SECONDS = re.compile(r"^rocketq_group_commit_seconds_total\{[^}]*\} ([\d.e+-]+)$", re.MULTILINE)


def thread_ticks(pid: int) -> dict[int, int]:
    """utime + stime (clock ticks) of each thread of *pid*."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rpartition(")")[2].split()
        except OSError:                       # the thread ended meanwhile
            continue
        out[int(task.name)] = int(fields[11]) + int(fields[12])
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Python thread names by OS thread id (``py-spy dump``); {} without py-spy."""
    try:
        dump = subprocess.run([str(PY_SPY), "dump", "-p", str(pid)], capture_output=True, text=True, check=False,
                              timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(tid): name for tid, name in re.findall(r'^Thread (\d+) \([^)]*\): "([^"]*)"', dump, re.MULTILINE)}


def by_thread(pid: int, before: dict[int, int], after: dict[int, int]) -> dict[str, float]:
    names = thread_names(pid)
    spent: dict[str, float] = {}
    for tid, ticks in after.items():
        # without py-spy only the main thread (the event loop's) is known; threads with no Python frame
        # are Rust's or the OS's
        name = names.get(tid, "main" if tid == pid else "other" if not names else "native")
        spent[name] = spent.get(name, 0.0) + (ticks - before.get(tid, 0)) / TICKS_PER_S
    return {k: round(v, 3) for k, v in sorted(spent.items(), key=lambda kv: -kv[1]) if v > 0}


def group_commit_syncs(pid: int) -> tuple[float, float] | None:
    """The broker's group-commit counters (fsyncs, seconds in them), from whichever of its listening
    ports serves /metrics."""
    import psutil
    ports = sorted({c.laddr.port for c in psutil.Process(pid).net_connections("tcp") if c.status == "LISTEN"})
    for port in ports:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=METRICS_TIMEOUT_S) as r:
                text = r.read().decode()
        except (OSError, ValueError):          # not the metrics port (remoting, NameServer, ...)
            continue
        syncs, seconds = SYNCS.search(text), SYNC_SECONDS.search(text)
        if syncs and seconds:
            return float(syncs.group(1)), float(seconds.group(1))
    return None


class _Configured(Rocketq):
    """compare's rocketq, its ``rocketq serve`` given extra ``--set KEY=VALUE`` arguments."""

    def __init__(self, root: Path, *, sync: bool, settings: list[str]):
        super().__init__(root, sync=sync)
        self._settings = [arg for kv in settings for arg in ("--set", kv)]

    def start(self) -> None:
        if not self._settings:
            return super().start()
        from rocketq.bench.broker_bench import ServeProcess
        flush = ["--flush-disk-type", "SYNC_FLUSH"] if self.sync else []
        self._serve = ServeProcess(self.root, *flush, *self._settings, grpc=self.serves_grpc).__enter__()
        self.proc, self.namesrv = self._serve.proc, self._serve.namesrv
        self._topic = f"T{time.monotonic_ns()}"


def one_run(size: int, *, sync: bool, preamble: bool, threads: bool, hold_s: float, plan: Plan,
            one: bool = False, settings: list[str] = (), async_flush: bool = False) -> dict:
    body = b"m" * size
    with tempfile.TemporaryDirectory() as tmp:
        system = _Configured(Path(tmp), sync=sync and not async_flush, settings=list(settings))
        system.start()
        try:
            print(f"serve pid {system.pid}", file=sys.stderr, flush=True)
            if one:
                _run(system.produce_one(WARMUP_SENDS, body))
            elif preamble and not sync:
                _run(system.produce_one(WARMUP_SENDS, body))
                _run(system.produce_one(plan.one_n, body))
            if hold_s:
                print(f"row in {hold_s} s", file=sys.stderr, flush=True)
                time.sleep(hold_s)
            ticks = thread_ticks(system.pid) if threads else {}
            syncs0 = group_commit_syncs(system.pid) if system.sync else None
            load0 = os.getloadavg()[0]
            client0 = time.process_time()
            with _Sampler(system.pid) as sampler:
                t0 = time.perf_counter()
                if sync or one:
                    lat = _run(system.produce_sync(plan.sync_n, body) if sync else system.produce_one(plan.one_n, body))
                    n = len(lat)
                else:
                    n, _secs = _run(system.produce_fast(plan.fast_n, body))
                secs = time.perf_counter() - t0
            client_cpu_s = time.process_time() - client0
            row = {"size": size, "row": ("sync64-async-flush" if async_flush else "sync64") if sync else "one" if one else "fast",
                   "set": list(settings), "msgs": n,
                   "msgs_per_s": round(n / sum(lat)) if one else round(n / secs),
                   "cpu_s_per_M": round(sampler.cpu_s * 1e6 / n, 2), "load_before": round(load0, 2),
                   "load_after": round(os.getloadavg()[0], 2)}
            if one:
                row["p50_ms"], row["p99_ms"] = round(_pct(lat, 0.5), 3), round(_pct(lat, 0.99), 3)
                row["cpu_us_per_send"] = round(sampler.cpu_s * 1e6 / n, 1)
            if sync:
                row["p99_ms"] = round(_pct(lat, 0.99), 2)
                # CPU a message of the two processes (this one is the client): which side bounds the row
                row["broker_us_per_msg"] = round(sampler.cpu_s * 1e6 / n, 1)
                row["client_us_per_msg"] = round(client_cpu_s * 1e6 / n, 1)
                syncs1 = group_commit_syncs(system.pid) if system.sync else None
                if syncs0 is not None and syncs1 is not None and syncs1[0] > syncs0[0]:
                    fsyncs = syncs1[0] - syncs0[0]
                    row["fsyncs"] = int(fsyncs)
                    row["sends_per_fsync"] = round(n / fsyncs, 1)
                    row["fsync_ms"] = round((syncs1[1] - syncs0[1]) / fsyncs * 1000, 2)
                    row["fsync_busy"] = round((syncs1[1] - syncs0[1]) / secs, 2)     # share of the row in fsync
            if threads:
                row["thread_cpu_s"] = by_thread(system.pid, ticks, thread_ticks(system.pid))
            return row
        finally:
            system.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, action="append", help="body bytes (repeatable) [default: 128 and 1024]")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--sync", action="store_true", help="the SYNC_FLUSH x64 row instead of batched produce")
    ap.add_argument("--one", action="store_true", help="the one-message-per-round-trip row instead")
    ap.add_argument("--async-flush", action="store_true",
                    help="with --sync: the same 64 producers against an ASYNC_FLUSH broker (what waiting for the fsync costs)")
    ap.add_argument("--no-preamble", action="store_true", help="skip the one-at-a-time sends before the row")
    ap.add_argument("--threads", action="store_true", help="CPU per broker thread")
    ap.add_argument("--hold", type=float, default=0.0, help="seconds to wait before the row (attach a profiler)")
    ap.add_argument("--messages", type=int, help="messages in the row [default: compare's]")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for rocketq serve (repeatable), e.g. transientStorePoolEnable=true")
    args = ap.parse_args(argv)
    plan = Plan()
    if args.sync and args.one:
        ap.error("--sync and --one are two different rows: pick one")
    if args.messages:
        plan = Plan(fast_n=args.messages, sync_n=args.messages, one_n=args.messages)
    for _ in range(args.runs):
        for size in args.size or (128, 1024):
            print(json.dumps(one_run(size, sync=args.sync, preamble=not args.no_preamble, threads=args.threads,
                                     hold_s=args.hold, plan=plan, one=args.one, settings=args.set,
                                     async_flush=args.async_flush)), flush=True)


if __name__ == "__main__":
    main()
