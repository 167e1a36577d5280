"""Deleting expired files (RocketMQ ``CleanCommitLogService`` / ``CleanConsumeQueueService``).

Every ``cleanResourceInterval`` ms the cleaner checks three triggers, like RocketMQ: the hour is
one of ``deleteWhen`` (e.g. ``"04"`` or ``"04;16"``), the disk holding the store is fuller than
``diskMaxUsedSpaceRatio`` percent, or a delete was requested by hand.  It then removes leading
CommitLog segments older than ``fileReservedTime`` hours (on a full disk, the oldest ones
regardless of age), never the segment being written.

Messages still in a consume queue die with their segment - that is what retention means - but
never silently: each queue that loses unconsumed-looking units is named in a warning with the
range of logical offsets that went, and its minimum offset moves past them, so consumers see
OFFSET_TOO_SMALL instead of reading holes.  Consume-queue and index files that only point below
the new start of the log are deleted after it.  Crossing ``diskMaxUsedSpaceRatio`` is logged as a
warning once (and going back under it at INFO), not every round.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time

log = logging.getLogger(__name__)

MAX_SEGMENTS_PER_ROUND = 10


def delete_hours(delete_when: str) -> set[int]:
    return {int(h) for h in delete_when.replace(",", ";").split(";") if h.strip().isdigit()}


class Cleaner:
    def __init__(self, store, *, interval_ms: int, reserved_hours: int, delete_when: str, max_used_ratio: int,
                 clock=time.time):
        self._store = store
        self._interval_s = interval_ms / 1000
        self._reserved_ms = reserved_hours * 3_600_000
        self._hours = delete_hours(delete_when)
        self._max_ratio = max_used_ratio
        self._clock = clock
        self._manual = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rocketq-clean", daemon=True)
        self._disk_was_full = False

    def start(self) -> None:
        self._thread.start()

    def request(self) -> None:
        self._manual.set()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.run_once()
            except Exception:
                log.exception("expired-file cleaning failed")

    def disk_used_ratio(self) -> float:
        usage = shutil.disk_usage(self._store.paths.root)
        return 100.0 * usage.used / usage.total if usage.total else 0.0

    def run_once(self, *, force: bool = False) -> int:
        """One round; returns how many CommitLog segments were deleted."""
        manual = self._manual.is_set()
        self._manual.clear()
        ratio = self.disk_used_ratio()
        disk_full = ratio > self._max_ratio
        if disk_full != self._disk_was_full:
            self._disk_was_full = disk_full
            log.log(logging.WARNING if disk_full else logging.INFO,
                    "disk of %s is %.1f %% used, %s diskMaxUsedSpaceRatio %d %%%s", self._store.paths.root, ratio,
                    "over" if disk_full else "back under", self._max_ratio,
                    ": deleting the oldest CommitLog segments whatever their age" if disk_full else "")
        hour_ok = time.localtime(self._clock()).tm_hour in self._hours
        if not (force or manual or disk_full or hour_ok):
            return 0
        files = self._store.commitlog.files
        gone = files.delete_expired(reserved_ms=0 if disk_full else self._reserved_ms,
                                    now_ms=int(self._clock() * 1000), force=disk_full,
                                    max_files=MAX_SEGMENTS_PER_ROUND)
        if gone:
            log.info("deleted %d expired commitlog segments: %s", len(gone), ", ".join(p.name for p in gone))
            self._after_log_shrank(files.min_offset())
        return len(gone)

    def _after_log_shrank(self, log_min: int) -> None:
        for (topic, qid), cq in list(self._store.consume_queues().items()):
            before = cq.min_offset()
            cq.delete_expired(log_min)
            after = cq.min_offset()
            if after > before:
                log.warning("retention: %s/%d lost logical offsets [%d, %d) with the expired commitlog segments",
                            topic, qid, before, after)
        if self._store.index is not None:
            self._store.index.delete_expired(log_min)

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
