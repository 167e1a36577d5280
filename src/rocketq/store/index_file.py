"""One index file: a hash index from message key to CommitLog offset (RocketMQ ``IndexFile``).

Layout, big-endian::

    header (40 B)   beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 | endPhyOffset i64 |
                    hashSlotCount i32 | indexCount i32          (indexCount starts at 1)
    slots           slot_count x i32: number of the newest entry in the slot, 0 = empty
    entries         max_entries x 20 B: keyHash i32 | phyOffset i64 | timeDiff i32 (s) | prevIndex i32

Entry ``i`` lives at ``40 + slot_count*4 + i*20``; entry 0 is never used, so a file holds
``max_entries - 1`` entries.  ``slot = keyHash % slot_count``; entries of one slot form a chain,
newest first, through ``prevIndex``.

Inserts are vectorised: a batch of n keys takes entry numbers ``count .. count+n-1`` (one
contiguous write); within the batch each entry's ``prev`` is the previous batch entry with the
same slot (found by a stable sort) or else the slot's old head; each touched slot then points to
its last entry of the batch.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

import numpy as np

HEADER_SIZE = 40
ENTRY_SIZE = 20
SLOT_SIZE = 4
ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("tdiff", ">i4"), ("prev", ">i4")])
_HEADER = struct.Struct(">qqqqii")
MAX_TIME_DIFF_S = (1 << 31) - 1


def index_file_size(slot_count: int, max_entries: int) -> int:
    return HEADER_SIZE + slot_count * SLOT_SIZE + max_entries * ENTRY_SIZE


class IndexFile:
    def __init__(self, path: Path, slot_count: int, max_entries: int, *, create: bool):
        self.path = Path(path)
        self.slot_count = slot_count
        self.max_entries = max_entries
        size = index_file_size(slot_count, max_entries)
        fd = os.open(self.path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o644)
        try:
            if create:
                try:
                    os.posix_fallocate(fd, 0, size)
                except OSError as exc:
                    os.close(fd)
                    self.path.unlink(missing_ok=True)
                    raise OSError(exc.errno, f"cannot reserve {size} bytes for index file {self.path}: "
                                             f"{exc.strerror}") from None
            actual = os.fstat(fd).st_size
            if actual != size:
                raise ValueError(f"{self.path}: {actual} bytes, expected {size} "
                                 f"({slot_count} slots, {max_entries} entries)")
            self._mm = mmap.mmap(fd, size)
        except BaseException:
            try:
                os.close(fd)
            except OSError:
                pass
            raise
        self._fd = fd
        u8 = np.frombuffer(self._mm, dtype=np.uint8)
        self._slots = u8[HEADER_SIZE:HEADER_SIZE + slot_count * SLOT_SIZE].view(">i4")
        self._entries = u8[HEADER_SIZE + slot_count * SLOT_SIZE:].view(ENTRY_DTYPE)
        if create:
            self._write_header(0, 0, 0, 0, 0, 1)
        h = self.header()
        if h[5] < 1 or h[5] > max_entries:
            raise ValueError(f"{self.path}: header indexCount {h[5]} is impossible (max {max_entries})")
        self.dirty = False

    def header(self) -> tuple:
        return _HEADER.unpack_from(self._mm, 0)

    def _write_header(self, *fields) -> None:
        _HEADER.pack_into(self._mm, 0, *fields)

    begin_timestamp = property(lambda self: self.header()[0])
    end_timestamp = property(lambda self: self.header()[1])
    begin_phy_offset = property(lambda self: self.header()[2])
    end_phy_offset = property(lambda self: self.header()[3])
    hash_slot_count = property(lambda self: self.header()[4])
    index_count = property(lambda self: self.header()[5])

    def is_full(self) -> bool:
        return self.index_count >= self.max_entries

    def put(self, hashes: np.ndarray, phy_offsets: np.ndarray, store_ts: np.ndarray) -> int:
        """Insert as many keys as fit; returns how many were written."""
        begin_ts, end_ts, begin_phy, end_phy, used_slots, count = self.header()
        n = min(len(hashes), self.max_entries - count)
        if n <= 0:
            return 0
        hashes, phy_offsets, store_ts = hashes[:n], phy_offsets[:n], store_ts[:n]
        if count == 1:
            begin_ts, begin_phy = int(store_ts[0]), int(phy_offsets[0])
        slots = (hashes % self.slot_count).astype(np.int64)
        numbers = np.arange(count, count + n, dtype=np.int64)
        order = np.argsort(slots, kind="stable")
        s_sorted = slots[order]
        same_as_prev = np.zeros(n, dtype=bool)
        same_as_prev[1:] = s_sorted[1:] == s_sorted[:-1]
        old_heads = self._slots[s_sorted].astype(np.int64)
        prev_sorted = np.where(same_as_prev, np.concatenate(([0], numbers[order][:-1])), old_heads)
        prev = np.empty(n, dtype=np.int64)
        prev[order] = prev_sorted
        tdiff = np.zeros(n, dtype=np.int64) if begin_ts <= 0 else \
            np.clip((store_ts - begin_ts) // 1000, 0, MAX_TIME_DIFF_S)
        block = np.empty(n, dtype=ENTRY_DTYPE)
        block["hash"], block["phy"], block["tdiff"], block["prev"] = hashes, phy_offsets, tdiff, prev
        self._entries[count:count + n] = block
        last_of_slot = np.ones(n, dtype=bool)
        last_of_slot[:-1] = s_sorted[1:] != s_sorted[:-1]
        heads = s_sorted[last_of_slot]
        newly_used = int(np.count_nonzero(self._slots[heads] == 0))
        self._slots[heads] = numbers[order][last_of_slot]
        self._write_header(begin_ts, int(store_ts[-1]), begin_phy, int(phy_offsets[-1]), used_slots + newly_used,
                           count + n)
        self.dirty = True
        return n

    def select(self, key_hash: int, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """CommitLog offsets of entries with *key_hash* stored in [begin_ms, end_ms], newest first."""
        begin_ts, _end, _bp, _ep, _used, count = self.header()
        out: list[int] = []
        number = int(self._slots[key_hash % self.slot_count])
        seen = 0
        while 0 < number < count and len(out) < max_num and seen < count:
            e = self._entries[number]
            t = begin_ts + int(e["tdiff"]) * 1000
            if int(e["hash"]) == key_hash and begin_ms <= t <= end_ms:
                out.append(int(e["phy"]))
            prev = int(e["prev"])
            if prev == number:
                break
            number = prev
            seen += 1
        return out

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False
            os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd < 0:
            return
        self.flush()
        del self._slots, self._entries
        self._mm.close()
        os.close(self._fd)
        self._fd = -1

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
