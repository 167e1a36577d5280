"""One index file: a hash index from message key to CommitLog offset (RocketMQ ``IndexFile``).

Theory of operation
-------------------
A message can be found by ``topic#key`` without scanning the log.  The key's hash picks a slot;
the slot holds the number of the newest entry whose hash falls in it; every entry holds the
number of the entry before it in the same slot.  A lookup walks that chain newest first and keeps
the entries whose full hash and store time match.  Different keys can share a hash, so a hit is a
candidate only: the caller reads the message and checks its real keys.

Layout, every integer big-endian, byte for byte RocketMQ's so files are interchangeable::

    off                    size                field
      0                       8                beginTimestamp  store time (ms) of entry 1
      8                       8                endTimestamp    store time (ms) of the newest entry
     16                       8                beginPhyOffset  CommitLog offset of entry 1
     24                       8                endPhyOffset    CommitLog offset of the newest entry
     32                       4                hashSlotCount   slots that ever went from empty to used
     36                       4                indexCount      next entry number (1 in a new file)
     40            slot_count x 4              slot[s]         newest entry number of slot s, 0 = empty
     40 + 4*slot_count   max_entries x 20      entry[i]        keyHash i32 | phyOffset i64 |
                                                               timeDiff i32 (s after beginTimestamp) |
                                                               prevIndex i32 (0 = end of chain)

Invariants
----------
* Entry numbers start at 1; 0 means "none", so entry 0 is never written and a file holds
  ``max_entries - 1`` entries.  Entries ``1 .. indexCount-1`` are written in put order and never
  change afterwards.
* ``slot = keyHash % slot_count``.  A chain only ever points to smaller entry numbers, so a walk
  ends; on a damaged file it is still cut off after ``indexCount`` steps.
* The header is written last in a put, so whoever reads ``indexCount = c`` under the caller's lock
  finds entries ``< c`` complete.

Inserts are vectorised, because the dispatcher indexes millions of keys a second: a batch of n
keys takes entry numbers ``c .. c+n-1`` and is written as one contiguous block.  A stable sort by
slot puts each slot's batch entries next to each other in put order, so an entry's ``prev`` is
its left neighbour in that order, or, for the first of its slot, the slot's old head; each touched
slot then gets the last of its entries.  That is exactly what n single RocketMQ ``putKey`` calls
would leave behind.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import threading
from pathlib import Path
from typing import NamedTuple

import numpy as np

from rocketq.store.mapped_file import fsync_dir

HEADER_SIZE = 40                    # bytes
SLOT_SIZE = 4                       # bytes, one int32 entry number
ENTRY_SIZE = 20                     # bytes
NO_ENTRY = 0                        # entry number meaning "empty slot" / "end of chain"
FIRST_ENTRY = 1                     # indexCount of a file without entries
MAX_TIME_DIFF_S = (1 << 31) - 1     # timeDiff is an int32 number of seconds
ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("tdiff", ">i4"), ("prev", ">i4")])
_HEADER = struct.Struct(">qqqqii")
_SLOT = struct.Struct(">i")
_I64 = struct.Struct(">q")
END_PHY_POS, INDEX_COUNT_POS = 24, 36   # header fields read alone on the put path
_ENTRY = struct.Struct(">iqii")
SCALAR_PUT_MAX = 4                  # batches this small are written entry by entry (see _put_one)
assert ENTRY_DTYPE.itemsize == ENTRY_SIZE == _ENTRY.size and _HEADER.size == HEADER_SIZE


def index_file_size(slot_count: int, max_entries: int) -> int:
    """Bytes of a file with this geometry (420,000,040 for RocketMQ's 5M slots / 20M entries)."""
    return HEADER_SIZE + slot_count * SLOT_SIZE + max_entries * ENTRY_SIZE


class IndexFileError(ValueError):
    """An index file that cannot be this geometry's index file; the message names the file."""


class IndexHeader(NamedTuple):
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


def _time_diffs(store_ts: np.ndarray, begin_ts: int) -> np.ndarray:
    """Seconds after the file's first entry, as RocketMQ clamps them (0 while there is no begin)."""
    if begin_ts <= 0:
        return np.zeros(len(store_ts), dtype=np.int64)
    return np.clip((store_ts - begin_ts) // 1000, 0, MAX_TIME_DIFF_S)


class IndexFile:
    """One memory-mapped index file.  Not thread-safe for writers: the service serialises puts,
    selects and closes; only :meth:`flush` may run concurrently with them."""

    def __init__(self, path: Path, slot_count: int, max_entries: int, *, create: bool):
        if slot_count < 1 or max_entries < 2:
            raise ValueError(f"index geometry {slot_count} slots / {max_entries} entries is impossible")
        self.path = Path(path)
        self.slot_count = slot_count
        self.max_entries = max_entries
        self.size = index_file_size(slot_count, max_entries)
        self._io_lock = threading.Lock()        # keeps the fd alive while flush() syncs it
        self._dirty = False
        self._fd, self._mm = self._open(create)
        self._slots, self._entries = self._views()
        self._entries_pos = HEADER_SIZE + slot_count * SLOT_SIZE
        if create:
            _HEADER.pack_into(self._mm, 0, 0, 0, 0, 0, 0, FIRST_ENTRY)
        else:
            self._validate()

    def _open(self, create: bool) -> tuple[int, mmap.mmap]:
        # A new file is reserved under "<name>.tmp" and renamed when whole, so a crash can leave a
        # stray .tmp (removed at load) but never a short index file.
        if create and self.path.exists():
            raise FileExistsError(f"index file {self.path} exists already")
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp if create else self.path, os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0), 0o644)
        try:
            if create:
                self._reserve(fd)
                os.rename(tmp, self.path)
                fsync_dir(self.path.parent)
            actual = os.fstat(fd).st_size
            if actual != self.size:
                raise IndexFileError(f"index file {self.path}: {actual} bytes, but {self.slot_count} slots and "
                                     f"{self.max_entries} entries take {self.size}")
            return fd, mmap.mmap(fd, self.size)
        except BaseException:
            os.close(fd)
            if create:
                tmp.unlink(missing_ok=True)
            raise

    def _views(self) -> tuple[np.ndarray, np.ndarray]:
        """Typed views of the slot and entry regions (the only holders of the buffer export)."""
        u8 = np.frombuffer(self._mm, dtype=np.uint8)
        slots_end = HEADER_SIZE + self.slot_count * SLOT_SIZE
        return u8[HEADER_SIZE:slots_end].view(">i4"), u8[slots_end:].view(ENTRY_DTYPE)

    def _reserve(self, fd: int) -> None:
        # Real blocks before mapping: a full disk must fail here, not as SIGBUS on a later store.
        try:
            os.posix_fallocate(fd, 0, self.size)
        except OSError as exc:
            code = exc.errno if exc.errno is not None else next(iter(exc.args), None)
            code = code if isinstance(code, int) else errno.EIO
            raise OSError(code, f"cannot reserve {self.size} bytes for index file {self.path}: "
                                f"{exc.strerror or os.strerror(code)}", str(self.path)) from exc
        fsync_dir(self.path.parent)

    def _validate(self) -> None:
        h = _HEADER.unpack_from(self._mm, 0)
        problem = None
        if not 0 <= h[5] <= self.max_entries:
            problem = f"indexCount {h[5]} is outside 0..{self.max_entries}"
        elif not 0 <= h[4] <= self.slot_count:
            problem = f"hashSlotCount {h[4]} is outside 0..{self.slot_count}"
        elif h[5] > FIRST_ENTRY and h[3] < 0:
            problem = f"endPhyOffset {h[3]} is negative"
        if problem:
            self.close()
            raise IndexFileError(f"index file {self.path}: bad header, {problem}")

    def header(self) -> IndexHeader:
        """The header fields; indexCount 0 reads as 1, as RocketMQ loads a never-written header."""
        h = _HEADER.unpack_from(self._mm, 0)
        return IndexHeader(*h[:5], max(h[5], FIRST_ENTRY))

    begin_timestamp = property(lambda self: self.header().begin_timestamp)
    end_timestamp = property(lambda self: self.header().end_timestamp)
    begin_phy_offset = property(lambda self: self.header().begin_phy_offset)
    end_phy_offset = property(lambda self: _I64.unpack_from(self._mm, END_PHY_POS)[0])
    hash_slot_count = property(lambda self: self.header().hash_slot_count)
    index_count = property(lambda self: max(_SLOT.unpack_from(self._mm, INDEX_COUNT_POS)[0], FIRST_ENTRY))

    def is_full(self) -> bool:
        return self.index_count >= self.max_entries

    def tail_count(self, phy: int) -> int:
        """How many of the newest entries, counting back from the last, point at *phy*."""
        n = 0
        i = self.index_count - 1
        while i >= FIRST_ENTRY and int(self._entries[i]["phy"]) == phy:
            n += 1
            i -= 1
        return n

    def put(self, hashes, phy_offsets, store_ts) -> int:
        """Append as many (hash, offset, store time) keys as fit, in order; return how many.  Arrays,
        or for a few keys (at most SCALAR_PUT_MAX) lists of Python ints."""
        self._check_open()
        h = self.header()
        n = min(len(hashes), self.max_entries - h.index_count)
        if n <= 0:
            return 0
        if len(phy_offsets) < n or len(store_ts) < n:
            raise ValueError(f"{len(hashes)} hashes but {len(phy_offsets)} offsets and {len(store_ts)} times")
        if n <= SCALAR_PUT_MAX:
            for i in range(n):
                self._put_one(h, int(hashes[i]), int(phy_offsets[i]), int(store_ts[i]))
                h = self.header()
            return n
        hashes = np.asarray(hashes[:n], dtype=np.int64)
        phys = np.asarray(phy_offsets[:n], dtype=np.int64)
        ts = np.asarray(store_ts[:n], dtype=np.int64)
        count = h.index_count
        first = count == FIRST_ENTRY
        begin_ts = int(ts[0]) if first else h.begin_timestamp
        begin_phy = int(phys[0]) if first else h.begin_phy_offset
        prev, heads, head_numbers, newly_used = self._link(hashes % self.slot_count, count)
        block = np.empty(n, dtype=ENTRY_DTYPE)
        block["hash"], block["phy"], block["tdiff"], block["prev"] = hashes, phys, _time_diffs(ts, begin_ts), prev
        self._entries[count:count + n] = block          # one contiguous write
        self._slots[heads] = head_numbers                # heads are unique: a well-defined scatter
        _HEADER.pack_into(self._mm, 0, begin_ts, int(ts[-1]), begin_phy, int(phys[-1]),
                          h.hash_slot_count + newly_used, count + n)
        self._dirty = True
        return n

    def _put_one(self, h: IndexHeader, key_hash: int, phy: int, ts: int) -> None:
        """One entry the way RocketMQ's ``putKey`` writes it (the numpy path costs ~40 us a call, too
        much for the one-message batches of a broker that is not busy)."""
        count = h.index_count
        first = count == FIRST_ENTRY
        begin_ts = ts if first else h.begin_timestamp
        slot_pos = HEADER_SIZE + (key_hash % self.slot_count) * SLOT_SIZE
        old = _SLOT.unpack_from(self._mm, slot_pos)[0]
        if old <= NO_ENTRY or old > count:              # outside the written entries: empty
            old = NO_ENTRY
        tdiff = 0 if begin_ts <= 0 else min(max((ts - begin_ts) // 1000, 0), MAX_TIME_DIFF_S)
        _ENTRY.pack_into(self._mm, self._entries_pos + count * ENTRY_SIZE, key_hash, phy, tdiff, old)
        _SLOT.pack_into(self._mm, slot_pos, count)
        _HEADER.pack_into(self._mm, 0, begin_ts, ts, phy if first else h.begin_phy_offset, phy,
                          h.hash_slot_count + (old == NO_ENTRY), count + 1)
        self._dirty = True

    def _link(self, slots: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Chain a batch numbered from *count*: (prev per entry, slots touched, their new heads,
        how many of those slots were empty)."""
        n = len(slots)
        order = np.argsort(slots, kind="stable")         # each slot's entries together, in put order
        s = slots[order]
        numbers = order + count                           # entry number of each sorted position
        first = np.ones(n, dtype=bool)
        first[1:] = s[1:] != s[:-1]
        last = np.ones(n, dtype=bool)
        last[:-1] = first[1:]
        old = self._slots[s[first]].astype(np.int64)
        # RocketMQ treats a head outside the written entries as empty rather than follow it.
        old[(old <= NO_ENTRY) | (old > count)] = NO_ENTRY
        prev_sorted = np.empty(n, dtype=np.int64)
        prev_sorted[1:] = numbers[:-1]
        prev_sorted[first] = old
        prev = np.empty(n, dtype=np.int64)
        prev[order] = prev_sorted
        return prev, s[last], numbers[last], int(np.count_nonzero(old == NO_ENTRY))

    def select(self, key_hash: int, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """CommitLog offsets of entries with *key_hash* stored in [begin_ms, end_ms], newest first
        (RocketMQ ``selectPhyOffset``)."""
        self._check_open()
        h = self.header()
        out: list[int] = []
        number = int(self._slots[key_hash % self.slot_count])
        steps = 0
        while NO_ENTRY < number < h.index_count and len(out) < max_num and steps < h.index_count:
            e_hash, phy, tdiff, prev = self._entries[number].item()
            if tdiff < 0:
                break
            stored = h.begin_timestamp + tdiff * 1000
            if e_hash == key_hash and begin_ms <= stored <= end_ms:
                out.append(phy)
            if prev == number or stored < begin_ms:     # older entries of the chain are older still
                break
            number = prev
            steps += 1
        return out

    def flush(self) -> None:
        """fdatasync if anything was put since the last flush (safe against a concurrent close)."""
        with self._io_lock:
            if self._fd < 0 or not self._dirty:
                return
            self._dirty = False             # cleared first: a put racing the sync marks it again
            try:
                os.fdatasync(self._fd)
            except BaseException:
                self._dirty = True
                raise

    def close(self) -> None:
        """Flush and unmap; idempotent."""
        self._release(sync=True)

    def destroy(self) -> None:
        """Close without syncing (the bytes are going away) and delete the file."""
        self._release(sync=False)
        self.path.unlink(missing_ok=True)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def _release(self, *, sync: bool) -> None:
        with self._io_lock:
            if self._fd < 0:
                return
            try:
                if sync and self._dirty:
                    os.fdatasync(self._fd)
            finally:
                del self._slots, self._entries  # drop the buffer exports, or mmap.close() refuses
                self._mm.close()
                os.close(self._fd)
                self._fd = -1

    def _check_open(self) -> None:
        if self._fd < 0:
            raise ValueError(f"index file {self.path} is closed")

    def __repr__(self) -> str:
        state = "closed" if self._fd < 0 else f"{self.index_count - 1} entries"
        return f"IndexFile({self.path.name}, {state})"
