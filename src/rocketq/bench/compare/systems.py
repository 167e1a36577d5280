"""rocketq, Redis Streams and NATS JetStream as :class:`System` implementations."""

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
    stamp_of,
    stamped,
    timed_each,
    which,
)


class Rocketq(System):
    name = "rocketq (remoting)"
    durability = {"async": "ASYNC_FLUSH: page cache, flushed every 500 ms",
                  "sync": "SYNC_FLUSH: fsync (group commit) before the ack"}

    def start(self) -> None:
        from rocketq.bench.broker_bench import ServeProcess
        self._serve = ServeProcess(self.root, *(["--flush-disk-type", "SYNC_FLUSH"] if self.sync else [])).__enter__()
        self.proc, self.namesrv = self._serve.proc, self._serve.namesrv
        self._topic = f"T{time.monotonic_ns()}"

    def stop(self) -> None:
        self._serve.__exit__(None, None, None)

    def _producer(self):
        from rocketq.client import Producer
        return Producer("CMP", self.namesrv)

    async def produce_one(self, n, body):
        from rocketq.client import Message
        async with self._producer() as p:
            await p.send(Message(self._topic, body))
            return await timed_each(n, lambda: p.send(Message(self._topic, body)))

    async def produce_fast(self, n, body):
        from rocketq.client import Message
        batch = 256 if len(body) <= 256 else 64
        async with self._producer() as p:
            sem = asyncio.Semaphore(8)

            async def one():
                async with sem:
                    await p.send_batch([Message(self._topic, body) for _ in range(batch)])
            t0 = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(n // batch)))
            return n // batch * batch, time.perf_counter() - t0

    async def consume(self, n):
        from rocketq.client import ConsumeFrom, LitePullConsumer
        c = LitePullConsumer(f"CMP{time.monotonic_ns()}", self.namesrv, consume_from=ConsumeFrom.FIRST,
                             pull_batch_size=256, buffer_batches=256)
        c.subscribe(self._topic)
        await c.start()
        got, t0 = 0, time.perf_counter()
        last = t0
        while got < n:
            msgs = await c.poll(2.0, 8192)
            if not msgs:
                break
            got += len(msgs)
            last = time.perf_counter()
        await c.commit()
        await c.shutdown()
        return got, last - t0

    async def end_to_end(self, rate, seconds, size):
        from rocketq.client import ConsumeFrom, Message, PushConsumer
        lat: list[float] = []
        topic = self._topic + "E"

        async def listener(msgs):
            now = time.perf_counter()
            lat.extend(now - stamp_of(m.body) for m in msgs)
        c = PushConsumer(f"CMPE{time.monotonic_ns()}", self.namesrv, listener=listener, consume_from=ConsumeFrom.LAST)
        c.subscribe(topic)
        async with self._producer() as p:
            await p.send(Message(topic, stamped(size)))
            await c.start()
            await asyncio.sleep(1.0)
            lat.clear()
            await paced(rate, seconds, lambda: p.send(Message(topic, stamped(size))))
            await _settle(lat, int(rate * seconds))
        await c.shutdown()
        return lat

    async def produce_sync(self, n, body, producers=64):
        from rocketq.client import Message
        async with self._producer() as p:
            await p.send(Message(self._topic, body))
            return await concurrent_timed(n, producers, lambda: p.send(Message(self._topic, body)))


async def _settle(lat: list, expected: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(lat) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


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
        await _settle(lat, int(rate * seconds))
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
        sem = asyncio.Semaphore(256)

        async def one():
            async with sem:
                await js.publish("s", body)
        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
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
        await _settle(lat, int(rate * seconds))
        await nc.close()
        return lat


def _systems() -> list[type[System]]:
    from rocketq.bench.compare.rabbitmq import RabbitStreams
    return [Rocketq, RedisStreams, NatsJetStream, RabbitStreams]


SYSTEMS = _systems()

