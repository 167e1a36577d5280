"""An ordered run of equal-size segments forming one logical file (RocketMQ ``MappedFileQueue``).

Used by the CommitLog (1 GiB segments) and by every ConsumeQueue (6,000,000-byte segments).
Segment ``i`` of the queue starts at ``first_offset + i * file_size``, so finding the segment for
an offset is arithmetic, not a search.  Segments only ever get added at the end (append) and
removed at the front (expiry) or the back (truncating a torn tail during recovery).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

from rocketq.store.allocator import AllocateService
from rocketq.store.mapped_file import MappedFile, file_name, parse_file_name
from rocketq.store.store_files import StoreOpenError

log = logging.getLogger(__name__)


class StoreLayoutError(StoreOpenError):
    """The files on disk are not a store this code can open (wrong sizes, gaps, strays)."""


class MappedFileQueue:
    def __init__(self, directory: Path, file_size: int, *,
                 factory: Callable[[Path], MappedFile] | None = None,
                 allocator: AllocateService | None = None):
        self.directory = Path(directory)
        self.file_size = file_size
        self._factory = factory or (lambda p: MappedFile(p, file_size))
        self._allocator = allocator
        self.files: list[MappedFile] = []

    # -- loading -----------------------------------------------------------------------------

    def load(self) -> None:
        """Map every existing segment; positions are set later by recovery."""
        if not self.directory.exists():
            return
        paths = []
        for path in sorted(self.directory.iterdir()):
            offset = parse_file_name(path)
            if offset is None:
                if path.name.endswith(".tmp"):       # a segment whose creation a crash interrupted
                    log.warning("removing %s, left by an interrupted segment creation", path)
                    path.unlink(missing_ok=True)
                    continue
                raise StoreLayoutError(f"{path}: not a segment file (names are 20-digit offsets)")
            size = path.stat().st_size
            if size != self.file_size:
                raise StoreLayoutError(
                    f"{path}: {size} bytes, but segments here are {self.file_size} bytes; "
                    f"was the store written with another segment size?")
            if offset % self.file_size:
                raise StoreLayoutError(f"{path}: offset {offset} is not a multiple of the segment size {self.file_size}")
            paths.append((offset, path))
        for (a, pa), (b, pb) in zip(paths, paths[1:]):
            if b != a + self.file_size:
                raise StoreLayoutError(f"{pb}: gap after {pa.name}; segment {file_name(a + self.file_size)} is missing")
        for _, path in paths:
            mf = MappedFile(path, self.file_size, create=False)
            mf.set_positions(self.file_size)
            self.files.append(mf)

    # -- lookup ------------------------------------------------------------------------------

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    @property
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    def find(self, offset: int) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        idx = (offset - files[0].file_from_offset) // self.file_size
        if 0 <= idx < len(files):
            return files[idx]
        return None

    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    def max_offset(self) -> int:
        """End of the data written so far (the next append's offset)."""
        last = self.last
        return last.file_from_offset + last.wrote if last else 0

    def committed_offset(self) -> int:
        last = self.last
        return last.file_from_offset + last.committed if last else 0

    def flushed_offset(self) -> int:
        """End of the flushed prefix: everything before it is on disk."""
        for mf in self.files:
            if mf.flushed < self.file_size:
                return mf.file_from_offset + mf.flushed
        last = self.last
        return last.file_from_offset + self.file_size if last else 0

    # -- growing -----------------------------------------------------------------------------

    def last_for_append(self, start_offset: int = 0) -> MappedFile:
        """The segment to append to, creating the next one when the last is full (or none exists)."""
        last = self.last
        if last is not None and not last.is_full():
            return last
        create_at = last.file_from_offset + self.file_size if last else start_offset - start_offset % self.file_size
        path = self.directory / file_name(create_at)
        if self._allocator is not None:
            mf = self._allocator.get(path, self.directory / file_name(create_at + self.file_size))
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
            mf = self._factory(path)
        self.files.append(mf)
        return mf

    # -- commit / flush ----------------------------------------------------------------------

    def _unfinished(self, position: str) -> list[MappedFile]:
        """Segments whose *position* has not reached their end, oldest first.

        Not only trailing ones: with a transient pool an older segment can still be uncommitted
        while a newer one, written straight to its mapping, is complete.
        """
        return [mf for mf in self.files if getattr(mf, position) < self.file_size]

    def commit(self) -> bool:
        """Write transient buffers to their files (pwrite); True when anything moved."""
        moved = False
        for mf in self._unfinished("committed"):
            if mf.write_buffer is not None and mf.commit():
                moved = True
        return moved

    def flush(self) -> int:
        """Sync every segment with unflushed data (its unflushed range, see ``MappedFile.flush``);
        returns the flushed offset."""
        for mf in self._unfinished("flushed"):
            mf.flush()
        return self.flushed_offset()

    # -- shrinking ---------------------------------------------------------------------------

    def truncate(self, offset: int, *, zero_tail: bool = True) -> None:
        """Drop everything at and after *offset*: later segments are deleted, the one holding it cut.

        *zero_tail* zeroes the rest of the cut segment, so a later scan cannot mistake stale bytes
        for data; the CommitLog passes False and zeroes only the garbage it found (a 1 GiB segment
        would otherwise be rewritten in full).
        """
        keep = []
        for mf in self.files:
            end = mf.file_from_offset + self.file_size
            if end <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                if zero_tail:
                    mf.truncate_tail(offset - mf.file_from_offset)
                else:
                    mf.set_positions(offset - mf.file_from_offset)
                keep.append(mf)
            else:
                log.warning("recovery: deleting %s, past the last valid offset %d", mf.path, offset)
                mf.destroy()
        self.files = keep

    def delete_first(self, count: int) -> list[Path]:
        """Remove the first *count* segments (expiry); returns their paths."""
        gone = []
        for mf in self.files[:count]:
            mf.destroy()
            gone.append(mf.path)
        self.files = self.files[count:]
        return gone

    def delete_expired(self, *, reserved_ms: int, now_ms: int | None = None, force: bool = False,
                       keep_from_offset: int | None = None, max_files: int = 10) -> list[Path]:
        """Delete leading full segments older than *reserved_ms* (all old ones when *force*).

        Never deletes the last segment, nor one holding offset *keep_from_offset* or later.
        """
        now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        count = 0
        for mf in self.files[:-1][:max_files]:
            if keep_from_offset is not None and mf.file_from_offset + self.file_size > keep_from_offset:
                break
            modified_ms = int(mf.path.stat().st_mtime * 1000)
            if not force and now_ms - modified_ms < reserved_ms:
                break
            count += 1
        return self.delete_first(count)

    def close(self, *, flush: bool = True) -> None:
        for mf in self.files:
            mf.close(flush=flush)
