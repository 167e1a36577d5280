"""Deleting expired files and watching the disk (RocketMQ ``CleanCommitLogService`` / ``CleanConsumeQueueService``).

Theory of operation
-------------------
Every ``DISK_CHECK_INTERVAL_S`` (or ``cleanResourceInterval`` when shorter) the cleaner reads how
full the file system holding the store is, and every ``cleanResourceInterval`` ms it runs a cleaning
round.  Thresholds, in percent of the file system used, RocketMQ's names and defaults:

* ``diskMaxUsedSpaceRatio`` (75): clean now instead of waiting for ``deleteWhen``, but only
  segments retention allows (older than ``fileReservedTime``) **and** that no consumer still needs:
  no segment at or after the lowest committed offset of any consumer group on any queue, or the
  delay-level service's progress, is deleted.  RocketMQ deletes expired segments whoever has read
  them.
* ``diskSpaceCleanForciblyRatio`` (85): with ``cleanFileForciblyEnable`` the oldest segments go
  whatever their age and whoever has read them, and the loss is logged as an ERROR with the
  messages and queues lost.  Off by default in rocketq (on in RocketMQ): losing unread messages is
  the operator's choice.  It is also the level writes resume at.
* ``diskSpaceWarningLevelRatio`` (90): the store refuses new writes (``SERVICE_NOT_AVAILABLE``,
  saying the disk is full) until usage is at or below ``diskSpaceCleanForciblyRatio`` again, as
  RocketMQ's disk-full flag does (the gap keeps it from flapping).

At a ``deleteWhen`` hour, or when asked (``delete_expired_files``), segments older than
``fileReservedTime`` go whoever has read them: that is what retention means.  Never the segment
being written.  Messages still in a consume queue die with their segment, but never silently: each
queue that loses units is named in a warning with the range of logical offsets that went, and its
minimum offset moves past them, so consumers see OFFSET_TOO_SMALL instead of reading holes.
Consume-queue and index files that only point below the new start of the log are deleted after it.
Crossing ``diskMaxUsedSpaceRatio`` is logged as a warning once (and going back under it at INFO), not
every round.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time

from rocketq.common.sysflag import SCHEDULE_TOPIC
from rocketq.store.consume_queue import BLANK_SIZE

log = logging.getLogger(__name__)

MAX_SEGMENTS_PER_ROUND = 10
DISK_CHECK_INTERVAL_S = 1.0         # how often the disk's fill level is read (a statvfs call)
FIRST_UNIT_LOOKAHEAD = 64           # units looked at past a consumer's offset for a real (non-blank) one
NAMED_QUEUES_MAX = 10               # queues named in the forced-deletion error line


def delete_hours(delete_when: str) -> set[int]:
    return {int(h) for h in delete_when.replace(",", ";").split(";") if h.strip().isdigit()}


class Cleaner:
    def __init__(self, store, *, interval_ms: int, reserved_hours: int, delete_when: str, max_used_ratio: int,
                 warning_ratio: int = 90, forcibly_ratio: int = 85, force_enable: bool = False,
                 clock=time.time, usage=shutil.disk_usage):
        self._store = store
        self._interval_s = interval_ms / 1000
        self._check_s = min(self._interval_s, DISK_CHECK_INTERVAL_S)
        self._reserved_ms = reserved_hours * 3_600_000
        self._hours = delete_hours(delete_when)
        self._max_ratio = max_used_ratio
        self._warning_ratio = warning_ratio
        self._forcibly_ratio = forcibly_ratio
        self._force_enable = force_enable
        self._clock = clock
        self._usage = usage
        self._manual = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rocketq-clean", daemon=True)
        self.full: str | None = None        # why writes are refused, while the disk is past the warning level
        self._stuck_warned = False
        self._last_free = -1
        self._disk_was_full = False

    def set_reserved_hours(self, hours: int) -> None:
        """fileReservedTime changed while running (mqadmin updateBrokerConfig): the next run uses it."""
        self._reserved_ms = hours * 3_600_000

    def start(self) -> None:
        self.check_space()                  # a store opened on a full disk refuses writes from the start
        self._thread.start()

    def request(self) -> None:
        self._manual.set()

    def _loop(self) -> None:
        last_round = time.monotonic()
        while not self._stop.wait(self._check_s):
            try:
                was_full = self.full
                self.check_space()
                now = time.monotonic()
                if now - last_round >= self._interval_s or self._manual.is_set() or (self.full and not was_full):
                    last_round = now
                    self.run_once()
            except Exception:
                log.exception("expired-file cleaning failed")

    # -- the disk's fill level -------------------------------------------------------------------

    def disk_used_ratio(self) -> float:
        usage = self._usage(self._store.paths.root)
        return 100.0 * usage.used / usage.total if usage.total else 0.0

    def check_space(self) -> float:
        """Read the fill level, set or clear :attr:`full`, and let a stalled dispatch try again when
        space was freed; returns the percentage used."""
        usage = self._usage(self._store.paths.root)
        ratio = 100.0 * usage.used / usage.total if usage.total else 0.0
        if ratio > self._warning_ratio or (self.full is not None and ratio > self._forcibly_ratio):
            if self.full is None:
                log.error("disk full: %.1f%% of the file system holding %s is used, above diskSpaceWarningLevelRatio "
                          "%d%%; new messages are refused until it is at or below %d%% (diskSpaceCleanForciblyRatio)",
                          ratio, self._store.paths.root, self._warning_ratio, self._forcibly_ratio)
            self.full = (f"service not available now: the broker's disk is full ({ratio:.1f}% used; new messages are "
                         f"refused past diskSpaceWarningLevelRatio {self._warning_ratio}% until usage is at or below "
                         f"diskSpaceCleanForciblyRatio {self._forcibly_ratio}%)")
        elif self.full is not None:
            log.warning("disk usage is %.1f%%, at or below diskSpaceCleanForciblyRatio %d%%: accepting messages again",
                        ratio, self._forcibly_ratio)
            self.full = None
        if usage.free > self._last_free >= 0:
            self._store.dispatcher.retry_now()
        self._last_free = usage.free
        return ratio

    # -- cleaning --------------------------------------------------------------------------------

    def run_once(self, *, force: bool = False) -> int:
        """One round; returns how many CommitLog segments were deleted."""
        manual = self._manual.is_set()
        self._manual.clear()
        ratio = self.check_space()
        pressed = ratio > self._max_ratio
        if pressed != self._disk_was_full:
            self._disk_was_full = pressed
            log.log(logging.WARNING if pressed else logging.INFO,
                    "disk of %s is %.1f %% used, %s diskMaxUsedSpaceRatio %d %%%s", self._store.paths.root, ratio,
                    "over" if pressed else "back under", self._max_ratio,
                    ": cleaning now what retention allows and every consumer group has read" if pressed else "")
        hour_ok = time.localtime(self._clock()).tm_hour in self._hours
        if not (force or manual or pressed or hour_ok):
            self._stuck_warned = False
            return 0
        files = self._store.commitlog.files
        now_ms = int(self._clock() * 1000)
        if force or manual or hour_ok:             # retention, as configured
            gone = files.delete_expired(reserved_ms=self._reserved_ms, now_ms=now_ms, max_files=MAX_SEGMENTS_PER_ROUND)
        else:                                      # early, under pressure: only what nobody still needs
            gone = files.delete_expired(reserved_ms=self._reserved_ms, now_ms=now_ms,
                                        keep_from_offset=self.unread_from(), max_files=MAX_SEGMENTS_PER_ROUND)
        if gone:
            log.info("deleted %d expired commitlog segments: %s", len(gone), ", ".join(p.name for p in gone))
            self._after_log_shrank(files.min_offset())
        forced = 0
        if self._force_enable and ratio > self._forcibly_ratio:
            forced = self._delete_forcibly(now_ms, MAX_SEGMENTS_PER_ROUND - len(gone))
        if pressed and not gone and not forced and not self._stuck_warned:
            self._stuck_warned = True
            log.warning("disk %.1f%% used, above diskMaxUsedSpaceRatio %d%%, but no commitlog segment is both older "
                        "than fileReservedTime and read by every consumer group; nothing deleted (deleting unread "
                        "messages needs cleanFileForciblyEnable=true)", ratio, self._max_ratio)
        if gone or forced:
            self._stuck_warned = False
            self.check_space()
        return len(gone) + forced

    def unread_from(self) -> int | None:
        """The lowest CommitLog offset a consumer still needs: the record at the lowest committed offset
        of any consumer group on any queue, or at the delay-level service's progress; None when no
        queue has such a reader (nothing to hold back)."""
        store = self._store
        floors = dict(store.consumed_offsets() if store.consumed_offsets is not None else {})
        schedule = getattr(store, "schedule", None)
        for (topic, qid) in store.consume_queues():
            if topic == SCHEDULE_TOPIC and schedule is not None:
                floors[(topic, qid)] = schedule.offsets.get(qid + 1, 0)
        lowest = None
        for key, offset in floors.items():
            cq = store.consume_queue(*key)
            if cq is None or offset >= cq.max_offset():
                continue
            for phy, size, _tag in cq.get_units(max(offset, cq.min_offset()), FIRST_UNIT_LOOKAHEAD).tolist():
                if size != BLANK_SIZE:
                    lowest = phy if lowest is None else min(lowest, phy)
                    break
        return lowest

    def _delete_forcibly(self, now_ms: int, max_files: int) -> int:
        """Delete the oldest segments whatever their age and readers (``cleanFileForciblyEnable``)."""
        if max_files <= 0:
            return 0
        store = self._store
        floors = store.consumed_offsets() if store.consumed_offsets is not None else {}
        before = {key: cq.min_offset() for key, cq in store.consume_queues().items()}
        files = store.commitlog.files
        gone = files.delete_expired(reserved_ms=0, now_ms=now_ms, force=True, max_files=max_files)
        if not gone:
            return 0
        self._after_log_shrank(files.min_offset(), quiet=True)
        lost, unread, hit = 0, 0, []
        for key, cq in store.consume_queues().items():
            start, end = before.get(key, 0), cq.min_offset()
            if end <= start:
                continue
            lost += end - start
            unread += max(0, end - max(start, floors.get(key, start)))
            hit.append(f"{key[0]}/{key[1]} [{start}, {end})")
        log.error("disk full: cleanFileForciblyEnable deleted %d commitlog segments (%s) before their time: "
                  "%d messages in %d queues lost, %d of them not read by every consumer group: %s", len(gone),
                  ", ".join(p.name for p in gone), lost, len(hit), unread,
                  "; ".join(hit[:NAMED_QUEUES_MAX]) + (" ..." if len(hit) > NAMED_QUEUES_MAX else ""))
        return len(gone)

    def _after_log_shrank(self, log_min: int, *, quiet: bool = False) -> None:
        for (topic, qid), cq in list(self._store.consume_queues().items()):
            before = cq.min_offset()
            cq.delete_expired(log_min)
            after = cq.min_offset()
            if after > before and not quiet:
                log.warning("retention: %s/%d lost logical offsets [%d, %d) with the expired commitlog segments",
                            topic, qid, before, after)
        if self._store.index is not None:
            self._store.index.delete_expired(log_min)

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
