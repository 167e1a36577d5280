"""The systems compared, each started by the suite on a free loopback port in a temporary directory,
driven by its usual Python client, and stopped (by pid) afterwards.

Every system implements the same five measurements (:class:`System`):

* ``produce_one``   - one message per round trip, acknowledged (latency list);
* ``produce_fast``  - the best batching / pipelining the client offers (count, seconds);
* ``consume``       - read a backlog with acknowledgements / offset commits (count, seconds);
* ``end_to_end``    - messages sent at a fixed rate, latency to a waiting consumer;
* ``produce_sync``  - 64 concurrent producers with a durability mode that fsyncs before the ack;

and ``fill`` (how the backlog is written; the batched produce unless a system says otherwise), and
``tool_rows``: what the field's own load tools measure against a system that speaks their protocol
(:mod:`.rmq_tools` for rocketq and Apache RocketMQ, :mod:`.kafka_tools` for Kafka).
A system whose client cannot keep up with a scenario's full size says so with ``caps`` (most
messages per scenario) and ``max_e2e_rate``; the report prints its ``notes``.

Durability per mode (what an acknowledgement means), stated in the report and checked by counting
the server's sync calls (:mod:`.fsync_check`):

* rocketq ASYNC_FLUSH: in the page cache, flushed every 500 ms; SYNC_FLUSH: fdatasync'ed (group commit).
* Redis ``appendfsync everysec``: in the AOF buffer, fsync'ed every second; ``always``: the AOF is
  fsync'ed before the reply (Redis batches the fsync per event-loop iteration).
* NATS JetStream 2.9 (file storage): written to the OS, not fsync'ed per message (nats-server 2.9
  has no per-message sync option), so it takes no part in the sync scenario.
* Apache RocketMQ: ASYNC_FLUSH / SYNC_FLUSH, as rocketq (:mod:`.apache_rocketmq`; over gRPC the proxy
  in local mode, the store in its JVM: :mod:`.apache_grpc`).
* Apache Kafka: appended to the leader's log (page cache) / ``log.flush.interval.messages=1``, an
  fsync after every append before the ack (:mod:`.kafka`).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout_s} s")


class System:
    name = "?"
    durability = {"async": "?", "sync": None}
    caps: dict[str, int] = {}              # scenario ("fast", "consume", "sync64") -> most messages
    max_e2e_rate: int | None = None        # fastest fixed rate the end-to-end scenario is run at
    notes = ""                             # how the client is driven, when the report must say it

    def __init__(self, root: Path, sync: bool = False, security=None):
        from rocketq.bench.security import NONE
        self.root, self.sync = root, sync
        self.security = security or NONE          # ACL / TLS: rocketq's rows use it, the peers run as they are
        self.proc: subprocess.Popen | None = None

    @classmethod
    def available(cls) -> str | None:
        """None when it can run here, else why not."""
        return None

    @classmethod
    def refuses(cls, security) -> str | None:
        """Why it cannot run with these security settings (a BenchSecurity), or None."""
        return None

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def pids(self) -> list[int]:
        """The server's process and all its descendants (what the sync count attaches to)."""
        import psutil
        root = psutil.Process(self.pid)
        return [root.pid] + [c.pid for c in root.children(recursive=True)]

    @classmethod
    def count(cls, scenario: str, n: int) -> int:
        return min(n, cls.caps.get(scenario, n))

    async def fill(self, n: int, body: bytes) -> None:
        """Write *n* more messages to the backlog ``consume`` reads."""
        await self.produce_fast(n, body)

    async def produce_one(self, n: int, body: bytes) -> list[float]:
        raise NotImplementedError

    async def produce_fast(self, n: int, body: bytes) -> tuple[int, float]:
        raise NotImplementedError

    async def consume(self, n: int) -> tuple[int, float]:
        raise NotImplementedError

    async def end_to_end(self, rate: int, seconds: float, size: int) -> list[float]:
        raise NotImplementedError

    async def produce_sync(self, n: int, body: bytes, producers: int = 64) -> list[float]:
        raise NotImplementedError

    def tool_rows(self, size: int, plan, sync: bool) -> list[tuple[str, str, float]]:
        """(scenario, metric, value) measured by the field's own load tools against this system
        (RocketMQ's benchmark workload, Kafka's perf tools), where it speaks their protocol."""
        return []


def stamped(size: int) -> bytes:
    return b"%020.6f" % time.perf_counter() + b"x" * max(0, size - 20)


def stamp_of(body: bytes) -> float:
    return float(body[:20])


async def paced(rate: int, seconds: float, send) -> None:
    """Call ``send()`` *rate* times a second for *seconds*, at most 512 in flight."""
    total, t0, pending = int(rate * seconds), time.perf_counter(), set()
    for i in range(total):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        pending.add(asyncio.ensure_future(send()))
        if len(pending) > 512:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    if pending:
        await asyncio.gather(*pending)


async def settle(lat: list, expected: int, timeout_s: float = 30.0) -> None:
    """Wait until *expected* latencies arrived (or *timeout_s* passed: the rest were lost or late)."""
    deadline = time.monotonic() + timeout_s
    while len(lat) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def timed_each(n: int, call) -> list[float]:
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        await call()
        lat.append(time.perf_counter() - t)
    return lat


async def concurrent_timed(n: int, workers: int, call) -> list[float]:
    """*n* calls by *workers* tasks, each awaiting its call before the next (as application tasks
    would; one task per call queued behind a semaphore costs the client as much as the calls);
    returns each call's latency."""
    lat: list[float] = []

    async def worker(count: int):
        for _ in range(count):
            t = time.perf_counter()
            await call()
            lat.append(time.perf_counter() - t)
    share, extra = divmod(n, workers)
    await asyncio.gather(*(worker(share + (i < extra)) for i in range(workers)))
    return lat


def which(binary: str) -> str | None:
    return shutil.which(binary) or next((p for p in (f"/usr/sbin/{binary}", f"/usr/bin/{binary}")
                                         if os.path.exists(p)), None)
