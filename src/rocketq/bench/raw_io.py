"""Raw references for the store benchmark: what the machine does with no store in the way.

* :func:`mmap_copy_rate` - copy N bytes, one chunk at a time, into a preallocated and pre-faulted
  file mapping (what a CommitLog append is, minus encoding and bookkeeping);
* :func:`write_copy_rate` - the same bytes through ``os.write`` into a new file, no fsync;
* :func:`fsync_per_message_rate` - the naive durable log: ``os.write`` + ``os.fdatasync`` per
  message, the baseline that group commit is measured against.

Each takes the directory to work in, so the reference runs on the same filesystem as the store
it is compared with, and removes its file afterwards.  Set-up (allocation, pre-faulting) is
outside the timed part, as the store's segment is allocated and warmed before its clock starts.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import time
from pathlib import Path

MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)   # Linux 5.14+
OS_PAGE_BYTES = mmap.PAGESIZE
WARM_STEP_BYTES = 64 << 20


def mmap_copy_rate(directory: Path, total_bytes: int, chunk_bytes: int) -> float:
    """Bytes/s copying *total_bytes* in *chunk_bytes* slices into a warmed mapping of that size."""
    assert 0 < chunk_bytes <= total_bytes
    chunk = os.urandom(chunk_bytes)
    fd, name = tempfile.mkstemp(dir=directory, prefix="raw-mmap-")
    try:
        os.posix_fallocate(fd, 0, total_bytes)
        with mmap.mmap(fd, total_bytes) as mm:
            _warm(mm, total_bytes)
            full = total_bytes - total_bytes % chunk_bytes
            t0 = time.perf_counter()
            for pos in range(0, full, chunk_bytes):
                mm[pos:pos + chunk_bytes] = chunk
            if full < total_bytes:
                mm[full:total_bytes] = chunk[:total_bytes - full]
            elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
        Path(name).unlink(missing_ok=True)
    return total_bytes / elapsed


def _warm(mm: mmap.mmap, size: int) -> None:
    """Fault every page in for writing, as the store's ``warm_mapped_file_enable`` does."""
    try:
        for off in range(0, size, WARM_STEP_BYTES):
            mm.madvise(MADV_POPULATE_WRITE, off, min(WARM_STEP_BYTES, size - off))
    except (OSError, ValueError):
        for off in range(0, size, OS_PAGE_BYTES):
            mm[off] = 0


def write_copy_rate(directory: Path, total_bytes: int, chunk_bytes: int) -> float:
    """Bytes/s writing *total_bytes* with ``os.write`` in *chunk_bytes* pieces to a new file (no fsync)."""
    assert 0 < chunk_bytes <= total_bytes
    chunk = os.urandom(chunk_bytes)
    view = memoryview(chunk)
    fd, name = tempfile.mkstemp(dir=directory, prefix="raw-write-")
    try:
        left = total_bytes
        t0 = time.perf_counter()
        while left:
            left -= os.write(fd, view[:min(chunk_bytes, left)])
        elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
        Path(name).unlink(missing_ok=True)
    return total_bytes / elapsed


def fsync_per_message_rate(directory: Path, record_bytes: int, seconds: float) -> tuple[float, int]:
    """(messages/s, messages) appending *record_bytes* and fdatasync'ing after each, for *seconds*."""
    record = os.urandom(record_bytes)
    fd, name = tempfile.mkstemp(dir=directory, prefix="raw-fsync-")
    count = 0
    try:
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while time.perf_counter() < deadline:
            os.write(fd, record)
            os.fdatasync(fd)
            count += 1
        elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
        Path(name).unlink(missing_ok=True)
    return count / elapsed, count
