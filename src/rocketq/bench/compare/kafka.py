"""Apache Kafka 4.4.0 (KRaft, one node acting as broker and controller) as a :class:`System`,
driven by confluent-kafka (the Python client on librdkafka, a native core) and by Kafka's own
``kafka-producer-perf-test`` / ``kafka-consumer-perf-test`` (:mod:`.kafka_tools`).

Launch: ``kafka.tools.StorageTool format`` (what ``kafka-storage.sh format`` runs) on a fresh
``log.dirs`` under the system's directory, then ``kafka.Kafka server.properties`` with the JVM flags
of kafka-server-start.sh / kafka-run-class.sh (1 GiB heap, G1), listeners on 127.0.0.1 free ports,
stopped by pid. Topics are created on first use with ``PARTITIONS`` partitions (RocketMQ's default
queue count, so every system spreads a topic the same way).

Durability: by default Kafka acknowledges an ``acks=all`` produce once the leader has appended it
to the log in the page cache (one node: the only in-sync replica) and leaves fsync to the OS and to
segment rolls; ``log.flush.interval.messages=1`` (the broker default of the topic setting
``flush.messages=1``) fsyncs the partition after every append, before the ack, and is the sync row.
Both are checked by counting sync calls.

The client scenarios: one message per round trip is produce + flush; batched produce is librdkafka's
own batching (``linger.ms`` 5, its default) with the delivery reports polled; the backlog is read
by a consumer assigned every partition from the beginning (no group rebalance in the timing) that
commits its offsets once at the end, as the rocketq row does; end-to-end sends paced produces to
a consumer polling on its own thread; the sync scenario keeps 64 produces in flight, each awaited.
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import threading
import time
import uuid
from pathlib import Path

from rocketq.bench.compare.peers import (
    System,
    _wait_port,
    concurrent_timed,
    free_port,
    paced,
    settle,
    stamp_of,
    stamped,
)

VERSION = "4.4.0"
PROJECT = "kafka"
PARTITIONS = 8
KAFKA_JVM = ("-Xms1g", "-Xmx1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true")
TOOL_JVM = ("-Xmx512m",)
FORMAT_TIMEOUT_S = 120
START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 30
FLUSH_TIMEOUT_S = 300
LOG_LEVEL = 4                       # librdkafka's syslog levels: warnings and worse only


def cluster_id() -> str:
    """A KRaft cluster id: a random UUID, base64url without padding (what kafka-storage random-uuid prints)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def server_properties(log_dir: Path, port: int, controller_port: int, sync: bool) -> str:
    lines = ["process.roles=broker,controller", "node.id=1", f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
             f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
             f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}", "controller.listener.names=CONTROLLER",
             "inter.broker.listener.name=PLAINTEXT",
             "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
             f"log.dirs={log_dir}", f"num.partitions={PARTITIONS}",
             # one node: the internal topics cannot have more replicas than that
             "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
             "transaction.state.log.min.isr=1", "share.coordinator.state.topic.replication.factor=1",
             "share.coordinator.state.topic.min.isr=1", "group.initial.rebalance.delay.ms=0"]
    if sync:
        lines.append("log.flush.interval.messages=1")
    return "\n".join(lines) + "\n"


def format_command(classpath: str, properties: Path, cid: str) -> list[str]:
    # --cluster-id=: a random id may start with "-", which argparse would take for an option
    return ["java", *TOOL_JVM, "-cp", classpath, "kafka.tools.StorageTool", "format", f"--cluster-id={cid}",
            "-c", str(properties)]


def server_command(classpath: str, properties: Path) -> list[str]:
    return ["java", *KAFKA_JVM, "-cp", classpath, "kafka.Kafka", str(properties)]


