"""Decoding a byte range of one CommitLog segment into Arrow batches (the store source's task).

A task owns the records that *start* in ``[lo, hi)`` of its segment.  For ``lo > 0`` the first
record is found without walking from the segment start: it is the first position at or after
``lo`` holding the record magic whose PHYSICALOFFSET field equals its own log offset (a body that
happens to contain the magic bytes does not also hold its own offset there).  The walk then
follows TOTALSIZE, a record allowed to reach up to ``hi + largest record`` (so the last record
starting before ``hi`` is whole); records starting at or after ``hi`` belong to the next task.
The walk and the decoding are one native pass of ``CHUNK_RECORDS`` records at a time
(:func:`rocketq._native.walk_columns`), so Spark gets the range's first batch after one chunk's
work, not after a walk of the whole range.

Damage (a record failing the walk's checks, as :func:`rocketq.store.scan.scan_segment` makes them) raises
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
from rocketq.spark.decode import walked_batch
from rocketq.spark.segments import OpenSegment, Segment

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
    wanted = sorted(rows.topics) if rows.topics is not None else None
    with OpenSegment(segment) as opened:
        buf = opened.buffer
        size = len(buf)
        hi = min(hi, size)
        limit = min(size, hi + max_record + RECORD_OVERHEAD)
        pos = first_record_at_or_after(buf, segment.base, lo, hi)
        while pos is not None and pos < hi:
            cols = _native.walk_columns(buf, segment.base, pos, hi, limit, chunk_records, check_crc=check_crc,
                                        topics=wanted, min_store_ms=rows.min_store_ms, max_store_ms=rows.max_store_ms)
            if cols["rows"]:
                yield walked_batch(cols, broker)
            pos = cols["end"]
            if cols["error"] is not None:
                pos = _skip_damage(buf, segment, pos, cols["error"][1], hi, fail_on_data_loss, skips)
            elif not cols["more"]:
                return


def _skip_damage(buf, segment: Segment, at: int, reason: str, hi: int, fail: bool, skips: SkipReport) -> int | None:
    where = f"{segment.path} at commitlog offset {segment.base + at}"
    if fail:
        raise DataLossError(f"damaged record in {where}: {reason} "
                            f"(set failOnDataLoss=false to skip damaged records)")
    resume = first_record_at_or_after(buf, segment.base, at + 1, hi)
    skipped = (resume if resume is not None else hi) - at
    if resume is None and _is_unwritten(buf, at):
        return None
    skips.skipped_bytes += skipped
    skips.places.append(where)
    log.warning("skipping %d damaged bytes in %s: %s", skipped, where, reason)
    return resume


def _is_unwritten(buf, pos: int) -> bool:
    """Zeros from *pos* to the end: the rest of a segment never written, not damage."""
    tail = np.frombuffer(buf, dtype=np.uint8)[pos:]
    return not tail.any()

