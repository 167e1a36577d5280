"""The broker benchmark (issue 3's numbers): a real ``rocketq serve`` process, rocketq's own client
in this process, over loopback.

Scenarios (each run ``runs`` times; min / median / max reported):

* ``echo floor``          - a bare uvloop TCP echo of a 1 KiB frame between two processes: what one
                            round trip costs on this machine before any broker code runs;
* ``sync send 1KiB``      - one producer, one message per round trip (msgs/s, p50/p99);
* ``in-flight send 1KiB`` - one producer, 256 single-message sends in flight;
* ``batch send 1KiB`` / ``batch send 128B`` - SEND_BATCH_MESSAGE of 64 / 256, 8 batches in flight;
* ``drain 1KiB backlog``  - a LitePullConsumer reading a backlog of ``backlog`` messages;
* ``end-to-end 1KiB``     - sends paced at ``e2e_rate``/s from a producer process of its own, a
                            long-polling PushConsumer in this one; latency = delivered - sent
                            (perf_counter, the system-wide monotonic clock, in the body);
* ``SYNC_FLUSH 64 producers`` - a second server with SYNC_FLUSH, 64 concurrent senders.

The broker runs ASYNC_FLUSH (except the last scenario) in its own process, as the issue asks.
With a :class:`~rocketq.bench.security.BenchSecurity` the servers start with ACL and/or TLS on and
every client of every scenario signs its requests and connects with TLS as told (issue 23).
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rocketq.bench.security import NONE, BenchSecurity

SERVE_START_TIMEOUT_S = 60
BOOT = re.compile(r"NameServer [\d.]+:(\d+), broker \S+ \(\S+\) [\d.]+:(\d+)")


@dataclass
class Scenario:
    name: str
    target: str
    rates: list[float] = field(default_factory=list)        # msgs/s per run
    p50_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        def mmm(xs):
            return [min(xs), statistics.median(xs), max(xs)] if xs else None
        return {"name": self.name, "target": self.target, "msgs_per_s": mmm(self.rates),
                "p50_ms": mmm(self.p50_ms), "p99_ms": mmm(self.p99_ms)}


class ServeProcess:
    """``rocketq serve`` on free ports in a temporary store, stopped (SIGTERM) on exit."""

    def __init__(self, root: Path, *extra: str, grpc: bool = False, env: dict[str, str] | None = None):
        self.root, self.extra, self.grpc, self.env = root, extra, grpc, env     # env: the server's (default: ours)

    def __enter__(self) -> ServeProcess:
        grpc_args = ["--grpc-port", "0"] if self.grpc else ["--no-grpc"]
        cmd = [sys.executable, "-m", "rocketq.cli.main", "serve", "--store-path", str(self.root), "--host",
               "127.0.0.1", "--port", "0", "--namesrv-port", "0", *grpc_args, *self.extra]
        self._stderr = tempfile.TemporaryFile(mode="w+")        # read back only when it does not start
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=self.env)
        ready, _, _ = select.select([self.proc.stdout], [], [], SERVE_START_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        match = BOOT.search(line)
        if not match:
            self.proc.kill()
            self.proc.wait()
            self._stderr.seek(0)
            said = [ln for ln in self._stderr.read().splitlines() if ln.strip()]
            self._stderr.close()
            raise RuntimeError("rocketq serve did not start" + (f": {said[-1].strip()}" if said else ""))
        self.namesrv = f"127.0.0.1:{match.group(1)}"
        grpc_match = re.search(r"gRPC [\d.]+:(\d+)", line)
        self.grpc_endpoint = f"127.0.0.1:{grpc_match.group(1)}" if grpc_match else None
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._stderr.close()


def _pcts(lat: list[float]) -> tuple[float, float]:
    lat = sorted(lat)
    return lat[len(lat) // 2] * 1000, lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000


async def _sends(namesrv: str, topic: str, n: int, size: int, inflight: int, batch: int,
                 security: BenchSecurity = NONE) -> tuple[float, list[float]]:
    """*n* messages of *size* bytes, one per send or *batch* per send, *inflight* sends at a time."""
    from rocketq.bench.compare.peers import concurrent_timed
    from rocketq.client import Message, Producer
    body = b"x" * size
    async with Producer("BENCH_PG", namesrv, **security.client_kwargs()) as p:
        await p.send(Message(topic, body))                 # route and connection warm
        calls = n // max(batch, 1)
        send = (lambda: p.send_batch([Message(topic, body) for _ in range(batch)])) if batch else \
            (lambda: p.send(Message(topic, body)))
        t0 = time.perf_counter()
        lat = await concurrent_timed(calls, inflight, send)
        return calls * max(batch, 1) / (time.perf_counter() - t0), lat


async def _drain(namesrv: str, topic: str, n: int, security: BenchSecurity = NONE) -> float:
    from rocketq.client import ConsumeFrom, LitePullConsumer
    c = LitePullConsumer(f"BENCH_DRAIN_{time.monotonic_ns()}", namesrv, consume_from=ConsumeFrom.FIRST,
                         pull_batch_size=256, buffer_batches=256, **security.client_kwargs())
    c.subscribe(topic)
    await c.start()
    got, t0 = 0, time.perf_counter()                 # from a started consumer (queues assigned) to the last batch
    last = t0
    deadline = time.monotonic() + 600
    while got < n and time.monotonic() < deadline:
        msgs = await c.poll(2.0, max_messages=8192)
        if not msgs and c.refusal is not None:       # the server refuses these credentials: no waiting
            await c.shutdown()
            raise c.refusal
        if not msgs and got:
            break                                    # idle for 2 s after data: everything is read
        got += len(msgs)
        last = time.perf_counter()
    rate = got / (last - t0) if last > t0 else 0.0
    await c.shutdown()
    return rate


async def _end_to_end(namesrv: str, topic: str, rate: int, seconds: float,
                      security: BenchSecurity = NONE) -> tuple[float, list[float]]:
    """A long-polling PushConsumer here, the paced producer in a process of its own (perf_counter is
    the system-wide monotonic clock, so the sent time in the body compares across processes)."""
    import multiprocessing
    from rocketq.client import ConsumeFrom, PushConsumer
    lat: list[float] = []

    async def listener(msgs):
        now = time.perf_counter()
        lat.extend(now - float(m.body[:20]) for m in msgs)
    consumer = PushConsumer(f"BENCH_E2E_{time.monotonic_ns()}", namesrv, listener=listener,
                            consume_from=ConsumeFrom.LAST, **security.client_kwargs())
    consumer.subscribe(topic)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    producer = ctx.Process(target=_paced_producer, args=(child, namesrv, topic, rate, seconds, security),
                           daemon=True)
    producer.start()
    try:
        loop = asyncio.get_running_loop()
        if await loop.run_in_executor(None, parent.recv) != "ready":   # route known, one message sent
            raise RuntimeError("the end-to-end producer did not start")
        await consumer.start()
        await asyncio.sleep(1.0)
        lat.clear()
        parent.send("go")
        total, sent_rate = await loop.run_in_executor(None, parent.recv)
        deadline = time.monotonic() + 30
        while len(lat) < total and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        producer.join(10)
        if producer.is_alive():
            producer.kill()
        await consumer.shutdown()
    return sent_rate, lat


def _paced_producer(conn, namesrv: str, topic: str, rate: int, seconds: float, security: BenchSecurity) -> None:
    """Child process: send ``rate``/s 1 KiB messages for ``seconds``, each stamped with perf_counter."""
    async def main() -> None:
        from rocketq.client import Message, Producer
        async with Producer("BENCH_PG", namesrv, **security.client_kwargs()) as p:
            await p.send(Message(topic, b"%020.6f" % time.perf_counter() + b"x" * 1004))
            conn.send("ready")
            await asyncio.get_running_loop().run_in_executor(None, conn.recv)
            total = int(rate * seconds)
            t0 = time.perf_counter()
            pending: set = set()
            for i in range(total):
                delay = t0 + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                body = b"%020.6f" % time.perf_counter() + b"x" * 1004
                pending.add(asyncio.ensure_future(p.send(Message(topic, body))))
                if len(pending) > 512:
                    _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            await asyncio.gather(*pending)
            conn.send((total, total / (time.perf_counter() - t0)))
    _run(main())


def _echo_floor(rounds: int = 5000) -> tuple[float, list[float]]:
    code = ("import asyncio,uvloop\nclass E(asyncio.Protocol):\n def connection_made(s,t): s.t=t\n"
            " def data_received(s,d): s.t.write(d)\nasync def m():\n s=await asyncio.get_running_loop()"
            ".create_server(E,'127.0.0.1',0)\n print(s.sockets[0].getsockname()[1],flush=True)\n"
            " await asyncio.sleep(3600)\nuvloop.run(m())\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())

        async def client():
            import socket
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            lat = []
            frame = b"x" * 1100
            for _ in range(rounds):
                t = time.perf_counter()
                w.write(frame)
                await r.readexactly(len(frame))
                lat.append(time.perf_counter() - t)
            w.close()
            return rounds / sum(lat), lat
        return _run(client())
    finally:
        proc.kill()
        proc.wait()


def _run(coro):
    try:
        import uvloop
        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def run_broker_bench(*, runs: int = 3, quick: bool = False, backlog: int = 1_000_000, e2e_rate: int = 10_000,
                     directory: Path | None = None, progress: Callable[[str], None] = lambda s: None,
                     security: BenchSecurity = NONE) -> dict:
    scale = 10 if quick else 1
    backlog = backlog // scale
    sc = {k: Scenario(k, t) for k, t in [
        ("echo floor (bare uvloop TCP round trip)", "-"), ("sync send 1KiB", ">= 10,000/s, p99 <= 2 ms"),
        ("in-flight send 1KiB (256)", ">= 150,000/s"), ("batch send 1KiB (64 x 8)", ">= 150,000/s"),
        ("batch send 128B (256 x 8)", ">= 300,000/s"), ("drain 1KiB backlog", ">= 300,000/s"),
        (f"end-to-end 1KiB at {e2e_rate}/s", "p50 <= 1 ms, p99 <= 5 ms"),
        ("SYNC_FLUSH 64 producers 1KiB", "report")]}
    names = list(sc)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        for run in range(runs):
            progress(f"run {run + 1}/{runs}: echo floor")
            rate, lat = _echo_floor(5000 // scale)
            _record(sc[names[0]], rate, lat)
            with ServeProcess(Path(tmp) / f"async-{run}", *security.serve_args()) as srv:
                for i, (n, size, inflight, batch) in enumerate([(20_000, 1024, 1, 0), (100_000, 1024, 256, 0),
                                                                (300_000, 1024, 8, 64), (600_000, 128, 8, 256)]):
                    progress(f"run {run + 1}/{runs}: {names[i + 1]}")
                    rate, lat = _run(_sends(srv.namesrv, f"B{i}", n // scale, size, inflight, batch, security))
                    _record(sc[names[i + 1]], rate, lat)
                progress(f"run {run + 1}/{runs}: filling a {backlog:,}-message backlog")
                _run(_sends(srv.namesrv, "Backlog", backlog, 1024, 8, 64, security))
                progress(f"run {run + 1}/{runs}: draining it")
                sc[names[5]].rates.append(_run(_drain(srv.namesrv, "Backlog", backlog, security)))
                progress(f"run {run + 1}/{runs}: end-to-end latency")
                rate, lat = _run(_end_to_end(srv.namesrv, "E2E", e2e_rate, 10 / scale, security))
                _record(sc[names[6]], rate, lat)
            with ServeProcess(Path(tmp) / f"sync-{run}", "--flush-disk-type", "SYNC_FLUSH",
                              *security.serve_args()) as srv:
                progress(f"run {run + 1}/{runs}: SYNC_FLUSH with 64 producers")
                rate, lat = _run(_sends(srv.namesrv, "Sync", 30_000 // scale, 1024, 64, 0, security))
                _record(sc[names[7]], rate, lat)
    return {"scenarios": [s.to_dict() for s in sc.values()], "runs": runs, "quick": quick, "backlog": backlog,
            "cpu_count": os.cpu_count(), "security": security.describe()}


def _record(s: Scenario, rate: float, lat: list[float]) -> None:
    s.rates.append(rate)
    if lat:
        p50, p99 = _pcts(lat)
        s.p50_ms.append(p50)
        s.p99_ms.append(p99)