class ApacheKafka(System):
    name = "Apache Kafka"
    version = VERSION
    durability = {"async": "acks=all, one node: appended to the log (page cache); fsync left to the OS",
                  "sync": "log.flush.interval.messages=1 (flush.messages=1): fsync after every append, before the ack"}
    notes = (f"Apache Kafka {VERSION}, KRaft, one node (JDK 17, heap 1 GiB), {PARTITIONS} partitions per topic, driven "
             "by confluent-kafka (librdkafka): batched produce is librdkafka's batching (linger.ms 5), the backlog "
             "read assigns every partition and commits once at the end")

    @classmethod
    def available(cls):
        from rocketq.bench.compare import jars
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            return "the confluent-kafka client is not installed (pip install confluent-kafka)"
        return jars.unavailable(PROJECT)

    def start(self) -> None:
        from rocketq.bench.compare import jars
        self.classpath = jars.build(PROJECT)
        r = self.root
        self.port, controller = free_port(), free_port()
        props = r / "server.properties"
        props.write_text(server_properties(r / "data", self.port, controller, self.sync))
        fmt = subprocess.run(format_command(self.classpath, props, cluster_id()), capture_output=True, text=True,
                             timeout=FORMAT_TIMEOUT_S, check=False)
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed: {fmt.stdout[-500:]} {fmt.stderr[-1000:]}")
        self._out = open(r / "kafka.out", "ab")
        self.proc = subprocess.Popen(server_command(self.classpath, props), stdout=self._out,
                                     stderr=subprocess.STDOUT, cwd=r)
        self.bootstrap = f"127.0.0.1:{self.port}"
        try:
            _wait_port(self.port, START_TIMEOUT_S)
            self._ensure_topic("warm")          # the broker answers metadata once the controller elected it
        except BaseException:
            self.stop()
            raise
        self.topic = f"t{time.monotonic_ns()}"

    def stop(self) -> None:
        super().stop()
        if getattr(self, "_out", None):
            self._out.close()

    def _ensure_topic(self, topic: str) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=60)
        try:
            futures[topic].result(90)
        except Exception as e:           # already there is fine
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise

    def _producer(self, **conf):
        from confluent_kafka import Producer
        return Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "log_level": LOG_LEVEL, **conf})

    async def produce_one(self, n, body):
        self._ensure_topic(self.topic)
        p = self._producer(**{"linger.ms": 0})
        p.produce(self.topic, body)
        p.flush(FLUSH_TIMEOUT_S)

        async def one():
            p.produce(self.topic, body)
            p.flush(FLUSH_TIMEOUT_S)
        lat = []
        for _ in range(n):
            t = time.perf_counter()
            await one()
            lat.append(time.perf_counter() - t)
        return lat

    async def produce_fast(self, n, body):
        self._ensure_topic(self.topic)
        p = self._producer(**{"queue.buffering.max.messages": 1_000_000})
        failed = []

        def report(err, msg):
            if err is not None:
                failed.append(err)
        t0 = time.perf_counter()
        for _ in range(n):
            while True:
                try:
                    p.produce(self.topic, body, on_delivery=report)
                    break
                except BufferError:            # the local queue is full: serve delivery reports first
                    p.poll(0.005)
            p.poll(0)
        left = p.flush(FLUSH_TIMEOUT_S)
        elapsed = time.perf_counter() - t0
        if failed or left:
            raise RuntimeError(f"Kafka batched produce: {len(failed)} failed, {left} undelivered ({failed[:1]})")
        return n, elapsed

    def _assigned_consumer(self, topic: str, group: str, offset):
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "log_level": LOG_LEVEL})
        partitions = c.list_topics(topic, timeout=30).topics[topic].partitions
        c.assign([TopicPartition(topic, p, offset) for p in partitions])
        return c

    async def consume(self, n):
        from confluent_kafka import OFFSET_BEGINNING
        c = self._assigned_consumer(self.topic, f"g{time.monotonic_ns()}", OFFSET_BEGINNING)
        got, t0 = 0, time.perf_counter()
        last = t0
        while got < n:
            msgs = c.consume(num_messages=10_000, timeout=2.0)
            if not msgs:
                break
            got += sum(1 for m in msgs if m.error() is None)
            last = time.perf_counter()
        c.commit(asynchronous=False)
        c.close()
        return got, last - t0

    async def end_to_end(self, rate, seconds, size):
        from confluent_kafka import OFFSET_END
        topic = self.topic + "e"
        self._ensure_topic(topic)
        c = self._assigned_consumer(topic, f"e{time.monotonic_ns()}", OFFSET_END)
        lat: list[float] = []
        stop = threading.Event()

        def reader():
            while not stop.is_set():
                for m in c.consume(num_messages=1000, timeout=0.1):
                    if m.error() is None:
                        lat.append(time.perf_counter() - stamp_of(m.value()))
        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        p = self._producer(**{"linger.ms": 0})
        p.produce(topic, stamped(size))
        p.flush(FLUSH_TIMEOUT_S)
        await settle(lat, 1)                # the consumer has its offsets and fetches: the stream can start
        await asyncio.sleep(0.5)
        lat.clear()

        async def send():
            p.produce(topic, stamped(size))
            p.poll(0)
        await paced(rate, seconds, send)
        p.flush(FLUSH_TIMEOUT_S)
        await settle(lat, int(rate * seconds))
        stop.set()
        thread.join()
        c.close()
        return lat

    async def produce_sync(self, n, body, producers=64):
        self._ensure_topic(self.topic)
        loop = asyncio.get_running_loop()
        p = self._producer(**{"linger.ms": 0})
        stop = threading.Event()

        def poller():                   # delivery reports run on the thread that polls
            while not stop.is_set():
                p.poll(0.05)
        thread = threading.Thread(target=poller, daemon=True)
        thread.start()

        async def one():
            fut = loop.create_future()

            def report(err, msg):
                loop.call_soon_threadsafe(_settle_future, fut, err)
            p.produce(self.topic, body, on_delivery=report)
            await fut
        try:
            return await concurrent_timed(n, producers, one)
        finally:
            stop.set()
            thread.join()
            p.flush(FLUSH_TIMEOUT_S)

    def tool_rows(self, size: int, plan, sync: bool) -> list[tuple[str, str, float]]:
        from rocketq.bench.compare import kafka_tools
        return kafka_tools.tool_rows(self.classpath, self.bootstrap, f"{self.topic}perf", size,
                                     records=plan.fast_n, sync=sync, create=self._ensure_topic)


def _settle_future(fut: asyncio.Future, err) -> None:
    if fut.done():
        return
    if err is None:
        fut.set_result(None)
    else:
        fut.set_exception(RuntimeError(f"Kafka delivery failed: {err}"))
