"""Start-up recovery: find the end of valid data in the CommitLog and make everything agree with it.

Theory of operation
-------------------
After a clean shutdown (no ``abort`` file) only the last three segments are walked, as RocketMQ's
``recoverNormally`` does.  After a crash the walk starts at the newest segment whose first record
is older than the checkpoint's bound (``recoverAbnormally``) and checks every record's magic,
size, physical offset and body CRC up to the end of the data.

The first record that fails is judged against ``physicFlushedOffset`` from the checkpoint:

* at or after it, it is a **torn tail** - bytes that were never acknowledged as durable - and the
  log is cut there (the garbage after it is zeroed so a later crash cannot resurrect it);
* before it, acknowledged data is damaged: start-up stops with :class:`CorruptionError`, naming
  the file and offset and the command that repairs it.  Nothing is skipped silently.

Records are checked by magic, size, offset and body CRC, so a tear that loses only bytes of the
topic / properties tail would pass, and never-written bytes read as zero.  The last byte of that
tail is the last byte of the properties (every conforming writer ends them with ``\x02``) or,
when they are empty, of the topic (legal topic characters only): zero there means a tear.  Only
records at or after the checkpoint's flushed offset are judged this way - those are the only ones
a crash can have torn.

Then consume queues drop units pointing past the new end, and the records after the checkpoint's
``logicsFlushedOffset`` are dispatched again (the sinks skip what they already hold).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rocketq.store.checkpoint import Checkpoint
from rocketq.store.mapped_file import MappedFile
from rocketq.store.mapped_file_queue import MappedFileQueue
from rocketq.store.scan import SegmentScan, scan_segment

log = logging.getLogger(__name__)

NORMAL_RECOVERY_FILES = 3


class CorruptionError(RuntimeError):
    """Acknowledged data does not parse; start-up must not continue."""

    def __init__(self, store_path, file, offset: int, reason: str):
        self.file, self.offset, self.reason = file, offset, reason
        super().__init__(
            f"corrupt record in {file} at commitlog offset {offset}: {reason}. "
            f"This is inside data that was flushed to disk, so rocketq will not start and skip it. "
            f"Inspect with `rocketq store verify {store_path}`; to cut the log at this record and "
            f"rebuild queues and index, run `rocketq store repair {store_path} --truncate-at {offset}`.")


@dataclass
class RecoveryReport:
    abnormal: bool
    scanned_bytes: int
    end_offset: int
    truncated_bytes: int
    redispatched_records: int


def recover_commitlog(files: MappedFileQueue, checkpoint: Checkpoint, *, abnormal: bool, check_crc: bool,
                      store_path) -> tuple[int, int, int]:
    """Set segment positions; returns (end offset, bytes scanned, bytes cut)."""
    segs = files.files
    if not segs:
        return 0, 0, 0
    start = _start_index(segs, checkpoint, abnormal)
    for mf in segs[:start]:
        mf.set_positions(files.file_size)
    scanned = 0
    for i in range(start, len(segs)):
        mf = segs[i]
        # after a crash, records past the flushed offset may be torn in their tail: see the module doc
        result = scan_segment(mf.buffer(), mf.file_from_offset, 0, files.file_size, check_crc=check_crc,
                              torn_from=checkpoint.physic_flushed_offset if abnormal else None)
        scanned += result.end
        if result.blank:
            mf.set_positions(files.file_size)
            continue
        end = mf.file_from_offset + result.end
        if result.error is not None and result.error.offset < checkpoint.physic_flushed_offset:
            raise CorruptionError(store_path, mf.path, result.error.offset, result.error.reason)
        if result.error is None and end < checkpoint.physic_flushed_offset:
            raise CorruptionError(store_path, mf.path, end, f"the log reads as ending here (zero bytes), but the "
                                  f"checkpoint says it was flushed up to {checkpoint.physic_flushed_offset}")
        cut = _cut_after(files, mf, result, i)
        return end, scanned, cut
    return files.max_offset(), scanned, 0


def _start_index(segs: list[MappedFile], checkpoint: Checkpoint, abnormal: bool) -> int:
    if not abnormal:
        return max(0, len(segs) - NORMAL_RECOVERY_FILES)
    bound = checkpoint.min_timestamp()
    for i in range(len(segs) - 1, -1, -1):
        first_ts = _first_store_timestamp(segs[i])
        if first_ts is not None and first_ts <= bound:
            return i
    return 0


def _first_store_timestamp(mf: MappedFile) -> int | None:
    head = mf.read(0, 72)
    size = int.from_bytes(head[0:4], "big", signed=True)
    if size <= 0:
        return None
    pos = 68 if head[39] & 0x10 else 56
    return int.from_bytes(head[pos:pos + 8], "big", signed=True)


def _cut_after(files: MappedFileQueue, mf: MappedFile, result: SegmentScan, index: int) -> int:
    """Make result.end the end of the log: zero garbage after it, drop later segments."""
    cut = 0
    if result.error is not None:
        log.warning("recovery: torn tail in %s at offset %d (%s); cutting the log there",
                    mf.path, result.error.offset, result.error.reason)
        cut = mf.truncate_tail(result.end)
    else:
        mf.set_positions(result.end)
    for later in files.files[index + 1:]:
        if later.read(0, 8) != bytes(8):
            log.warning("recovery: deleting %s, which follows the end of valid data", later.path)
            cut += files.file_size
    files.truncate(mf.file_from_offset + result.end, zero_tail=False)
    return cut
