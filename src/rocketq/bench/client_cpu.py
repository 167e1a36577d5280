"""The Python client's CPU per awaited ``Producer.send``, against a real ``rocketq serve`` in another process.

``python -m rocketq.bench.client_cpu [--size 128] [--messages 20000] [--concurrency 1] [--runs 1]
[--server-src DIR] [--profile FILE]``

Starts ``rocketq serve`` (ASYNC_FLUSH, or SYNC_FLUSH with ``--sync``) in a temporary directory, warms
a producer up (route, connection, 500 sends), then times ``--messages`` sends of ``--size`` bytes, each
awaited before its sender's next one, by ``--concurrency`` senders (1: compare's "one" row; 64: its
"sync" row's shape) on uvloop, as ``bench compare`` drives them.  Prints one JSON line per run: the
client process's CPU per send (``time.process_time``: what the client costs, whatever the broker
does), msgs/s, and the load average.

For A/B runs of two trees, run this file with ``PYTHONPATH=<tree>/src`` (the client measured is that
tree's) and ``--server-src`` one fixed tree's ``src`` for both, so the broker stays the same.
``--profile FILE`` writes a cProfile of the timed sends (pstats format).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

WARMUP_SENDS = 500


async def timed_sends(namesrv: str, topic: str, n: int, size: int, concurrency: int, profile: str | None) -> dict:
    from rocketq.client import Message, Producer
    body = b"m" * size
    async with Producer("CLIENT_CPU", namesrv) as p:
        for _ in range(WARMUP_SENDS):
            await p.send(Message(topic, body))

        async def sender(count: int) -> None:
            for _ in range(count):
                await p.send(Message(topic, body))
        share, extra = divmod(n, concurrency)
        profiler = None
        if profile:
            import cProfile
            profiler = cProfile.Profile()
            profiler.enable()
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(sender(share + (i < extra)) for i in range(concurrency)))
        cpu, secs = time.process_time() - cpu0, time.perf_counter() - t0
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
    return {"client_cpu_us_per_send": round(cpu * 1e6 / n, 1), "msgs_per_s": round(n / secs)}


def one_run(size: int, n: int, concurrency: int, *, sync: bool, server_src: str | None, profile: str | None) -> dict:
    from rocketq.bench.broker_bench import ServeProcess
    from rocketq.bench.compare.runner import _run
    flush = ["--flush-disk-type", "SYNC_FLUSH"] if sync else []
    env = {**os.environ, "PYTHONPATH": server_src} if server_src else None
    with tempfile.TemporaryDirectory() as tmp:
        serve = ServeProcess(Path(tmp), *flush, env=env).__enter__()
        try:
            load0 = os.getloadavg()[0]
            row = _run(timed_sends(serve.namesrv, f"T{time.monotonic_ns()}", n, size, concurrency, profile))
        finally:
            serve.__exit__(None, None, None)
    return {"size": size, "concurrency": concurrency, "sync": sync, "msgs": n, **row,
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, action="append", help="body bytes (repeatable) [default: 128 and 1024]")
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--concurrency", type=int, action="append", help="senders (repeatable) [default: 1 and 64]")
    ap.add_argument("--sync", action="store_true", help="the broker with SYNC_FLUSH")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--server-src", help="PYTHONPATH for rocketq serve (one broker for A/B runs of two clients)")
    ap.add_argument("--profile", help="write a cProfile of the timed sends here (one size and concurrency)")
    args = ap.parse_args(argv)
    for _ in range(args.runs):
        for concurrency in args.concurrency or (1, 64):
            for size in args.size or (128, 1024):
                print(json.dumps(one_run(size, args.messages, concurrency, sync=args.sync, server_src=args.server_src,
                                         profile=args.profile)), flush=True)


if __name__ == "__main__":
    main()
