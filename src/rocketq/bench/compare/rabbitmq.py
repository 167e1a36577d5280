"""RabbitMQ streams (``rabbitmq-server`` with the stream plugin) as a :class:`System`, driven with
``rstream``.  The node runs in its own temporary directory (mnesia, logs, config, enabled plugins,
Erlang cookie under a private HOME) on free ports, and is stopped by pid with its Erlang VM; the
Erlang port mapper it starts (``epmd``, which daemonizes out of the node's process group) listens on
a private port and is stopped after the node, so a run leaves no daemon behind and never touches a
system ``epmd``.

Durability: a stream confirms a publish once the message is written to the stream's segment on the
node (not fsync'ed per message; RabbitMQ relies on replication between nodes for safety), so it
takes no part in the sync scenario.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time

from rocketq.bench.compare.peers import System, _wait_port, free_port, paced, stamp_of, stamped, timed_each, which

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"


class RabbitStreams(System):
    name = "RabbitMQ streams"
    durability = {"async": "stream confirm: written to the segment, no per-message fsync", "sync": None}

    @classmethod
    def available(cls):
        if not os.path.exists(SERVER) and not which("rabbitmq-server"):
            return "rabbitmq-server is not installed (apt-get install rabbitmq-server)"
        try:
            import rstream  # noqa: F401
        except ImportError:
            return "the rstream client is not installed (pip install rstream)"
        return None

    def start(self) -> None:
        self.port, amqp, dist, self.epmd_port = free_port(), free_port(), free_port(), free_port()
        r = self.root
        (r / "enabled_plugins").write_text("[rabbitmq_stream].\n")
        (r / "rabbitmq.conf").write_text(f"listeners.tcp.default = 127.0.0.1:{amqp}\n"
                                         f"stream.listeners.tcp.1 = 127.0.0.1:{self.port}\nloopback_users = none\n")
        env = dict(os.environ, HOME=str(r), RABBITMQ_MNESIA_BASE=str(r / "mnesia"), RABBITMQ_LOG_BASE=str(r / "log"),
                   RABBITMQ_NODENAME=f"rocketqbench{self.port}@localhost", RABBITMQ_DIST_PORT=str(dist),
                   RABBITMQ_ENABLED_PLUGINS_FILE=str(r / "enabled_plugins"),
                   RABBITMQ_CONFIG_FILE=str(r / "rabbitmq.conf"), RABBITMQ_PID_FILE=str(r / "pid"),
                   ERL_EPMD_PORT=str(self.epmd_port))
        server = SERVER if os.path.exists(SERVER) else which("rabbitmq-server")
        self.proc = subprocess.Popen([server], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                     start_new_session=True)
        _wait_port(self.port, 90)
        self.stream = f"s{time.monotonic_ns()}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)       # the script, its Erlang VM and epmd's children
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        epmd = which("epmd")
        if epmd and getattr(self, "epmd_port", None):
            subprocess.run([epmd, "-port", str(self.epmd_port), "-kill"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10, check=False)

    def _producer(self):
        from rstream import Producer
        return Producer("127.0.0.1", self.port, username="guest", password="guest")

    async def produce_one(self, n, body):
        async with self._producer() as p:
            await p.create_stream(self.stream, exists_ok=True)
            return await timed_each(n, lambda: p.send_wait(self.stream, body))

    async def produce_fast(self, n, body):
        async with self._producer() as p:
            await p.create_stream(self.stream, exists_ok=True)
            confirmed = 0
            done = asyncio.Event()

            def on_confirm(status) -> None:
                nonlocal confirmed
                confirmed += 1
                if confirmed >= n:
                    done.set()
            t0 = time.perf_counter()
            for start in range(0, n, 1000):
                await p.send_batch(self.stream, [body] * min(1000, n - start), on_publish_confirm=on_confirm)
            await asyncio.wait_for(done.wait(), 300)
            return n, time.perf_counter() - t0

    async def consume(self, n):
        from rstream import Consumer, ConsumerOffsetSpecification, OffsetType
        got, last = 0, time.perf_counter()
        done = asyncio.Event()
        consumer = Consumer("127.0.0.1", self.port, username="guest", password="guest")
        name = f"c{time.monotonic_ns()}"

        async def on_message(msg, ctx) -> None:
            nonlocal got, last
            got += 1
            last = time.perf_counter()
            if got % 10_000 == 0 or got >= n:
                await ctx.consumer.store_offset(self.stream, name, ctx.offset)     # offset tracking
            if got >= n:
                done.set()
        await consumer.start()
        t0 = time.perf_counter()
        await consumer.subscribe(self.stream, on_message, subscriber_name=name, initial_credit=64,
                                 offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None))
        runner = asyncio.create_task(consumer.run())
        while not done.is_set() and time.perf_counter() - last < 3:
            await asyncio.sleep(0.1)
        await consumer.close()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        return got, last - t0

    async def end_to_end(self, rate, seconds, size):
        from rstream import Consumer, ConsumerOffsetSpecification, OffsetType
        lat: list[float] = []
        stream = self.stream + "e"
        async with self._producer() as p:
            await p.create_stream(stream, exists_ok=True)
            consumer = Consumer("127.0.0.1", self.port, username="guest", password="guest")

            async def on_message(msg, ctx) -> None:
                lat.append(time.perf_counter() - stamp_of(bytes(msg)))
            await consumer.start()
            await consumer.subscribe(stream, on_message,
                                     offset_specification=ConsumerOffsetSpecification(OffsetType.NEXT, None))
            runner = asyncio.create_task(consumer.run())
            await asyncio.sleep(0.5)
            await paced(rate, seconds, lambda: p.send_wait(stream, stamped(size)))
            deadline = time.monotonic() + 30
            while len(lat) < int(rate * seconds) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await consumer.close()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        return lat
