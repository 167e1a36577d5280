"""What the store tells an operator: a disk over diskMaxUsedSpaceRatio (once per crossing, not every
cleaning round) and flushes too slow for the disk to keep up (rate-limited)."""

import logging
import time

from rocketq.store.cleaner import Cleaner
from rocketq.store.flush import SLOW_FLUSH_S, GroupCommitService


def _cleaner(store, ratio: int) -> Cleaner:
    return Cleaner(store, interval_ms=3_600_000, reserved_hours=72, delete_when="", max_used_ratio=ratio)


def test_a_full_disk_is_warned_about_once_per_crossing(store, caplog):
    caplog.set_level(logging.INFO, logger="rocketq.store.cleaner")
    full = _cleaner(store, 0)                           # any used byte is over 0 %
    full.run_once()
    full.run_once()
    over = [r for r in caplog.records if "over diskMaxUsedSpaceRatio" in r.getMessage()]
    assert len(over) == 1 and over[0].levelno == logging.WARNING and str(store.paths.root) in over[0].getMessage()
    full._max_ratio = 100                                # the operator freed space (or raised the ratio)
    full.run_once()
    assert [r for r in caplog.records if "back under diskMaxUsedSpaceRatio" in r.getMessage()]


def test_a_slow_group_commit_is_warned_about_and_rate_limited(caplog):
    caplog.set_level(logging.WARNING, logger="rocketq.store.flush")
    flushed = 0

    def slow_flush() -> int:            # a disk that takes longer than SLOW_FLUSH_S for one fdatasync
        nonlocal flushed
        time.sleep(SLOW_FLUSH_S + 0.05)
        flushed += 100
        return flushed

    service = GroupCommitService(slow_flush, timeout_ms=10_000)
    service.start()
    try:
        assert service.wait_flushed(100) and service.wait_flushed(200)
    finally:
        service.shutdown()
    slow = [r for r in caplog.records if "the disk is not keeping up" in r.getMessage()]
    assert len(slow) == 1 and "SYNC_FLUSH group commit" in slow[0].getMessage()    # the second within the minute
