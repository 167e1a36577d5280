"""Background preallocation of the next segment (RocketMQ ``AllocateMappedFileService``).

Creating a segment means reserving its blocks, mapping it and, with ``warmMapedFileEnable``,
faulting every page in for writing (RocketMQ's warm-up, which dirties them with zeros); for a
1 GiB file that is seconds of work that must not happen under the put lock.  When the writer
asks for segment N, the service hands over N (already made, or made now) and starts making N+1
in the background, so the next roll is a list append.

Without the warm-up, ``prefault_mapped_file_enable`` maps pages in read-only
(``MADV_POPULATE_READ``, dirtying nothing), so an append's first write to a page is a cheap
write-protect fault instead of a full fault on the writer's thread.  Only a window follows the
writer: up to ``PREFAULT_AHEAD_BYTES`` past its write position, in steps of at least
``PREFAULT_MIN_STEP_BYTES``, spilling into the segment made ahead once the window passes the end
of the current one.  A segment is never populated whole: that cost a second of kernel time per
GiB on the other core whether or not the segment was ever written (a fresh store's next segment,
made as soon as the first is handed out), and competed with the writer and the dispatcher.

A segment with a transient-pool buffer is neither warmed nor followed: its commit writes it with
``pwrite`` (:mod:`rocketq.store.mapped_file`), nobody writes through its mapping, and populating it
would make the kernel zero every page the write then overwrites.

The request queue holds at most two paths (next and next-next); a failed preallocation is
remembered and reported to the writer, who then tries once in the foreground and returns
``CREATE_MAPPED_FILE_FAILED`` if that fails too.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from rocketq.store.mapped_file import MappedFile, file_name

log = logging.getLogger(__name__)

MAX_PENDING_REQUESTS = 2
ALLOCATE_WAIT_TIMEOUT_S = 5.0
PREFAULT_AHEAD_BYTES = 64 << 20
PREFAULT_MIN_STEP_BYTES = 8 << 20
# how often the thread looks at the writer's position while following it: every 20 ms while the
# writer moved a step (8 MiB) or more since the last look (a 4 KiB writer runs at ~2 GB/s, 40 MB in
# 20 ms of a 64 MiB window), every 100 ms otherwise - a broker's single sends or an idle store then
# cost the thread 10 wake-ups a second instead of 50 (each a futex wake and a GIL take)
FOLLOW_FAST_S = 0.02
FOLLOW_SLOW_S = 0.1


class AllocateService:
    def __init__(self, factory: Callable[[Path], MappedFile], *, warm: bool = False, prefault: bool = False,
                 sync_warm: bool = False):
        self._factory = factory
        self._warm = warm
        self._sync_warm = sync_warm                     # SYNC_FLUSH: warmed zeros go to disk at once
        self._prefault = prefault
        self._cond = threading.Condition()
        self._pending: list[Path] = []
        self._followed: MappedFile | None = None       # the segment being appended to (prefault mode)
        self._populated = 0                             # ... mapped up to here
        self._looked_at = 0                             # ... whose write position was this at the last look
        self._interval = FOLLOW_FAST_S                  # until the next look
        self._spilled: dict[Path, int] = {}             # segments made ahead: mapped up to here
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
            self.follow(result)                  # made ahead (and its first window mapped, maybe)
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
                self._followed = mf if mf.write_buffer is None else None     # pooled: written with pwrite
                self._populated = self._spilled.pop(mf.path, 0)
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not (self._stopped or any(p not in self._ready for p in self._pending)):
                    self._cond.wait(self._interval if self._followed is not None else None)
                if self._stopped:
                    return
                path = next((p for p in self._pending if p not in self._ready), None)
            if path is None:
                self._prefault_ahead()
                continue
            try:
                mf: MappedFile | BaseException = self._factory(path)
                if self._warm and mf.write_buffer is None:   # (a pooled segment is written with pwrite)
                    mf.warm(sync=self._sync_warm)   # RocketMQ's warm-up: the whole segment, as it is made
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
        its segment and, past that segment's end, in the one made ahead."""
        mf = self._followed
        if mf is None:
            return
        if mf.closed:
            with self._cond:
                if self._followed is mf:
                    self._followed = None
            return
        wrote = mf.wrote
        self._interval = FOLLOW_FAST_S if abs(wrote - self._looked_at) >= PREFAULT_MIN_STEP_BYTES else FOLLOW_SLOW_S
        self._looked_at = wrote
        want = wrote + PREFAULT_AHEAD_BYTES
        target = min(mf.file_size, want)
        if target - self._populated >= PREFAULT_MIN_STEP_BYTES or (target == mf.file_size > self._populated):
            mf.prefault(target)
            with self._cond:
                if self._followed is mf:
                    self._populated = target
        if want > mf.file_size:
            self._spill(mf.path.parent / file_name(mf.file_from_offset + mf.file_size), want - mf.file_size)

    def _spill(self, path: Path, end: int) -> None:
        """Map the segment made ahead at *path* up to *end* (the part of the window past the current one)."""
        with self._cond:
            nxt = self._ready.get(path)
            done = self._spilled.get(path, 0)
        if not isinstance(nxt, MappedFile) or nxt.write_buffer is not None \
                or (end - done < PREFAULT_MIN_STEP_BYTES and end < nxt.file_size) or done >= min(end, nxt.file_size):
            return
        nxt.prefault(end)
        with self._cond:
            if self._ready.get(path) is nxt:
                self._spilled[path] = min(end, nxt.file_size)

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
        self._spilled.clear()
        self._followed = None
