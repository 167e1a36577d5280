"""rocketq over the remoting protocol, driven by rocketq's own asyncio client, as a :class:`System`.

The server is ``rocketq serve`` on free ports in the system's directory (gRPC off unless a subclass
serves it); batched produce is SEND_BATCH_MESSAGE (256 x 128 B or 64 x 1 KiB per call, 8 calls in
flight), the backlog is read by a LitePullConsumer (1,024 a pull) and committed once at the end.  With a secured
:class:`~rocketq.bench.security.BenchSecurity` the server starts with its ACL / TLS arguments and
every client here signs and speaks TLS as it says.
"""

from __future__ import annotations

import asyncio
import time

from rocketq.bench.compare.peers import System, concurrent_timed, paced, settle, stamp_of, stamped, timed_each


class Rocketq(System):
    name = "rocketq (remoting)"
    durability = {"async": "ASYNC_FLUSH: page cache, flushed every 500 ms",
                  "sync": "SYNC_FLUSH: fdatasync (group commit) before the ack"}
    serves_grpc = False
    # the backlog reader's pullBatchSize: the most the Java client asks for (rocketq's broker answers up to
    # MAX_PULL_MESSAGES, 4,096; Apache RocketMQ's 32, its maxTransferCountOnMessageInMemory).  A pull costs each side ~0.1-0.2 ms
    # besides its records (BENCHMARKS.md, issue 15's backlog profile): at 256 a pull that was ~half the
    # broker's CPU per message at 128 B.
    pull_batch_size = 1024
    runs_rmq_tools = True              # RocketMQ's benchmark workload over remoting (once per server, not per row)

    def start(self) -> None:
        from rocketq.bench.broker_bench import ServeProcess
        # the sync server goes without a transient pool a --server-config file may turn on: RocketMQ (and
        # rocketq) refuse the pool with SYNC_FLUSH, and the async rows are the ones it is measured on
        flush = ["--flush-disk-type", "SYNC_FLUSH", "--set", "transientStorePoolEnable=false"] if self.sync else []
        self._serve = ServeProcess(self.root, *flush, *self.security.serve_args(), grpc=self.serves_grpc).__enter__()
        self.proc, self.namesrv = self._serve.proc, self._serve.namesrv
        self._topic = f"T{time.monotonic_ns()}"

    def stop(self) -> None:
        self._serve.__exit__(None, None, None)

    def _producer(self):
        from rocketq.client import Producer
        return Producer("CMP", self.namesrv, **self.security.client_kwargs())

    async def produce_one(self, n, body):
        from rocketq.client import Message
        async with self._producer() as p:
            await p.send(Message(self._topic, body))
            return await timed_each(n, lambda: p.send(Message(self._topic, body)))

    async def produce_fast(self, n, body):
        from rocketq.client import Message
        batch = 256 if len(body) <= 256 else 64
        async with self._producer() as p:
            messages = lambda: [Message(self._topic, body) for _ in range(batch)]   # noqa: E731
            t0 = time.perf_counter()
            await concurrent_timed(n // batch, 8, lambda: p.send_batch(messages()))
            return n // batch * batch, time.perf_counter() - t0

    async def consume(self, n):
        from rocketq.client import ConsumeFrom, LitePullConsumer
        c = LitePullConsumer(f"CMP{time.monotonic_ns()}", self.namesrv, consume_from=ConsumeFrom.FIRST,
                             pull_batch_size=self.pull_batch_size, buffer_batches=256, **self.security.client_kwargs())
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
        c = PushConsumer(f"CMPE{time.monotonic_ns()}", self.namesrv, listener=listener, consume_from=ConsumeFrom.LAST,
                         **self.security.client_kwargs())
        c.subscribe(topic)
        async with self._producer() as p:
            await p.send(Message(topic, stamped(size)))
            await c.start()
            await asyncio.sleep(1.0)
            lat.clear()
            await paced(rate, seconds, lambda: p.send(Message(topic, stamped(size))))
            await settle(lat, int(rate * seconds))
        await c.shutdown()
        return lat

    def tool_rows(self, size, plan, sync):
        from rocketq.bench.compare import jars, rmq_tools
        if not self.runs_rmq_tools or jars.missing_java("rocketmq"):
            return []
        return rmq_tools.tool_rows(self.namesrv, self.root, size, seconds=plan.tool_seconds,
                                   warmup_s=plan.tool_warmup_s, sync=sync)

    async def produce_sync(self, n, body, producers=64):
        from rocketq.client import Message
        async with self._producer() as p:
            await p.send(Message(self._topic, body))
            return await concurrent_timed(n, producers, lambda: p.send(Message(self._topic, body)))
