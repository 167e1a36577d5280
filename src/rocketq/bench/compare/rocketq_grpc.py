"""rocketq over gRPC, driven by the official RocketMQ 5 Python client, as a :class:`System`.

The server is the same ``rocketq serve`` as the remoting row, this time with its gRPC endpoint on a
free port; the client is ``rocketmq-python-client`` 5.1.2, driven as :mod:`rocketq.bench.official_client`
describes.  The client is blocking and thread-based, so every scenario runs it on a worker thread.

Where the client cannot do what the scenario asks, the row says so (``notes``):

* it has no batch send: "best batching / pipelining" is ``send_async`` with 256 in flight;
* it tops out near 2,000 sends/s and 2,000 receive+acks/s on this machine (one AckMessage call per
  message), so the batched produce and the backlog read are capped (``caps``) - the rate is the
  same over 20,000 messages as over a million - and the backlog is written through the remoting
  protocol (the consumer reads the same stored messages either way);
* it cannot carry a 5,000 msgs/s end-to-end stream (sender and receiver share its threads), so it
  takes part only at ``max_e2e_rate``.
"""

from __future__ import annotations

import asyncio
import time

from rocketq.bench import official_client as oc
from rocketq.bench.compare.peers import paced, settle, stamp_of, stamped
from rocketq.bench.compare.rocketq_remoting import Rocketq

WARM_TIMEOUT_S = 15.0


class RocketqGrpc(Rocketq):
    name = "rocketq (gRPC)"
    durability = {"async": "ASYNC_FLUSH: page cache, flushed every 500 ms",
                  "sync": "SYNC_FLUSH: SendMessage answers after the group commit's fdatasync"}
    serves_grpc = True
    runs_rmq_tools = False             # the remoting row's server already ran them
    caps = {"fast": 20_000, "consume": 30_000}
    max_e2e_rate = 500
    notes = (f"the official {oc.CLIENT} over gRPC. It has no batch send: its batched-produce row is send_async "
             f"with {oc.ASYNC_WINDOW} in flight. Batched produce capped at {caps['fast']:,} messages and the "
             f"backlog read at {caps['consume']:,} (receive {oc.RECEIVE_BATCH} at a time, one ack call per "
             f"message on {oc.ACK_THREADS} threads; the backlog itself is written over remoting); end-to-end "
             f"only at {max_e2e_rate:,} msgs/s, the client cannot carry more with sends and receives together")

    @classmethod
    def available(cls):
        return oc.available()

    @classmethod
    def refuses(cls, security):
        return security.official_client_refusal()

    def _official(self) -> dict:
        credentials, tls = self.security.official_client_settings()
        return {"credentials": credentials, "tls": tls}

    def start(self) -> None:
        super().start()
        self.endpoint = self._serve.grpc_endpoint
        if self.endpoint is None:
            self.stop()
            raise RuntimeError("rocketq serve did not announce a gRPC endpoint")

    def _consumer(self, group: str, topic: str):
        return oc.started_consumer(self.endpoint, group, topic, **self._official())

    def _with_producer(self, topic: str, work):
        p = oc.started_producer(self.endpoint, topic, **self._official())
        try:
            return work(p)
        finally:
            p.shutdown()

    async def produce_one(self, n, body):
        return await asyncio.to_thread(self._with_producer, self._topic,
                                       lambda p: oc.send_each(p, self._topic, body, n))

    async def produce_fast(self, n, body):
        def timed(p):
            t0 = time.perf_counter()
            oc.send_windowed(p, self._topic, body, n, oc.ASYNC_WINDOW)
            return n, time.perf_counter() - t0
        return await asyncio.to_thread(self._with_producer, self._topic, timed)

    async def fill(self, n, body):
        await Rocketq.produce_fast(self, n, body)           # remoting batches: minutes faster

    async def consume(self, n):
        def read():
            c = self._consumer(f"CMPG{time.monotonic_ns()}", self._topic)
            try:
                return oc.receive_and_ack(c, n, deadline_s=300)
            finally:
                c.shutdown()
        return await asyncio.to_thread(read)

    async def end_to_end(self, rate, seconds, size):
        topic = self.e2e_topic(rate)
        lat: list[float] = []

        def on_batch(msgs) -> None:
            now = time.perf_counter()
            lat.extend(now - stamp_of(m.body) for m in msgs)
        p = await asyncio.to_thread(oc.started_producer, self.endpoint, topic, warm_body=stamped(size),
                                    **self._official())
        c = await asyncio.to_thread(self._consumer, f"CMPGE{time.monotonic_ns()}", topic)
        try:
            with oc.BackgroundReceiver(c, on_batch):
                await self._warm(p, topic, size, lat)
                await paced(rate, seconds, lambda: asyncio.wrap_future(p.send_async(oc.message(topic, stamped(size)))))
                await settle(lat, int(rate * seconds))
                got = list(lat)
        finally:
            await asyncio.to_thread(c.shutdown)
            await asyncio.to_thread(p.shutdown)
        return got

    def e2e_topic(self, rate: int) -> str:
        return f"{self._topic}E{rate}"

    @staticmethod
    async def _warm(p, topic: str, size: int, lat: list) -> None:
        """Until a stamped message has come through (the receiver's first long poll is open)."""
        deadline = time.monotonic() + WARM_TIMEOUT_S
        while not lat and time.monotonic() < deadline:
            await asyncio.wrap_future(p.send_async(oc.message(topic, stamped(size))))
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)                # the warm messages' stragglers
        lat.clear()

    async def produce_sync(self, n, body, producers=64):
        return await asyncio.to_thread(self._with_producer, self._topic,
                                       lambda p: oc.send_windowed(p, self._topic, body, n, producers))
