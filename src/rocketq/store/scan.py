"""Walking the CommitLog: record boundaries and validation (recovery, ``store verify``, rebuilds, Spark).

The walk itself is native (:func:`rocketq._native.scan_segment`, the GIL released): from ``start``
it checks each record - magic, size, lengths adding up to TOTALSIZE, PHYSICALOFFSET equal to its
position, the body CRC when asked - and follows TOTALSIZE to the next.  It stops at the end of the
data (fewer than 8 bytes left, or 8 zero bytes), at a blank record reaching the segment's end, or
at the first record that fails, which it names; the caller decides whether that is a torn tail
(truncate) or corruption (stop).  :func:`parse_rows` reads the dispatch fields of records back in
plain Python, for the offline checker that must not trust the code it checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from rocketq import _native
from rocketq.store.record import RecordError, StoredMessage


@dataclass
class SegmentScan:
    """Result of walking one segment from ``start``."""

    positions: np.ndarray          # int64 start of each valid record (segment-relative)
    sizes: np.ndarray              # int64
    end: int                       # segment-relative end of valid data
    blank: bool                    # the segment was closed by a blank record at ``end``
    error: RecordError | None      # why the walk stopped early, None at clean end of data


def scan_segment(buf, base_offset: int, start: int, limit: int, *, check_crc: bool,
                 torn_from: int | None = None) -> SegmentScan:
    """Walk and check the records of ``buf[start:limit]`` (the segment starts at commitlog offset
    *base_offset*).  With *torn_from*, a record at or after that offset whose topic/properties tail
    ends in a zero byte also ends the walk (a tear a crash left behind)."""
    positions, sizes, end, blank, error = _native.scan_segment(buf, base_offset, start, limit, check_crc=check_crc,
                                                               torn_from=torn_from)
    return SegmentScan(np.frombuffer(positions, dtype=np.int64), np.frombuffer(sizes, dtype=np.int64), end, blank,
                       RecordError(*error) if error is not None else None)


def split_records(buf, start: int = 0, limit: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Positions and sizes of the records laid back to back in ``buf[start:limit]`` (a pull's body,
    whose records keep their log offsets), and where the walk stopped."""
    limit = len(buf) if limit is None else limit
    positions, sizes, end, _blank, _error = _native.scan_segment(buf, None, start, limit, check_crc=False)
    return np.frombuffer(positions, dtype=np.int64), np.frombuffer(sizes, dtype=np.int64), end


class Row(NamedTuple):
    """The dispatch fields of one record, read back for checking."""

    physical_offset: int
    size: int
    queue_offset: int
    store_timestamp: int
    topic: str
    queue_id: int
    sys_flag: int
    tags: str | None
    keys: list[str]
    uniq_key: str | None


def parse_rows(buf, base_offset: int, positions, sizes) -> list[Row]:
    """Rows of the records at *positions* (already walked, so whole), parsed by :class:`StoredMessage`."""
    rows = []
    for pos, size in zip(np.asarray(positions).tolist(), np.asarray(sizes).tolist()):
        m = StoredMessage(bytes(buf[pos:pos + size]))
        rows.append(Row(base_offset + pos, size, m.queue_offset, m.store_timestamp, m.topic, m.queue_id, m.sys_flag,
                        m.tags, m.keys, m.uniq_key))
    return rows
