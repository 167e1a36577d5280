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

Inserts are native (:func:`rocketq._native.index_put_run`): a run of entries per call, each
linked exactly as one RocketMQ ``putKey`` would link it, the header written once after them; a long
run is linked with the GIL released (the service's lock keeps other writers and readers out).
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import threading
from pathlib import Path
from typing import NamedTuple

from rocketq import _native
from rocketq.store.mapped_file import fsync_dir

HEADER_SIZE = 40                    # bytes
SLOT_SIZE = 4                       # bytes, one int32 entry number
ENTRY_SIZE = 20                     # bytes
NO_ENTRY = 0                        # entry number meaning "empty slot" / "end of chain"
FIRST_ENTRY = 1                     # indexCount of a file without entries
MAX_TIME_DIFF_S = (1 << 31) - 1     # timeDiff is an int32 number of seconds
_HEADER = struct.Struct(">qqqqii")
_SLOT = struct.Struct(">i")
_I64 = struct.Struct(">q")
END_PHY_POS, INDEX_COUNT_POS = 24, 36   # header fields read alone on the put path
_ENTRY = struct.Struct(">iqii")
assert ENTRY_SIZE == _ENTRY.size and _HEADER.size == HEADER_SIZE


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
        while i >= FIRST_ENTRY and _ENTRY.unpack_from(self._mm, self._entries_pos + i * ENTRY_SIZE)[1] == phy:
            n += 1
            i -= 1
        return n

    def put(self, entries: list[tuple[int, int, int]]) -> int:
        """Append as many ``(hash, commitlog offset, store time)`` entries as fit, in order; return how many."""
        self._check_open()
        n = _native.index_put(self._mm, self.slot_count, self.max_entries, entries)
        self._dirty = self._dirty or n > 0
        return n

    def put_run(self, run, start: int) -> int:
        """Append a dispatch run's index entries from *start* on, as many as fit; return how many."""
        self._check_open()
        n = _native.index_put_run(self._mm, self.slot_count, self.max_entries, run, start)
        self._dirty = self._dirty or n > 0
        return n

    def select(self, key_hash: int, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """CommitLog offsets of entries with *key_hash* stored in [begin_ms, end_ms], newest first
        (RocketMQ ``selectPhyOffset``)."""
        self._check_open()
        h = self.header()
        out: list[int] = []
        number = _SLOT.unpack_from(self._mm, HEADER_SIZE + (key_hash % self.slot_count) * SLOT_SIZE)[0]
        steps = 0
        while NO_ENTRY < number < h.index_count and len(out) < max_num and steps < h.index_count:
            e_hash, phy, tdiff, prev = _ENTRY.unpack_from(self._mm, self._entries_pos + number * ENTRY_SIZE)
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
                self._mm.close()
                os.close(self._fd)
                self._fd = -1

    def _check_open(self) -> None:
        if self._fd < 0:
            raise ValueError(f"index file {self.path} is closed")

    def __repr__(self) -> str:
        state = "closed" if self._fd < 0 else f"{self.index_count - 1} entries"
        return f"IndexFile({self.path.name}, {state})"
