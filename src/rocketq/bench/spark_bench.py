"""The Spark benchmark (issue 5's numbers), all in one run and one SparkSession (``local[*]``):

* ``spark.range`` ceilings   - ``spark.range(N)`` to the ``noop`` sink: the bare one-column range,
                               and the same range shaped into the source's 12 columns by Spark SQL
                               (what the JVM alone does per row of this shape);
* ``rocketq-store`` source   - a real ``rocketq serve`` store holding the backlog, read from its
                               segment files to ``noop``;
* ``rocketq`` topic source   - the same backlog pulled from the running broker to ``noop``;
* ``rocketq`` sink           - ``spark.range`` rows of 128-byte bodies sent to a topic.

The backlog (``N`` messages of 128 bytes, default 5,000,000) is sent once through rocketq's own
client (batches of 256, 16 in flight) before the timed reads.  Rates are rows (or messages) per
second of wall time from the action's start to its end; each read runs ``runs`` times after a
warm-up query; min / median / max reported.
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
    """The ``rocketq-bench-canned`` source: one decoded batch of the store, repeated (built lazily,
    so the data source classes load only with pyspark)."""

    @staticmethod
    def source():
        from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

        from rocketq.spark.decode import STORE_COLUMNS, ddl

        class CannedReader(DataSourceReader):
            def __init__(self, options):
                self.path, self.repeat = options["path"], int(options["repeat"])
                self.parts = int(options["partitions"])

            def partitions(self):
                return [InputPartition(i) for i in range(self.parts)]

            def read(self, partition):
                batch = _first_batch(self.path)
                for _ in range(self.repeat):
                    yield batch

        class CannedSource(DataSource):
            @classmethod
            def name(cls):
                return "rocketq-bench-canned"

            def schema(self):
                return ddl(STORE_COLUMNS)

            def reader(self, schema):
                return CannedReader(self.options)

        return CannedSource


def _first_batch(store: str):
    from rocketq.spark.segments import list_segments
    from rocketq.spark.store_reader import read_range
    seg = list_segments(store)[0]
    return next(read_range(seg, 0, min(seg.size, 64 << 20), max_record=4 << 20, chunk_records=65_536))


def _timed(action: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0


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

    def measure(name: str, rows: int, action: Callable[[], object]) -> None:
        progress(f"{name} (warm-up)")
        action()
        for i in range(runs):
            progress(f"{name} run {i + 1}/{runs}")
            results.setdefault(name, []).append(rows / _timed(action))

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
            store_df = spark.read.format("rocketq-store").option("maxBytesPerPartition", str(128 << 20)) \
                .option("topics", TOPIC).load(str(store))
            measure("rocketq-store source", rows, lambda: store_df.write.save(**noop))
            topic_df = spark.read.format("rocketq").option("namesrv", srv.namesrv).option("topics", TOPIC).load()
            measure("rocketq topic source", rows, lambda: topic_df.write.save(**noop))
            spark.dataSource.register(_Canned.source())
            canned_parts, canned_repeat = 8, max(1, rows // (8 * 65_536))
            canned = spark.read.format("rocketq-bench-canned").option("path", str(store)) \
                .option("repeat", canned_repeat).option("partitions", canned_parts).load()
            measure("Arrow intake ceiling (decoded batches, no decoding)", canned_parts * canned_repeat * 65_536,
                    lambda: canned.write.save(**noop))
            sink_rows = spark.range(sink_n).selectExpr(f"'{TOPIC}Sink' as topic",
                                                       f"cast(repeat('x', {BODY}) as binary) as body")
            measure("rocketq sink", sink_n, lambda: sink_rows.write.format("rocketq")
                    .option("namesrv", srv.namesrv).mode("append").save())
            spark.stop()

    def mmm(xs):
        return [min(xs), statistics.median(xs), max(xs)]
    summary = {k: mmm(v) for k, v in results.items()}
    ceiling = summary["spark.range shaped like a message row"][1]
    return {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "messages": rows, "body_bytes": BODY, "runs": runs, "master": master, "backlog_fill_msgs_per_s": fill_rate,
        "rows_per_s": summary,
        "ratios": {
            "store source / shaped range (target >= 0.5)": summary["rocketq-store source"][1] / ceiling,
            "store source / plain range": summary["rocketq-store source"][1] / summary["spark.range (1 column)"][1],
            "store source / Arrow intake ceiling": summary["rocketq-store source"][1]
            / summary["Arrow intake ceiling (decoded batches, no decoding)"][1],
        },
        "targets": {"rocketq topic source": ">= 1,000,000 rows/s", "rocketq sink": ">= 200,000 msgs/s"},
    }
