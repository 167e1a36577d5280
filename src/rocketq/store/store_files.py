"""The store directory: its layout, the process lock and the abort marker.

::

    <store>/commitlog/<20-digit offset>                  CommitLog segments
    <store>/consumequeue/<topic>/<queueId>/<20-digit>    consume-queue segments
    <store>/consumequeue_ext/<topic>/<queueId>/<20-digit>  their ext files (bit-map prefilter)
    <store>/index/<yyyyMMddHHmmssSSS>                    index files
    <store>/checkpoint  <store>/abort  <store>/lock
    <store>/config/topics.json consumerOffset.json delayOffset.json subscriptionGroup.json

``lock`` is held with ``flock`` for the life of the process, so a second process opening the
same store fails at once with a clear message instead of corrupting it.  ``abort`` exists while a
store is open; finding it at start means the last run did not shut down cleanly.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

STORE_ENTRIES = {"commitlog", "consumequeue", "consumequeue_ext", "index", "checkpoint", "abort", "lock", "config"}


class StoreOpenError(RuntimeError):
    """The store cannot be opened: locked by another process, or the path is not a store."""


class StorePaths:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.commitlog = self.root / "commitlog"
        self.consumequeue = self.root / "consumequeue"
        self.consumequeue_ext = self.root / "consumequeue_ext"   # the bit-map prefilter's ext files
        self.index = self.root / "index"
        self.checkpoint = self.root / "checkpoint"
        self.abort = self.root / "abort"
        self.lock = self.root / "lock"
        self.config = self.root / "config"
        self.delay_offset = self.config / "delayOffset.json"
        self.geometry = self.config / "storeGeometry.json"   # rocketq's: file sizes, for offline tools

    def check_is_store(self) -> None:
        """Refuse a path that exists but is clearly something else (a file, or a foreign directory)."""
        root = self.root
        if root.exists() and not root.is_dir():
            raise StoreOpenError(f"{root} is a file, not a store directory")
        if root.is_dir():
            entries = {p.name for p in root.iterdir()}
            foreign = entries - STORE_ENTRIES
            if foreign and not entries & {"commitlog", "checkpoint"}:
                sample = ", ".join(sorted(foreign)[:5])
                raise StoreOpenError(
                    f"{root} is not a store (it has {sample} but no commitlog/ or checkpoint); "
                    f"give an empty or new directory")
            if self.commitlog.exists() and not self.commitlog.is_dir():
                raise StoreOpenError(f"{self.commitlog} should be a directory of segment files")


class ProcessLock:
    def __init__(self, path: Path):
        self.path = path
        self._fd = -1

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreOpenError(f"store {self.path.parent} is in use by another process (pid {holder}); "
                                 f"stop it first or choose another --store-path") from None
        pid = str(os.getpid()).encode()
        try:            # over the old pid first: an existing lock file needs no new space (a full disk)
            os.pwrite(fd, pid, 0)
            os.ftruncate(fd, len(pid))
        except OSError:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def create_abort_marker(path: Path) -> None:
    """The marker is its existence; the pid in it is for people, and left out on a full disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            os.write(fd, str(os.getpid()).encode())
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        os.fsync(fd)
    finally:
        os.close(fd)
