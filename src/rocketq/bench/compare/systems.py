"""Redis Streams and NATS JetStream as :class:`System` implementations, and ``SYSTEMS``: every system
compared, in the order the report lists them (rocketq's protocols first, then Apache RocketMQ's (remoting,
gRPC) and Apache Kafka, then the peers from the OS)."""

from __future__ import annotations

import asyncio
import subprocess
import time

from rocketq.bench.compare.peers import (
    System,
    _wait_port,
    concurrent_timed,
    free_port,
    paced,
    settle,
    stamp_of,
    stamped,
    timed_each,
    which,
)


class RedisStreams(System):
    name = "Redis Streams"
    durability = {"async": "appendfsync everysec: AOF fsync once a second",
                  "sync": "appendfsync always: AOF fsync before the reply (batched per loop)"}

    @classmethod
    def available(cls):
        if not which("redis-server"):
            return "redis-server is not installed (apt-get install redis-server)"
        try:
            import redis  # noqa: F401
        except ImportError:
            return "the redis client is not installed (pip install redis)"
        return None

    def start(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--dir", str(self.root), "--appendonly", "yes", "--appendfsync",
                                      "always" if self.sync else "everysec", "--save", "", "--protected-mode", "no"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(self.port)
        self.stream = "s"

    def _client(self):
        import redis.asyncio as redis
        return redis.Redis(host="127.0.0.1", port=self.port)

    async def produce_one(self, n, body):
        r = self._client()
        lat = await timed_each(n, lambda: r.xadd(self.stream, {"b": body}))
        await r.aclose()
        return lat

    async def produce_fast(self, n, body):
        r = self._client()
        t0 = time.perf_counter()
        for start in range(0, n, 1000):
            pipe = r.pipeline(transaction=False)
            for _ in range(min(1000, n - start)):
                pipe.xadd(self.stream, {"b": body})
            await pipe.execute()
        elapsed = time.perf_counter() - t0
        await r.aclose()
        return n, elapsed

    async def consume(self, n):
        r = self._client()
        group = f"g{time.monotonic_ns()}"
        await r.xgroup_create(self.stream, group, id="0")
        got, t0 = 0, time.perf_counter()
        while got < n:
            resp = await r.xreadgroup(group, "c1", {self.stream: ">"}, count=1000)
            if not resp:
                break
            ids = [mid for mid, _ in resp[0][1]]
            await r.xack(self.stream, group, *ids)
            got += len(ids)
        elapsed = time.perf_counter() - t0
        await r.aclose()
        return got, elapsed

    async def end_to_end(self, rate, seconds, size):
        prod, cons = self._client(), self._client()
        lat: list[float] = []
        stream = "e2e"
        await prod.xadd(stream, {"b": b"start"})
        last_id = "$"
        stop = asyncio.Event()

        async def reader():
            nonlocal last_id
            while not stop.is_set():
                resp = await cons.xread({stream: last_id}, block=200, count=1000)
                now = time.perf_counter()
                for _, entries in resp or ():
                    for mid, fields in entries:
                        last_id = mid
                        lat.append(now - stamp_of(fields[b"b"]))
        task = asyncio.create_task(reader())
        await asyncio.sleep(0.5)
        await paced(rate, seconds, lambda: prod.xadd(stream, {"b": stamped(size)}))
        await settle(lat, int(rate * seconds))
        stop.set()
        await task
        await prod.aclose()
        await cons.aclose()
        return lat

    async def produce_sync(self, n, body, producers=64):
        import redis.asyncio as redis
        pool = redis.ConnectionPool(host="127.0.0.1", port=self.port, max_connections=producers)
        r = redis.Redis(connection_pool=pool)
        lat = await concurrent_timed(n, producers, lambda: r.xadd(self.stream, {"b": body}))
        await r.aclose()
        await pool.aclose()
        return lat


class NatsJetStream(System):
    name = "NATS JetStream"
    durability = {"async": "file storage: written to the OS, no per-message fsync (2.9)", "sync": None}

    @classmethod
    def available(cls):
        if not which("nats-server"):
            return "nats-server is not installed (apt-get install nats-server)"
        try:
            import nats  # noqa: F401
        except ImportError:
            return "the nats client is not installed (pip install nats-py)"
        return None

    def start(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([which("nats-server"), "-js", "-a", "127.0.0.1", "-p", str(self.port),
                                      "-sd", str(self.root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(self.port)

    async def _js(self, stream: str = "S", subject: str = "s"):
        import nats
        from nats.js.api import StorageType
        nc = await nats.connect(f"nats://127.0.0.1:{self.port}")
        js = nc.jetstream()
        try:
            await js.add_stream(name=stream, subjects=[subject], storage=StorageType.FILE)
        except Exception:          # already there
            pass
        return nc, js

    async def produce_one(self, n, body):
        nc, js = await self._js()
        lat = await timed_each(n, lambda: js.publish("s", body))
        await nc.close()
        return lat

    async def produce_fast(self, n, body):
        nc, js = await self._js()
        t0 = time.perf_counter()
        await concurrent_timed(n, 256, lambda: js.publish("s", body))
        elapsed = time.perf_counter() - t0
        await nc.close()
        return n, elapsed

    async def consume(self, n):
        nc, js = await self._js()
        sub = await js.pull_subscribe("s", f"d{time.monotonic_ns()}")
        got, t0 = 0, time.perf_counter()
        while got < n:
            try:
                msgs = await sub.fetch(1000, timeout=2)
            except Exception:
                break
            for m in msgs:
                await m.ack()
            got += len(msgs)
        elapsed = time.perf_counter() - t0
        await nc.close()
        return got, elapsed

    async def end_to_end(self, rate, seconds, size):
        from nats.js.api import DeliverPolicy
        nc, js = await self._js("E", "e")
        lat: list[float] = []

        async def on_msg(m):
            lat.append(time.perf_counter() - stamp_of(m.data))
            await m.ack()
        await js.subscribe("e", cb=on_msg, deliver_policy=DeliverPolicy.NEW)
        await asyncio.sleep(0.5)
        await paced(rate, seconds, lambda: js.publish("e", stamped(size)))
        await settle(lat, int(rate * seconds))
        await nc.close()
        return lat


def _systems() -> list[type[System]]:
    from rocketq.bench.compare.apache_grpc import ApacheRocketMQGrpc
    from rocketq.bench.compare.apache_rocketmq import ApacheRocketMQ
    from rocketq.bench.compare.kafka import ApacheKafka
    from rocketq.bench.compare.rabbitmq import RabbitStreams
    from rocketq.bench.compare.rocketq_grpc import RocketqGrpc
    from rocketq.bench.compare.rocketq_remoting import Rocketq
    return [Rocketq, RocketqGrpc, ApacheRocketMQ, ApacheRocketMQGrpc, ApacheKafka, RedisStreams, NatsJetStream,
            RabbitStreams]


SYSTEMS = _systems()

