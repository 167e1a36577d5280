"""RocketMQ's benchmark workload, run with the same flags against Apache RocketMQ and rocketq.

Apache RocketMQ's own tools (``org.apache.rocketmq.example.benchmark.Producer`` / ``BatchProducer``
/ ``Consumer``, behind producer.sh / consumer.sh) are not published to Maven Central, so the suite
runs ``rocketq.bench.RmqBenchmark`` (``java/rocketmq/src``), which takes their flags and does what
they do with the rocketmq-client 5.3.3 jars of the broker's own distribution; see its header for
where it differs (a bounded run, a warm-up excluded, percentiles).

Per system and message size, on one topic of ``TOPIC_QUEUES`` queues:

* ``rmq_producer``: 64 threads, one message per synchronous send (producer.sh's default);
* ``rmq_producer_keys``: the same with ``-k true``: every message carries a key, so the broker indexes
  every message (its IndexFile, rocketq's index) - what keys cost on the send path. Run last, on a
  topic of its own, so the other rows are measured as before it existed;
* ``rmq_batch``: 64 threads, ``BATCH`` messages per send (BatchProducer's default);
* ``rmq_consumer``: a push consumer with 20 threads (consumer.sh's default) reading everything the
  two producers stored, from the first offset.

Under SYNC_FLUSH the producer and batch rows run again (``*_sync``). The parser is pure (text in, numbers out).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

MAIN = "rocketq.bench.RmqBenchmark"
PRODUCER_THREADS = 64              # producer.sh / BatchProducer default
CONSUMER_THREADS = 20              # consumer.sh default
BATCH = 16                         # BatchProducer default
TOPIC_QUEUES = 8
CLIENT_JVM = ("-XX:+UseParallelGC", "-Xms1g", "-Xmx1g")
CONSUMER_IDLE_S = 5.0              # the consumer stops when nothing arrived for this long
EXTRA_TIMEOUT_S = 180.0            # JVM start, route lookups and shutdown on top of the timed seconds
_PAIR = re.compile(r"([A-Za-z][A-Za-z0-9]*(?: [A-Za-z][A-Za-z0-9]*)*(?:\(ms\))?): (\S+)")


def parse_complete(text: str) -> dict[str, float | str]:
    """The ``[Complete] Key: value ...`` summary line of the tool's output, numbers as floats."""
    lines = [ln for ln in text.splitlines() if ln.startswith("[Complete]")]
    if not lines:
        raise ValueError(f"no [Complete] line in the load tool's output: {text.strip()[-500:]!r}")
    out: dict[str, float | str] = {}
    for key, value in _PAIR.findall(lines[-1][len("[Complete]"):]):
        try:
            out[key] = float(value)
        except ValueError:
            out[key] = value
    return out


def tool_command(classpath: str, mode: str, namesrv: str, topic: str, *, size: int = 128,
                 seconds: float = 20.0, warmup_s: float = 3.0, keys: bool = False, group: str = "",
                 expect: int = 0, log_dir: Path | None = None) -> list[str]:
    """The JVM command line of one run of the load tool, flags as RocketMQ's tools name them."""
    jvm = ["java", *CLIENT_JVM]
    if log_dir is not None:
        jvm += [f"-Duser.home={log_dir}", f"-Drocketmq.client.logRoot={log_dir}", "-Drocketmq.client.logLevel=WARN"]
    args = [mode, "-n", namesrv, "-t", topic]
    if mode == "consumer":
        args += ["-w", str(CONSUMER_THREADS), "-g", group or f"benchmark_consumer_{topic}", "-x", str(expect),
                 "-i", str(CONSUMER_IDLE_S)]
    else:
        args += ["-w", str(PRODUCER_THREADS), "-s", str(size), "-k", str(keys).lower(), "-d", str(seconds),
                 "-W", str(warmup_s)]
        if mode == "batch":
            args += ["-b", str(BATCH)]
    return [*jvm, "-cp", classpath, MAIN, *args]


def run_tool(cmd: list[str], timeout_s: float) -> dict[str, float | str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"load tool failed ({proc.returncode}): {proc.stdout[-800:]}\n{proc.stderr[-1500:]}")
    return parse_complete(proc.stdout)


async def _create_topic(namesrv: str, topic: str) -> None:
    from rocketq.client import Admin
    async with Admin(namesrv) as admin:
        await admin.create_topic(topic, queues=TOPIC_QUEUES)


def producer_rows(prefix: str, report: dict) -> list[tuple[str, str, float]]:
    return [(prefix, "msgs/s", float(report["Send TPS"])), (prefix, "p50 ms", float(report["p50 RT(ms)"])),
            (prefix, "p99 ms", float(report["p99 RT(ms)"])), (prefix, "failed", float(report["Send Failed"]))]


def tool_rows(namesrv: str, root: Path, size: int, *, seconds: float, warmup_s: float,
              sync: bool) -> list[tuple[str, str, float]]:
    """(scenario, metric, value) of the producer and batch runs and, unless *sync*, the consumer and the
    keyed producer runs."""
    from rocketq.bench.compare import jars
    classpath = jars.build("rocketmq")
    topic = f"RMQB{size}{'S' if sync else ''}{root.name[-6:].replace('-', '')}"
    asyncio.run(_create_topic(namesrv, topic))
    logs = root / "tool-logs"
    timeout = seconds + warmup_s + EXTRA_TIMEOUT_S
    suffix = "_sync" if sync else ""
    rows, stored = [], 0
    for mode, scenario in (("producer", "rmq_producer"), ("batch", "rmq_batch")):
        report = run_tool(tool_command(classpath, mode, namesrv, topic, size=size, seconds=seconds,
                                       warmup_s=warmup_s, log_dir=logs), timeout)
        rows += producer_rows(scenario + suffix, report)
        stored += int(report["Send Total"]) + 1          # each run sends one untimed message first
    if not sync:
        report = run_tool(tool_command(classpath, "consumer", namesrv, topic, expect=stored, log_dir=logs),
                          timeout + stored / 10_000)
        if int(report["Consume Total"]) == 0:       # a stall, not a rate: reported as a failed run
            raise ToolRunFailed(f"RocketMQ benchmark consumer read none of the {stored} messages of {topic}", rows)
        rows.append(("rmq_consumer", "msgs/s", float(report["Consume TPS"])))
        rows.append(("rmq_consumer", "read / stored", float(report["Consume Total"]) / stored))
        keyed = topic + "K"                          # last: the rows above run as they did before it existed
        asyncio.run(_create_topic(namesrv, keyed))
        report = run_tool(tool_command(classpath, "producer", namesrv, keyed, size=size, seconds=seconds,
                                       warmup_s=warmup_s, keys=True, log_dir=logs), timeout)
        rows += producer_rows("rmq_producer_keys", report)
    return rows


class ToolRunFailed(RuntimeError):
    """One tool run of several failed; *rows* holds what the ones before it measured."""

    def __init__(self, message: str, rows: list[tuple[str, str, float]]):
        super().__init__(message)
        self.rows = rows
