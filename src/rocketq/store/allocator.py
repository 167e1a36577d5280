"""Background preallocation of the next segment (RocketMQ ``AllocateMappedFileService``).

Creating a segment means reserving its blocks, mapping it and, with ``warmMapedFileEnable``,
faulting every page in for writing (RocketMQ's warm-up, which dirties them with zeros); for a
1 GiB file that is seconds of work that must not happen under the put lock.  When the writer
asks for segment N, the service hands over N (already made, or made now) and starts making N+1
in the background, so the next roll is a list append.

Without the warm-up (``prefault_mapped_file_enable``, on by default) the thread follows the
writer, mapping the pages up to ``PREFAULT_AHEAD_BYTES`` past the write position read-only
(dirtying nothing), so an append's first write to a page is a cheap write-protect fault instead
of a full fault on the writer's thread (measured: ~3 us per 1 KiB message on the broker's event
loop).  Near a segment's end the window reaches into the next segment (made ahead, not yet
handed out), so the writer finds the head of the next segment mapped when it rolls.  Only pages
about to be written are populated: populating costs 0.1-4.5 s of kernel time per GiB on this VM
(perf: zeroing the pages ext4 reads for unwritten extents, dearest on guest memory the host has
not backed yet), and a whole segment mapped ahead charged a fresh broker that cost in its first
seconds (the 1 GiB segment after the first, made at the first put), whatever it then wrote.

The request queue holds at most two paths (next and next-next); a failed preallocation is
remembered and reported to the writer, who then tries once in the foreground and returns
``CREATE_MAPPED_FILE_FAILED`` if that fails too.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from rocketq.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

MAX_PENDING_REQUESTS = 2
ALLOCATE_WAIT_TIMEOUT_S = 5.0
PREFAULT_AHEAD_BYTES = 64 << 20
PREFAULT_MIN_STEP_BYTES = 8 << 20
FOLLOW_INTERVAL_S = 0.02


class AllocateService:
    def __init__(self, factory: Callable[[Path], MappedFile], *, warm: bool = False, prefault: bool = False):
        self._factory = factory
        self._warm = warm
        self._prefault = prefault
        self._cond = threading.Condition()
        self._pending: list[Path] = []
        self._followed: MappedFile | None = None       # the segment being appended to (prefault mode)
        self._populated = 0                             # ... mapped up to here
        self._head: tuple[MappedFile, int] | None = None    # the next segment, mapped up to here
        self._ready: dict[Path, MappedFile | BaseException] = {}
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="rocketq-allocate", daemon=True)
        self._thread.start()

    def get(self, path: Path, next_path: Path | None) -> MappedFile:
        """Segment *path*, waiting for a background allocation in flight; queue *next_path*."""
        with self._cond:
            result = self._ready.pop(path, None)
            if result is None and path in self._pending:
                self._cond.wait_for(lambda: path in self._ready or self._stopped, ALLOCATE_WAIT_TIMEOUT_S)
                result = self._ready.pop(path, None)
            if path in self._pending:
                self._pending.remove(path)
            if next_path is not None and next_path not in self._pending and next_path not in self._ready \
                    and len(self._pending) < MAX_PENDING_REQUESTS:
                self._pending.append(next_path)
                self._cond.notify_all()
        if isinstance(result, MappedFile):
            self.follow(result)                  # made ahead, its head mapped while the one before filled
            return result
        if isinstance(result, BaseException):
            log.warning("background preallocation of %s failed (%s); retrying in the foreground", path, result)
        mf = self._factory(path)
        self.follow(mf)
        return mf

    def follow(self, mf: MappedFile) -> None:
        """Prefault ahead of the writer in *mf*, the segment appended to from now on."""
        if self._prefault and not self._warm:
            with self._cond:
                head, self._head = self._head, None
                self._followed, self._populated = mf, head[1] if head is not None and head[0] is mf else 0
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not (self._stopped or any(p not in self._ready for p in self._pending)):
                    self._cond.wait(FOLLOW_INTERVAL_S if self._followed is not None else None)
                if self._stopped:
                    return
                path = next((p for p in self._pending if p not in self._ready), None)
            if path is None:
                self._prefault_ahead()
                continue
            try:
                mf: MappedFile | BaseException = self._factory(path)
                if self._warm:
                    mf.warm()
            except Exception as exc:   # reported to the writer when it asks for this path
                mf = exc
            with self._cond:
                if self._stopped or path not in self._pending:
                    if isinstance(mf, MappedFile):
                        if self._stopped:
                            mf.destroy()            # made ahead, never handed out
                        else:                       # the writer stopped waiting and opened it itself:
                            mf.close(flush=False)   # its file is in use, only this mapping goes
                    continue
                self._ready[path] = mf
                self._cond.notify_all()

    def _prefault_ahead(self) -> None:
        """One step of following the writer: map what lies up to PREFAULT_AHEAD_BYTES past it, in
        its segment and, near that segment's end, in the head of the next one."""
        mf = self._followed
        if mf is None:
            return
        want = mf.wrote + PREFAULT_AHEAD_BYTES
        target = min(mf.file_size, want)
        if target - self._populated >= PREFAULT_MIN_STEP_BYTES or (target == mf.file_size and self._populated < target):
            mf.prefault(target)
            with self._cond:
                if self._followed is mf:
                    self._populated = target
                    if mf.closed:
                        self._followed = None
        if want > mf.file_size:
            self._prefault_head(mf, want - mf.file_size)

    def _prefault_head(self, mf: MappedFile, end: int) -> None:
        """Map the next segment (when it is made already) up to *end*."""
        with self._cond:
            head = self._head
            if head is None or head[0].file_from_offset != mf.file_from_offset + mf.file_size:
                nxt = next((r for r in self._ready.values() if isinstance(r, MappedFile)
                            and r.file_from_offset == mf.file_from_offset + mf.file_size), None)
                head = self._head = (nxt, 0) if nxt is not None else None
        if head is None or end - head[1] < PREFAULT_MIN_STEP_BYTES and end < head[0].file_size:
            return
        end = min(end, head[0].file_size)
        head[0].prefault(end)
        with self._cond:
            if self._head is not None and self._head[0] is head[0]:
                self._head = (head[0], end)

    def shutdown(self) -> None:
        """Stop the thread and delete segments made ahead but never handed out."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout=10)
        for mf in self._ready.values():
            if isinstance(mf, MappedFile):
                mf.destroy()
        self._ready.clear()
        self._followed = None
