"""Kafka's own load tools against the Kafka peer: ``kafka-producer-perf-test``
(``org.apache.kafka.tools.ProducerPerformance``) and ``kafka-consumer-perf-test``
(``org.apache.kafka.tools.ConsumerPerformance``) from kafka-tools 4.4.0, run as the scripts run
them (``kafka-run-class.sh``: a JVM of their own, 512 MiB heap).

* ``kafka_producer_perf``: ``--num-records N --record-size SIZE --throughput -1`` with the
  producer's defaults (acks=all, linger.ms 5 in 4.x, batch.size 16 KiB): msgs/s and the tool's
  latency percentiles (per record, send to acknowledgement);
* ``kafka_consumer_perf``: ``--num-records N`` of what the producer wrote, one consumer in a fresh
  group; msgs/s is the tool's ``fetch.nMsg.sec`` (after the group join; ``nMsg.sec`` includes it).

Under ``flush.messages=1`` the producer row runs again (``kafka_producer_perf_sync``). The parsers
are pure (text in, numbers out).
"""

from __future__ import annotations

import re
import subprocess

TOOL_JVM = ("-Xmx512m",)
TOOL_TIMEOUT_S = 600
CONSUMER_TIMEOUT_MS = 60_000        # the consumer tool gives up after this long without a record
_PRODUCER_FINAL = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th")


def parse_producer(text: str) -> dict[str, float]:
    """The final summary line of ProducerPerformance (the one with percentiles)."""
    found = _PRODUCER_FINAL.findall(text)
    if not found:
        raise ValueError(f"no final summary in kafka-producer-perf-test's output: {text.strip()[-500:]!r}")
    keys = ("records", "rate", "mb", "avg", "max", "p50", "p95", "p99", "p999")
    return {k: float(v) for k, v in zip(keys, found[-1])}


def parse_consumer(text: str) -> dict[str, float]:
    """ConsumerPerformance's CSV: the header line and the values line under it, numeric columns only."""
    lines = [ln.strip() for ln in text.splitlines()]
    for i, line in enumerate(lines[:-1]):
        if line.startswith("start.time,"):
            header = [h.strip() for h in line.split(",")]
            values = [v.strip() for v in lines[i + 1].split(",")]
            if len(values) != len(header):
                break
            out = {}
            for h, v in zip(header, values):
                try:
                    out[h] = float(v)
                except ValueError:
                    pass
            return out
    raise ValueError(f"no results in kafka-consumer-perf-test's output: {text.strip()[-500:]!r}")


def producer_command(classpath: str, bootstrap: str, topic: str, records: int, size: int) -> list[str]:
    return ["java", *TOOL_JVM, "-cp", classpath, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
            "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
            "--command-property", f"bootstrap.servers={bootstrap}"]


def consumer_command(classpath: str, bootstrap: str, topic: str, records: int, group: str) -> list[str]:
    return ["java", *TOOL_JVM, "-cp", classpath, "org.apache.kafka.tools.ConsumerPerformance",
            "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records), "--group", group,
            "--timeout", str(CONSUMER_TIMEOUT_MS)]


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[4]} failed ({proc.returncode}): {proc.stdout[-800:]}\n{proc.stderr[-1500:]}")
    return proc.stdout


def tool_rows(classpath: str, bootstrap: str, topic: str, size: int, *, records: int, sync: bool,
              create) -> list[tuple[str, str, float]]:
    """(scenario, metric, value) of the producer tool and (unless *sync*) the consumer tool."""
    create(topic)
    prefix = "kafka_producer_perf" + ("_sync" if sync else "")
    p = parse_producer(_run(producer_command(classpath, bootstrap, topic, records, size)))
    rows = [(prefix, "msgs/s", p["rate"]), (prefix, "p50 ms", p["p50"]), (prefix, "p99 ms", p["p99"])]
    if not sync:
        c = parse_consumer(_run(consumer_command(classpath, bootstrap, topic, records, f"perf-{topic}")))
        rows.append(("kafka_consumer_perf", "msgs/s", c["fetch.nMsg.sec"]))
    return rows
