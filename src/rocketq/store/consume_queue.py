"""A consume queue: per topic and queue id, a dense array of 20-byte units (RocketMQ ``ConsumeQueue``).

Unit layout, big-endian::

    int64 commitlog offset | int32 record size | int64 tags code

The tags code is Java ``String.hashCode`` of the TAGS property (0 without tags); in
``SCHEDULE_TOPIC_XXXX`` it is the delivery time in ms instead.  Logical offset N lives at byte
N * 20 of the concatenated segments (300,000 units = 6,000,000 bytes per segment by default),
so a lookup is arithmetic.  Pre-filled gaps hold ``0 | 0x7FFFFFFF | 0`` like RocketMQ's blanks.

With the bit-map prefilter (:mod:`rocketq.store.filter_bitmap`) a unit's tags code may instead be
an address in the queue's extension file (:attr:`ConsumeQueue.ext`, at most ``Integer.MIN_VALUE - 1``,
so never a tags code): the extension is cut back with the queue on recovery and expires with it.

The dispatcher is the only writer.  It may hand a unit again after a crash (re-dispatch from a
checkpoint); units below the current end are skipped, so a re-dispatch is idempotent.
The queue is derived state: it can always be rebuilt from the CommitLog.
"""

from __future__ import annotations

import bisect
import struct
from pathlib import Path
from typing import Callable

import numpy as np

from rocketq import _native
from rocketq.common.validation import path_component_error
from rocketq.store.consume_queue_ext import MAX_ADDR as EXT_MAX_ADDR
from rocketq.store.mapped_file import MappedFile
from rocketq.store.mapped_file_queue import MappedFileQueue

CQ_UNIT_SIZE = 20
CQ_DTYPE = np.dtype([("phy", ">i8"), ("size", ">i4"), ("tag", ">i8")])
CQ_UNIT = struct.Struct(">qiq")         # the same unit, one at a time
BLANK_SIZE = 0x7FFFFFFF
_BLANK_UNIT = np.array([(0, BLANK_SIZE, 0)], dtype=CQ_DTYPE).tobytes()
RECOVER_LAST_FILES = 3


