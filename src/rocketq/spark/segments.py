"""Finding and opening CommitLog segment files for the store source and the bulk jobs.

A store directory is a local path (or ``file://`` URI), read through ``mmap``; any other URI
(``s3://``, ``gs://``, ``hdfs://``, ...) is opened with ``pyarrow.fs`` and a segment is read
into memory whole.  Segments are the files of ``<store>/commitlog`` named by the 20-digit log
offset of their first byte.  A local segment also carries where its data seems to end, so that
tasks are planned over data, not over zeros: its first hole (segments are preallocated), moved back
over the zeros written before it (a broker prefaults up to ~72 MiB of zeros ahead of its writer, and a
warmed segment is zeros to its end: planning over them gave one task a small fraction of the others'
records, and the last wave of tasks ran with a core idle).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from urllib.parse import urlparse

import numpy as np

from rocketq.spark.options import OptionError

ZERO_SCAN_BLOCK_BYTES = 1 << 20      # trailing zeros are looked for a block at a time, from the end
ZERO_SCAN_MAX_BYTES = 256 << 20      # more than a broker's prefault window (~72 MiB) of zeros: stop looking


@dataclass(frozen=True)
class Segment:
    path: str            # local path or URI of the file
    base: int            # log offset of its first byte
    size: int            # file size
    written: int | None = None   # where the data seems to end (a planning hint only; None: unknown)

    @property
    def extent(self) -> int:
        """The bytes worth planning tasks for: a segment is preallocated whole, its tail unwritten."""
        return self.size if self.written is None else min(self.written, self.size)


def written_extent(path: str) -> int | None:
    """Where the file's data seems to end: its first hole (``SEEK_HOLE``: unwritten or
    never-allocated blocks; the file's size where the file system cannot say), moved back over the
    zeros before it (:func:`data_end`); None when the file cannot be opened.  A hint: a broker may
    write past it at any time, so readers still read to the end of the file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            hole = os.lseek(fd, 0, os.SEEK_HOLE)
        except (OSError, AttributeError):
            hole = os.fstat(fd).st_size
        return data_end(fd, hole)
    finally:
        os.close(fd)


def data_end(fd: int, end: int) -> int:
    """*end* moved back to just after the last non-zero byte before it: a segment holds records from
    offset 0 on and zeros after them.  Scans back a block at a time, so it reads the zeros only, and
    at most ``ZERO_SCAN_MAX_BYTES`` of them (then *end* stays: a segment warmed with zeros whole is
    planned as before).  A record ending in zeros is cut short: still only a hint."""
    if end <= 0:
        return 0
    with mmap.mmap(fd, end, access=mmap.ACCESS_READ) as mapped:
        view = np.frombuffer(mapped, dtype=np.uint8)
        found = end
        hi = end
        while hi > 0 and end - hi < ZERO_SCAN_MAX_BYTES:
            lo = max(0, hi - ZERO_SCAN_BLOCK_BYTES)
            nonzero = np.flatnonzero(view[lo:hi]) if view[lo:hi].any() else None
            if nonzero is not None:
                found = lo + int(nonzero[-1]) + 1
                break
            hi = lo
        else:
            found = 0 if hi == 0 else end
        del view                            # the map cannot close while numpy holds it
        return found


def _local(path: str) -> str | None:
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme == "file" else path
    if len(parsed.scheme) == 1:          # a Windows drive letter
        return path
    return None


def _join(root: str, name: str) -> str:
    return root.rstrip("/") + "/" + name


def list_segments(store: str) -> list[Segment]:
    """The store's CommitLog segments in log order; a clear error when *store* is not a store."""
    local = _local(store)
    if local is not None:
        directory = os.path.join(local, "commitlog")
        if not os.path.isdir(local):
            raise OptionError(f"store path {store!r} does not exist or is not a directory")
        if not os.path.isdir(directory):
            raise OptionError(f"{store!r} is not a rocketq store: it has no commitlog directory")
        names = sorted(n for n in os.listdir(directory) if n.isdigit() and len(n) == 20)
        return [Segment(os.path.join(directory, n), int(n), os.path.getsize(os.path.join(directory, n)),
                        written_extent(os.path.join(directory, n))) for n in names]
    from pyarrow import fs
    filesystem, root = fs.FileSystem.from_uri(store)
    infos = filesystem.get_file_info(fs.FileSelector(_join(root, "commitlog"), allow_not_found=True))
    if not infos:
        raise OptionError(f"{store!r} is not a rocketq store: no commitlog segments under it")
    scheme = urlparse(store).scheme
    return sorted((Segment(f"{scheme}://{i.path}", int(i.base_name), i.size) for i in infos
                   if i.base_name.isdigit() and len(i.base_name) == 20), key=lambda s: s.base)


class OpenSegment:
    """A segment's bytes (``buffer``) for the duration of a ``with`` block."""

    def __init__(self, segment: Segment):
        self.segment = segment
        self._file = None
        self._map = None
        self.buffer = None

    def __enter__(self) -> OpenSegment:
        local = _local(self.segment.path)
        if local is not None:
            self._file = open(local, "rb")
            size = os.fstat(self._file.fileno()).st_size
            if size:
                self._map = mmap.mmap(self._file.fileno(), size, access=mmap.ACCESS_READ)
            self.buffer = self._map if self._map is not None else b""
        else:
            from pyarrow import fs
            filesystem, path = fs.FileSystem.from_uri(self.segment.path)
            with filesystem.open_input_file(path) as f:
                self.buffer = f.read()
        return self

    def __exit__(self, *exc) -> None:
        self.buffer = None
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:          # Arrow arrays still point into it: the GC unmaps later
                pass
        if self._file is not None:
            self._file.close()
