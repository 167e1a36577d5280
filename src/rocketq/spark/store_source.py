"""``spark.read.format("rocketq-store")``: a batch source over a store directory's CommitLog.

Options (strings, case-insensitive):

``path``               the store directory (local path or a URI pyarrow.fs opens); ``load(path)`` works too
``maxBytesPerPartition``  split segments into equal ranges of at most this many bytes (default 256 MiB)
``minPartitions``      make the count of ranges a multiple of this (cutting the largest ranges, not
                       below 4 MiB), so the last wave of tasks fills every core; default: the CPU
                       count of the process planning the read (in local mode, the cores of ``local[*]``)
``failOnDataLoss``     ``true`` (default): a damaged record fails the read, naming file and offset;
                       ``false``: damaged bytes are skipped with a warning
``verifyChecksum``     check each body's CRC (default ``true``)
``topics``             comma-separated topics to keep (decoded rows of other topics are dropped early)
``startingTimestamp`` / ``endingTimestamp``  store-time window in ms, [start, end)
``maxMessageSize``     the largest body the broker accepted (default 4 MiB), to find the ends of ranges
``broker``             value of the ``broker`` column (default null: a store does not know its broker name)

One input partition per segment range.  With ``spark.sql.python.filterPushdown.enabled=true``,
:func:`rocketq.spark.register` registers a reader that also takes ``topic = / IN`` and
``store_timestamp`` comparisons from ``where`` clauses (Spark still re-checks them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone

from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, GreaterThan, GreaterThanOrEqual, In, \
    InputPartition, LessThan, LessThanOrEqual

from rocketq.spark import options as opt
from rocketq.spark.decode import STORE_COLUMNS, ddl
from rocketq.spark.segments import Segment, list_segments
from rocketq.spark.store_reader import RowFilter, read_range

DEFAULT_PARTITION_BYTES = 256 << 20
MIN_SPLIT_BYTES = 4 << 20            # a range is not cut below this only to even out the last wave
DEFAULT_MAX_MESSAGE = 4 << 20


@dataclass
class SegmentRange(InputPartition):
    segment: Segment
    lo: int
    hi: int


def plan_ranges(segments: list[Segment], max_bytes: int, slots: int = 1) -> list[SegmentRange]:
    """Each segment's data (:attr:`Segment.extent`) cut into equal ranges of at most *max_bytes*, the
    last range reaching to the end of the file (data written after planning is read too); then,
    while the count of ranges is not a multiple of *slots* (the task slots expected to run them),
    the segment with the largest ranges is cut once more, down to ``MIN_SPLIT_BYTES``: the last wave
    of tasks then keeps every slot busy instead of one task running alone (5 ranges on 2 cores
    take as long as 6)."""
    parts = [max(1, -(-seg.extent // max_bytes)) for seg in segments]
    want = -(-max(sum(parts), slots) // slots) * slots
    for _ in range(want - sum(parts)):
        i = max(range(len(segments)), key=lambda j: segments[j].extent / parts[j], default=None)
        if i is None or segments[i].extent // (parts[i] + 1) < MIN_SPLIT_BYTES:
            break
        parts[i] += 1
    return [SegmentRange(seg, seg.extent * j // k, seg.size if j == k - 1 else seg.extent * (j + 1) // k)
            for seg, k in zip(segments, parts) for j in range(k)]


class StoreReader(DataSourceReader):
    def __init__(self, options):
        self.path = opt.required(options, "path", "the store directory, e.g. load('/var/rocketq/store')")
        self.max_bytes = opt.integer(options, "maxBytesPerPartition", DEFAULT_PARTITION_BYTES, minimum=1 << 20)
        self.slots = opt.integer(options, "minPartitions", os.cpu_count() or 1, minimum=1)
        self.fail_on_data_loss = opt.boolean(options, "failOnDataLoss", True)
        self.check_crc = opt.boolean(options, "verifyChecksum", True)
        self.broker = options.get("broker")
        topics = opt.listing(options, "topics")
        self.rows = RowFilter(frozenset(topics) if topics else None,
                              opt.integer(options, "startingTimestamp", None, minimum=0),
                              opt.integer(options, "endingTimestamp", None, minimum=0))
        self.segments = list_segments(self.path)            # fail at planning, on the driver
        self.max_record = opt.integer(options, "maxMessageSize", DEFAULT_MAX_MESSAGE, minimum=1)

    def partitions(self):
        return plan_ranges(self.segments, self.max_bytes, self.slots)

    def read(self, partition):
        if not isinstance(partition, SegmentRange):          # Spark's single empty partition
            return iter(())
        return read_range(partition.segment, partition.lo, partition.hi, max_record=self.max_record,
                          check_crc=self.check_crc, fail_on_data_loss=self.fail_on_data_loss, broker=self.broker,
                          rows=self.rows)


def _ms(value) -> int | None:
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return int(value.timestamp() * 1000)
    return None


class PushdownStoreReader(StoreReader):
    """The store reader that also narrows topics and the store-time window from ``where`` clauses."""

    def pushFilters(self, filters):
        topics, lo, hi = self.rows.topics, self.rows.min_store_ms, self.rows.max_store_ms
        for f in filters:
            col = f.attribute[0] if len(f.attribute) == 1 else None
            if col == "topic" and isinstance(f, (EqualTo, In)):
                wanted = frozenset([f.value] if isinstance(f, EqualTo) else f.value)
                topics = wanted & topics if topics is not None else wanted
            elif col == "store_timestamp" and _ms(f.value) is not None:
                ms = _ms(f.value)
                if isinstance(f, (GreaterThan, GreaterThanOrEqual)):
                    lo = ms if lo is None else max(lo, ms)           # ms precision: Spark re-checks '>'
                elif isinstance(f, (LessThan, LessThanOrEqual)):
                    hi = ms + 1 if hi is None else min(hi, ms + 1)
        self.rows = RowFilter(topics, lo, hi)
        return list(filters)                                          # Spark keeps evaluating every filter


class RocketqStoreDataSource(DataSource):
    """``format("rocketq-store")``: the records of a store's CommitLog segment files."""

    @classmethod
    def name(cls) -> str:
        return "rocketq-store"

    def schema(self):
        return ddl(STORE_COLUMNS)

    def reader(self, schema):
        return StoreReader(self.options)


class PushdownRocketqStoreDataSource(RocketqStoreDataSource):
    def reader(self, schema):
        return PushdownStoreReader(self.options)
