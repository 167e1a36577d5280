"""The Spark benchmark (issue 5's numbers), all in one run and one SparkSession (``local[*]``):

* ``spark.range`` ceilings   - ``spark.range(N)`` to the ``noop`` sink: the bare one-column range,
                               and the same range shaped into the source's 12 columns by Spark SQL
                               (what the JVM alone does per row of this shape);
* ``rocketq-store`` source   - a real ``rocketq serve`` store holding the backlog, read from its
                               segment files to ``noop``;
* ``rocketq`` topic source   - the same backlog pulled from the running broker to ``noop``;
* Arrow intake ceilings      - each source's partitions, rows and batch size, but every batch is one
                               the source decoded once, memory-mapped: Spark's own cost of taking
                               Arrow batches of that shape from a Python source; each source's target
                               is a ratio to the ceiling of its own shape (the store source's 14
                               columns, the topic source's 12 with a broker name; before 2026-11-26
                               the topic source was compared with the store-shaped ceiling);
* ``rocketq`` sink           - ``spark.range`` rows of 128-byte bodies sent to a topic.

The backlog (``N`` messages of 128 bytes, default 5,000,000) is sent once through rocketq's own
client (batches of 256, 16 in flight) before the timed reads.  Rates are rows (or messages) per
second of wall time from the action's start to its end; each read runs ``runs`` times after a
warm-up query; min / median / max reported.  A source and its ceiling are read in alternating pairs,
``max(runs, RATIO_PAIRS)`` of them, one right after the other and which goes first alternating, and
each target ratio is the median of the pairs' ratios: a single run of either swings 2x with the
load of the two cores and the JVM's JIT warms up as the session goes on, so reading all of a
source's runs and then all of its ceiling's (as before 2026-11-26, 20:00 UTC) favoured the later one
and made the ratio of two medians taken minutes apart.
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rocketq.bench.broker_bench import ServeProcess

TOPIC = "SparkBench"
BODY = 128
STORE_PARTITION_BYTES = 128 << 20
CEILING = "Arrow intake ceiling (decoded batches, no decoding)"
CEILING_TOPIC = "Arrow intake ceiling, topic-source batches"
RATIO_PAIRS = 3          # a source and its ceiling are read in at least this many alternating pairs


async def _fill(namesrv: str, n: int, progress: Callable[[str], None]) -> float:
    from rocketq.client import Message, Producer
    body = b"x" * BODY
    sent = 0
    async with Producer("SPARK_BENCH_PG", namesrv) as p:
        sem = asyncio.Semaphore(16)

        async def one(k: int) -> None:
            nonlocal sent
            async with sem:
                await p.send_batch([Message(TOPIC, body, keys=f"k{k}") for _ in range(256)])
                sent += 256
                if sent % 262_144 < 256:
                    progress(f"backlog {sent:,}/{n:,}")
        t0 = time.perf_counter()
        await asyncio.gather(*(one(k) for k in range(n // 256)))
        return sent / (time.perf_counter() - t0)


class _Canned:
    """The ``rocketq-bench-canned`` source: the Arrow intake ceiling.  It reads the same number of
    rows in the same partitions, in batches of the same size, as the store source does, but its
    batch is decoded once, on the driver, and memory-mapped from an Arrow IPC file by every task:
    the rows cost Spark's intake and nothing of rocketq's (built lazily, so the data source classes
    load only with pyspark)."""

    @staticmethod
    def source():
        from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

        from rocketq.spark.decode import STORE_COLUMNS, TOPIC_COLUMNS, ddl

        class CannedReader(DataSourceReader):
            def __init__(self, options):
                self.path, self.rows = options["path"], int(options["rows"])
                self.parts = int(options["partitions"])

            def partitions(self):
                return [InputPartition(i) for i in range(self.parts)]

            def read(self, partition):
                import pyarrow as pa
                batch = pa.ipc.open_file(pa.memory_map(self.path)).get_batch(0)
                for lo in range(0, self.rows, batch.num_rows):
                    yield batch if lo + batch.num_rows <= self.rows else batch.slice(0, self.rows - lo)

        class CannedSource(DataSource):
            @classmethod
            def name(cls):
                return "rocketq-bench-canned"

            def schema(self):
                return ddl(TOPIC_COLUMNS if self.options.get("columns") == "topic" else STORE_COLUMNS)

            def reader(self, schema):
                return CannedReader(self.options)

        return CannedSource


def _canned_batch_file(store: Path, out: Path) -> int:
    """The store's first decoded batch (``CHUNK_RECORDS`` rows, as the store source yields them)
    written to an Arrow IPC file; returns its row count."""
    import pyarrow as pa

    from rocketq.spark.segments import list_segments
    from rocketq.spark.store_reader import read_range
    seg = list_segments(str(store))[0]
    batch = next(read_range(seg, 0, seg.size, max_record=4 << 20))
    with pa.OSFile(str(out), "wb") as f, pa.ipc.new_file(f, batch.schema) as w:
        w.write_batch(batch)
    return batch.num_rows


def _canned_topic_batch_file(namesrv: str, out: Path) -> tuple[int, int]:
    """The topic source's first batch (its first partition's, as it yields them) written to an Arrow IPC
    file; returns (its row count, the source's partition count)."""
    import pyarrow as pa

    from rocketq.spark.queue_reader import read_queue
    from rocketq.spark.topic_source import TopicReader
    parts = TopicReader({"namesrv": namesrv, "topics": TOPIC}).partitions()
    batches = read_queue(parts[0].task)
    batch = next(batches)
    batches.close()
    with pa.OSFile(str(out), "wb") as f, pa.ipc.new_file(f, batch.schema) as w:
        w.write_batch(batch)
    return batch.num_rows, len(parts)


def _store_partitions(store: Path, max_bytes: int) -> int:
    """How many input partitions the store source plans for *store* (its default ``minPartitions``)."""
    from rocketq.spark.segments import list_segments
    from rocketq.spark.store_source import plan_ranges
    return len(plan_ranges(list_segments(str(store)), max_bytes, os.cpu_count() or 1))


def _timed(action: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0


def _tree_cpu() -> dict[str, float]:
    """CPU seconds (user + system, with reaped children's) of this process's descendants from
    ``/proc``: the JVM (``java``) and the rest (Spark's Python daemons and workers, the broker); empty
    where there is no ``/proc``.  A worker that exits between two readings and is reaped by its
    daemon moves its CPU into the daemon's children's time: the sum stays right."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    children: dict[int, list[tuple[int, str, float]]] = {}
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue                                  # gone meanwhile
        name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        cpu = sum(int(x) for x in fields[11:15]) / tick          # utime stime cutime cstime
        children.setdefault(int(fields[1]), []).append((int(pid), name, cpu))
    out = {"jvm": 0.0, "python": 0.0}
    todo = [os.getpid()]
    while todo:
        for pid, name, cpu in children.get(todo.pop(), []):
            out["jvm" if name == "java" else "python"] += cpu
            todo.append(pid)
    return out


def _cpu_ratios(cpu: dict[str, dict[str, list[float]]]) -> dict[str, float]:
    """Each ceiling's CPU a row over its source's (JVM and Python side, the broker included for the
    topic source), medians over the runs: the rows/s ratio two cores busy with nothing else would
    give, read from CPU time, which other work on the machine moves much less than wall time."""
    def per_row(name: str) -> float:
        return sum(statistics.median(xs) for xs in cpu[name].values())
    if not all(cpu.get(name) for name in ("rocketq-store source", CEILING, "rocketq topic source", CEILING_TOPIC)):
        return {}
    return {"store source / ceiling, by CPU a row": per_row(CEILING) / per_row("rocketq-store source"),
            "topic source / its ceiling, by CPU a row": per_row(CEILING_TOPIC) / per_row("rocketq topic source")}


def _shaped_range(spark, n: int):
    """spark.range(n) shaped like the source's rows, by Spark SQL alone."""
    from pyspark.sql import functions as F
    return spark.range(n).select(
        F.lit(TOPIC).alias("topic"), F.lit("broker-a").alias("broker"), (F.col("id") % 4).cast("int").alias("queue_id"),
        F.col("id").alias("queue_offset"), F.concat(F.lit("k"), F.col("id").cast("string")).alias("keys"),
        F.lit(None).cast("string").alias("tags"), F.expr(f"cast(repeat('x', {BODY}) as binary)").alias("body"),
        F.create_map(F.lit("UNIQ_KEY"), F.col("id").cast("string")).alias("properties"),
        F.hex(F.col("id")).alias("msg_id"), F.current_timestamp().alias("born_timestamp"),
        F.current_timestamp().alias("store_timestamp"), F.lit(0).alias("reconsume_times"))


def run_spark_bench(*, n: int = 5_000_000, runs: int = 3, sink_n: int = 1_000_000, master: str = "local[*]",
                    directory: Path | None = None, progress: Callable[[str], None] = lambda s: None) -> dict:
    from rocketq.spark.session import get_session
    results: dict[str, list[float]] = {}
    load: dict[str, list[float]] = {}
    cpu: dict[str, dict[str, list[float]]] = {}      # us of CPU a row: the JVM's, the Python side's

    def timed_rate(name: str, rows: int, action: Callable[[], object]) -> float:
        before = _tree_cpu()
        rate = rows / _timed(action)
        after = _tree_cpu()
        results.setdefault(name, []).append(rate)
        load.setdefault(name, []).append(os.getloadavg()[0])   # other work on the cores skews it: shown beside
        for part in after:
            cpu.setdefault(name, {}).setdefault(part, []).append((after[part] - before[part]) / rows * 1e6)
        return rate

    def measure(name: str, rows: int, action: Callable[[], object]) -> None:
        progress(f"{name} (warm-up)")
        action()
        for i in range(runs):
            progress(f"{name} run {i + 1}/{runs}")
            timed_rate(name, rows, action)

    def pairs(source: tuple, ceiling: tuple) -> list[float]:
        """A source and its ceiling, each warmed up once, then read in ``max(runs, RATIO_PAIRS)`` pairs,
        which one goes first alternating (the JVM's JIT and the load then favour neither): each
        pair's ratio."""
        for name, _, action in (source, ceiling):
            progress(f"{name} (warm-up)")
            action()
        ratios = []
        for i in range(max(runs, RATIO_PAIRS)):
            progress(f"{source[0]} and its ceiling, pair {i + 1}")
            first, second = (source, ceiling) if i % 2 == 0 else (ceiling, source)
            rates = {first[0]: timed_rate(*first), second[0]: timed_rate(*second)}
            ratios.append(rates[source[0]] / rates[ceiling[0]])
        return ratios

    with tempfile.TemporaryDirectory(dir=directory, prefix="rocketq-spark-bench-") as tmp:
        store = Path(tmp) / "store"
        with ServeProcess(store) as srv:
            progress("filling the backlog")
            fill_rate = asyncio.run(_fill(srv.namesrv, n, progress))
            rows = n // 256 * 256
            progress("starting Spark")
            spark = get_session(master, app="rocketq bench spark")
            noop = dict(format="noop", mode="overwrite")
            measure("spark.range (1 column)", rows, lambda: spark.range(rows).write.save(**noop))
            measure("spark.range shaped like a message row", rows,
                    lambda: _shaped_range(spark, rows).write.save(**noop))
            spark.dataSource.register(_Canned.source())
            canned_path = Path(tmp) / "canned.arrow"
            _canned_batch_file(store, canned_path)
            parts = _store_partitions(store, STORE_PARTITION_BYTES)
            canned = spark.read.format("rocketq-bench-canned").option("path", str(canned_path)) \
                .option("rows", str(rows // parts)).option("partitions", str(parts)).load()
            store_df = spark.read.format("rocketq-store").option("maxBytesPerPartition", str(STORE_PARTITION_BYTES)) \
                .option("topics", TOPIC).load(str(store))
            store_ratios = pairs(("rocketq-store source", rows, lambda: store_df.write.save(**noop)),
                                 (CEILING, rows // parts * parts, lambda: canned.write.save(**noop)))
            canned_topic_path = Path(tmp) / "canned-topic.arrow"
            _, topic_parts = _canned_topic_batch_file(srv.namesrv, canned_topic_path)
            canned_topic = spark.read.format("rocketq-bench-canned").option("path", str(canned_topic_path)) \
                .option("columns", "topic").option("rows", str(rows // topic_parts)) \
                .option("partitions", str(topic_parts)).load()
            topic_df = spark.read.format("rocketq").option("namesrv", srv.namesrv).option("topics", TOPIC).load()
            topic_ratios = pairs(("rocketq topic source", rows, lambda: topic_df.write.save(**noop)),
                                 (CEILING_TOPIC, rows // topic_parts * topic_parts,
                                  lambda: canned_topic.write.save(**noop)))
            sink_rows = spark.range(sink_n).selectExpr(f"'{TOPIC}Sink' as topic",
                                                       f"cast(repeat('x', {BODY}) as binary) as body")
            measure("rocketq sink", sink_n, lambda: sink_rows.write.format("rocketq")
                    .option("namesrv", srv.namesrv).mode("append").save())
            spark.stop()

    def mmm(xs):
        return [min(xs), statistics.median(xs), max(xs)]
    summary = {k: mmm(v) for k, v in results.items()}
    ceiling, topic_ceiling = summary[CEILING][1], summary[CEILING_TOPIC][1]
    return {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "messages": rows, "body_bytes": BODY, "runs": runs, "master": master, "backlog_fill_msgs_per_s": fill_rate,
        "rows_per_s": summary, "load_1m_after": {k: mmm(v) for k, v in load.items()},
        "ratios": {
            "store source / Arrow intake ceiling (target >= 0.85)": statistics.median(store_ratios),
            "topic source / its Arrow intake ceiling (target >= 0.75)": statistics.median(topic_ratios),
            "topic source / the store-shaped ceiling (the ratio before 2026-11-26)": summary["rocketq topic source"][1]
            / ceiling,
            "store source / shaped range": summary["rocketq-store source"][1]
            / summary["spark.range shaped like a message row"][1],
        },
        "pair_ratios": {"store source / ceiling": store_ratios, "topic source / its ceiling": topic_ratios},
        "cpu_us_per_row": {k: {part: statistics.median(xs) for part, xs in v.items()} for k, v in cpu.items()},
        "cpu_ratios": _cpu_ratios(cpu),
        "us_per_row_over_the_ceiling": {
            "rocketq-store source": 1e6 / summary["rocketq-store source"][1] - 1e6 / ceiling,
            "rocketq topic source": 1e6 / summary["rocketq topic source"][1] - 1e6 / topic_ceiling},
        "targets": {"rocketq sink": ">= 400,000 msgs/s"},
    }
