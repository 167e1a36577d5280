"""Decoding a byte range of one CommitLog segment into Arrow batches (the store source's task).

A task owns the records that *start* in ``[lo, hi)`` of its segment.  For ``lo > 0`` the first
record is found without walking from the segment start: it is the first position at or after
``lo`` holding the record magic whose PHYSICALOFFSET field equals its own log offset (a body that
happens to contain the magic bytes does not also hold its own offset there).  The walk then
follows TOTALSIZE up to ``hi + largest record``, so the last record starting before ``hi`` is
whole; records starting at or after ``hi`` belong to the next task.

Damage (a record failing its checks, :func:`rocketq.store.scan.scan_segment`) raises
:class:`DataLossError` naming the file and log offset, or, with ``fail_on_data_loss=False``,
is skipped: the walk resumes at the next valid record and the skipped bytes are counted in the
returned :class:`SkipReport` and logged as a warning.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pyarrow as pa

from rocketq import _native
from rocketq.spark.decode import decode
from rocketq.spark.segments import OpenSegment, Segment
from rocketq.store.scan import scan_segment

log = logging.getLogger(__name__)

CHUNK_RECORDS = 65_536
# a record is at most maxMessageSize of body plus header, topic and properties (<= 32 KiB)
RECORD_OVERHEAD = 64 << 10


class DataLossError(RuntimeError):
    """Records in the store could not be read (damage), and the reader was told to fail on it."""


@dataclass
class SkipReport:
    skipped_bytes: int = 0
    places: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RowFilter:
    """What the reader may drop itself: topics (None = all) and a store-time window in ms.  The
    native decoder applies it (:func:`rocketq.spark.decode.decode`), so a dropped record costs no
    column work and a kept batch is never copied by a filter."""

    topics: frozenset[str] | None = None
    min_store_ms: int | None = None       # inclusive
    max_store_ms: int | None = None       # exclusive


def first_record_at_or_after(buf, base: int, lo: int, hi: int) -> int | None:
    """Segment-relative position of the first record starting in ``[lo, hi)``, or None (native:
    the V1 magic at +4 and PHYSICALOFFSET equal to the position's log offset)."""
    if lo == 0:
        return 0
    return _native.find_record_start(buf, base, lo, hi)


def read_range(segment: Segment, lo: int, hi: int, *, max_record: int, check_crc: bool = True,
               fail_on_data_loss: bool = True, broker: str | None = None, rows: RowFilter = RowFilter(),
               skips: SkipReport | None = None, chunk_records: int = CHUNK_RECORDS) -> Iterator[pa.RecordBatch]:
    skips = skips if skips is not None else SkipReport()
    with OpenSegment(segment) as opened:
        buf = opened.buffer
        size = len(buf)
        hi = min(hi, size)
        limit = min(size, hi + max_record + RECORD_OVERHEAD)
        start = first_record_at_or_after(buf, segment.base, lo, hi)
        while start is not None and start < hi:
            scan = scan_segment(buf, segment.base, start, limit, check_crc=check_crc)
            mine = int(np.searchsorted(scan.positions, hi))
            for c in range(0, mine, chunk_records):
                e = min(mine, c + chunk_records)
                yield from decode(buf, segment.base, scan.positions[c:e], scan.sizes[c:e], broker=broker,
                                  store_columns=True, topics=rows.topics, min_store_ms=rows.min_store_ms,
                                  max_store_ms=rows.max_store_ms)
            if scan.error is None or scan.end >= hi:
                return
            start = _skip_damage(buf, segment, scan, limit, hi, fail_on_data_loss, skips)


def _skip_damage(buf, segment: Segment, scan, limit: int, hi: int, fail: bool, skips: SkipReport) -> int | None:
    where = f"{segment.path} at commitlog offset {segment.base + scan.end}"
    if fail:
        raise DataLossError(f"damaged record in {where}: {scan.error.reason} "
                            f"(set failOnDataLoss=false to skip damaged records)")
    resume = first_record_at_or_after(buf, segment.base, scan.end + 1, hi)
    skipped = (resume if resume is not None else hi) - scan.end
    if resume is None and _is_unwritten(buf, scan.end):
        return None
    skips.skipped_bytes += skipped
    skips.places.append(where)
    log.warning("skipping %d damaged bytes in %s: %s", skipped, where, scan.error.reason)
    return resume


def _is_unwritten(buf, pos: int) -> bool:
    """Zeros from *pos* to the end: the rest of a segment never written, not damage."""
    tail = np.frombuffer(buf, dtype=np.uint8)[pos:]
    return not tail.any()

