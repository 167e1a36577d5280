"""Reading a queue: consume-queue units to CommitLog records, with RocketMQ's status rules.

Status rules (``DefaultMessageStore.getMessage``), ``max`` being the next offset to be written:

* no such queue -> NO_MATCHED_LOGIC_QUEUE; empty queue -> NO_MESSAGE_IN_QUEUE (next = 0)
* offset < min -> OFFSET_TOO_SMALL (next = min); offset == max -> OFFSET_OVERFLOW_ONE (next = offset)
* offset > max -> OFFSET_OVERFLOW_BADLY (next = max, as RocketMQ 5; 4.x moved to min when min was 0,
  which after a failover - a consumer past the new master's log end - re-read whole queues)
* otherwise FOUND, or NO_MATCHED_MESSAGE when a tag filter matched nothing, or
  MESSAGE_WAS_REMOVING when the records are already gone from the log; next = past what was read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable

from rocketq import _native
from rocketq.store import filter_bitmap
from rocketq.store.consume_queue import CQ_UNIT_SIZE
from rocketq.store.record import StoredMessage
from rocketq.store.results import GetMessageResult, GetStatus
from rocketq.store.scan import split_records

MAX_PULL_BYTES = 4 << 20


class QueueReader:
    def __init__(self, queue_lookup: Callable, commitlog):
        self._lookup = queue_lookup
        self._log = commitlog

    def get(self, topic: str, queue_id: int, offset: int, max_count: int, *,
            tag_codes: set[int] | None = None, max_bytes: int | None = None, prefilter=None) -> GetMessageResult:
        cq = self._lookup((topic, queue_id))
        if cq is None:
            return GetMessageResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, next_begin_offset=0)
        lo, hi = cq.min_offset(), cq.max_offset()
        if hi == 0:
            return GetMessageResult(GetStatus.NO_MESSAGE_IN_QUEUE, [], 0, lo, hi)
        if offset < lo:
            return GetMessageResult(GetStatus.OFFSET_TOO_SMALL, [], lo, lo, hi)
        if offset == hi:
            return GetMessageResult(GetStatus.OFFSET_OVERFLOW_ONE, [], offset, lo, hi)
        if offset > hi:
            return GetMessageResult(GetStatus.OFFSET_OVERFLOW_BADLY, [], hi, lo, hi)
        return self._read_units(cq, offset, max(1, max_count), tag_codes, max_bytes or MAX_PULL_BYTES, lo, hi,
                                prefilter)

    def _read_units(self, cq, offset, max_count, tag_codes, max_bytes, lo, hi, prefilter) -> GetMessageResult:
        units = cq.get_unit_bytes(offset, max_count)
        if not units:
            return GetMessageResult(GetStatus.OFFSET_FOUND_NULL, [], offset + 1, lo, hi)
        window_units, kept = len(units) // CQ_UNIT_SIZE, None
        if cq.ext is not None and (tag_codes is not None or prefilter is not None):
            units, kept = filter_bitmap.window(cq, units, tag_codes=tag_codes, prefilter=prefilter)
        codes = list(tag_codes) if tag_codes is not None else None
        log_min = self._log.min_offset()
        blobs, count, consumed, last, removed, answered = [], 0, 0, -1, False, 0
        while consumed * CQ_UNIT_SIZE < len(units):     # one native read per segment the records are in
            rest = units[consumed * CQ_UNIT_SIZE:] if consumed else units
            mf = self._log.files.find(int.from_bytes(rest[:8], "big", signed=True)) or self._log.files.last
            if mf is None:
                break
            blob, n, used, at, gone, stop = _native.read_units(rest, mf.buffer(), mf.file_from_offset, mf.committed,
                                                               log_min=log_min, max_bytes=max_bytes, tag_codes=codes,
                                                               answered=answered)
            blobs.append(blob)
            count, consumed, removed, answered = count + n, consumed + used, removed or gone, answered + len(blob)
            last = at if at >= 0 else last
            if stop != "segment" or (used == 0 and n == 0) or answered >= max_bytes:
                break
        if kept is not None:       # the bit maps dropped units: back to window positions (all of it when done)
            consumed = int(kept[consumed]) if consumed < len(kept) else window_units
        if count:
            blob = blobs[0] if len(blobs) == 1 else b"".join(blobs)
            return GetMessageResult(GetStatus.FOUND, RecordRun(blob, count), offset + consumed, lo, hi, last)
        status = GetStatus.MESSAGE_WAS_REMOVING if removed else GetStatus.NO_MATCHED_MESSAGE
        return GetMessageResult(status, [], offset + consumed, lo, hi, -1)


class RecordRun(Sequence):
    """Back-to-back records read in one piece: ``blob`` is what a PULL_MESSAGE body carries, and
    the :class:`StoredMessage` objects are made only if someone looks at them (a pull of 1,024
    records then costs one copy, not 1,024 header parses)."""

    __slots__ = ("blob", "_count", "_messages")

    def __init__(self, blob: bytes, count: int):
        self.blob = blob
        self._count = count
        self._messages: list | None = None

    def _all(self) -> list:
        if self._messages is None:
            positions, _sizes, _end = split_records(self.blob)
            self._messages = [StoredMessage(self.blob, p) for p in positions.tolist()]
        return self._messages

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self):
        return iter(self._all())
