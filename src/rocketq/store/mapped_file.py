"""One fixed-size, memory-mapped segment file (RocketMQ ``MappedFile``).

A segment is named by the 20-digit zero-padded offset of its first byte and has three
positions, all relative to the start of the file, with ``flushed <= committed <= wrote``:

* ``wrote``     - bytes appended so far (into the mapping, or into the transient buffer);
* ``committed`` - bytes in the file's page cache (== wrote without a transient buffer; with one,
  bytes the commit thread has written to the file with ``pwrite``);
* ``flushed``   - bytes known to be on disk (fdatasync returned).

Space is reserved with ``posix_fallocate`` before the file is mapped.  That matters: writing
through a mapping into a sparse file on a full disk kills the process with SIGBUS, while a
failed fallocate is an ordinary, reportable ``OSError``.

With a transient buffer (RocketMQ's ``transientStorePoolEnable``) the commit writes the buffer to
the file with ``pwrite`` (RocketMQ: ``FileChannel.write``), never through the mapping: a full page
written with write() is copied into the page cache without being zeroed first, whereas the first
touch of a mapped page of a fallocated file makes the kernel zero it (ext4 reads unwritten extents
as zeros) before the copy.  Readers still read committed bytes through the mapping: it shows the
same page cache.  Such a segment is never warmed nor prefaulted - nobody writes through its mapping.

Only one thread appends (the CommitLog holds its put lock); flushing and committing run on
background threads.  Positions are plain ints: CPython assigns them atomically.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

import numpy as np

OS_PAGE_SIZE = 4096
ZERO_CHUNK_BYTES = 1 << 20
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)
MS_SYNC = getattr(mmap, "MS_SYNC", 4)
try:                                  # libc's madvise and msync, called without the GIL (see MappedFile.warm)
    _libc = ctypes.CDLL(None, use_errno=True)
    _madvise, _msync = _libc.madvise, _libc.msync
    for _call in (_madvise, _msync):
        _call.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        _call.restype = ctypes.c_int
except (OSError, AttributeError):      # no C library to load here: warm() touches pages, prefault() nothing,
    _madvise = _msync = None           # flush() syncs the whole file
FILE_NAME_DIGITS = 20


def file_name(offset: int) -> str:
    return f"{offset:0{FILE_NAME_DIGITS}d}"


def parse_file_name(path: Path) -> int | None:
    name = path.name
    if len(name) == FILE_NAME_DIGITS and name.isdigit():
        return int(name)
    return None


def reserve_space(fd: int, size: int) -> None:
    """Default space reservation; tests inject a failing one to simulate a full disk."""
    os.posix_fallocate(fd, 0, size)


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """``pwrite`` all of *data* at *offset* (a write may be short; the GIL is released for each)."""
    done = 0
    while done < len(data):
        n = os.pwrite(fd, data[done:], offset + done)
        if n <= 0:
            raise OSError(f"pwrite at {offset + done} wrote nothing")
        done += n


def fsync_dir(directory: Path) -> None:
    """Make the directory's entries (a new or renamed file) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_full_size(path: Path, size: int, reserve) -> int:
    """Create *path* at its full size, atomically: reserve space in ``<name>.tmp``, then rename.

    A crash can leave only a ``.tmp`` file (ignored and removed at load), never a short segment.
    The directory is not synced here: :meth:`MappedFile.flush` syncs it before the first
    ``fdatasync`` of the new file (see ``name_synced``).
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        reserve(fd, size)
        if os.fstat(fd).st_size < size:
            os.ftruncate(fd, size)
        os.rename(tmp, path)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    return fd


class MappedFile:
    def __init__(self, path: Path, file_size: int, *, create: bool = True,
                 reserve=reserve_space, transient_pool=None):
        self.path = Path(path)
        self.file_size = file_size
        offset = parse_file_name(self.path)
        if offset is None:
            raise ValueError(f"{self.path}: segment files are named by a 20-digit offset")
        self.file_from_offset = offset
        # False until the directory entry of a file made here is known to be on disk: the first
        # flush syncs the directory before it claims any byte durable.  Not at creation, because
        # files are made on the threads that append (the dispatcher's consume-queue files, a
        # commitlog segment the allocator did not make ahead), and a directory fsync queues behind
        # the log's writeback: 0.05-0.66 s measured on the dispatch thread during the batch row,
        # long enough for back-pressure to stop the writer.  RocketMQ does not sync the directory.
        self.name_synced = True
        self._stray_dirty = False     # bytes outside [flushed, committed) were rewritten: the next flush syncs the file
        if create and not self.path.exists():
            self._fd = _create_full_size(self.path, file_size, reserve)
            self.name_synced = False
        else:
            self._fd = os.open(self.path, os.O_RDWR)
        try:
            actual = os.fstat(self._fd).st_size
            if actual != file_size:
                raise ValueError(f"{self.path}: size {actual} bytes, expected {file_size}")
            self._mm = mmap.mmap(self._fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self._fd)
            raise
        self._pool = transient_pool
        self.write_buffer: bytearray | None = transient_pool.borrow() if transient_pool else None
        self.wrote = 0
        self.committed = 0
        self.flushed = 0
        self.store_timestamp = 0      # store time of the last record appended, for expiry
        self.closed = False

    # -- writing -----------------------------------------------------------------------------

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote

    def is_full(self) -> bool:
        return self.wrote >= self.file_size

    def append(self, data) -> int:
        """Copy *data* at the write position; returns the position it was written at."""
        pos = self.wrote
        end = pos + len(data)
        if end > self.file_size:
            raise ValueError(f"{self.path.name}: append of {len(data)} bytes at {pos} passes the end")
        if self.write_buffer is not None:
            self.write_buffer[pos:end] = data
        else:
            self._mm[pos:end] = data
            self.committed = end
        self.wrote = end
        return pos

    def write_target(self):
        """The buffer appends go into: the transient buffer when there is one, else the mapping
        (for writers that encode in place, followed by :meth:`advance`).  ``SinglePut.append``
        reads the same two attributes natively: keep them in step."""
        return self.write_buffer if self.write_buffer is not None else self._mm

    def advance(self, n: int) -> None:
        """*n* bytes were written at the write position of :meth:`write_target`."""
        end = self.wrote + n
        if end > self.file_size:
            raise ValueError(f"{self.path.name}: advancing {n} bytes at {self.wrote} passes the end")
        self.wrote = end
        if self.write_buffer is None:
            self.committed = end

    def write_at(self, pos: int, data) -> None:
        """Overwrite bytes below the write position (consume-queue blanks, index headers)."""
        self._mm[pos:pos + len(data)] = data
        self._stray_dirty = True

    def commit(self) -> int:
        """Write [committed, wrote) of the transient buffer to the file; returns the bytes committed.

        The write starts at the page holding ``committed``, so the page a previous commit ended in
        is rewritten whole (a few hundred bytes at most): whole pages land in the page cache
        without a read-back, even should the kernel have dropped that page meanwhile.  ``pwrite``
        lets go of the GIL; the writer only appends past ``wrote``, so the range is stable.
        """
        if self.write_buffer is None:
            return 0
        start, end = self.committed, self.wrote
        if end > start:
            page = start - start % OS_PAGE_SIZE
            with memoryview(self.write_buffer) as view:
                _pwrite_all(self._fd, view[page:end], page)
            self.committed = end
        if end >= self.file_size:
            self._release_buffer()
        return end - start

    def _release_buffer(self) -> None:
        buf, self.write_buffer = self.write_buffer, None
        if buf is not None and self._pool is not None:
            self._pool.give_back(buf)

    def flush(self) -> int:
        """Make [flushed, committed) durable; returns the new flushed position.  A file made by
        this object has its name made durable first (a directory fsync, once).

        Only that range is written out (``msync(MS_SYNC)`` of the mapping over it, which the
        kernel turns into an ``fdatasync`` of that file range; no GIL held), not every dirty page of
        the file: a warmed segment is dirty zeros past the write position, and ``fdatasync`` wrote
        all of them at the first flush - a second of disk writes per 1 GiB segment ("flush took
        0.5 s or more") - after which every page the writer reached had been write-protected again
        and cost it a fault.  Bytes rewritten below ``flushed`` (``write_at``, ``truncate_tail``)
        make the next flush sync the whole file."""
        target = self.committed
        if target > self.flushed and not self.closed:
            if not self.name_synced:
                fsync_dir(self.path.parent)
                self.name_synced = True
            if self._stray_dirty or not self._sync_range(self.flushed, target):
                os.fdatasync(self._fd)
                self._stray_dirty = False
            self.flushed = target
        return self.flushed

    def _sync_range(self, start: int, end: int) -> bool:
        """``msync(MS_SYNC)`` over the pages of [start, end); False when it cannot be done here
        (no C library, the mapping closed meanwhile): the caller syncs the whole file instead."""
        base = self._address() if _msync is not None else None
        if base is None:
            return False
        start -= start % OS_PAGE_SIZE
        if _msync(base + start, end - start, MS_SYNC) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"msync of {self.path} [{start}, {end}): {os.strerror(code)}")
        return True

    def dirty_pages(self) -> int:
        return self.committed // OS_PAGE_SIZE - self.flushed // OS_PAGE_SIZE

    def warm(self, *, sync: bool = False) -> None:
        """Fault in every page past the written data now, so appends do not pay for page faults.

        ``madvise(MADV_POPULATE_WRITE)`` (Linux 5.14+) makes the kernel populate writable pages in
        bulk (measured here: ~0.3 s of kernel time per GiB, after which writing the pages costs
        ~0.1 s per GiB against ~0.6-2.5 s for an unprepared segment).  The call goes through
        ctypes, which lets go of the GIL for it: ``mmap.madvise`` would hold it for the whole
        populate, stopping the writer and the dispatcher while a segment is made ahead.  Older
        kernels fall back to writing a zero into each page past the data (never into a page that
        holds data).  RocketMQ's warm-up (``warmMapedFileEnable``) writes zeros the same way: the
        pages are dirty afterwards.  With *sync* (the store under SYNC_FLUSH) they are written out
        here (``fdatasync``, no GIL held), as RocketMQ forces them while it warms under SYNC_FLUSH:
        otherwise the first group commit on the segment writes all of its zeros while the producers
        waiting for it wait ("flush took 0.5 s or more"; the effect on a whole benchmark row was within
        the noise of a loaded machine, BENCHMARKS.md).  Written-back pages are write-protected again, so the writer takes a (cheap)
        write-protect fault per page after all; without *sync* the flushes leave the zeros
        after the data alone (see :meth:`flush`), and only the kernel's own writeback of pages
        dirty for longer than ``vm.dirty_expire_centisecs`` (30 s by default) does that.
        """
        start = self._first_unwritten_page()
        if start >= self.file_size or self.closed or self.write_buffer is not None:
            return                          # a pooled segment: the commit writes it with pwrite
        if not self._populate(start, self.file_size, MADV_POPULATE_WRITE):
            view = np.frombuffer(self._mm, dtype=np.uint8)
            view[start::OS_PAGE_SIZE] = 0
            del view
        if sync:
            os.fdatasync(self._fd)

    def prefault(self, end: int | None = None) -> None:
        """Map the pages from the write position up to *end* (the file end by default) read-only
        now (``MADV_POPULATE_READ``, Linux 5.14+; nothing on older kernels), so an append's first
        write to a page costs a write-protect fault instead of a full one.

        Unlike :meth:`warm` this dirties nothing, so no zeros are written to the disk; the pages
        are clean page cache until data lands in them.  The GIL is released during the call (see
        :meth:`warm`).
        """
        start = self._first_unwritten_page()
        end = self.file_size if end is None else min(end, self.file_size)
        if start < end and not self.closed and self.write_buffer is None:      # pooled: see warm()
            self._populate(start, end, MADV_POPULATE_READ)

    def _populate(self, start: int, end: int, advice: int) -> bool:
        """``madvise(advice)`` over [start, end) of the mapping without holding the GIL; False when
        the kernel (or this platform) cannot do it.  Should the segment be unmapped meanwhile,
        madvise fails with ENOMEM and nothing else happens."""
        base = self._address() if _madvise is not None else None
        if base is None:
            return False
        return _madvise(base + start, end - start, advice) == 0     # no GIL held: one call, no steps

    def _address(self) -> int | None:
        """The mapping's address for a libc call without the GIL, or None when it is closed."""
        try:
            exported = ctypes.c_char.from_buffer(self._mm)
        except (TypeError, ValueError):          # closed meanwhile
            return None
        base = ctypes.addressof(exported)
        del exported                             # the address stays valid while the mapping lives
        return base

    def _first_unwritten_page(self) -> int:
        return -(-self.wrote // OS_PAGE_SIZE) * OS_PAGE_SIZE

    # -- reading -----------------------------------------------------------------------------

    def read(self, pos: int, size: int) -> bytes:
        """Bytes [pos, pos+size) of written data (from the transient buffer if not yet committed)."""
        end = pos + size
        if end > self.committed:
            buf = self.write_buffer
            if buf is not None:
                return bytes(buf[pos:end])
        return self._mm[pos:end]

    def gather(self, starts: list[int], ends: list[int]) -> bytes | None:
        """Bytes [starts[i], ends[i]) for every i, concatenated in one copy straight from the mapping;
        None when some of them are not committed to the mapping yet (transient-pool mode)."""
        if self.write_buffer is not None and max(ends) > self.committed:
            return None
        view = memoryview(self._mm)
        try:
            return b"".join(map(view.__getitem__, map(slice, starts, ends)))
        finally:
            view.release()

    def buffer(self):
        """The whole mapping, for scanners that parse in place (never keep it past close)."""
        return self._mm


    # -- lifecycle ---------------------------------------------------------------------------

    def set_positions(self, pos: int) -> None:
        """After recovery: everything up to *pos* is valid and on disk."""
        self.wrote = self.committed = self.flushed = pos

    def truncate_tail(self, pos: int) -> int:
        """Make *pos* the write position and zero the stale bytes after it; returns bytes zeroed.

        Zeroes chunk by chunk and stops at the first chunk that is already all zeros: stale data
        after a torn write is at most one batch long, and rewriting a whole untouched segment
        would fault in every page of it.
        """
        start = pos
        view = np.frombuffer(self._mm, dtype=np.uint8)
        try:
            while pos < self.file_size:
                end = min(self.file_size, pos + ZERO_CHUNK_BYTES)
                chunk = view[pos:end]
                if not chunk.any():
                    break
                chunk[:] = 0
                pos = end
        finally:
            del view
        self.set_positions(start)
        self._stray_dirty = pos > start
        return pos - start

    def close(self, *, flush: bool = True) -> None:
        if self.closed:
            return
        if flush:
            self.commit()
            self.flush()
        self._release_buffer()
        self.closed = True
        try:
            self._mm.close()
        except BufferError:
            pass   # a reader still holds a view; the mapping goes when it does
        os.close(self._fd)

    def destroy(self) -> None:
        self.close(flush=False)
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return (f"MappedFile({self.path.name}, wrote={self.wrote}, committed={self.committed}, "
                f"flushed={self.flushed})")
