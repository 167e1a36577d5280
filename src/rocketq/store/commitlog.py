"""The CommitLog: every message of every topic, appended to one run of segment files.

Theory of operation
-------------------
:mod:`rocketq.store.prepare` (no lock) turns messages into a native record batch: validated, sizes
known.  ``append`` then takes the put lock once for the whole batch: it picks the segment, assigns
each queue its next offsets (the ``(topic, queue id) -> next offset`` table), and has the batch
encode itself straight into the mapped segment (the GIL released for large batches), filling in
queue offsets, physical offsets, the store time and the body CRCs as it copies.

A batch never straddles segments: when ``batch bytes + 8`` does not fit in what is left, a blank
record (``remaining | 0xCBD43194``) closes the segment and the batch goes to the next one.  A
batch bigger than a segment is refused.  Prepared and rolled-back transaction records get queue
offset 0 and do not advance the table: they never reach a consume queue.

A single message (no delay level) skips the batch: :meth:`CommitLog.append_message` has the native
``SinglePut`` read the clock, read, check and encode the message straight into the segment, advance
the segment and build the result (message id included) in one call under the lock; the records are
the same bytes as the batch path's.

Invariants: records are contiguous from the first segment's start; every record's PHYSICALOFFSET
field equals its position; the queue-offset table only grows.  This module knows nothing about
consume queues or indexes: the dispatcher reads the records back from the segments; ``append``
only tells it how many messages arrived (``on_appended``, inside the lock).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rocketq import _native
from rocketq.common.msgid import HostAddress
from rocketq.common.sysflag import BORNHOST_V6
from rocketq.common.validation import topic_error
from rocketq.store.allocator import AllocateService
from rocketq.store.mapped_file import MappedFile
from rocketq.store.mapped_file_queue import MappedFileQueue
from rocketq.store.record import END_FILE_MIN_BLANK_LENGTH, encode_blank
from rocketq.store.results import PutError, PutMessageResult, PutStatus

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024      # StoreConfig.max_message_size's default


class CommitLog:
    def __init__(self, directory: Path, *, file_size: int, store_host: HostAddress,
                 allocator: AllocateService | None = None, transient_pool=None, reserve=None,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_BYTES):
        self.store_host = store_host
        self.file_size = file_size
        self.pooled = transient_pool is not None      # appends reach the file only at the next commit
        kwargs = {"transient_pool": transient_pool}
        if reserve is not None:
            kwargs["reserve"] = reserve
        self.files = MappedFileQueue(directory, file_size,
                                     factory=lambda p: MappedFile(p, file_size, **kwargs), allocator=allocator)
        # (topic, queue id) -> next queue offset; SinglePut holds this very dict: change it in place only
        self.queue_offsets: dict[tuple[str, int], int] = {}
        self.put_lock = threading.Lock()
        self.last_store_timestamp = 0
        self._single = _native.SinglePut(self.queue_offsets, max_body_bytes=max_message_size, store_ip=store_host.ip,
                                         store_port=store_host.port, segment_bytes=file_size, check_topic=topic_error,
                                         result_type=PutMessageResult, put_ok=PutStatus.PUT_OK)

    # -- appending ---------------------------------------------------------------------------

    def append(self, batch, *, clock=time.time, on_appended=None) -> tuple[int, int]:
        """Append *batch* (a ``RecordBatch``) under the put lock; returns (physical offset of its first
        record, store timestamp); its queue offsets are then on the batch.  Raises PutError (nothing
        written) on failure.  *on_appended(count)* runs inside the lock, so the dispatcher hears in
        log order."""
        total = batch.total_bytes
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise PutError(PutStatus.MESSAGE_ILLEGAL,
                           f"a batch of {total} bytes does not fit in a {self.file_size}-byte commitlog segment")
        ip, port = self.store_host
        with self.put_lock:
            files = self.files.files
            mf = files[-1] if files else None        # the common case inline: ~5 calls less per single put
            if mf is None or mf.wrote + total + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
                mf = self._segment_for(total)
            store_ts = int(clock() * 1000)
            pos = mf.wrote
            first = mf.file_from_offset + pos
            batch.append_to(mf.write_target(), pos, self.queue_offsets, physical_offset=first,
                            store_timestamp=store_ts, store_ip=ip, store_port=port)
            mf.advance(total)
            mf.store_timestamp = store_ts
            self.last_store_timestamp = store_ts
            if on_appended is not None:
                on_appended(len(batch))
        return first, store_ts

    def append_message(self, msg, clock, on_appended) -> PutMessageResult:
        """Append one ``Message`` without a delay level (those take the batch path: the schedule
        topic is policy) under the put lock; *clock* and *on_appended* as for :meth:`append`.
        Raises PutError (nothing written) for a message the store refuses."""
        # acquire / release rather than ``with``: the statement looks up and binds the lock's
        # __enter__ and __exit__ and parses their arguments, ~0.1 us a put (BENCHMARKS.md, put5)
        lock = self.put_lock
        lock.acquire()
        try:
            files = self.files.files
            mf = files[-1] if files else self._segment_for(0)
            while True:
                try:   # read, check, encode, advance the segment and make the result: one native call
                    result = self._single.append(msg, mf, clock)
                    break
                except _native.SegmentFull as full:     # once per segment: close it, go on in the next
                    mf = self._segment_for(full.args[0])
            self.last_store_timestamp = result.store_timestamp
            on_appended(1)
        except _native.BatchError as exc:
            raise PutError(PutStatus[exc.args[0]], exc.args[1]) from None
        finally:
            lock.release()
        return result

    def _segment_for(self, total: int) -> MappedFile:
        """The segment the next *total* bytes go to, closing the current one with a blank if needed."""
        try:
            mf = self.files.last_for_append()
            if total + END_FILE_MIN_BLANK_LENGTH > mf.remaining:
                remaining = mf.remaining
                mf.append(encode_blank(remaining))
                mf.wrote = mf.file_size   # the rest of the segment is unused by definition
                if mf.write_buffer is None:
                    mf.committed = mf.file_size
                mf = self.files.last_for_append()
        except OSError as exc:
            raise PutError(PutStatus.CREATE_MAPPED_FILE_FAILED, f"cannot create the next commitlog segment: {exc}") from exc
        return mf

    # -- reading -----------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes | None:
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote:
            return None
        try:
            return mf.read(pos, size)
        except ValueError:      # the segment was deleted by expiry while we were reading
            return None

    def gather(self, phys: list[int], sizes: list[int]) -> bytes | None:
        """The records at *phys* (of *sizes*) concatenated, when all lie written in one segment; else None."""
        mf = self.files.find(phys[0])
        if mf is None:
            return None
        base = mf.file_from_offset
        starts = [p - base for p in phys]
        ends = [a + n for a, n in zip(starts, sizes)]
        if min(starts) < 0 or max(ends) > mf.wrote:
            return None
        try:
            return mf.gather(starts, ends)
        except ValueError:      # the segment was deleted by expiry while we were reading
            return None

    def store_time_of(self, offset: int, size: int) -> int | None:
        head = self.read(offset, 72)
        if head is None:
            return None
        sys_flag = int.from_bytes(head[36:40], "big")
        pos = 68 if sys_flag & BORNHOST_V6 else 56
        return int.from_bytes(head[pos:pos + 8], "big", signed=True)

    def min_offset(self) -> int:
        return self.files.min_offset()

    def max_offset(self) -> int:
        return self.files.max_offset()

    def flushed_offset(self) -> int:
        return self.files.flushed_offset()

    # -- durability --------------------------------------------------------------------------

    def flush(self) -> int:
        return self.files.flush()

    def commit(self) -> bool:
        return self.files.commit()

    def dirty_bytes(self) -> int:
        return sum(mf.committed - mf.flushed for mf in self.files._unfinished("flushed"))

    def uncommitted_bytes(self) -> int:
        return sum(mf.wrote - mf.committed for mf in self.files._unfinished("committed"))

    def close(self) -> None:
        self.files.close(flush=True)
