"""The store's maintenance and figures (part of :class:`MessageStore`, kept apart to keep files small):
topic deletion, a slave's replicated appends, the durability bookkeeping (CommitLog flushes and the
consume-queue/index/checkpoint flush loop), and the numbers the broker's runtime stats show."""

from __future__ import annotations

import logging

from rocketq.common.validation import path_component_error

log = logging.getLogger("rocketq.store.message_store")     # the name these messages always had


class StoreMaintenance:
    """Mixed into MessageStore; uses its commitlog, queues, dispatcher, cleaner, checkpoint and paths."""

    def delete_topic(self, topic: str) -> int:
        """Forget *topic*: its consume queues (files deleted) and its next-offset entries (RocketMQ's
        ``deleteTopics``).  Its records stay in the CommitLog until they expire, unreachable.
        Returns how many queues were removed; raises ValueError for a name that is not one directory
        name (``../x``, ``/abs``): nothing outside ``consumequeue/`` is ever removed."""
        err = path_component_error(topic)
        if err:
            raise ValueError(f"topic {err}: not deleted")
        with self._queues_lock:
            doomed = [self._queues.pop(key) for key in [k for k in self._queues if k[0] == topic]]
            self._dirty_queues.difference_update(doomed)
        with self.commitlog.put_lock:
            for key in [k for k in self.commitlog.queue_offsets if k[0] == topic]:
                del self.commitlog.queue_offsets[key]
        for cq in doomed:
            cq.destroy()
        for root in (self.paths.consumequeue, self.paths.consumequeue_ext):
            try:
                (root / topic).rmdir()
            except OSError:
                pass
        return len(doomed)

    def append_replicated(self, offset: int, data) -> int:
        """A slave's append: *data* are the master's CommitLog bytes from *offset*, which must be this
        log's end.  They are written as they are (same segment size, so records, blanks and segment
        boundaries land where they are on the master), then dispatched to queues and index.
        Returns the new end; raises ValueError when *offset* is not the end."""
        cl = self.commitlog
        with cl.put_lock:
            end = cl.max_offset()
            if offset != end and not (end == 0 and not cl.files.files):
                raise ValueError(f"replicated bytes start at {offset}, this CommitLog ends at {end}")
            view, pos = memoryview(data), offset
            while view:
                mf = cl.files.last_for_append(pos)
                if mf.file_from_offset + mf.wrote != pos:
                    raise ValueError(f"replicated bytes at {pos} do not continue segment {mf.path.name}")
                n = min(len(view), cl.file_size - mf.wrote)
                mf.append(view[:n])
                view, pos = view[n:], pos + n
        self.dispatcher.dispatch_range(offset, pos)
        return pos

    def reset_queue_offsets(self) -> None:
        """Next queue offsets from the consume queues (a slave taking over writes)."""
        with self.commitlog.put_lock:
            for key, cq in list(self._queues.items()):
                self.commitlog.queue_offsets[key] = cq.max_offset()

    # -- durability bookkeeping --------------------------------------------------------------

    def _flush_commitlog(self) -> int:
        ts = self.commitlog.last_store_timestamp
        flushed = self.commitlog.flush()
        cp = self.checkpoint.value
        if flushed > cp.physic_flushed_offset:
            cp.physic_flushed_offset = flushed
            cp.physic_msg_timestamp = ts
        return flushed

    def _logics_flush_loop(self) -> None:
        interval = self.config.flush_interval_consume_queue_ms / 1000
        while not self._logics_stop.wait(interval):
            try:
                self._flush_logics()
            except Exception:       # logged once per episode: it is retried every interval
                if not self._logics_flush_failing:
                    log.exception("flushing consume queues / checkpoint failed; retrying every %.1f s", interval)
                self._logics_flush_failing = True
            else:
                if self._logics_flush_failing:
                    log.warning("flushing consume queues / checkpoint works again")
                self._logics_flush_failing = False

    def _flush_logics(self, *, final: bool = False) -> None:
        dispatched = self.dispatcher.dispatched_offset
        ts = self.commitlog.last_store_timestamp
        with self._queues_lock:
            dirty, self._dirty_queues = self._dirty_queues, set()
        for cq in dirty:
            cq.flush()
        cp = self.checkpoint.value
        if self.index is not None:
            cp.index_msg_timestamp = max(cp.index_msg_timestamp, self.index.flush())
        cp.logics_flushed_offset = max(cp.logics_flushed_offset, dispatched)
        cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, ts if dispatched >= self.commitlog.max_offset() else
                                      cp.logics_msg_timestamp)
        if final:
            cp.physic_flushed_offset = self.commitlog.flushed_offset()
        self.checkpoint.flush()

    # -- figures for runtime stats -------------------------------------------------------------

    def min_physical_offset(self) -> int:
        return self.commitlog.min_offset()

    def max_physical_offset(self) -> int:
        return self.commitlog.max_offset()

    def dispatch_behind_bytes(self) -> int:
        return max(0, self.commitlog.max_offset() - self.dispatcher.dispatched_offset)

    def dispatch_backlog(self) -> tuple[int, int]:
        """(messages appended but not yet dispatched, the limit at which producers are held)."""
        return self.dispatcher.lag_messages, self.config.dispatch_queue_max_messages

    def earliest_physical_time(self) -> int:
        """Store time of the oldest record in the CommitLog, or -1 when it is empty."""
        lo = self.commitlog.min_offset()
        m = self.read_message(lo) if lo < self.commitlog.max_offset() else None
        return m.store_timestamp if m is not None else -1

    def disk_used_ratio(self) -> float:
        """Used fraction (0..1) of the file system holding the CommitLog."""
        return self.cleaner.disk_used_ratio() / 100
