"""Bulk jobs on Spark over topics or a store's files (run by ``rocketq spark ...``).

``export``         rows of a source DataFrame to Parquet, partitioned by ``topic`` and ``date``
                   (the store day, UTC).
``stats``          per topic and queue: messages, body bytes, distinct keys (approximate,
                   HyperLogLog++), first/last queue offset and store time.
``rebuild_index``  consume queues and index files rebuilt from the CommitLog: Spark tasks parse
                   the segments in parallel into dispatch rows (the same parser as recovery),
                   the driver feeds them in log order through the store's own consume-queue and
                   index writers (:mod:`rocketq.store.dispatcher`).  The new files are built
                   beside the old ones and swapped in only when complete, so a failed job leaves
                   the store as it was; ``rocketq store verify`` passes on the result.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from rocketq.spark.segments import OpenSegment, Segment, list_segments
from rocketq.spark.store_reader import DataLossError


def source_frame(spark, *, store: str | None = None, namesrv: str | None = None, topics: str | None = None,
                 topic_pattern: str | None = None, access_options: dict[str, str] | None = None):
    """The DataFrame a job reads: a store directory, or topics through a NameServer (with
    *access_options*: accessKey, secretKey, tls, ... of format("rocketq"))."""
    if (store is None) == (namesrv is None):
        raise ValueError("give either a store path or a NameServer address")
    if store is not None:
        reader = spark.read.format("rocketq-store")
        if topics:
            reader = reader.option("topics", topics)
        return reader.load(store)
    reader = spark.read.format("rocketq").option("namesrv", namesrv).options(**(access_options or {}))
    reader = reader.option("topicPattern", topic_pattern) if topic_pattern else reader.option("topics", topics or "")
    return reader.load()


def export(df, out: str, *, mode: str = "errorifexists") -> None:
    from pyspark.sql import functions as F
    dated = df.withColumn("date", F.to_date(F.col("store_timestamp")))
    dated.write.mode(mode).partitionBy("topic", "date").parquet(out)


def stats(df) -> list[dict]:
    from pyspark.sql import functions as F
    per_queue = df.groupBy("topic", "queue_id").agg(
        F.count(F.lit(1)).alias("messages"), F.sum(F.length("body")).alias("body_bytes"),
        F.min("queue_offset").alias("first_offset"), F.max("queue_offset").alias("last_offset"),
        F.min("store_timestamp").alias("first_store_time"), F.max("store_timestamp").alias("last_store_time"))
    keys = (df.select("topic", "queue_id", F.explode(F.split(F.col("keys"), " ")).alias("key"))
            .where(F.col("key") != "").groupBy("topic", "queue_id")
            .agg(F.approx_count_distinct("key").alias("distinct_keys")))
    joined = per_queue.join(keys, ["topic", "queue_id"], "left").fillna(0, ["distinct_keys"])
    return [r.asDict() for r in joined.orderBy("topic", "queue_id").collect()]


@dataclass
class RebuildResult:
    records: int
    queues: int
    end_offset: int


def _parse_segment(segment: Segment, delay_levels_ms: list[int]):
    """The dispatch run of every record in *segment* (runs in a Spark task; the native walk builds
    the units and index entries, the driver writes them); damage fails the job."""
    from rocketq import _native
    from rocketq.store.scan import scan_segment
    with OpenSegment(segment) as opened:
        buf = opened.buffer
        scan = scan_segment(buf, segment.base, 0, len(buf), check_crc=True)
        if scan.error is not None:
            raise DataLossError(f"damaged record in {segment.path}: {scan.error} (repair the store first: "
                                f"rocketq store repair)")
        if not len(scan.positions):
            return None
        return _native.dispatch_scan(buf, 0, scan.end, base_offset=segment.base, delay_levels_ms=delay_levels_ms)


class _Writers:
    """The store's consume-queue and index writers over fresh directories."""

    def __init__(self, root: Path, geometry):
        from rocketq.store.consume_queue import ConsumeQueue
        from rocketq.store.dispatch_sinks import ConsumeQueueSink, IndexSink
        from rocketq.store.index_service import IndexService
        self.cq_dir, self.index_dir = root / "consumequeue.rebuild", root / "index.rebuild"
        for d in (self.cq_dir, self.index_dir):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

        def queue_for(topic: str, qid: int) -> ConsumeQueue:
            cq = self.queues.get((topic, qid))
            if cq is None:
                cq = self.queues[(topic, qid)] = ConsumeQueue(self.cq_dir, topic, qid, geometry.consume_queue_entries)
            return cq

        self.index = None
        self.sinks = [ConsumeQueueSink(queue_for)]
        if geometry.message_index_enable:
            self.index = IndexService(self.index_dir, slot_count=geometry.index_slots,
                                      max_entries=geometry.index_max_entries)
            self.index.load(clean_shutdown=True, checkpoint_ms=0)
            self.sinks.append(IndexSink(self.index))

    def dispatch(self, run) -> None:
        for sink in self.sinks:
            sink.dispatch(run)

    def close(self) -> int:
        """Flush and close everything; the index's last store time (0 without an index)."""
        for cq in self.queues.values():
            cq.flush()
            cq.close()
        last = 0
        if self.index is not None:
            last = self.index.flush()
            self.index.close()
        return last


def rebuild_index(spark, store: str, *, progress=None) -> RebuildResult:
    from rocketq.store.checkpoint import CheckpointFile
    from rocketq.store.config import StoreConfig
    from rocketq.store.store_files import ProcessLock, StorePaths
    from rocketq.store.tools import load_geometry
    paths = StorePaths(Path(store))
    segments = list_segments(store)
    lock = ProcessLock(paths.lock)
    lock.acquire()                       # the broker must not be running (it holds the same lock)
    try:
        geometry = load_geometry(paths)
        writers = _Writers(paths.root, geometry)
        delays = StoreConfig().delay_levels_ms
        records, end, last_ts = 0, 0, 0
        try:
            rdd = spark.sparkContext.parallelize(segments, max(1, len(segments))).map(
                lambda seg: _parse_segment(seg, delays))
            for i, run in enumerate(rdd.toLocalIterator(prefetchPartitions=True)):
                if run is not None:
                    writers.dispatch(run)
                    records += run.records
                    end = run.end_offset
                    last_ts = max(last_ts, run.max_store_timestamp)
                if progress:
                    progress(i + 1, len(segments))
        finally:
            index_ts = writers.close()
        _swap(paths, writers)
        cp = CheckpointFile(paths.checkpoint)
        cp.value.logics_flushed_offset = end
        cp.value.logics_msg_timestamp = last_ts
        cp.value.index_msg_timestamp = max(index_ts, last_ts if writers.index is not None else 0)
        cp.close()
        return RebuildResult(records, len(writers.queues), end)
    finally:
        lock.release()


def _swap(paths, writers: _Writers) -> None:
    """Put the rebuilt directories in place of the old ones (old ones removed after the rename)."""
    for new, current in ((writers.cq_dir, paths.consumequeue), (writers.index_dir, paths.index)):
        old = current.with_name(current.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if current.exists():
            current.rename(old)
        new.rename(current)
        shutil.rmtree(old, ignore_errors=True)