class ConsumeQueue:
    def __init__(self, root: Path, topic: str, queue_id: int, entries_per_file: int):
        err = path_component_error(topic)
        if err:        # the broker refuses such names first; this keeps the files inside the store anyway
            raise ValueError(f"topic {err}: no consume queue for it under {root}")
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = entries_per_file * CQ_UNIT_SIZE
        directory = Path(root) / topic / str(queue_id)
        self.files = MappedFileQueue(directory, self.file_size, factory=lambda p: MappedFile(p, self.file_size))
        self.min_logic_offset = 0           # in bytes, like RocketMQ: first unit still backed by the log
        self.max_phy_offset = -1            # end (offset + size) of the last dispatched record
        self.ext = None                     # its ConsumeQueueExt, when bit maps were ever written for it

    # -- offsets (in units) ------------------------------------------------------------------

    def min_offset(self) -> int:
        return self.min_logic_offset // CQ_UNIT_SIZE

    def max_offset(self) -> int:
        """Next logical offset to be written (= number of units including any pre-blanks)."""
        return self.files.max_offset() // CQ_UNIT_SIZE

    # -- writing -----------------------------------------------------------------------------

    def put(self, units: np.ndarray, first_offset: int) -> None:
        """Write *units* (CQ_DTYPE) as logical offsets first_offset, first_offset+1, ..."""
        last = units[-1]
        self.put_bytes(units.tobytes(), first_offset, int(last["phy"]) + int(last["size"]))

    def put_bytes(self, data: bytes, first_offset: int, phy_end: int) -> None:
        """:meth:`put` of units already encoded (20 bytes each); *phy_end* is the end of the last one's record."""
        files = self.files.files
        if files:                             # the common case, one dispatched send: it fits the last segment
            mf = files[-1]
            pos = mf.wrote
            if mf.file_from_offset + pos == first_offset * CQ_UNIT_SIZE and len(data) <= mf.file_size - pos:
                _native.cq_write(mf.write_target(), pos, data)
                mf.advance(len(data))
                self.max_phy_offset = phy_end
                return
        end = self.files.max_offset()
        start = first_offset * CQ_UNIT_SIZE
        if start < end:                       # re-dispatch: skip what is already there
            if start + len(data) <= end:
                return
            data = data[end - start:]
            start = end
        if start > end:
            self._fill_blanks(end, start)
        data = memoryview(data)
        pos = 0
        while pos < len(data):
            mf = self.files.last_for_append(start)
            n = min(len(data) - pos, mf.remaining)
            # natively, without the GIL for long runs (a fresh segment's page faults); advanced after
            # the copy, so a reader never sees a unit half written
            _native.cq_write(mf.write_target(), mf.wrote, data[pos:pos + n])
            mf.advance(n)
            pos += n
        self.max_phy_offset = phy_end

    def _fill_blanks(self, end: int, start: int) -> None:
        if not self.files.files:
            # a queue whose first unit is not at 0 (e.g. after its old files expired): start the
            # segment holding *start* and blank only inside it, as RocketMQ's fillPreBlank does
            mf = self.files.last_for_append(start)
            end = mf.file_from_offset
            self.min_logic_offset = start
        while end < start:
            mf = self.files.last_for_append(end)
            n = min((start - end) // CQ_UNIT_SIZE, mf.remaining // CQ_UNIT_SIZE)
            mf.append(_BLANK_UNIT * n)
            end += n * CQ_UNIT_SIZE

    # -- reading -----------------------------------------------------------------------------

    def get_units(self, offset: int, max_count: int) -> np.ndarray:
        """Up to *max_count* units from logical *offset*, stopping at a segment end (copy)."""
        return np.frombuffer(self.get_unit_bytes(offset, max_count), dtype=CQ_DTYPE)

    def get_unit_bytes(self, offset: int, max_count: int) -> bytes:
        """The units of :meth:`get_units` as the file holds them (20 bytes each, big-endian)."""
        pos = offset * CQ_UNIT_SIZE
        mf = self.files.find(pos)
        if mf is None:
            return b""
        rel = pos - mf.file_from_offset
        limit = min(mf.committed, rel + max_count * CQ_UNIT_SIZE)
        if limit <= rel:
            return b""
        return mf.read(rel, limit - rel)

    def get_unit(self, offset: int) -> tuple[int, int, int] | None:
        units = self.get_units(offset, 1)
        if len(units) == 0:
            return None
        u = units[0]
        return int(u["phy"]), int(u["size"]), int(u["tag"])

    def search_offset_by_time(self, timestamp_ms: int, store_time_of: Callable[[int, int], int | None],
                              *, boundary_lower: bool = True) -> int:
        """Logical offset of the first (lower) / last (upper) unit stored at or before/after *timestamp_ms*.

        Binary search over units; *store_time_of(phy, size)* reads the record's store time from the
        log (None when the record is gone).  Returns min/max offset when out of range, like RocketMQ.
        """
        lo, hi = self.min_offset(), self.max_offset()
        if lo >= hi:
            return lo

        def time_at(i: int) -> int:
            unit = self.get_unit(i)
            if unit is None or unit[1] == BLANK_SIZE:
                return -1
            t = store_time_of(unit[0], unit[1])
            return -1 if t is None else t

        keys = _LazyTimes(time_at, lo, hi)
        if boundary_lower:
            return lo + bisect.bisect_left(keys, timestamp_ms)
        return max(lo, lo + bisect.bisect_right(keys, timestamp_ms) - 1)

    # -- recovery ----------------------------------------------------------------------------

    def load(self) -> None:
        self.files.load()

    def recover(self) -> None:
        """Find the end of valid units in the last segments and make it the write position."""
        files = self.files.files
        if not files:
            return
        start = max(0, len(files) - RECOVER_LAST_FILES)
        end_pos = files[start].file_from_offset
        for mf in files[start:]:
            units = np.frombuffer(mf.read(0, mf.file_size), dtype=CQ_DTYPE)
            valid = (units["phy"] >= 0) & (units["size"] > 0)
            invalid = np.flatnonzero(~valid)
            n = int(invalid[0]) if len(invalid) else len(units)
            end_pos = mf.file_from_offset + n * CQ_UNIT_SIZE
            if n < len(units):
                break
        self.files.truncate(end_pos)
        self._refresh_max_phy()

    def truncate_dirty(self, max_phy: int) -> None:
        """Drop units pointing at or past *max_phy* (the log was cut there during recovery)."""
        while self.files.files:
            mf = self.files.last
            units = np.frombuffer(mf.read(0, mf.wrote), dtype=CQ_DTYPE)
            if len(units) == 0 and len(self.files.files) > 1:     # an empty last file hides nothing
                self.files.files.pop().destroy()
                continue
            real = units["size"] != BLANK_SIZE
            bad = np.flatnonzero(real & (units["phy"] + units["size"] > max_phy))
            if len(bad) == 0:
                break
            self.files.truncate(mf.file_from_offset + int(bad[0]) * CQ_UNIT_SIZE)
            if self.files.last is mf and mf.wrote == 0:
                self.files.files.pop().destroy()
            if int(bad[0]) > 0:
                break
        self._refresh_max_phy()
        if self.ext is not None:            # ext units no surviving unit points at go too (RocketMQ's truncateByMaxAddress)
            self.ext.truncate_after(self._last_ext_address())

    def _last_ext_address(self) -> int | None:
        for mf in reversed(self.files.files):
            tags = np.frombuffer(mf.read(0, mf.wrote), dtype=CQ_DTYPE)["tag"]
            at = np.flatnonzero(tags <= EXT_MAX_ADDR)
            if len(at):
                return int(tags[at[-1]])
        return None

    def _refresh_max_phy(self) -> None:
        self.max_phy_offset = -1
        n = self.max_offset()
        if n > 0:
            unit = self.get_unit(n - 1)
            if unit and unit[1] != BLANK_SIZE:
                self.max_phy_offset = unit[0] + unit[1]

    def correct_min_offset(self, commitlog_min_offset: int) -> None:
        """After old log segments are deleted, skip units that point below the log's start."""
        first = self.files.first
        if first is None:
            return
        units = np.frombuffer(first.read(0, first.wrote), dtype=CQ_DTYPE)
        ok = np.flatnonzero((units["phy"] >= commitlog_min_offset) & (units["size"] != BLANK_SIZE))
        pos = first.file_from_offset + (int(ok[0]) * CQ_UNIT_SIZE if len(ok) else first.wrote)
        self.min_logic_offset = max(self.min_logic_offset, pos)

    def delete_expired(self, commitlog_min_offset: int) -> int:
        """Delete whole leading segments whose last unit points below the log's start."""
        count = 0
        for mf in self.files.files[:-1]:
            units = np.frombuffer(mf.read(mf.file_size - CQ_UNIT_SIZE, CQ_UNIT_SIZE), dtype=CQ_DTYPE)
            if int(units[0]["phy"]) >= commitlog_min_offset:
                break
            count += 1
        self.files.delete_first(count)
        self.correct_min_offset(commitlog_min_offset)
        first = self.files.first
        if count and self.ext is not None and first is not None:
            tags = np.frombuffer(first.read(0, first.wrote), dtype=CQ_DTYPE)["tag"]
            at = np.flatnonzero(tags <= EXT_MAX_ADDR)
            if len(at):
                self.ext.delete_below(int(tags[at[0]]))
        return count

    def flush(self) -> None:
        if self.ext is not None:            # first, so a unit on disk never points at ext bytes that are not
            self.ext.flush()
        self.files.flush()

    def close(self) -> None:
        if self.ext is not None:
            self.ext.close()
        self.files.close()

    def destroy(self) -> None:
        """Unmap and delete every segment and the queue's directory (topic deletion)."""
        if self.ext is not None:
            self.ext.destroy()
        for mf in self.files.files:
            mf.destroy()
        self.files.files.clear()
        try:
            self.files.directory.rmdir()
        except OSError:
            pass


class _LazyTimes:
    """A read-only sequence view for bisect: element i is the store time of unit lo+i."""

    def __init__(self, fn, lo: int, hi: int):
        self._fn, self._lo, self._n = fn, lo, hi - lo

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> int:
        return self._fn(self._lo + i)
