"""A consume queue's extension file (RocketMQ ``ConsumeQueueExt``): per message, its filter bit map.

Theory of operation
-------------------
With the bit-map prefilter on (:mod:`rocketq.store.filter_bitmap`), each message dispatched to a
queue whose topic has SQL92 filters gets an *ext unit* here, and its 20-byte consume-queue unit
holds the unit's *address* in place of the tags code.  The files live in
``<store>/consumequeue_ext/<topic>/<queueId>/<20-digit offset>`` (48 MiB each by default,
``mappedFileSizeConsumeQueueExt``), appended only by the dispatcher.

Ext unit, big-endian (RocketMQ's ``CqExtUnit``, byte for byte)::

    int16 size (20 + bitmap bytes) | int64 tags code | int64 store timestamp (ms)
    | int16 bitmap bytes | bitmap (bit p = bit p % 8 of byte p // 8)

An address is the unit's offset in the concatenated files plus ``Long.MIN_VALUE``, so it is at
most ``MAX_ADDR`` (``Integer.MIN_VALUE - 1``) and cannot be mistaken for a tags code (a Java int)
or a delivery time (positive).  A unit never straddles two files: when the next one does not fit
before the last ``END_BLANK_DATA_LENGTH`` bytes, ``int16 -1`` is written and the file is full.

The file is derived state like the consume queue: written before the consume-queue units that
point into it, and cut back on recovery to the last unit a surviving consume-queue unit points at
(:meth:`truncate_after`), so the two agree after a crash.  RocketMQ also walks the ext files from
the start on recovery; rocketq does not need to (the consume queue says where the end is).
Reads are vectorised: :meth:`read` gathers the units of a whole pull window in one go.

Where rocketq differs from RocketMQ (the unit and file formats are the same): RocketMQ, with
``enableConsumeQueueExt``, writes an ext unit for every message of every topic (an empty bit map
where no filter applies); rocketq writes them only for topics with registered SQL92 filters, so
other topics keep plain tags codes and their reads pay nothing.  Ext files are opened wherever they
exist, even with the feature turned off later, so tags codes behind ext addresses still resolve.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rocketq.store.mapped_file import MappedFile
from rocketq.store.mapped_file_queue import MappedFileQueue

EXT_DIR = "consumequeue_ext"
DEFAULT_EXT_FILE_SIZE = 48 << 20          # RocketMQ's mappedFileSizeConsumeQueueExt
END_BLANK_DATA_LENGTH = 4
MIN_EXT_UNIT_SIZE = 20                    # size + tags code + store time + bitmap size
MAX_EXT_UNIT_SIZE = 0x7FFF                # the size is a Java short
END_MARK = b"\xff\xff"                    # int16 -1: the rest of the file is empty
LONG_MIN = -(1 << 63)
MAX_ADDR = -(1 << 31) - 1                 # Integer.MIN_VALUE - 1
_HEAD = np.dtype([("size", ">i2"), ("tag", ">i8"), ("time", ">i8"), ("bits", ">i2")])


def is_ext_addr(address) -> bool:
    return address <= MAX_ADDR


def decorate(offset):
    """File offset -> address (works on numpy int64 arrays too)."""
    return offset + LONG_MIN


def undecorate(address):
    return address - LONG_MIN


def encode_units(tags: np.ndarray, times: np.ndarray, bitmaps: np.ndarray) -> np.ndarray:
    """The ext units of n messages as an (n, 20 + b) uint8 array; *bitmaps* is (n, b) uint8."""
    n, b = bitmaps.shape
    size = MIN_EXT_UNIT_SIZE + b
    if size > MAX_EXT_UNIT_SIZE:
        raise ValueError(f"an ext unit of {size} bytes is larger than {MAX_EXT_UNIT_SIZE}")
    head = np.empty(n, dtype=_HEAD)
    head["size"], head["tag"], head["time"], head["bits"] = size, tags, times, b
    out = np.empty((n, size), dtype=np.uint8)
    out[:, :MIN_EXT_UNIT_SIZE] = head.view(np.uint8).reshape(n, MIN_EXT_UNIT_SIZE)
    out[:, MIN_EXT_UNIT_SIZE:] = bitmaps
    return out


def open_ext(cq, root: Path, file_size: int, *, fresh: bool = False) -> None:
    """Attach *cq*'s ext files when it has any; for a queue being created (*fresh*) they are stale
    (its consume queue was deleted, to be rebuilt) and are deleted instead."""
    if not (Path(root) / cq.topic / str(cq.queue_id)).is_dir():
        return
    ext = ConsumeQueueExt(root, cq.topic, cq.queue_id, file_size)
    ext.load()
    if fresh:
        ext.destroy()
    else:
        cq.ext = ext


def _heads(raw: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(raw[:, :MIN_EXT_UNIT_SIZE]).view(_HEAD).reshape(len(raw))


class ConsumeQueueExt:
    def __init__(self, root: Path, topic: str, queue_id: int, file_size: int = DEFAULT_EXT_FILE_SIZE):
        self.file_size = file_size
        self.files = MappedFileQueue(Path(root) / topic / str(queue_id), file_size,
                                     factory=lambda p: MappedFile(p, file_size))

    # -- writing -----------------------------------------------------------------------------

    def put(self, units: np.ndarray) -> np.ndarray:
        """Append the (n, size) encoded *units*; returns their addresses (int64)."""
        n, size = units.shape
        addresses = np.empty(n, dtype=np.int64)
        done = 0
        while done < n:
            mf = self.files.last_for_append(0)
            fit = max(0, (mf.remaining - END_BLANK_DATA_LENGTH) // size)
            if fit == 0:                       # RocketMQ's fullFillToEnd: mark the end, go to the next file
                mf.append(END_MARK)
                mf.advance(mf.remaining)
                continue
            take = min(fit, n - done)
            start = mf.file_from_offset + mf.wrote
            mf.append(units[done:done + take].tobytes())
            addresses[done:done + take] = decorate(start + size * np.arange(take, dtype=np.int64))
            done += take
        return addresses

    # -- reading -----------------------------------------------------------------------------

    def read(self, addresses: np.ndarray, bitmap_bytes: int):
        """The units at *addresses* whose bit map has *bitmap_bytes* bytes: ``(ok, tags, bitmaps)``,
        ``ok`` false where no such unit is there (then its tags and bits are zero)."""
        size = MIN_EXT_UNIT_SIZE + bitmap_bytes
        ok, raw = self._gather(addresses, size)
        head = _heads(raw)
        ok &= (head["size"] == size) & (head["bits"] == bitmap_bytes)
        return ok, np.where(ok, head["tag"].astype(np.int64), 0), raw[:, MIN_EXT_UNIT_SIZE:]

    def read_tags(self, addresses: np.ndarray):
        """``(ok, tags codes)`` of the units at *addresses*, whatever their bit-map size."""
        ok, raw = self._gather(addresses, MIN_EXT_UNIT_SIZE)
        head = _heads(raw)
        ok &= (head["size"] >= MIN_EXT_UNIT_SIZE) & (head["size"] == MIN_EXT_UNIT_SIZE + head["bits"])
        return ok, np.where(ok, head["tag"].astype(np.int64), 0)

    def _gather(self, addresses: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The *size* bytes at each address, as an (n, size) array, and where they were all there."""
        n = len(addresses)
        ok = np.zeros(n, dtype=bool)
        raw = np.zeros((n, size), dtype=np.uint8)
        files = self.files.files
        if not n or not files:
            return ok, raw
        real = undecorate(np.asarray(addresses, dtype=np.int64))
        which = (real - files[0].file_from_offset) // self.file_size
        for idx in np.unique(which).tolist():
            if not 0 <= idx < len(files):
                continue
            mf = files[idx]
            sel = np.flatnonzero(which == idx)
            rel = real[sel] - mf.file_from_offset
            fits = (rel >= 0) & (rel + size <= mf.committed)
            sel, rel = sel[fits], rel[fits]
            if not len(sel):
                continue
            data = np.frombuffer(mf.buffer(), dtype=np.uint8, count=mf.committed)
            raw[sel] = data[rel[:, None] + np.arange(size)]
            del data                            # no view of the mapping outlives the call
            ok[sel] = True
        return ok, raw

    def unit_size_at(self, address: int) -> int | None:
        real = undecorate(address)
        mf = self.files.find(real)
        if mf is None:
            return None
        rel = real - mf.file_from_offset
        if rel + 2 > mf.committed:
            return None
        size = int.from_bytes(mf.read(rel, 2), "big", signed=True)
        return size if MIN_EXT_UNIT_SIZE <= size and rel + size <= mf.committed else None

    # -- recovery and expiry -------------------------------------------------------------------

    def truncate_after(self, address: int | None) -> None:
        """Keep the units up to and including the one at *address* (None: keep nothing), as
        RocketMQ's ``truncateByMaxAddress`` after a consume queue's recovery."""
        if address is None:
            end = 0
        else:
            size = self.unit_size_at(address)
            end = undecorate(address) + (size or 0)
        if end <= 0:
            for mf in self.files.files:
                mf.destroy()
            self.files.files = []
            return
        self.files.truncate(end)

    def delete_below(self, address: int) -> int:
        """Delete whole files that end at or before the unit at *address* (``truncateByMinAddress``)."""
        real = undecorate(address)
        count = 0
        for mf in self.files.files[:-1]:
            if mf.file_from_offset + self.file_size > real:
                break
            count += 1
        self.files.delete_first(count)
        return count

    def load(self) -> None:
        self.files.load()

    def flush(self) -> None:
        self.files.flush()

    def close(self) -> None:
        self.files.close()

    def destroy(self) -> None:
        for mf in self.files.files:
            mf.destroy()
        self.files.files = []
        try:
            self.files.directory.rmdir()
        except OSError:
            pass
