"""Background preallocation of the next segment (RocketMQ ``AllocateMappedFileService``).

Creating a segment means reserving its blocks, mapping it and faulting its pages in (for
writing with ``warmMapedFileEnable``, which dirties them with zeros as RocketMQ's warm-up does;
else read-only, ``prefault_mapped_file_enable``, which dirties nothing); for a 1 GiB file that is seconds of work that must not happen under the put lock.  When the
writer asks for segment N, the service hands over N (already made, or made now) and starts
making N+1 in the background, so the next roll is a list append.

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


class AllocateService:
    def __init__(self, factory: Callable[[Path], MappedFile], *, warm: bool = False, prefault: bool = False):
        self._factory = factory
        self._warm = warm
        self._prefault = prefault
        self._cond = threading.Condition()
        self._pending: list[Path] = []
        self._to_prefault: list[MappedFile] = []        # made in the foreground: fault in behind the writer
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
            return result
        if isinstance(result, BaseException):
            log.warning("background preallocation of %s failed (%s); retrying in the foreground", path, result)
        mf = self._factory(path)
        self.prefault_later(mf)
        return mf

    def prefault_later(self, mf: MappedFile) -> None:
        """Fault *mf*'s unwritten pages in read-only on this service's thread (a segment made in the
        foreground, or the one a restarted store appends to), while the writer goes on."""
        if self._prefault and not self._warm:
            with self._cond:
                self._to_prefault.append(mf)
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopped or self._to_prefault
                                    or any(p not in self._ready for p in self._pending))
                if self._stopped:
                    return
                if self._to_prefault:
                    segment = self._to_prefault.pop(0)
                    path = None
                else:
                    path = next(p for p in self._pending if p not in self._ready)
            if path is None:
                segment.prefault()          # a closed segment raises nothing here (see prefault)
                continue
            try:
                mf: MappedFile | BaseException = self._factory(path)
                if self._warm:
                    mf.warm()
                elif self._prefault:
                    mf.prefault()
            except Exception as exc:   # reported to the writer when it asks for this path
                mf = exc
            with self._cond:
                if self._stopped or path not in self._pending:
                    if isinstance(mf, MappedFile):
                        mf.destroy()
                    continue
                self._ready[path] = mf
                self._cond.notify_all()

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
        self._to_prefault.clear()
