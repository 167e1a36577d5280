"""Building consume queues and the index from the CommitLog (RocketMQ ``ReputMessageService``).

Theory of operation
-------------------
The dispatcher reads back what the put path appended: it walks the log from ``dispatched_offset``
to the end of the data and feeds each walked run to the sinks.  The walk is one native call per
segment run (:func:`rocketq._native.dispatch_scan`): it parses the records and builds the 20-byte
consume-queue units and the index entries in Rust, with the GIL released, so the writer and the
dispatcher use both cores.  The same walk serves the live path, recovery's re-dispatch and a
slave's replicated appends: the log is the only input, as in RocketMQ.

The put path only *notifies* (:meth:`Dispatcher.notify_appended`, inside the put lock): how many
messages it appended.  The thread dispatches whatever is there when it wakes.  When it falls
``max_pending_messages`` behind, producers wait: back-pressure.

:meth:`Dispatcher.drive_from` moves the dispatch of small appends onto an event loop (the
broker's): an append of fewer than ``LOOP_BATCH_MAX`` messages schedules one drain callback if none
is pending (behind the callbacks already queued, so the producer's answer goes out first).  That
saves a thread wake-up and two GIL hand-offs per single send, which is what one-at-a-time sends and
a message's end-to-end latency wait on, while batch sends keep the thread.

A run is dispatched whole or not at all as far as ``dispatched_offset`` is concerned: the sinks skip
what they already hold (units below a queue's end, index entries at or below its newest offset), so
walking a run again after a failure is harmless.  In transient-store-pool mode only bytes committed
to the mapping are dispatched, as RocketMQ's reput reads only up to the committed position.

Sinks implement ``dispatch(run)``; the store wires :class:`ConsumeQueueSink` and :class:`IndexSink`,
and listeners (long polling) get ``(topic, queue_id, next_offset)``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Callable, Protocol

from rocketq import _native
from rocketq.store.consume_queue import CQ_UNIT_SIZE

log = logging.getLogger(__name__)

LOOP_DRAIN_BYTES = 4 << 20     # per event-loop callback (drive_from), so one drain never holds the loop long
LOOP_BATCH_MAX = 16            # with drive_from, appends smaller than this are dispatched on the loop
LOOP_RETRY_S = 0.001           # the loop's next look when the thread was draining
THREAD_DRAIN_BYTES = 64 << 20  # per walk of the thread, so waiters are told about progress in between


class DispatchError(RuntimeError):
    """The log holds bytes that are no record where the dispatcher expected one."""


class Sink(Protocol):
    def dispatch(self, run) -> None: ...


class ConsumeQueueSink:
    """Writes each run of 20-byte units into its topic/queue's consume queue."""

    def __init__(self, queue_for: Callable[[str, int], object],
                 on_arrival: Callable[[str, int, int], None] | None = None,
                 on_written: Callable[[object], None] | None = None):
        self._queue_for = queue_for
        self.on_arrival = on_arrival
        self.on_written = on_written        # told after units are written (marks the queue dirty)

    def dispatch(self, run) -> None:
        for topic, queue_id, first, units, phy_end in run.queue_runs():
            cq = self._queue_for(topic, queue_id)
            cq.put_bytes(units, first, phy_end)
            if self.on_written is not None:
                self.on_written(cq)
            if self.on_arrival is not None:
                self.on_arrival(topic, queue_id, first + len(units) // CQ_UNIT_SIZE)


class IndexSink:
    """Feeds the run's ``topic#key`` entries (every KEYS word and the UNIQ_KEY) to the index service."""

    def __init__(self, index_service):
        self._index = index_service

    def dispatch(self, run) -> None:
        if run.index_entries:
            self._index.put_run(run)


class Dispatcher:
    """The dispatch thread (or event-loop callbacks) walking the log behind the writer.

    *log* is the CommitLog (its ``files`` and ``max_offset()``); *delay_levels_ms* give the
    schedule topic's units their delivery times.  Whoever dispatches holds ``_drain_lock``, so the
    sinks see the log in order.
    """

    def __init__(self, log, sinks: list[Sink], *, delay_levels_ms: list[int], with_index: bool,
                 max_pending_messages: int):
        self._log = log
        self._sinks = sinks
        self._delay_ms = list(delay_levels_ms)
        self._with_index = with_index
        self._max_pending = max_pending_messages
        self._appended_msgs = 0      # messages the put path appended (single writer: the put lock)
        self._done_msgs = 0          # records walked (under _drain_lock)
        self._drain_lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = False
        self._progress = threading.Condition()
        self._waiters = 0
        self._stopped = False
        self._drain_scheduled = False
        self._event_loop = None      # set by drive_from
        self.failure: BaseException | None = None
        self.dispatched_offset = 0
        self._thread = threading.Thread(target=self._loop, name="rocketq-dispatch", daemon=True)

    def start(self, from_offset: int) -> None:
        self.dispatched_offset = from_offset
        self._thread.start()

    def drive_from(self, loop) -> None:
        """Dispatch small appends on the asyncio *loop* from now on (the broker's)."""
        self._event_loop = loop
        if self._behind():
            self._schedule_drain()

    def dispatch_range(self, start: int, end: int) -> int:
        """Walk [start, end) now, in the caller's thread (recovery, a slave's replicated bytes);
        returns how many records were dispatched."""
        with self._drain_lock:
            self.dispatched_offset = max(self.dispatched_offset, start) if self._thread.is_alive() else start
            return self._walk_to(end, limit_bytes=None)     # not the put path's: no back-pressure count

    def notify_appended(self, count: int, *, timeout_s: float = 30.0) -> None:
        """The put path appended *count* messages (called under the put lock, so in log order)."""
        if self.failure is not None:
            raise RuntimeError("the dispatcher stopped on an error") from self.failure
        self._appended_msgs += count
        if self._event_loop is not None and count < LOOP_BATCH_MAX:
            if not self._drain_scheduled:
                self._schedule_drain()
        elif self._idle:
            self._wake.set()
        if self._appended_msgs - self._done_msgs > self._max_pending:
            if self._event_loop is not None:
                self._drain()
                self._raise_if_failed()
            else:
                self._wake.set()
                self._wait_for(lambda: self._appended_msgs - self._done_msgs <= self._max_pending, timeout_s,
                               f"the dispatcher is more than {self._max_pending} messages behind")

    def wait_dispatched(self, timeout_s: float = 60.0) -> bool:
        """Wait until everything appended before this call has reached every sink."""
        target = self._log.max_offset()
        if self._event_loop is not None:
            self._drain()
        else:
            self._wake.set()
        try:
            self._wait_for(lambda: self.dispatched_offset >= target, timeout_s, "")
        except TimeoutError:
            return False
        return True

    @property
    def lag_messages(self) -> int:
        return max(0, self._appended_msgs - self._done_msgs)

    # -- waiting -------------------------------------------------------------------------------

    def _wait_for(self, predicate, timeout_s: float, what: str) -> None:
        with self._progress:
            self._waiters += 1
            try:
                ok = self._progress.wait_for(lambda: predicate() or self.failure is not None or self._stopped,
                                             timeout_s)
            finally:
                self._waiters -= 1
        self._raise_if_failed()
        if not ok:
            raise TimeoutError(f"{what} after {timeout_s}s" if what else f"not dispatched after {timeout_s}s")

    def _raise_if_failed(self) -> None:
        if self.failure is not None:
            raise RuntimeError("the dispatcher stopped on an error") from self.failure

    def _notify(self) -> None:
        with self._progress:
            self._progress.notify_all()

    # -- draining ------------------------------------------------------------------------------

    def _behind(self) -> bool:
        return self.dispatched_offset < self._log.max_offset()

    def _schedule_drain(self) -> None:
        """One drain callback on the loop, behind what is queued there already: a put answered in this
        loop iteration has its response write queued behind the put, so hop once more and the
        response goes out before the drain runs."""
        loop = self._event_loop
        self._drain_scheduled = True
        try:
            if asyncio._get_running_loop() is loop:
                loop.call_soon(loop.call_soon, self._drain_step)
            else:
                loop.call_soon_threadsafe(loop.call_soon, self._drain_step)
        except RuntimeError:             # the loop is closed: whoever waits drains itself
            self._drain_scheduled = False

    def _drain_step(self) -> None:
        """One loop callback: reset the flag first, so an append racing with this drain schedules another.
        The loop never waits for the thread's drain: when the thread holds the lock, it takes what is
        there, and the loop looks again shortly in case an append arrived just as it finished."""
        self._drain_scheduled = False
        if not self._drain(LOOP_DRAIN_BYTES, blocking=False):
            self._drain_scheduled = True
            try:
                self._event_loop.call_later(LOOP_RETRY_S, self._drain_step)
            except RuntimeError:         # the loop is closed: whoever waits drains itself
                self._drain_scheduled = False
            return
        if self._behind() and not self._drain_scheduled and self.failure is None:
            self._schedule_drain()

    def _loop(self) -> None:
        while self.failure is None:
            if not self._behind():
                self._idle = True
                if not self._behind() and not self._stopped:
                    self._wake.wait()
                    self._wake.clear()
                self._idle = False
                if not self._behind() and self._stopped:
                    return
            self._drain(THREAD_DRAIN_BYTES)

    def _drain(self, limit_bytes: int | None = None, *, blocking: bool = True) -> bool:
        """Dispatch up to the log's end (at most *limit_bytes* of it); False when not *blocking* and
        someone else is draining."""
        if not self._drain_lock.acquire(blocking):
            return False
        try:
            if self.failure is None:
                try:
                    self._done_msgs += self._walk_to(self._log.max_offset(), limit_bytes=limit_bytes)
                except BaseException as exc:   # derived state is now behind the log: stop loudly
                    log.exception("dispatch failed at commitlog offset %d; consume queues and index stop here "
                                  "until restart", self.dispatched_offset)
                    self.failure = exc
            if self._waiters:
                self._notify()
        finally:
            self._drain_lock.release()
        return True

    def _walk_to(self, end: int, *, limit_bytes: int | None) -> int:
        """Feed the sinks the records in [dispatched_offset, end) (caller holds _drain_lock); returns
        how many records were walked."""
        files = self._log.files
        walked = 0
        offset = self.dispatched_offset
        budget = limit_bytes
        while offset < end and (budget is None or budget > 0):
            mf = files.find(offset)
            if mf is None:
                first = files.min_offset()
                if offset < first:       # expired while we were behind: nothing to dispatch there
                    offset = first
                    continue
                break
            base = mf.file_from_offset
            limit = min(mf.committed, end - base)
            start = offset - base
            if limit <= start:
                break
            run = _native.dispatch_scan(mf.buffer(), start, limit, base_offset=base, delay_levels_ms=self._delay_ms,
                                        with_index=self._with_index, max_bytes=budget)
            if run.error is not None:
                raise DispatchError(f"{mf.path}: {run.error}")
            for sink in self._sinks:
                sink.dispatch(run)
            offset = base + files.file_size if run.blank else base + run.end
            self.dispatched_offset = offset
            walked += run.records
            if budget is not None:
                budget -= run.end - start
            if run.end == start and not run.blank:
                break
        return walked

    def shutdown(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        self._notify()
