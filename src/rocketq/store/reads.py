"""Reading a queue: consume-queue units to CommitLog records, with RocketMQ's status rules.

Status rules (``DefaultMessageStore.getMessage``), ``max`` being the next offset to be written:

* no such queue -> NO_MATCHED_LOGIC_QUEUE; empty queue -> NO_MESSAGE_IN_QUEUE (next = 0)
* offset < min -> OFFSET_TOO_SMALL (next = min); offset == max -> OFFSET_OVERFLOW_ONE (next = offset)
* offset > max -> OFFSET_OVERFLOW_BADLY (next = max, or min when min is 0)
* otherwise FOUND, or NO_MATCHED_MESSAGE when a tag filter matched nothing, or
  MESSAGE_WAS_REMOVING when the records are already gone from the log; next = past what was read.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache
from itertools import accumulate, repeat
from typing import Callable

import numpy as np

from rocketq.store.consume_queue import BLANK_SIZE, CQ_DTYPE, CQ_UNIT_SIZE
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
        raw = cq.get_unit_bytes(offset, max_count)
        if not raw:
            return GetMessageResult(GetStatus.OFFSET_FOUND_NULL, [], offset + 1, lo, hi)
        if tag_codes is None:
            fast = self._contiguous(raw, max_bytes)
            if fast is not None:
                return GetMessageResult(GetStatus.FOUND, fast[0], offset + len(fast[0]), lo, hi, fast[1])
        units = np.frombuffer(raw, dtype=CQ_DTYPE)
        phys, sizes = units["phy"].astype(np.int64), units["size"].astype(np.int64)
        real = sizes != BLANK_SIZE
        alive = real & (phys >= self._log.min_offset())
        take = alive if tag_codes is None else alive & np.isin(units["tag"], np.fromiter(tag_codes, np.int64))
        # stop before the unit that would push the answer past max_bytes (the first one always goes)
        total = np.cumsum(np.where(take, sizes, 0))
        over = np.flatnonzero(take & (total > max_bytes) & (total - sizes > 0))
        consumed = int(over[0]) if len(over) else len(units)
        chosen = np.flatnonzero(take[:consumed])
        records, removed = self._read_records(phys[chosen], sizes[chosen])
        removed = removed or bool((real[:consumed] & ~alive[:consumed]).any())
        if records:
            status = GetStatus.FOUND
        else:
            status = GetStatus.MESSAGE_WAS_REMOVING if removed else GetStatus.NO_MATCHED_MESSAGE
        return GetMessageResult(status, records, offset + consumed, lo, hi,
                                int(phys[chosen[-1]]) if len(chosen) else -1)

    def _read_records(self, phys: np.ndarray, sizes: np.ndarray) -> tuple[RecordRun | list, bool]:
        """The records at *phys*, copied once straight from the segment when they share one, else one by one."""
        if len(phys) == 0:
            return [], False
        blob = self._log.gather(phys.tolist(), sizes.tolist())
        if blob is None:
            parts = [self._log.read(p, n) for p, n in zip(phys.tolist(), sizes.tolist())]
            kept = [p for p in parts if p is not None]
            if len(kept) < len(parts):
                return list(map(StoredMessage, kept)), True
            blob = b"".join(kept)
        cuts = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=cuts[1:])
        return RecordRun(blob, cuts.tolist()), False

    def _contiguous(self, raw: bytes, max_bytes: int) -> tuple[RecordRun, int] | None:
        """The common case - units pointing at back-to-back records, no filter - with one read: the
        records and the log offset of the last one.

        Returns None when the general path is needed (gaps, blanks, too many bytes, records
        spanning segments or already expired).  Done on the units as Python ints (one ``struct``
        call): for a few dozen units, numpy's per-call costs were most of a small read.
        """
        units = _units_struct(len(raw) // CQ_UNIT_SIZE).unpack(raw)
        phys, sizes = units[0::3], units[1::3]
        first = phys[0]
        cuts = list(accumulate(sizes, initial=0))        # a blank unit's size makes this exceed max_bytes
        if cuts[-1] > max_bytes or first < self._log.min_offset():
            return None
        if len(phys) > 1 and phys != tuple(map(first.__add__, cuts[:-1])):
            return None
        blob = self._log.read(first, cuts[-1])
        if blob is None:
            return None
        return RecordRun(blob, cuts), phys[-1]


@lru_cache(maxsize=64)
def _units_struct(n: int) -> struct.Struct:
    return struct.Struct(">" + "qiq" * n)


class RecordRun(Sequence):
    """Back-to-back records read in one piece: ``blob`` is what a PULL_MESSAGE body carries, and
    the :class:`StoredMessage` objects are made only if someone looks at them (a pull of 1,024
    records then costs one slice, not 1,024 header parses)."""

    __slots__ = ("blob", "_cuts", "_messages")

    def __init__(self, blob: bytes, cuts: list[int]):
        self.blob = blob
        self._cuts = cuts
        self._messages: list | None = None

    def _all(self) -> list:
        if self._messages is None:
            cuts = self._cuts
            self._messages = list(map(StoredMessage, repeat(self.blob, len(cuts) - 1), cuts[:-1]))
        return self._messages

    def __len__(self) -> int:
        return len(self._cuts) - 1

    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self):
        return iter(self._all())
