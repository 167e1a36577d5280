"""Reading a queue: consume-queue units to CommitLog records, with RocketMQ's status rules.

Status rules (``DefaultMessageStore.getMessage``), ``max`` being the next offset to be written:

* no such queue -> NO_MATCHED_LOGIC_QUEUE; empty queue -> NO_MESSAGE_IN_QUEUE (next = 0)
* offset < min -> OFFSET_TOO_SMALL (next = min); offset == max -> OFFSET_OVERFLOW_ONE (next = offset)
* offset > max -> OFFSET_OVERFLOW_BADLY (next = max, or min when min is 0)
* otherwise FOUND, or NO_MATCHED_MESSAGE when a tag filter matched nothing, or
  MESSAGE_WAS_REMOVING when the records are already gone from the log; next = past what was read.
"""

from __future__ import annotations

from typing import Callable

from rocketq.store.consume_queue import BLANK_SIZE
from rocketq.store.record import StoredMessage
from rocketq.store.results import GetMessageResult, GetStatus

MAX_PULL_BYTES = 4 << 20


class QueueReader:
    def __init__(self, queue_lookup: Callable, commitlog):
        self._lookup = queue_lookup
        self._log = commitlog

    def get(self, topic: str, queue_id: int, offset: int, max_count: int, *,
            tag_codes: set[int] | None = None, max_bytes: int | None = None) -> GetMessageResult:
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
            return GetMessageResult(GetStatus.OFFSET_OVERFLOW_BADLY, [], lo if lo == 0 else hi, lo, hi)
        return self._read_units(cq, offset, max(1, max_count), tag_codes, max_bytes or MAX_PULL_BYTES, lo, hi)

    def _read_units(self, cq, offset, max_count, tag_codes, max_bytes, lo, hi) -> GetMessageResult:
        units = cq.get_units(offset, max_count)
        if len(units) == 0:
            return GetMessageResult(GetStatus.OFFSET_FOUND_NULL, [], offset + 1, lo, hi)
        fast = self._contiguous(units, tag_codes, max_bytes)
        if fast is not None:
            return GetMessageResult(GetStatus.FOUND, fast, offset + len(fast), lo, hi)
        read = self._log.read
        log_min = self._log.min_offset()
        messages = []
        consumed = 0
        removed = False
        total_bytes = 0
        for phy, size, tag in zip(units["phy"].tolist(), units["size"].tolist(), units["tag"].tolist()):
            if messages and total_bytes + size > max_bytes:
                break
            consumed += 1
            if size == BLANK_SIZE:
                continue
            if phy < log_min:
                removed = True
                continue
            if tag_codes is not None and tag not in tag_codes:
                continue
            raw = read(phy, size)
            if raw is None:
                removed = True
                continue
            messages.append(StoredMessage(raw))
            total_bytes += size
        if messages:
            status = GetStatus.FOUND
        else:
            status = GetStatus.MESSAGE_WAS_REMOVING if removed else GetStatus.NO_MATCHED_MESSAGE
        return GetMessageResult(status, messages, offset + consumed, lo, hi)

    def _contiguous(self, units, tag_codes, max_bytes) -> list | None:
        """The common case - units pointing at back-to-back records, no filter - with one read.

        Returns None when the general path is needed (gaps, blanks, a tag filter, too many bytes,
        records spanning segments or already expired).
        """
        if tag_codes is not None:
            return None
        phys = units["phy"]
        sizes = units["size"]
        first = int(phys[0])
        end = int(phys[-1]) + int(sizes[-1])
        if end - first > max_bytes or first < self._log.min_offset():
            return None
        if len(units) > 1 and not (phys[1:] == phys[:-1] + sizes[:-1]).all():
            return None
        blob = self._log.read(first, end - first)
        if blob is None:
            return None
        cuts = (phys - first).tolist()
        cuts.append(end - first)
        return list(map(StoredMessage, map(blob.__getitem__, map(slice, cuts[:-1], cuts[1:]))))
